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
    r"|ps|please|pls|kindly|heads up|for the record|for context|just so you know|two things"
    r"|a few things|one thing|quick note)\b[\s,:;!—–-]*"
    r"|(?:好的|好|嗯|另外|还有|对了|顺便说一下|顺便|注意|重要|提醒一下|说明一下)[\s，,：:！!]*)*"
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
    # "别用 X，用 Y" / "不要用 X，改用 Y": a correction naming what to use instead.
    re.compile(
        r"^(?P<rest>(?:请)?(?:别|不要|不许|千万别|千万不要)(?:再)?(?:用|使用)\s*[^，,。；;]{1,40}?"
        r"[\s，,、；;]*(?:要|请|改|应该|而是|就)?(?:用|使用|换成|改用)\s*\S.*)"
    ),
)
# What an English correction must say for "no, ..." to be more than a refusal.
_CORRECTIVE = re.compile(
    r"^(?:please\s+)?(?:use|run|call|try|put|set|import|install|pass|keep|we use|you should"
    r"|it should|should be|the (?:correct|right|real|actual)|never|always|don[’']?t ever)\b"
    r"|\binstead\b|\brather than\b|,\s*not\b"
    r"|\b(?:don[’']?t|do not|never) use\b|\bwe (?:now |only )?use\b|\bwe (?:switched|moved)\b"
    r"|\b(?:go|goes|belongs?|lives?) (?:in|into|against|to|under)\b|\bis only\b|\bare only\b"
)
# "No, ..." that refuses or defers rather than corrects.
_REFUSAL = re.compile(
    r"^(?:thanks?|thank you|that[’']?s (?:fine|ok|okay|all|it)|not (?:now|yet|really)|need\b"
    r"|problem|worries|stop|wait|don[’']?t (?:bother|worry)|never ?mind|leave it|skip it"
    r"|it[’']?s (?:fine|ok)|i (?:mean|meant|think)|sorry)"
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
    r"[^.]{0,40}?(?:\b(?:at|in|under|on)\s+\S|\b(?:is|are)\s+(?:https?://|\S*/\S))"
    r"|(?:文档|链接|手册|wiki|规范)"
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


_TITLE_URL = re.compile(
    r"\s*(?:(?:is|are|lives?|at|in|on|under|see|:|是|在)\s*)*(?:https?://|www\.)\S+\s*"
)


def _title(core: str) -> str:
    # A URL is for the body: in a title it is long, unreadable and cut in the middle.
    core = _TITLE_URL.sub(" ", core)
    core = " ".join(core.split()).strip(" ,:;—–-，：；。").rstrip(".!。！;；")
    if core.lower().startswith("to "):
        core = core[3:]
    return _shorten(core[:1].upper() + core[1:], 60)


# A rule about how to treat the person ("tell me before ...") is theirs, wherever it applies.
_ABOUT_ME = re.compile(
    r"^(?:always\s+|please\s+|first\s+)*(?:(?:tell|ask|warn|notify|remind|show)\s+me|let me know)\b"
    r"|(?:先|要)?(?:告诉|问|提醒|通知|跟)我(?:一声|一下)?\W*$|^(?:先|要)?(?:告诉|问|提醒|通知)我"
)


# Words that name where a habit is applied, not a repository: "write commit messages in the
# imperative", "prefer small commits", "先跑测试再提交" are the person's way of working.
_WEAK_CUE = re.compile(
    r"commits?|branch(?:es)?|pull requests?|prs?|releases?|changelog|deploy\w*|测试|分支|构建|部署"
)
_NAMED_BRANCH = re.compile(r"\b(?:main|master|develop|dev|trunk|release)\s+branch\b|\bmain\b")


def _names_project(low: str, kind: NoteType) -> bool:
    """Whether ``low`` names something of this repository (for a preference: strongly)."""
    if kind is not NoteType.USER_PREFERENCE:
        return _PROJECT_CUES.search(low) is not None
    if _NAMED_BRANCH.search(low):
        return True
    return any(not _WEAK_CUE.fullmatch(m.group()) for m in _PROJECT_CUES.finditer(low))


def _level(text: str, kind: NoteType, rest: str = "") -> Level:
    low = text.lower()
    if kind is NoteType.USER_PREFERENCE and _ABOUT_ME.search(rest.strip().lower()):
        return Level.USER
    if _names_project(low, kind):
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


# A project fact said in passing, with no trigger ("the integration tests need Redis on
# 6380"): a statement (not a question, a request or a story of what just happened) with
# a verb of how things are set up, about something concrete (a number, a path, a name).
_FACT_VERB = re.compile(
    r"\b(?:needs?|requires?|depends on|runs? (?:on|in|under|with|against)|lives? (?:in|at|on|under)"
    r"|(?:is|are) (?:at|in|on|under|called|named|kept in|stored in|generated from|defined in"
    r"|built with|served from|hosted on)|listens? on|talks? to|connects? to|deploys? (?:to|on|only)"
    r"|only (?:deploys|runs|builds)|reads? (?:its |the )?(?:config|settings|secrets)\b|we use"
    r"|uses|builds? with|(?:switched|moved|migrated|bumped|upgraded|changed) (?:to|from)"
    r"|replaced|renamed|no longer)\b"
    r"|需要|依赖|跑在|运行在|部署在|放在|位于|定义在|存放在|用的是|使用|采用|端口是|要在|要用"
    r"|叫做|前缀是|换成|改成|迁到|迁移到|升级到|切到|不再"
)
# "The worker queue is RabbitMQ", "the port is 8443": a copula before a proper name or number.
_IS_NAME = re.compile(r"\b(?:is|are)\s+(?:[A-Z][\w.+-]*[A-Za-z0-9]|[\w.-]*\d[\w.-]*)")
_CONCRETE = re.compile(
    r"\d|[\w.-]+/[\w./-]+|\b\w+\.\w{1,8}\b|(?<=[\s(])[A-Z][A-Za-z0-9]*[A-Za-z0-9]"
    r"|[A-Za-z]{2,}(?=[^A-Za-z]*[\u4e00-\u9fff])|(?<=[\u4e00-\u9fff])\s*[A-Za-z]{2,}"
)
_NOT_FACT = re.compile(
    r"^(?:i|i[’']m|i[’']ve|you|let[’']?s|let us|can|could|would|will|should|please|pls|fix|run"
    r"|rename|add|remove|delete|update|change|try|make|create|write|check|look|show|tell|explain"
    r"|move|use|put|set|open|close|revert|undo|push|pull|commit|merge|build|deploy|install"
    r"|if|when|maybe|perhaps|hmm|why|what|how|where|who|which)\b"
    r"|^(?:帮我|把|再|请|给我|你|我|看一下|看看|为什么|怎么|如果|能不能|可以)"
    r"|\b(?:right now|at the moment|currently|still|today|tonight|just now|for now|broken"
    r"|failing|fails|failed|crash(?:ed|es)?|didn[’']?t work|doesn[’']?t work|seems?)\b"
    r"|现在|刚才|暂时|白屏|报错|失败了|好像|似乎"
)


def _fact(masked: str, original: str) -> tuple[NoteType, re.Match[str], bool] | None:
    """A statement of how the project is set up, as a ``project_knowledge`` capture."""
    if _NOT_FACT.search(masked) or len(masked) < 8:
        return None
    if not (_FACT_VERB.search(masked) or _IS_NAME.search(original)):
        return None
    concrete = _CONCRETE.search(original)
    if not (concrete and (_PROJECT_CUES.search(masked) or _TECH.search(original))):
        return None
    m = re.match(r"(?P<rest>.+)", original, re.S)
    assert m is not None
    return NoteType.PROJECT_KNOWLEDGE, m, False


# Something technical by name: a version, a port, a dotted or CamelCase identifier, an acronym.
_TECH = re.compile(
    r"\b\d+(?:\.\d+)+\b|\b\d{2,5}\b|\b[A-Za-z]+[A-Z][A-Za-z]+\b|\b[A-Z]{2,}\b|\b\w+\.\w+\b"
    r"|(?<=\s)[A-Z][a-z]+[A-Za-z0-9]*\b"
)
# A credential stated in prose: the value itself is the secret, and nothing else is said.
_CREDENTIAL = re.compile(
    # A password's value, as written or already redacted: the sentence is only the secret.
    r"(?i)\b(?:password|passwd|passphrase|pin)\s*(?:is|=|:)\s*\S{4,}"
    r"|(?:密码|口令)\s*(?:是|为|=|:|：)\s*\S{4,}"
    # A key or token's raw value; redacted, only when nothing follows it ("api_key=[…]"),
    # since "the script reads GITHUB_TOKEN=[…] from the environment" is a fact worth keeping.
    r"|(?i:\b(?:api[ _-]?key|token|secret))\s*(?:is|=|:)\s*(?!\[REDACTED)\S{4,}"
    r"|(?:密钥|令牌)\s*(?:是|为|=|:|：)\s*(?!\[REDACTED)\S{4,}"
    r"|(?i:\b(?:api[_-]?key|token|password|secret|密钥|密码))\s*[=:：是]\s*\[REDACTED:[a-z0-9_]+\]"
    r"\s*\W*$"
)


def _host(text: str) -> str:
    """The host of the first URL in ``text`` (a title when nothing else is left)."""
    m = re.search(r"https?://([^/\s]+)", text)
    return m.group(1) if m else ""


def _first_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("```", "~~~")):
            return _shorten(line, 200)
    return ""


