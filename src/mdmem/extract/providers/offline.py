"""The offline provider: explicit memory requests and corrections, with no model and no network.

mdmem uses it when no API key is set, so the whole pipeline works anywhere. It
reads only what the *user* wrote in the turn, and captures sentences that say,
in so many words, to remember something, to follow a standing rule, or that
correct the assistant, in English and Chinese::

    remember that ... / remember: ... / please remember ... / keep in mind ...
    from now on ... / going forward ... / always ... / never ... / don't ever ...
    no, use X instead / no - use X, not Y / actually, use X / that's wrong, ...
    记住…… / 请记住…… / 以后…… / 今后…… / 总是…… / 永远…… / 不要…… / 别再……
    不对，应该…… / 不是……而是……

A trigger counts only at the start of a sentence (after "ok,", "also", "please",
"好的，" and the like). Each capture becomes one ``create`` operation:

* **type**: a correction is ``correction_feedback``; a standing rule ("from now
  on", "always", "never", "以后", "不要") is ``user_preference``; "remember ..."
  is ``reference_material`` when it holds a URL or points at documentation,
  ``user_preference`` when it opens with how to behave ("remember to ...", "I
  prefer", "要..."; a "never" later in a remembered fact does not count), and
  ``project_knowledge`` otherwise.
* **level**: ``project`` when the sentence names something in the repository:
  code in backticks, a path or file name, a URL, a tool (npm, pytest, git ...),
  "this repo", "the tests", "our CI", branches or commits, "本项目", "这个仓库",
  "测试". Otherwise ``user`` when it is about the person (language, spelling,
  tone, "answer in", "call me", "用中文"); otherwise ``user`` for a standing
  rule and ``project`` for anything else.

Skipped: questions, sentences that start any other way ("I don't need you to
remember", "if you always ..."), text inside code fences, block quotes, inline
code or quotation marks, and sentences whose only content is a redacted secret.
Identical captures in one turn are kept once; at most 20 are kept per turn.

Limits: it finds only what is said explicitly. It misses implicit knowledge
("the build broke because of X" with no request to remember it), paraphrases
outside the phrases above, anything only the assistant said or did, facts
spread over several sentences, and whether a request is a one-off ("never mind
the tests for now" is skipped, "never run the tests today" is kept). Titles are
cut from the sentence, not written. Use a model provider for real extraction.
"""

from __future__ import annotations

import re

from mdmem._kinds import Level, NoteType
from mdmem.extract.providers.base import ExtractionRequest, Message

__all__ = ["OfflineProvider"]

_MAX_CAPTURES = 20

_MARKER = re.compile(r"\[REDACTED:[a-z0-9_]{1,40}\]")
_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,}).*?(?:^[ \t]*\1[ \t]*$|\Z)", re.M | re.S)
_BLOCKQUOTE = re.compile(r"^[ \t]*>.*$", re.M)
_INLINE = re.compile(
    r"`[^`\n]+`|\"[^\"\n]{1,300}\"|“[^”\n]{1,300}”|「[^」\n]{1,300}」|『[^』\n]{1,300}』"
)
_CUT = re.compile(r"[.!?]+(?=\s|\Z)|[。！？]+|\n")
# Several requests in one sentence: cut before a second trigger. A strong trigger
# ("remember", "from now on", "记住", "以后") after any comma, semicolon or "and";
# a weak one ("always", "never", "不要", "总是") only after a semicolon or a
# conjunction, so "以后用中文回答，不要用英文" stays one rule.
_STRONG = (
    r"(?:please\s+)?(?:remember\b|keep in mind\b|from now on\b|going forward\b"
    r"|请?记住|以后|今后|从现在开始)"
)
_WEAK = r"(?:always\b|never\b|don[’']?t ever\b|总是|永远|始终|不要|别再)"
_JOIN_CUT = re.compile(
    rf"(?:[,;，；]\s*(?:and\s+|also\s+|另外|还有|并且|而且)?|(?<!\s)\s+and\s+(?:also\s+)?)"
    rf"(?={_STRONG})"
    rf"|(?:[;；]\s*|,\s*(?:and|also)\s+|(?<!\s)\s+and\s+also\s+|[，,]\s*(?:另外|还有|并且|而且))"
    rf"(?={_WEAK})"
)
_PARAGRAPH_BREAK = re.compile(r"\n[ \t]*\n")
_BULLET = re.compile(r"(?:[-*+•]|\d+[.)]|#+)\s+")
_LEAD = re.compile(
    r"(?:(?:ok(?:ay)?|also|and|but|oh|so|btw|hey|fyi|one more thing|important(?:ly)?|note"
    r"|ps|please|pls|kindly)\b[\s,:;!—–-]*|(?:好的|好|嗯|另外|还有|对了|顺便说一下|注意|重要)[\s，,：:！!]*)*"
)
_QUESTION = re.compile(
    r"[?？]\s*$|[吗呢么]\s*[。.！!]?\s*$|^(?:do|does|did|can|could|would|will|have|should|is|are)"
    r"\s+(?:you|i|we)\b"
)
_FILLER = re.compile(
    r"\b(?:my|the|a|an|is|are|this|that|it|here|key|keys|token|tokens|password|secret|api"
    r"|use|our|your)\b|我的|密钥|密码|令牌|是|这个|[^\w]|_",
)

