"""Dedupe on write: is a new note the same fact as one the store already has?

One similarity, in one function (:func:`similarity`) so it can be swapped for
the recall engine's: the Jaccard index of the sets of character trigrams of
the normalised title, summary and body (case folded, NFKC, runs of anything
that is not a letter or digit made one space). Trigrams of characters work
the same for English and for Chinese, which has no spaces.

:data:`THRESHOLD` was measured (``benchmarks/bench_truth.py``) on pairs of the
recall development set that share words but mean different things, against
paraphrased duplicates: no hard pair reaches it. Two more guards keep
different facts apart however alike their words: a near-duplicate must name
the same numbers and versions (``MSRV 1.74`` is not ``MSRV 1.80``), their
titles must overlap (:data:`TITLE_CONTAINMENT`: templated notes about
different things share most of their body), and a text
shorter than :data:`MIN_CHARS` must repeat the other exactly. Below it, two notes are kept
apart: a missed merge costs a line of the index; a false merge loses a fact.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from mdmem._record import record

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator

__all__ = [
    "MIN_CHARS",
    "PREFILTER",
    "THRESHOLD",
    "Duplicate",
    "find_duplicate",
    "near_among",
    "near_rows",
    "normalise",
    "number_key",
    "similarity",
    "title_near",
]

#: At or above this similarity a create is taken as a near-duplicate of that note.
THRESHOLD = 0.6
#: Title + summary similarity below which a note is not even read to compare bodies.
PREFILTER = 0.25

#: Titles of near-duplicates share at least this share of the shorter one's trigrams.
TITLE_CONTAINMENT = 0.5
#: Below this many normalised characters only an exact repeat is a duplicate.
MIN_CHARS = 80

_NOT_WORD = re.compile(r"[\W_]+")
# Numbers and versions ("1.74", "v2", "15"): two notes that differ in one state different facts.
# What this pattern finds is what a note's numbers are; it is matched by _number_tokens, in
# linear time (the pattern's own search backtracks over every word: quadratic in its length,
# 1.6 s for one 16 KB word, minutes for a hostile 256 KB note).
_NUMBERS = re.compile(r"\w*\d[\w.]*\w|\d")
_RUN = re.compile(r"[\w.]+")
_DIGIT = re.compile(r"\d")


def _number_tokens(text: str) -> set[str]:
    """``set(_NUMBERS.findall(text))``, in one pass.

    No match of the pattern crosses a character outside ``[\\w.]``, and within such a
    run it matches at most once: from the start of the dot-separated stretch holding
    the run's first digit to the run's last word character when that digit comes
    before it, else that digit alone (it is the last word character); nothing in a run
    without a digit. (The pattern's ``\\w*\\d`` takes the stretch; ``[\\w.]*\\w`` runs to the
    last word character; its other branch is the lone digit.)
    """
    found: set[str] = set()
    for match in _RUN.finditer(text):
        run = match.group()
        digit = _DIGIT.search(run)
        if digit is None:
            continue
        first, last = digit.start(), len(run.rstrip(".")) - 1
        if first < last:
            found.add(run[run.rfind(".", 0, first) + 1 : last + 1])
        else:
            found.add(run[first])
    return found


def _numbers(text: str) -> frozenset[str]:
    return frozenset(_number_tokens(unicodedata.normalize("NFKC", text).casefold()))


def number_key(title: str, summary: str, body: str) -> str:
    """The numbers and versions a note names, as one key its duplicates share.

    The numbers found in the note's normal form, sorted, space-separated (``""``:
    none). An exact duplicate has the same normal form, so the same key; a
    near-duplicate must name the same numbers as the note it repeats
    (:func:`find_duplicate` compares ``_numbers`` of both texts), and the key is
    a function of those (each number's normal form, whatever surrounds it: a
    property test holds it). So a create needs comparing only with the notes of
    its key: "Note number 7" is never compared with "Note number 8", nor
    "Migration 0042" with "Migration 0043", however alike their words.
    """
    return " ".join(sorted(_number_tokens(normalise(note_text(title, summary, body)))))


def normalise(text: str) -> str:
    """Text reduced to what a duplicate must share: case folded, NFKC, words split by a space."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def _trigrams(text: str) -> frozenset[str]:
    padded = f" {normalise(text)} "
    if len(padded) < 3:
        return frozenset({padded})
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def _containment(x: frozenset[str], y: frozenset[str]) -> float:
    small = min(len(x), len(y))
    return len(x & y) / small if small else 1.0


