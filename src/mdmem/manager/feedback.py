"""Feedback: a user's correction counts against the notes that misled the agent.

After each turn the worker looks for a correction: the model flags one by
writing a ``correction_feedback`` note, or the offline detector sees a user
say so ("that's wrong", "no, it's", "不对", "你记错了", "错了", ...). A note of
either store is marked disputed (:mod:`mdmem.recall.disputes`) only when the
correction really contradicts it (:func:`contradicts`): the correction says
what is wrong ("X, not Y", "Y was removed", "不是 Y"), the note says that
wrong thing, is on the same subject, and does not already say what the
correction says is right. Measured on labelled pairs (``tests/data/
dispute_pairs.json``, ``benchmarks/bench_disputes.py``). A disputed note is
ranked lower by recall, shown by ``mdmem why``, ``mdmem stats`` and the web
page, offered by ``mdmem review``; a person can dismiss a false dispute.
Notes the turn itself wrote are never disputed by it. A note that a later
turn writes again, changed or unchanged, is confirmed and recovers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mdmem.recall.disputes import clear, dispute_penalty, disputed, mark

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence

    from mdmem.store.store import Store

__all__ = [
    "after_turn",
    "contradicted",
    "contradicts",
    "correcting",
    "correction",
    "dispute_penalty",
    "disputed",
    "salient",
    "wrong_terms",
]


_CORRECTION = re.compile(
    r"(?:\b(?:that'?s|that is|this is|it'?s|you'?re|you are)\s+(?:just\s+)?"
    r"(?:wrong|incorrect|not (?:right|correct|true)|outdated|mistaken)\b"
    r"|\bno,\s*(?:it'?s|it is|that'?s|we|you|the|use)\b"
    r"|\bnot anymore\b|\byou misremember|\byou remembered (?:it )?wrong"
    r"|\bwrong[.!]|^\s*(?:no|nope|wrong)\s*[,.!]"
    r"|不对|不是这样|你记错了|记错了|错了|搞错了|不正确|并不是|不是的)",
    re.I | re.M,
)
_WORD = re.compile(r"[a-z0-9][a-z0-9_.+-]*[a-z0-9+]|[a-z0-9]|[\u4e00-\u9fff]+", re.I)
_STOP = frozenset(
    [
        "the",
        "and",
        "for",
        "with",
        "from",
        "that",
        "this",
        "these",
        "those",
        "then",
        "than",
        "was",
        "were",
        "are",
        "is",
        "be",
        "been",
        "not",
        "you",
        "your",
        "our",
        "its",
        "it's",
        "use",
        "used",
        "using",
        "run",
        "runs",
        "into",
        "onto",
        "over",
        "under",
        "about",
        "after",
        "before",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "how",
        "all",
        "any",
        "each",
        "some",
        "such",
        "only",
        "also",
        "just",
        "now",
        "here",
        "there",
        "they",
        "them",
        "their",
        "have",
        "has",
        "had",
        "will",
        "would",
        "should",
        "could",
        "can",
        "may",
        "might",
        "must",
        "shall",
        "do",
        "does",
        "did",
        "done",
        "get",
        "gets",
        "got",
        "need",
        "needs",
        "one",
        "two",
        "yes",
        "no",
        "wrong",
        "right",
        "correct",
        "actually",
        "please",
        "thanks",
        "sure",
        "okay",
        "note",
        "notes",
        "memory",
    ]
)


def correction(messages: Sequence[tuple[str, str]]) -> tuple[str, str] | None:
    """The first correction in a turn: (the user's words, the assistant's statement before)."""
    before = ""
    for role, text in messages:
        if role == "assistant":
            before = text
        elif role == "user" and _CORRECTION.search(text):
            return text, before
    return None


def salient(text: str) -> set[str]:
    """The words that carry meaning: lower case, stop words out, Chinese text as pairs."""
    out: set[str] = set()
    for word in _WORD.findall(text.lower()):
        if "\u4e00" <= word[0] <= "\u9fff":
            out.update(word[i : i + 2] for i in range(max(len(word) - 1, 1)))
        elif len(word) >= 3 and word not in _STOP:
            out.add(word.strip(".-"))
    return out


# What a correction says is wrong: the phrase after "instead of", "not", "不是", ...,
# or before "was removed", "已经废弃了", ... A dot inside a phrase stays (`fmt.Println`).
_PHRASE = r"((?:[^,;:!?，。；：！？\n()（）.]|\.(?=\S)){1,60})"
_BEFORE = r"([\w`./:-]+(?:\s+[\w`./:-]+)?)"
_WRONG = [
    re.compile(
        rf"\b(?:instead of|rather than|not|no longer)\s+(?:use |using |with )?{_PHRASE}", re.I
    ),
    re.compile(
        rf"\b(?:don'?t|do not|stop|never)\s+(?:use|using|run|running|call)?\s*{_PHRASE}", re.I
    ),
    re.compile(
        rf"{_BEFORE}\s+(?:is|was|has been|are|were)\s+"
        r"(?:removed|gone|deprecated|dropped|outdated|dead|replaced|no longer\b)",
        re.I,
    ),
    re.compile(r"(?:而不是|不是(?!这样|的)|不要用|不要|别用|不用|不再用)\s*" + _PHRASE),
    re.compile(
        _BEFORE + r"\s*(?:早就|已经|都)?"
        r"(?:删了|删掉了|没了|废弃了|不用了|被删除了|不支持了|去掉了|过时了)"
    ),
]
# Where a "not X" phrase ends: "not requests for HTTP calls" is about requests.
_CUT = re.compile(r"\s+(?:for|in|on|at|when|because|since|so|and|but|as|any ?more|now)\b.*", re.I)
_CODE = re.compile(r"`([^`\n]{1,80})`")
# A word of these is the subject of many notes: alone it says nothing about which note erred.
_GENERIC = frozenset(
    ["test", "tests", "file", "files", "code", "make", "build", "data", "default", "work", "use"]
)
# Pairs of Chinese characters that are grammar, not subject.
_CJK_STOP = frozenset(
    ["已经", "早就", "不是", "不要", "要用", "不用", "我们", "们用", "错了", "不对"]
)
_PARTS = re.compile(r"[./_:-]")


def _words(text: str, *, parts: bool = False) -> set[str]:
    """Every term of ``text``: words of 3+ letters (plural ``s`` dropped), numbers and
    versions however short (``60``, ``v1``), Chinese as pairs; with ``parts``, the pieces
    of ``sphinx-build`` or ``log.Printf`` too."""
    out: set[str] = set()
    for word in _WORD.findall(text.replace("`", " ").lower()):
        if "\u4e00" <= word[0] <= "\u9fff":
            out.update(word[i : i + 2] for i in range(max(len(word) - 1, 1)))
            continue
        word = word.strip(".-")
        if any(c.isdigit() for c in word) or (len(word) >= 3 and word not in _STOP):
            out.add(word[:-1] if len(word) > 3 and word.endswith("s") and word.isalpha() else word)
        if parts and _PARTS.search(word):
            out.update(p for p in _PARTS.split(word) if len(p) >= 3 or p.isdigit())
    return out - _CJK_STOP


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?;])\s+|(?<=[。！？；])|\n+", text) if s.strip()]


def correcting(said: str) -> str:
    """The part of a user's message that corrects: the sentences with a correction phrase
    or a "not X" / "X was removed" / "不是 X" part (the rest may be a new instruction)."""
    kept = [
        s for s in _sentences(said) if _CORRECTION.search(s) or any(p.search(s) for p in _WRONG)
    ]
    return " ".join(kept)


def wrong_terms(text: str) -> set[str]:
    """The terms of what a correction says is wrong (``not X``, ``X was removed``, ``不是X``):
    the code in backticks of such a phrase if it has some, else the phrase up to a ``for``,
    ``in``, ``because``, ..."""
    out: set[str] = set()
    for pattern in _WRONG:
        for match in pattern.finditer(text):
            phrase = match.group(1)
            code = _CODE.findall(phrase)
            if code:
                phrase = " ".join(code)
            elif "`" in phrase:
                phrase = phrase.split("`")[0]
            out |= _words(_CUT.sub("", phrase))
    return out


def _values(text: str) -> set[str]:
    """What a correction says is right, as far as it can be told: its code in backticks,
    and its numbers, versions and paths."""
    found = set()
    for code in _CODE.findall(text):
        found |= _words(code)
    found |= {w for w in _words(text) if _PARTS.search(w) or any(c.isdigit() for c in w)}
    return found


def contradicts(said: str, before: str, note: str) -> bool:
    """Whether the correction ``said`` (after the assistant's ``before``) contradicts the
    note whose title and summary are ``note``.

    Only a correction that says what is wrong counts ("X, not Y", "use X instead
    of Y", "Y was removed", "不是 Y", "Y 已经废弃了"), and only against a note that:

    - says that wrong thing: a name of code in it (``log.Printf``), two of its
      words, or one on the same subject (the note shares another word with the
      correction or with what the assistant said before it);
    - does not already say what the correction says is right (its code, numbers,
      versions or paths): such a note agrees with the correction.
    """
    return bool(contradicted(said, [("", note)], before))


def contradicted(said: str, notes: Iterable[tuple[str, str]], before: str = "") -> list[str]:
    """The notes (name, title and summary) that the correction ``said`` contradicts
    (:func:`contradicts`); what the correction says is read once, not once a note."""
    part = correcting(said)
    wrong = wrong_terms(part) if part else set()
    if not wrong:
        return []
    right = _values(part) - wrong
    subject = (_words(part) | _words(before)) - wrong - _GENERIC
    out: list[str] = []
    for name, note in notes:
        words = _words(note, parts=True)
        hit = words & wrong
        if not hit or words & right:
            continue
        # Two of its words, a name of code (`log.Printf`, `config.yaml`), or one on the subject.
        named = len(hit) >= 2 or any(_PARTS.search(t) for t in hit)
        if named or ((hit - _GENERIC) and words & subject):
            out.append(name)
    return out


def after_turn(
    stores: Sequence[Store],
    messages: Sequence[tuple[str, str]],
    *,
    turn: str,
    at: str,
    written: dict[str, list[tuple[str, str]]],
    flagged: bool = False,
) -> dict[str, list[str]]:
    """Mark what a correction in this turn contradicts; clear what the turn confirmed.

    ``written`` is, per level, the (action, filename) pairs the turn wrote or
    proposed; ``flagged`` says the model saw a correction. Returns, per level,
    the names marked disputed.
    """
    found = correction(messages)
    marked: dict[str, list[str]] = {}
    for store in stores:
        level = store.level.value
        mine = {name for _, name in written.get(level, [])}
        # Confirmed again by this turn: recovers.
        clear(store, [n for action, n in written.get(level, []) if action != "delete"])
        if found is None and not flagged:
            continue
        said, before = found if found is not None else (_last_user(messages), _last(messages))
        part = correcting(said)
        wrong = wrong_terms(part) if part else set()
        if not wrong:
            continue  # it says nothing is wrong: it contradicts no note (contradicted)
        candidates = [
            (e.filename, f"{e.title} — {e.summary}")
            for e in _candidates(store, f"{before}\n{said}", len(mine), wrong)
            if e.filename not in mine and e.type != "correction_feedback"
        ]
        names = contradicted(said, candidates, before)
        if names:
            why = (correcting(said) or said).strip()
            marked[level] = mark(store, names, turn=turn, at=at, reason=why[:300])
    return marked


#: How many notes of a store a correction is checked against: the best matches of its words.
CANDIDATES = 50


class _Heading:
    __slots__ = ("filename", "summary", "title", "type")

    def __init__(self, filename: str, kind: str, title: str, summary: str) -> None:
        self.filename, self.type, self.title, self.summary = filename, kind, title, summary


def _candidates(
    store: Store, statement: str, skip: int, wrong: Collection[str] = ()
) -> list[_Heading]:
    """The notes a correction may contradict: the :data:`CANDIDATES` whose title and
    summary best match its words, from the store's search index (a turn costs what it
    writes, not a pass over every note). A note sharing no word with it cannot qualify,
    nor can one when no note of the store holds a word of ``wrong`` (what the correction
    says is wrong, :func:`wrong_terms`): then the index is not asked to rank any."""
    from mdmem.recall.engine import index_of
    from mdmem.recall.text import terms
    from mdmem.recall.weights import distinctive

    index = index_of(store)
    words = sorted(set(terms(statement)))
    wanted = {w: set(terms(w)) for w in wrong}
    df = index.document_frequency([*words, *(t for ts in wanted.values() for t in ts)])
    # A note holding the word holds each of its search terms; a word with none (a stop
    # word of the index) cannot be ruled out.
    if wanted and all(ts and not ts <= df.keys() for ts in wanted.values()):
        return []
    rare, present = distinctive(words, df, index.count())
    # Found by its distinctive words; when it has none (each in most of a large store),
    # by the notes whose title and summary hold all of them: ranking most of the store
    # by words that say little would cost a turn a pass over its index.
    found = rare or present
    rows = index.match(found, CANDIDATES + skip, heading=True, every=not rare)
    return [_Heading(r.name, r.type, r.title, r.summary) for r in rows]


def _last(messages: Sequence[tuple[str, str]]) -> str:
    return next((t for r, t in reversed(messages) if r == "assistant"), "")


def _last_user(messages: Sequence[tuple[str, str]]) -> str:
    return next((t for r, t in reversed(messages) if r == "user"), "")