# Each pattern reads the masked, lowered sentence; ``rest`` is what the title is cut from.
_CORRECTIONS_EN = (
    re.compile(r"^(?:no|nope|nah)\b\s*(?:[,.;:!—–-]+\s*(?P<rest>.*)|$)"),
    re.compile(r"^actually\b[\s,:;—–-]*(?P<rest>.+)"),
)
_CORRECTIONS_PLAIN = (
    re.compile(
        r"^(?:that[’']?s|that is|this is|it[’']?s)\s+(?:wrong|incorrect|not right|not correct)\b"
        r"[\s,.;:!—–-]*(?P<rest>.*)"
    ),
    re.compile(r"^(?:不对|不是这样|错了|不正确|你错了|搞错了)[\s，,。.！!：:；;—-]*(?P<rest>.*)"),
    re.compile(r"^(?:其实|实际上)[\s，,：:]*(?P<rest>(?:应该|要用|用|是).+)"),
    re.compile(r"^(?P<rest>.{0,40}?不是.{1,80}?而是.+)"),
)
# What an English correction must say for "no, ..." to be more than a refusal.
_CORRECTIVE = re.compile(
    r"^(?:please\s+)?(?:use|run|call|try|put|set|import|install|pass|keep|we use|you should"
    r"|it should|should be|the (?:correct|right|real|actual)|never|always|don[’']?t ever)\b"
    r"|\binstead\b|\brather than\b|,\s*not\b"
)
_REMEMBER = (
    re.compile(
        r"^(?:remember|memori[sz]e|keep in mind|make a note|take note|for future reference)\b"
        r"(?!\s+(?:when|how|what|why|who|where|me|us|him|her|them|the time|if|whether)\b)"
        r"[\s,:;—–-]*(?:that\b)?[\s,:;—–-]*(?P<rest>.*)"
    ),
    re.compile(r"^(?:don[’']?t|do not) forget\s+that\b[\s,:]*(?P<rest>.+)"),
    re.compile(
        r"^(?:save|add|store|put|write)\s+(?:this|that|it)\s+(?:to|in|into)\s+(?:your\s+)?"
        r"memory\b[\s,:;—–-]*(?P<rest>.*)"
    ),
    re.compile(
        r"^(?:请你|请|你要|要|帮我)?(?:记住|记一下|记好|牢记|记得|记下来|记下)(?![吗了不])"
        r"[\s，,：:。]*(?P<rest>.*)"
    ),
)
_PREFERENCES = (
    re.compile(
        r"^(?:from now on|going forward|from here on(?: out)?|in (?:the )?future|henceforth"
        r"|moving forward)\b[\s,:;—–-]*(?P<rest>.+)"
    ),
    re.compile(
        r"^(?:you\s+(?:should|must|need to)\s+)?"
        r"(?P<rest>(?:always|never|don[’']?t ever|do not ever)"
        r"(?!\s+(?:mind|been|was|were|had|has|have|heard|seen|thought|knew|did|worked|works"
        r"|happens|a|an|the)\b)\s+\S.*)"
    ),
    re.compile(
        r"^(?:please\s+)?(?P<rest>(?:tell|ask|warn|notify|remind|show)\s+me\s+(?:first\s+)?"
        r"(?:before|whenever|every time|each time|any time|anytime)\b.+)"
    ),
    re.compile(r"^(?:请)?(?:以后|今后|从现在开始|从今以后|往后|从此以后)[\s，,：:]*(?P<rest>.+)"),
    re.compile(r"^(?:请|你要|你应该|要)?(?P<rest>(?:总是|永远|始终|每次都|一律|务必).+)"),
    re.compile(
        r"^(?:请|你)?(?P<rest>(?:不要|别再|千万不要|绝对不要|不许|禁止)"
        r"(?!担心|着急|客气|紧|急|怕|管|记|保存|忘|了).+)"
    ),
)
_EMPTY_REST = re.compile(r"^(?:this|these|the following|this one|这个|这些|以下|下面)?\W*$")