@record
class Candidate:
    """An existing note as :func:`find_duplicate` first looks at it: from its index entry."""

    filename: str
    title: str
    norm_title: str
    head: frozenset[str]
    title_grams: frozenset[str]
    numbers: frozenset[str]
    """The numbers of the title and summary: the whole note has at least these."""


_CANDIDATES: dict[tuple[str, str], tuple[str, frozenset[str], frozenset[str], frozenset[str]]] = {}


def candidate(filename: str, title: str, summary: str) -> Candidate:
    """A note's :class:`Candidate` (the work is cached: index lines change rarely)."""
    key = (title, summary)
    found = _CANDIDATES.get(key)
    if found is None:
        if len(_CANDIDATES) > 50_000:
            _CANDIDATES.clear()
        head = f"{title}\n{summary}"
        found = (normalise(title), _trigrams(head), _trigrams(title), _numbers(head))
        _CANDIDATES[key] = found
    return Candidate(filename, title, *found)


class Index:
    """Candidates by title trigram, so a create compares with the few notes whose title is close.

    A near-duplicate's title shares at least :data:`TITLE_CONTAINMENT` of the
    shorter title's trigrams, so only notes with that many common title
    trigrams (counted from the postings) are worth a look.
    """

    def __init__(self) -> None:
        self._by_name: dict[str, Candidate] = {}
        self._postings: dict[str, set[str]] = {}

    def add(self, c: Candidate) -> None:
        """Add or replace a note's candidate."""
        self.remove(c.filename)
        self._by_name[c.filename] = c
        for gram in c.title_grams:
            self._postings.setdefault(gram, set()).add(c.filename)

    def remove(self, filename: str) -> None:
        """Forget a note."""
        old = self._by_name.pop(filename, None)
        if old is not None:
            for gram in old.title_grams:
                self._postings.get(gram, set()).discard(filename)

    def near(self, title: str) -> list[Candidate]:
        """The notes whose title is close enough to ``title`` to be compared."""
        grams = _trigrams(title)
        counts: dict[str, int] = {}
        for gram in grams:
            for name in self._postings.get(gram, ()):
                counts[name] = counts.get(name, 0) + 1
        out = []
        for name, common in counts.items():
            c = self._by_name[name]
            if common >= TITLE_CONTAINMENT * min(len(grams), len(c.title_grams)):
                out.append(c)
        return sorted(out, key=lambda c: c.filename)


def near_among(title: str, candidates: Iterable[Candidate]) -> list[Candidate]:
    """Those of ``candidates`` that :meth:`Index.near` would keep for ``title``, by file name.

    The same test without building an index: for a few candidates (what the
    catalog's keys give a create) the postings would cost more than they save.
    """
    grams = _trigrams(title)
    out = [
        c
        for c in candidates
        if len(grams & c.title_grams) >= TITLE_CONTAINMENT * min(len(grams), len(c.title_grams))
    ]
    return sorted(out, key=lambda c: c.filename)


@functools.lru_cache(maxsize=8192)
def _title_grams(title: str) -> frozenset[str]:
    return _trigrams(title)


def title_near(title: str, rows: Iterable[tuple[str, str, str]]) -> Iterator[tuple[str, str, str]]:
    """Those of ``rows`` (name, title, summary) whose title :meth:`Index.near` would keep
    for ``title``, in their order."""
    grams = _trigrams(title)
    for row in rows:
        theirs = _title_grams(row[1])
        if len(grams & theirs) >= TITLE_CONTAINMENT * min(len(grams), len(theirs)):
            yield row


def near_rows(title: str, rows: Iterable[tuple[str, str, str]]) -> list[Candidate]:
    """:func:`near_among` of the candidates of ``rows`` (name, title, summary), each made
    only when its title is near: making one costs more than the title test."""
    out = [candidate(*row) for row in title_near(title, rows)]
    return sorted(out, key=lambda c: c.filename)