# -- supersession: a fact that changed ----------------------------------------------------

_INDEX_LINE = re.compile(
    r"^-\s+(?:(?P<level>project|user):\s+)?\[(?P<type>[a-z_]+)\]\s+(?P<about>.*?)"
    r"(?:\s+\[[^\]]*\])*\s+\((?P<file>[^()\s/\\]+\.md)\)\s*$"
)
# Words that say a fact is no longer true: the new note replaces the old one.
_CHANGED = re.compile(
    r"\b(?:switched|moved|migrated|bumped|upgraded|changed|replaced|renamed|no longer|instead"
    r"|out of date|outdated|not any ?more|now)\b"
    r"|换成|改成|改为|迁到|迁移到|升级到|切到|不再|过时|下线|已经|现在|不用"
)
# Things of one kind: naming one of them is about the same topic as naming another.
_KINDRED = [
    {"npm", "pnpm", "yarn", "bun"},
    {"jenkins", "actions", "gitlab", "circleci", "travis", "buildkite"},
    {"pytest", "unittest", "nose"},
    {"black", "ruff", "yapf", "autopep8"},
    {"requests", "httpx", "aiohttp"},
    {"moment", "dayjs", "date-fns", "luxon"},
    {"rabbitmq", "kafka", "sqs", "nats"},
    {"mysql", "postgres", "postgresql", "sqlite"},
    {"english", "chinese", "japanese", "german", "french", "英文", "中文", "英语", "汉语"},
    {"logging", "structlog", "loguru"},
    {"docker", "podman"},
    {"makefile", "justfile"},
]
_STOP = {
    "the",
    "a",
    "an",
    "is",
    "are",
    "to",
    "on",
    "in",
    "of",
    "for",
    "and",
    "or",
    "we",
    "our",
    "use",
    "uses",
    "used",
    "with",
    "from",
    "it",
    "this",
    "that",
    "be",
    "not",
    "no",
    "now",
    "run",
    "runs",
    "note",
    "as",
    "at",
    "by",
    "all",
    "always",
    "never",
    "one",
}
_WORD = re.compile(r"[a-z0-9][a-z0-9.+-]*[a-z0-9]|[a-z0-9]")
_HAN = re.compile(r"[\u4e00-\u9fff]+")