_URL = re.compile(r"https?://\S+")
_DOC_POINTER = re.compile(
    r"\b(?:docs?|documentation|wiki|spec|specification|runbook|dashboard|design doc|adr|rfc)\b"
    r"[^.]{0,40}?\b(?:at|in|under|on)\s+\S|(?:文档|链接|手册|wiki|规范)"
)
# "Remember to ..." is about behaviour; "remember that X, so never do Y" is a fact
# about the project, so for a remembered sentence only its opening counts.
_BEHAVIOUR_FIRST = re.compile(
    r"\s*(?:to\s|i (?:prefer|like|want|hate)\b|i[’']d like|always\b|never\b|call me\b"
    r"|answer\b|reply\b|respond\b|don[’']?t\b|要|先|每次|别|不要|总是|永远|以后|我喜欢|我希望"
    r"|我习惯|叫我|回答|回复|用中文|用英文)"
)
# Look-behinds keep each run of path characters to one start: linear on any input.
_PROJECT_CUES = re.compile(
    r"`|https?://|(?<![\w./-])(?!and/or\b)[\w.-]+/[\w./-]+"
    r"|(?<![\w-])[\w-]+\.(?:py|js|ts|tsx|jsx|go|rs|rb|java|kt|c|h|cpp|cs|php|sh|md|toml|ya?ml"
    r"|json|ini|cfg|lock|txt|sql|env|gradle|xml)\b"
    r"|\b(?:this|the|our) (?:repo|repository|project|codebase|app|service|package|library"
    r"|monorepo|tests?|test suite|build|ci|pipeline|api|database|db|schema)\b"
    r"|\b(?:ci|makefile|dockerfile|npm|pnpm|yarn|pip|uv|poetry|pytest|cargo|docker|kubectl"
    r"|terraform|git|tox|nox|ruff|mypy|eslint|prettier|jest|vitest|gradle|maven|migrations?"
    r"|endpoints?|staging|production|deploy\w*|commits?|branch(?:es)?|pull requests?|prs?"
    r"|changelog|releases?)\b"
    r"|本项目|这个项目|该项目|项目里|这个仓库|仓库|代码库|测试|构建|分支|部署|接口|数据库|目录|依赖"
)
_USER_CUES = re.compile(
    r"\b(?:answer|respond|reply|talk|speak|explain|call me|my name|i prefer|i like|i want"
    r"|i[’']d like|i hate|me|my|chinese|english|japanese|british|american|spelling|tone|concise"
    r"|verbose|brief|emojis?|polite|formal|informal|apologi[sz]e|language)\b"
    r"|用中文|中文|英文|回答|回复|叫我|我喜欢|我习惯|我希望|简洁|语气|称呼"
)


def _blank(m: re.Match[str], fill: str) -> str:
    return fill * len(m.group())