def similarity(a: str, b: str) -> float:
    """How alike two texts are, 0 to 1: Jaccard of character trigrams of the normalised text."""
    x, y = _trigrams(a), _trigrams(b)
    if not x and not y:
        return 1.0
    return len(x & y) / len(x | y)


def note_text(title: str, summary: str, body: str) -> str:
    """What a note says, as :func:`similarity` compares it."""
    return f"{title}\n{summary}\n{body}"


@record
class Duplicate:
    """An existing note a new one repeats: ``exact`` when the normalised text is the same."""

    filename: str
    score: float
    exact: bool


class _Text:
    """A new note's text for :func:`find_duplicate`: normal form and numbers made on demand."""

    __slots__ = ("_folded", "_head_numbers", "_numbers", "_text", "_wanted")

    def __init__(self, text: str, head_numbers: frozenset[str]) -> None:
        self._text = text
        self._head_numbers = head_numbers
        self._wanted: str | None = None
        self._folded: str | None = None
        self._numbers: frozenset[str] | None = None

    def wanted(self) -> str:
        if self._wanted is None:
            self._wanted = normalise(self._text)
        return self._wanted

    def short(self) -> bool:
        return len(self.wanted()) < MIN_CHARS

    def numbers(self) -> frozenset[str]:
        if self._numbers is None:
            if self._folded is None:
                self._folded = unicodedata.normalize("NFKC", self._text).casefold()
            self._numbers = frozenset(_number_tokens(self._folded))
        return self._numbers

    def has_numbers(self, numbers: frozenset[str]) -> bool:
        """Whether the text names all of ``numbers`` (as :func:`_numbers` finds them)."""
        rest = numbers - self._head_numbers
        if not rest:
            return True
        if self._folded is None:
            self._folded = unicodedata.normalize("NFKC", self._text).casefold()
        # A number of the text is a piece of it: one that is not there is not named.
        if any(n not in self._folded for n in rest):
            return False
        return rest <= self.numbers()


def find_duplicate(
    title: str,
    summary: str,
    body: str,
    candidates: Iterable[Candidate],
    read: Callable[[str], tuple[str, str, str] | None],
    threshold: float = THRESHOLD,
) -> Duplicate | None:
    """The existing note that ``title``/``summary``/``body`` repeats, if any.

    ``candidates`` are the notes to compare with, from their index entries
    (see :func:`candidate`); ``read(name)`` gives (title, summary, body) of
    one, and is called only for candidates whose title and summary are close.
    """
    candidates = list(candidates)
    if not candidates:
        return None  # nothing to compare with: the text need not even be normalised
    text = note_text(title, summary, body)
    wanted_title = normalise(title)
    head = _trigrams(f"{title}\n{summary}")
    size = len(head)
    title_grams = _trigrams(title)
    # The whole text's normal form and numbers cost most here: each is made when first
    # needed. No number spans a line, so the title and summary's are the text's too.
    lazy = _Text(text, _numbers(f"{title}\n{summary}"))
    best: Duplicate | None = None
    for c in candidates:
        if c.norm_title != wanted_title:
            # Cheap tests first, on what the index entry says; the note is read last.
            common = len(head & c.head)
            if common < PREFILTER * (size + len(c.head) - common):
                continue
            if _containment(title_grams, c.title_grams) < TITLE_CONTAINMENT:
                continue
            if lazy.short():  # only an exact repeat counts: its title is the same
                continue
            if not lazy.has_numbers(c.numbers):
                continue  # it names a number this text lacks: different facts
        full = read(c.filename)
        if full is None:
            continue
        other = note_text(*full)
        if normalise(other) == lazy.wanted():
            return Duplicate(c.filename, 1.0, True)
        if lazy.short() or lazy.numbers() != _numbers(other):
            continue
        if _containment(title_grams, _trigrams(full[0])) < TITLE_CONTAINMENT:
            continue
        score = similarity(text, other)
        if score >= threshold and (best is None or score > best.score):
            best = Duplicate(c.filename, score, False)
    return best
