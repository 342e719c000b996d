"""Feedback: a user's correction counts against the notes that misled the agent.

After each turn the worker looks for a correction: the model flags one by
writing a ``correction_feedback`` note, or the offline detector sees a user
say so ("that's wrong", "no, it's", "不对", "你记错了", "错了", ...). The notes
the session was given (the prompt block: every indexed note of both stores)
that share at least :data:`MIN_SHARED` salient words with what was corrected
(the assistant's statement before the correction, and the correction itself)
are marked disputed (:mod:`mdmem.recall.disputes`): ranked lower by recall,
shown by ``mdmem why`` and ``mdmem stats``, offered by ``mdmem review``.
Notes the turn itself wrote are never disputed by it. A note that a later
turn writes again, changed or unchanged, is confirmed and recovers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from mdmem.recall.disputes import clear, dispute_penalty, disputed, mark

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mdmem.store.store import Store

__all__ = [
    "MIN_SHARED",
    "after_turn",
    "contradicted",
    "correction",
    "dispute_penalty",
    "disputed",
    "salient",
]

MIN_SHARED = 2

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


def contradicted(statement: str, notes: Iterable[tuple[str, str]]) -> list[str]:
    """The notes (name, text) that share :data:`MIN_SHARED` salient words with ``statement``."""
    words = salient(statement)
    if not words:
        return []
    return [name for name, text in notes if len(words & salient(text)) >= MIN_SHARED]


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
        statement = f"{before}\n{said}"
        candidates = [
            (e.filename, f"{e.title} {e.summary}")
            for e in _candidates(store, f"{before}\n{said}", len(mine))
            if e.filename not in mine and e.type != "correction_feedback"
        ]
        names = contradicted(statement, candidates)
        if names:
            marked[level] = mark(store, names, turn=turn, at=at, reason=said.strip()[:300])
    return marked


#: How many notes of a store a correction is checked against: the best matches of its words.
CANDIDATES = 50


class _Heading:
    __slots__ = ("filename", "summary", "title", "type")

    def __init__(self, filename: str, kind: str, title: str, summary: str) -> None:
        self.filename, self.type, self.title, self.summary = filename, kind, title, summary


def _candidates(store: Store, statement: str, skip: int) -> list[_Heading]:
    """The notes a correction may contradict: the :data:`CANDIDATES` whose title and
    summary best match its words, from the store's search index (a turn costs what it
    writes, not a pass over every note). A note sharing no word with it cannot qualify."""
    from mdmem.recall.engine import index_of
    from mdmem.recall.text import terms

    rows = index_of(store).match(terms(statement), CANDIDATES + skip, heading=True)
    return [_Heading(r.name, r.type, r.title, r.summary) for r in rows]


def _last(messages: Sequence[tuple[str, str]]) -> str:
    return next((t for r, t in reversed(messages) if r == "assistant"), "")


def _last_user(messages: Sequence[tuple[str, str]]) -> str:
    return next((t for r, t in reversed(messages) if r == "user"), "")