def _mask(text: str) -> str:
    """Lower-case ``text`` with quoted and fenced parts blanked out, offsets unchanged."""
    low = text.lower()
    if len(low) != len(text):  # U+0130 lowers to two code points
        low = text.replace("\u0130", "i").lower()
    low = _FENCE.sub(lambda m: _blank(m, "\n"), low)
    low = _BLOCKQUOTE.sub(lambda m: _blank(m, " "), low)
    # Keep the delimiters so a quoted phrase still reads as "something" to the
    # patterns, but nothing inside can trigger a capture.
    return _INLINE.sub(lambda m: m.group()[0] + "x" * (len(m.group()) - 2) + m.group()[-1], low)


def _sentences(mask: str) -> list[tuple[int, int, int]]:
    """Return ``(start, end, paragraph)`` for each non-blank sentence, whitespace trimmed."""
    spans: list[tuple[int, int, int]] = []
    paragraph, pos, last = 0, 0, 0
    # (where a sentence ends, where the next begins): a joining "and" belongs to neither.
    cuts = sorted(
        {(m.end(), m.end()) for m in _CUT.finditer(mask)}
        | {(m.start(), m.end()) for m in _JOIN_CUT.finditer(mask)}
    )
    for end, after in [*cuts, (len(mask), len(mask))]:
        if end < pos:
            continue
        start, stop = pos, end
        while start < stop and mask[start].isspace():
            start += 1
        while stop > start and mask[stop - 1].isspace():
            stop -= 1
        if start < stop:
            if _PARAGRAPH_BREAK.search(mask, last, start):
                paragraph += 1
            spans.append((start, stop, paragraph))
            last = stop
        pos = after
    return spans


def _unbullet(mask: str, start: int, end: int) -> int:
    """Where a sentence starts once a list bullet or heading mark is skipped."""
    bullet = _BULLET.match(mask, start, end)
    return bullet.end() if bullet else start


_BREAK = re.compile(r"[\s,;:，、；：。）)」』]")


def _shorten(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, cut at a space or punctuation, never inside a
    word or a number (unless a single word is longer than half the limit)."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    breaks = [m.end() for m in _BREAK.finditer(cut)]
    if breaks and breaks[-1] >= limit // 2:
        cut = cut[: breaks[-1]]
    elif cut[-1:].isascii() and cut[-1:].isalnum() and text[len(cut)].isalnum():
        # No break in sight (CJK text): at least step out of a Latin word or a number.
        run = len(cut)
        while run > 0 and cut[run - 1].isascii() and cut[run - 1].isalnum():
            run -= 1
        if run >= limit // 3:
            cut = cut[:run]
    return cut.rstrip(" ,;:—-，、；：") + "…"


def _summary(rest: str, fallback: str) -> str:
    """One sentence saying what the note holds, without the trigger ("Remember that ...")."""
    core = " ".join(rest.split()).strip(" ,:;—–-，：；")
    if not core:
        core = " ".join(fallback.split())
    if core.lower().startswith("to "):
        core = core[3:]
    core = core[:1].upper() + core[1:]
    if core and core[-1] not in ".!?。！？…":
        core += "。" if ord(core[-1]) >= 0x2E80 else "."
    return _shorten(core, 160)


def _title(core: str) -> str:
    core = " ".join(core.split()).strip(" ,:;—–-").rstrip(".!。！;；")
    if core.lower().startswith("to "):
        core = core[3:]
    return _shorten(core[:1].upper() + core[1:], 60)


# A rule about how to treat the person ("tell me before ...") is theirs, wherever it applies.
_ABOUT_ME = re.compile(
    r"^(?:always\s+|please\s+|first\s+)*(?:(?:tell|ask|warn|notify|remind|show)\s+me|let me know)\b"
    r"|(?:先|要)?(?:告诉|问|提醒|通知|跟)我(?:一声|一下)?\W*$|^(?:先|要)?(?:告诉|问|提醒|通知)我"
)


def _level(text: str, kind: NoteType, rest: str = "") -> Level:
    low = text.lower()
    if kind is NoteType.USER_PREFERENCE and _ABOUT_ME.search(rest.strip().lower()):
        return Level.USER
    if _PROJECT_CUES.search(low):
        return Level.PROJECT
    if _USER_CUES.search(low) or kind is NoteType.USER_PREFERENCE:
        return Level.USER
    return Level.PROJECT


def _only_secrets(rest: str) -> bool:
    """Whether a captured sentence says nothing once its redacted secrets are taken out."""
    if not _MARKER.search(rest):
        return False
    return not _FILLER.sub("", _MARKER.sub("", rest).lower()).strip()


def _classify(unit: str) -> tuple[NoteType, re.Match[str], bool] | None:
    """The trigger ``unit`` (masked, lowered, lead-ins removed) starts with, if any.

    The flag says whether the rest must read as a correction (English "no, ...").
    """
    for pattern in _CORRECTIONS_EN:
        m = pattern.match(unit)
        if m:
            return NoteType.CORRECTION_FEEDBACK, m, True
    for pattern in _CORRECTIONS_PLAIN:
        m = pattern.match(unit)
        if m:
            return NoteType.CORRECTION_FEEDBACK, m, False
    for patterns, kind in (
        (_REMEMBER, NoteType.PROJECT_KNOWLEDGE),
        (_PREFERENCES, NoteType.USER_PREFERENCE),
    ):
        for pattern in patterns:
            m = pattern.match(unit)
            if m:
                return kind, m, False
    return None


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("```", "~~~")):
            return _shorten(line, 200)
    return ""


