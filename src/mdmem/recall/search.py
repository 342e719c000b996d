"""Keyword search over notes: pure functions, no index on disk.

A note matches when it shares at least one token with the query. Tokens are
case-folded runs of word characters (the text is split on ``\\W+``), except
that each CJK character is a token of its own, since Chinese and Japanese do
not put spaces between words. A note's score is the term frequency of the
query's tokens, counting a hit in the title :data:`TITLE_WEIGHT` times and in
the summary :data:`SUMMARY_WEIGHT` times; ties go to the note updated last,
then to the file name.

Reading every note is fast enough for stores of a few thousand notes (a
libyaml parse is ~27 µs a note); a store that outgrows that wants SQLite FTS5.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mdmem._kinds import Level
from mdmem.store.note import clean_inline

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mdmem.store.note import Note
    from mdmem.store.store import Store

__all__ = [
    "SNIPPET_CHARS",
    "SUMMARY_WEIGHT",
    "TITLE_WEIGHT",
    "Hit",
    "search",
    "search_stores",
    "tokenize",
]

TITLE_WEIGHT = 3
SUMMARY_WEIGHT = 2
SNIPPET_CHARS = 160

# Han (with extensions and compatibility forms), kana, Hangul, CJK symbols.
_CJK = (
    "\u2e80-\u2fdf\u3005-\u3007\u3021-\u3029\u3040-\u30ff\u3100-\u312f\u3131-\u318e"
    "\u31a0-\u31bf\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
    "\U00020000-\U0003134f"
)
_TOKEN = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+")
_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Hit:
    """One search result: which note, how well it matched, and a line of it to show."""

    filename: str
    level: Level
    title: str
    summary: str
    score: int
    snippet: str
    updated: datetime | None = None


def _tokens_with_spans(text: str) -> list[tuple[str, int, int]]:
    # NFKC first, so full-width letters and ligatures match their plain forms.
    text = unicodedata.normalize("NFKC", text)
    return [(m.group().casefold(), m.start(), m.end()) for m in _TOKEN.finditer(text)]


def tokenize(text: str) -> list[str]:
    """The search tokens of ``text``: case-folded words, and each CJK character alone."""
    return [token for token, _, _ in _tokens_with_spans(text)]


def _snippet(body: str, terms: set[str], fallback: str) -> str:
    """About :data:`SNIPPET_CHARS` characters of the body around its first matching token."""
    text = unicodedata.normalize("NFKC", body)
    spans = [(start, end) for token, start, end in _tokens_with_spans(text) if token in terms]
    if not spans:
        return clean_inline(fallback or text, SNIPPET_CHARS)
    start, end = spans[0]
    half = max(0, (SNIPPET_CHARS - (end - start)) // 2)
    left = max(0, start - half)
    right = min(len(text), end + half)
    piece = clean_inline(text[left:right])
    return ("…" if left > 0 else "") + piece + ("…" if right < len(text) else "")


def _score(note: Note, terms: set[str]) -> int:
    title = Counter(tokenize(note.title))
    summary = Counter(tokenize(note.summary))
    body = Counter(tokenize(note.body))
    return sum(TITLE_WEIGHT * title[t] + SUMMARY_WEIGHT * summary[t] + body[t] for t in terms)


def search(query: str, notes: Iterable[tuple[Level, Note]], *, limit: int = 10) -> list[Hit]:
    """The ``limit`` notes that best match ``query``, best first; ``[]`` if nothing matches.

    ``notes`` are (level, note) pairs, so one search can span both stores.
    """
    terms = set(tokenize(query))
    if not terms or limit <= 0:
        return []
    hits = []
    for level, note in notes:
        score = _score(note, terms)
        if score > 0:
            hits.append(
                Hit(
                    filename=note.filename,
                    level=Level(level),
                    title=note.title,
                    summary=note.summary,
                    score=score,
                    snippet=_snippet(note.body, terms, note.summary or note.title),
                    updated=note.updated,
                )
            )
    # Best score, then most recently updated, then file name (project before user on a tie).
    hits.sort(key=lambda h: (h.filename, h.level.value))
    hits.sort(key=lambda h: (h.score, h.updated or _OLDEST), reverse=True)
    return hits[:limit]


def _current(store: Store) -> list[Note]:
    from mdmem.store.marks import left_out

    notes = store.notes()  # brings the catalog, and so the marks, up to date first
    gone = left_out(store)
    return [note for note in notes if note.filename not in gone]


def search_stores(query: str, stores: Iterable[Store], *, limit: int = 10) -> list[Hit]:
    """Search the current notes of several stores (superseded, expired, malformed ones left out)."""
    return search(
        query, ((store.level, note) for store in stores for note in _current(store)), limit=limit
    )
