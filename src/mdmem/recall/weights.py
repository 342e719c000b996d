"""What a query's terms weigh, and what a store's document frequencies tell before ranking.

A term weighs its IDF in the pool of the stores searched (:func:`term_idf`; FTS5's
own BM25 weighs it by :func:`fts_idf`); a note's *coverage* of a query is the share
of that weight in the terms it holds (:func:`coverage_weights`). From a store's
document frequencies alone, without ranking a row: which words find notes there
(:func:`distinctive`), whether more than :data:`CROWD` notes hold every word
(:func:`crowded`), and the most coverage any of its notes can have (:func:`reach`).
On the per-prompt hook's path: imports nothing beyond ``math``.
"""

from __future__ import annotations

import math

TYPE_CHECKING = False  # not typing's: this module is on the per-prompt hook's path
if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "CROWD",
    "cjk_gram",
    "coverage_weights",
    "crowded",
    "distinctive",
    "fts_idf",
    "reach",
    "seams",
    "term_idf",
]

#: A store over this many notes is large: a word in more than a third of it says little.
_COMMON = 500
#: A prompt that more than this many notes match equally well names none of them.
CROWD = 3


def term_idf(total: int, df: int) -> float:
    return math.log((total - df + 0.5) / (df + 0.5) + 1.0)


def fts_idf(total: int, df: int) -> float:
    # FTS5's own (bm25() in fts5_aux.c): never below 1e-6.
    return max(math.log((total - df + 0.5) / (df + 0.5)), 1e-6)


def cjk_gram(term: str) -> bool:
    """Whether ``term`` is a CJK n-gram: two or more Han characters (as the regular
    expression ``[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]{2,}`` would say, without
    compiling its ranges, ~1 ms, in the per-prompt hook's process)."""
    return len(term) >= 2 and all(
        "\u3400" <= ch <= "\u4dbf" or "\u4e00" <= ch <= "\u9fff" or "\uf900" <= ch <= "\ufaff"
        for ch in term
    )


def seams(
    qterms: Sequence[str], df: dict[str, int], alternatives: dict[str, list[str]]
) -> set[str]:
    """The query's CJK n-grams that only straddle two words: in no note, each character in one.

    A CJK run is cut into overlapping n-grams (``推送通知`` -> ``推送 送通 通知``), so a
    question also yields the grams across its word boundaries (``送通``); one that
    no note contains while every character of it is in a gram that notes do is
    an artefact of the cutting, not a word the notes lack, and it does not count
    against a note's coverage (an English word no note has still does).
    """

    def present(t: str) -> bool:  # in a note, itself or by a translation
        return bool(df.get(t)) or any(df.get(a) for a in alternatives.get(t, ()))

    absent = [t for t in qterms if cjk_gram(t) and not present(t)]
    if not absent:
        return set()
    found = "".join(t for t in qterms if cjk_gram(t) and present(t))
    return {t for t in absent if all(ch in found for ch in t)}


def crowded(qterms: Sequence[str], df: dict[str, int], total: int, hidden: int = 0) -> bool:
    """Whether a store's document frequencies alone show that more than :data:`CROWD` of
    its notes hold every one of ``qterms``, none of them :func:`distinctive`.

    Those notes cover the whole prompt (coverage 1, the most any note has; the
    caller leaves out a word no note holds, which lowers every note's alike), so the
    per-prompt :func:`gate` names none of them ("a prompt that more than CROWD notes
    match equally well names none"): the hook need not rank them. Ranking them was
    BM25 over most of the store (a prompt of common words at 100,000 notes: 0.3-0.5 s).
    At least ``total - sum(total - df)`` notes hold every term (each term is missing
    from ``total - df`` notes at most), less the ``hidden`` ones (superseded, never
    candidates). Exact wherever every match of the store is a candidate (at most
    :data:`CANDIDATES` of them); in a larger store the gate's rule is taken at its word,
    as the crowd holds whether or not BM25's first fifty show it.
    """
    if total <= _COMMON:
        return False
    least = total - hidden
    for t in set(qterms):
        n = df.get(t, 0)
        if n <= max(total / 3, _COMMON):
            return False  # a distinctive or absent word: it may name a note
        least -= total - n
    return least > CROWD


def distinctive(
    words: Sequence[str], df: dict[str, int], total: int
) -> tuple[list[str], list[str]]:
    """(the words that find notes, the words the store has), of ``words`` in a store of
    ``total`` notes with document frequencies ``df``.

    A word in more than a third of a large store (over 1,500 notes) says little (its
    IDF is near 0) and would make a match rank most of the store: it still counts for
    coverage, not for finding. In a smaller store every word finds.
    """
    present = [t for t in words if df.get(t, 0) > 0]
    return [t for t in present if df[t] <= max(total / 3, _COMMON)], present


def coverage_weights(
    qterms: Sequence[str],
    alternatives: dict[str, list[str]],
    pool_df: dict[str, int],
    pool_total: int,
) -> tuple[dict[str, float], float]:
    """Each query term's weight in a note's coverage (its IDF in the pool), and their sum."""
    straddling = seams(qterms, pool_df, alternatives)
    idf = {t: term_idf(pool_total, pool_df.get(t, 0)) for t in qterms if t not in straddling}
    return idf, sum(idf.values()) or 1.0


def reach(
    qterms: Sequence[str],
    alternatives: dict[str, list[str]],
    df: dict[str, int],
    pool: tuple[dict[str, int], int],
) -> float:
    """The most coverage any note of a store can have for ``qterms``: the share of their
    weight held by the terms the store has at all (its document frequencies ``df``), as
    :func:`lexical` counts it (a term's translations count for it). No note of the store
    covers more; known without ranking a row."""
    pool_df, pool_total = pool
    idf, whole = coverage_weights(qterms, alternatives, pool_df, max(pool_total, 1))
    held = sum(
        v
        for t, v in idf.items()
        if df.get(t, 0) > 0 or any(df.get(a, 0) > 0 for a in alternatives.get(t, ()))
    )
    return held / whole