def _topic(text: str) -> set[str]:
    """The words a note is about: Latin words, Chinese character pairs, and kinds of tool."""
    low = text.lower()
    words = {w for w in _WORD.findall(low) if w not in _STOP and (len(w) > 1 or w.isdigit())}
    for run in _HAN.findall(low):
        words.update(run[i : i + 2] for i in range(len(run) - 1))
    for group, members in enumerate(_KINDRED):
        if words & members or any(m in low for m in members if not m.isascii()):
            words.add(f"kind:{group}")
    return words


def _existing(request: ExtractionRequest) -> list[tuple[str, str, str]]:
    """``(level, filename, title and summary)`` of the notes the request shows."""
    out: list[tuple[str, str, str]] = []
    views = (request.project_index, "project"), (request.user_index, "user"), (request.related, "")
    for view, level in views:
        for line in view.splitlines():
            m = _INDEX_LINE.match(line.strip())
            if m:
                out.append((m.group("level") or level, m.group("file"), m.group("about")))
    return out


def _replaces(op: dict[str, object], existing: list[tuple[str, str, str]]) -> str | None:
    """The existing note a capture replaces: same store, same topic, and said to have changed."""
    text = f"{op['title']} {op['content']}"
    if op["type"] != NoteType.CORRECTION_FEEDBACK.value and not _CHANGED.search(text.lower()):
        return None
    new = _topic(str(op["content"]).split("\n\nIn reply to the assistant:")[0])
    best, best_score = None, 0
    for level, filename, about in existing:
        if level != op["level"]:
            continue
        shared = new & _topic(about)
        score = sum(2 if w.startswith("kind:") else 1 for w in shared)
        if score > best_score:
            best, best_score = filename, score
    return best if best_score >= 2 else None


class OfflineProvider:
    """Captures explicit memory requests and corrections from the user's messages."""

    name = "offline"

    def extract(self, request: ExtractionRequest) -> list[object]:
        """Return one ``create`` operation per explicit request in the turn; ``[]`` if none."""
        ops: list[dict[str, object]] = []
        seen: set[tuple[str, str, str]] = set()
        previous: Message | None = None
        for message in request.messages:
            if message.role == "user":
                for op in self._capture(message.text, previous):
                    key = (op["type"], op["level"], " ".join(op["content"].split()).casefold())
                    if key not in seen and len(ops) < _MAX_CAPTURES:
                        seen.add(key)
                        ops.append(dict(op))
            elif message.role == "assistant":
                previous = message
        existing = _existing(request)
        for made in ops:
            replaced = _replaces(made, existing)
            if replaced:
                made["supersedes"] = [replaced]
        return list(ops)

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
            found = _classify(masked) or _fact(masked, original)
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
            if strict and (
                _REFUSAL.match(rest.lower())
                or not (_CORRECTIVE.search(rest.lower()) or _PROJECT_CUES.search(rest.lower()))
                or len(rest.split()) < 3
            ):
                continue
            if _CREDENTIAL.search(rest) or _only_secrets(rest):
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
                    "title": _title(rest) or _title(original) or _title(_host(rest)),
                    "summary": _summary(rest, text[first:end]),
                    "content": content,
                }
            )
        return ops