class OfflineProvider:
    """Captures explicit memory requests and corrections from the user's messages."""

    name = "offline"

    def extract(self, request: ExtractionRequest) -> list[object]:
        """Return one ``create`` operation per explicit request in the turn; ``[]`` if none."""
        ops: list[object] = []
        seen: set[tuple[str, str, str]] = set()
        previous: Message | None = None
        for message in request.messages:
            if message.role == "user":
                for op in self._capture(message.text, previous):
                    key = (op["type"], op["level"], " ".join(op["content"].split()).casefold())
                    if key not in seen and len(ops) < _MAX_CAPTURES:
                        seen.add(key)
                        ops.append(op)
            elif message.role == "assistant":
                previous = message
        return ops

    def _capture(self, text: str, previous: Message | None) -> list[dict[str, str]]:
        mask = _mask(text)
        units = [(_unbullet(mask, s, e), e, p) for s, e, p in _sentences(mask)]
        ops: list[dict[str, str]] = []
        taken = 0  # units before this index already belong to a capture
        for index, (first, end, paragraph) in enumerate(units):
            if index < taken:
                continue
            lead = _LEAD.match(mask, first, end)
            start = lead.end() if lead else first
            masked, original = mask[start:end], text[start:end]
            if _QUESTION.search(masked):
                continue
            found = _classify(masked)
            if found is None:
                continue
            kind, m, strict = found
            rest = original[m.start("rest") : m.end("rest")].strip() if m.group("rest") else ""
            content = text[first:end].strip()
            if not rest or (kind is NoteType.PROJECT_KNOWLEDGE and _EMPTY_REST.match(rest.lower())):
                # "Remember this:" or a bare "No." points at what follows in the paragraph.
                wanted = 5 if kind is NoteType.PROJECT_KNOWLEDGE else 1
                after = [u for u in units[index + 1 : index + 1 + wanted] if u[2] == paragraph]
                if not after:
                    continue
                rest = " ".join(text[s:e] for s, e, _ in after)
                content = "\n".join([content, *(text[s:e] for s, e, _ in after)])
                taken = index + 1 + len(after)
            if strict and not _CORRECTIVE.search(rest.lower()):
                continue
            if _only_secrets(rest):
                continue
            if kind is NoteType.PROJECT_KNOWLEDGE:
                if _URL.search(rest) or _DOC_POINTER.search(rest.lower()):
                    kind = NoteType.REFERENCE_MATERIAL
                elif _BEHAVIOUR_FIRST.match(rest.lower()):
                    kind = NoteType.USER_PREFERENCE
            level = _level(content, kind, rest)
            if kind is NoteType.CORRECTION_FEEDBACK and previous is not None:
                corrected = _first_line(previous.text)
                if corrected:
                    content += f"\n\nIn reply to the assistant: {corrected}"
            ops.append(
                {
                    "action": "create",
                    "level": level.value,
                    "type": kind.value,
                    "title": _title(rest) or _title(original),
                    "summary": _summary(rest, text[first:end]),
                    "content": content,
                }
            )
        return ops
