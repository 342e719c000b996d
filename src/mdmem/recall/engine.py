"""Ranked recall over several stores: search, a budgeted selection, and the Markdown block.

Ranking (see docs/concepts/recall.md):

1. **Lexical** (:func:`lexical`): the query's terms
   (:func:`mdmem.recall.text.terms`) against each store's FTS5 index, BM25
   with the fields weighted (title 4, summary 2, body 1, type 1) rescaled to
   one IDF over all the stores searched, times the square of the note's
   coverage of the query; the best :data:`CANDIDATES` notes of each store. A
   superseded note's match goes to the note that replaced it.
2. **Semantic** (with the ``semantic`` extra): the cosine similarity of the
   query's embedding to every note's, and the two rankings fused by weighted
   reciprocal rank. A note's lexical vote is weighted by its *coverage*, the
   IDF-weighted share of the query's terms it contains: a note that only shares
   a common word with the query (the usual case across languages) barely votes.
3. **Left out**: notes whose ``expires`` has passed, and notes a current note
   ``supersedes`` (by file name, in the same store), so a changed fact's old
   version neither outranks nor accompanies the new one.
   Of two near-duplicate candidates of one type (:data:`NEAR_DUPLICATE`), the
   older drops just below the newer: a fact changed without a link.
4. **Disputed** notes (a user's correction contradicted them, see
   :mod:`mdmem.recall.disputes`) have their score multiplied by the penalty.
5. **Ties** go to the note updated last, then project before user, then name.
"""

from __future__ import annotations

import math
import os
import re
import time

from mdmem._kinds import Level
from mdmem._lines import clean_inline
from mdmem.recall.dictionary import expand
from mdmem.recall.disputes import dispute_penalty, disputed
from mdmem.recall.fts import Index, Row
from mdmem.recall.text import terms
from mdmem.recall.usage import USE_BONUS as USE_BONUS
from mdmem.recall.usage import reads, use_bonus
from mdmem.recall.weights import CROWD as CROWD
from mdmem.recall.weights import coverage_weights, crowded, distinctive, fts_idf, reach, term_idf
from mdmem.store import watch
from mdmem.store.hit import Hit

TYPE_CHECKING = False  # not typing's: this module is on the cold `mdmem search` path
if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence
    from datetime import datetime

    from mdmem.recall.view import StoreView as Store

    #: A pool of stores' statistics: each term's document frequency, and the notes.
    Pool = tuple[dict[str, int], int]

__all__ = [
    "CANDIDATES",
    "HINTS",
    "distinctive",
    "estimate_tokens",
    "evidence",
    "gate",
    "index_of",
    "lexical",
    "recall",
    "recall_block",
    "recalled",
    "recheck",
    "render_hit",
    "search",
    "semantic_mode",
    "similarity",
]

#: How many lexical (and semantic) candidates each store contributes before fusion.
CANDIDATES = 50
SNIPPET_CHARS = 160
# Reciprocal rank fusion: score = Σ weight / (K + rank); K = 60 as in the RRF paper.
_K = 60
_SEMANTIC_WEIGHT = 1.0
_LEXICAL_WEIGHT = 1.0
# A note that shares no term with the query is a semantic candidate only this close in
# meaning (USE-multilingual cosines of unrelated texts sit around 0-0.2, but one gold note
# in ten of recall-calib sits below 0.17: 0.2 cost its paraphrase hit@5 0.75 -> 0.69, and
# 0.1 changes nothing on recall-dev or the held-out set). The per-prompt gate still asks
# for MIN_COSINE.
SEMANTIC_FLOOR = 0.1
# A warm process trusts its last look at a store this long when nothing was added,
# renamed or removed (the directory's mtime did not move); edits by mdmem itself
# always rename, so they are seen at once.
_RECHECK_SECONDS = 2.0
#: The power of a note's coverage in its lexical score (Lucene's coordination factor is
#: the power 1; measured 1, 1.5, 2, 3 on both query sets: see docs/benchmarks.md).
COVERAGE_POWER = 2.0
#: With ``min_coverage``, a note sharing too few of the query's words still passes when it is
#: this close in meaning (USE-multilingual cosine; the gold of recall-calib sits at a median
#: 0.37, other candidates below 0.31 nine times in ten).
MIN_COSINE = 0.5
#: A note's *evidence* (0-1) that it answers the query: its coverage, or, with vectors, its
#: cosine over :data:`MIN_COSINE` when that is higher (a cosine of 0.5 counts as every word).
#: The relative gate and the "about it" test of a listed note compare evidence.
ABOUT = 0.5

#: How the block's last line tells the reader to search for more.
HINTS = {
    "mcp": "call the memory_search tool",
    "cli": "run `mdmem search QUERY`",
}

_INDEXES: dict[str, tuple[Index, int, float]] = {}
KEEP_OPEN = 16  #: search indexes a process keeps open (least recently used closed past it)
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s+|\n+")


def index_of(store: Store, *, fresh: bool = False) -> Index:
    """The store's search index, up to date and kept open (``fresh``: every note listed)."""
    path = store.path
    try:
        dir_mtime = os.stat(path).st_mtime_ns
    except OSError:
        dir_mtime = 0
    now = time.monotonic()
    known = _INDEXES.pop(path, None)  # put back last: the dict's order is the use order
    if known is not None and known[0].store is not store:
        known[0].store = store
    if (
        known is not None
        and not fresh
        and known[1] == dir_mtime
        and now - known[2] < _RECHECK_SECONDS
        and not watch.active(path)  # watched: asking the watch is cheaper than 2 s of doubt
    ):
        _INDEXES[path] = known
        return known[0]
    index = known[0] if known is not None else Index(store)
    index.sync(full=fresh)
    _INDEXES[path] = (index, dir_mtime, now)
    while len(_INDEXES) > KEEP_OPEN:  # a page or server switched across many stores
        _INDEXES.pop(next(iter(_INDEXES)))[0].close()
    return index


def recheck() -> None:
    """Have the next :func:`index_of` of every store bring its index in step, as a fresh
    process would: what a long-lived process runs before a request it answers in a fresh
    process's place (the prompt server, ``integrations/prompt_server.py``). The indexes
    stay open."""
    for path, (index, dir_mtime, _) in list(_INDEXES.items()):
        index.doubt()
        _INDEXES[path] = (index, dir_mtime, float("-inf"))


def semantic_mode(requested: bool | None = None) -> bool:
    """Whether to match semantically: ``requested``, else ``$MDMEM_SEMANTIC``, else if installed.

    ``MDMEM_SEMANTIC`` is ``on``, ``off`` or ``auto`` (the default: on when the
    ``semantic`` extra is installed).
    """
    if requested is not None:
        return requested
    setting = os.environ.get("MDMEM_SEMANTIC", "auto").strip().lower()
    if setting in ("0", "off", "no", "false"):
        return False
    from mdmem.recall import semantic

    return semantic.available()


def estimate_tokens(text: str) -> int:
    """A cautious token count: a token per 4 ASCII characters, one per other character.

    Model tokenizers spend about a token on a CJK character and on 3-4 characters
    of English; overestimating keeps a block within its budget.
    """
    ascii_count = len(text.encode("ascii", "ignore"))
    return math.ceil(ascii_count / 4) + (len(text) - ascii_count)


class _Candidate:
    __slots__ = ("cosine", "coverage", "level", "lexical", "row", "score", "words")

    def __init__(self, row: Row, level: Level) -> None:
        self.row = row
        self.level = level
        self.lexical = 0.0
        self.coverage = 0.0
        self.cosine: float | None = None
        self.score = 0.0
        self.words: set[str] | None = None


def search(
    stores: Iterable[Store],
    query: str,
    *,
    limit: int = 10,
    types: Sequence[str] | None = None,
    semantic: bool | None = None,
    min_coverage: float = 0.0,
    now: datetime | None = None,
) -> list[Hit]:
    """The notes of ``stores`` that best answer ``query``, best first (at most ``limit``).

    ``types`` keeps only notes of those types; ``semantic`` forces semantic
    matching on or off (None: :func:`semantic_mode`); ``min_coverage`` (0-1)
    drops notes that contain less than that IDF-weighted share of the query's
    terms and are not close in meaning either, for callers that would rather
    show nothing than something unrelated.
    """
    if limit <= 0:
        return []
    ranked, qset = _rank(stores, query, types, semantic, min_coverage, now)
    return [_hit(c, qset) for c in ranked[:limit]]


def _rank(
    stores: Iterable[Store],
    query: str,
    types: Sequence[str] | None,
    semantic: bool | None,
    min_coverage: float,
    now: datetime | None,
    *,
    crowd: bool = False,
    floor: float = 0.0,
    _retry: bool = True,
) -> tuple[list[_Candidate], set[str]]:
    """Every candidate for ``query``, best first, and the query's terms; none, with
    ``crowd`` (the per-prompt gate's), when a store is :func:`crowded` for it.

    ``floor`` is the coverage the caller's :func:`gate` keeps a candidate from
    (its ``min_coverage``): a store whose notes cannot reach it is not ranked
    unless the gate would read its scores (what the gate decides is the same)."""
    if not query.strip():
        return [], set()
    started = time.monotonic()
    qterms = sorted(set(terms(query)))
    # Words in the other language that mean the same (mdmem.recall.dictionary).
    alternatives = expand(query, qterms)
    use_semantic = semantic_mode(semantic)
    candidates: dict[tuple[str, str], _Candidate] = {}
    per_store: list[tuple[Index, Level, set[str]]] = []
    stores_seen: list[Store] = []
    disputed_by_level: dict[str, dict[str, dict[str, object]]] = {}
    wanted = sorted(set(qterms).union(*alternatives.values()))
    frequencies: list[dict[str, int]] = []
    for store in stores:
        stores_seen.append(store)
        disputed_by_level[store.level.value] = disputed(store)
        index = index_of(store)
        hidden = index.hidden(now)
        per_store.append((index, store.level, hidden))
        frequencies.append(index.document_frequency(wanted) if qterms else {})
    # One term weighs the same in every store searched: the statistics of them all.
    pool_df: dict[str, int] = {}
    for df in frequencies:
        for t, n in df.items():
            pool_df[t] = pool_df.get(t, 0) + n
    pool = (pool_df, sum(index.count() for index, _, _ in per_store))
    if crowd and qterms:
        # A word no note of any store holds, itself or translated, lowers every note's
        # coverage alike (when nothing is matched by meaning, which could make up for it).
        held = [
            t
            for t in qterms
            if use_semantic
            or pool_df.get(t)
            or any(pool_df.get(a) for a in alternatives.get(t, ()))
        ]
        for (index, _, hidden), df in zip(per_store, frequencies, strict=True):
            if held and crowded(held, df, index.count(), len(hidden)):
                return [], set(qterms)  # the gate would say nothing: no note ranked for it
    if qterms:
        _lexical_stage(
            candidates,
            per_store,
            frequencies,
            (qterms, alternatives, types, pool),
            least=0.0 if use_semantic else min_coverage or floor,
            later=not min_coverage,
            floor=floor,
        )
    if use_semantic:
        # False while no note has a vector yet: then the ranking is the lexical one.
        use_semantic = _add_semantic(candidates, per_store, query, types)
    # The notes about to be returned are checked against their files (mdmem.recall.fts's
    # freshness contract): if any changed on disk, it is re-indexed and the query runs again.
    # Not when this query's sync checked every note (a sweep, a listing, the watcher).
    stale = [
        not index.checked_after(started)
        and index.refresh(name for (lvl, name) in candidates if lvl == level.value)
        for index, level, _ in per_store
    ]
    if _retry and any(stale):
        return _rank(
            stores_seen,
            query,
            types,
            semantic,
            min_coverage,
            now,
            crowd=crowd,
            floor=floor,
            _retry=False,
        )
    _fuse(candidates.values(), use_semantic)
    # Of two versions of one note (near-duplicates of a type), the newer is the current one.
    for index, level, _ in per_store:
        _prefer_newer(index, [c for c in candidates.values() if c.level is level])
    # A note a user's correction disputed ranks lower until confirmed (mdmem.recall.disputes).
    by_level = {store.level.value: store for store in stores_seen}
    for (level_name, name), c in candidates.items():
        if disputed_by_level.get(level_name) and name in disputed_by_level[level_name]:
            c.score *= dispute_penalty(by_level[level_name], name)
    # Notes people actually read rank a little higher, as the seed's score does with hit
    # counts and recency: at most USE_BONUS, from the usage ledger (mdmem.store.ledger).
    indexes = {level.value: index for index, level, _ in per_store}
    with_hits = {level_name for level_name, _ in candidates}  # a store without one is not read
    uses = {n: reads(s, indexes.get(n)) for n, s in by_level.items() if n in with_hits}
    for (level_name, name), c in candidates.items():
        use = uses.get(level_name, {}).get(name)
        if use is not None:
            c.score *= use_bonus(*use)
    ranked = sorted(
        candidates.values(),
        key=lambda c: (
            -c.score,
            -(c.row.updated or 0.0),
            c.level is not Level.PROJECT,
            c.row.name,
        ),
    )
    if min_coverage > 0:
        ranked = [c for c in ranked if c.coverage >= min_coverage or (c.cosine or 0) >= MIN_COSINE]
    return ranked, set(qterms)


def _lexical_stage(
    candidates: dict[tuple[str, str], _Candidate],
    per_store: list[tuple[Index, Level, set[str]]],
    frequencies: list[dict[str, int]],
    query: tuple[Sequence[str], dict[str, list[str]], Sequence[str] | None, Pool],
    *,
    least: float,
    later: bool,
    floor: float,
) -> None:
    """Each store's :func:`lexical` candidates into ``candidates``.

    A store none of whose notes can hold ``least`` of the query (its
    :func:`reach`; ``least`` 0 for none) gives no candidate that counts: below
    ``min_coverage`` one is dropped, and below the per-prompt gate's ``floor``
    one is never kept nor raises the best, and only its lexical score could
    count, for the gate's lead rule, read only when no candidate is ABOUT the
    prompt. With ``later`` such a store is ranked only then; without, never.
    (A word in most of a store, its only one of the prompt, made BM25 rank
    nearly all of it for nothing.) Lexical ranking only: the caller passes
    ``least`` 0 when notes may pass by meaning.
    """
    qterms, alternatives, types, pool = query
    deferred: list[tuple[tuple[Index, Level, set[str]], dict[str, int]]] = []
    for store, df in zip(per_store, frequencies, strict=True):
        if least > 0 and reach(qterms, alternatives, df, pool) < least:
            deferred.append((store, df))
            continue
        for c in lexical(*store, qterms, alternatives, types, df, pool):
            candidates[(store[1].value, c.row.name)] = c
    if not deferred or not later:
        return
    if max((c.coverage for c in candidates.values() if c.coverage >= floor), default=0.0) < ABOUT:
        for store, df in deferred:
            for c in lexical(*store, qterms, alternatives, types, df, pool):
                candidates[(store[1].value, c.row.name)] = c


def evidence(c: _Candidate) -> float:
    """How much ``c`` looks like an answer (0-1): its coverage, or its cosine's share of MIN_COSINE.

    Unlike the fused score, which only orders one query's candidates, it means
    the same from one query to the next: the per-prompt gate compares it.
    """
    if c.cosine is None:
        return c.coverage
    return max(c.coverage, min(c.cosine / MIN_COSINE, 1.0))


#: The per-prompt gate (:func:`gate`): a note the session's start listed may come back when it
#: is one of the first this many of the prompt's candidates, whatever its evidence.
LISTED_TOP = 2
#: ... and with no candidate :data:`ABOUT` the prompt, the first must score this many times the
#: second lexically (a wrong note sharing one word with the prompt wins by little)...
LEAD = 2.0
#: ... and a prompt that more than :data:`CROWD` notes match equally well names none of them
#: (mdmem.recall.weights, which proves it from document frequencies).


def gate(
    ranked: Sequence[_Candidate],
    *,
    min_coverage: float = 0.0,
    relative: float = 0.0,
    exclude: Iterable[str] = (),
    listed: Iterable[str] = (),
    per_prompt: bool = False,
) -> list[_Candidate]:
    """Which of one query's ranked candidates to show: the automatic path's one decision.

    In order: a note must hold ``min_coverage`` of the query's words or be
    :data:`MIN_COSINE` close; with ``per_prompt`` (a prompt nobody asked to
    search), the prompt must be about something: a candidate :data:`ABOUT` it,
    or a first candidate :data:`LEAD` times the second's lexical score, and no
    more than :data:`CROWD` notes tied at the best evidence; a note must have at
    least ``relative`` times the best candidate's :func:`evidence`; then the
    notes the reader saw are left out (``exclude``), and those the session's
    start only listed (``listed``) unless among the first :data:`LISTED_TOP` or
    :data:`ABOUT` the query. The best is counted before anything is left out,
    so a prompt whose answer was shown already is not padded with weak matches.
    Calibrated on ``benchmarks/data/recall-calib`` (``bench_recall.py hooks``).
    """
    kept = [c for c in ranked if c.coverage >= min_coverage or (c.cosine or 0.0) >= MIN_COSINE]
    if not kept:
        return []
    best = max(evidence(c) for c in kept)
    if per_prompt:
        scores = sorted((c.lexical for c in ranked), reverse=True)
        lead = scores[0] / scores[1] if len(scores) > 1 and scores[1] > 0 else math.inf
        if best < ABOUT and lead < LEAD:
            return []
    if relative > 0:
        kept = [c for c in kept if evidence(c) >= relative * best]
    if per_prompt and sum(1 for c in kept if evidence(c) >= 0.95 * best) > CROWD:
        return []
    skip, brief = set(exclude), set(listed)
    return [
        c
        for i, c in enumerate(kept)
        if c.row.name not in skip
        and (c.row.name not in brief or i < LISTED_TOP * per_prompt or evidence(c) >= ABOUT)
    ]


def lexical(
    index: Index,
    level: Level,
    hidden: set[str],
    qterms: Sequence[str],
    alternatives: dict[str, list[str]],
    types: Sequence[str] | None,
    df: dict[str, int] | None = None,
    pool: tuple[dict[str, int], int] | None = None,
) -> list[_Candidate]:
    """The lexical candidates of one store for the query terms, with their lexical score.

    The score is the field-weighted BM25 of the index times the square of the
    note's *coverage*, the IDF-weighted share of the query's terms it contains
    (a term's translations count for it): as Lucene's coordination factor, a
    note with every word of the question beats one that repeats a single word
    of it. A note a current note supersedes is not a candidate, but its score
    goes to its successor when higher.
    This is the one lexical ranking; fusion with the semantic one starts from it.
    """
    wanted = sorted(set(qterms).union(*alternatives.values()))
    if df is None:
        df = index.document_frequency(wanted)
    total = max(index.count(), 1)
    pool_df, pool_total = pool if pool is not None else (df, total)
    pool_total = max(pool_total, 1)
    idf, whole = coverage_weights(qterms, alternatives, pool_df, pool_total)
    # FTS5's BM25 weighs a term by the store's own IDF; rescaled to the pool's, the
    # scores of two stores compare (exactly for one matched term, closely for more).
    local = {t: fts_idf(total, df.get(t, 0)) for t in wanted}
    pooled = {t: fts_idf(pool_total, pool_df.get(t, 0)) for t in wanted}
    rescale = pool is not None and local != pooled  # one store alone: nothing to do
    # A term in a third of a large store says little (its IDF is near 0) and would make
    # the match rank thousands of rows: it still counts for coverage, not for finding.
    rare, present_terms = distinctive(wanted, df, total)
    found: dict[str, _Candidate] = {}
    # A superseded note's match goes to the note that replaced it: a question asked in
    # the old note's words ("machine", "token") is about what is true now.
    inherited: dict[str, tuple[float, float]] = {}
    successors = index.successors() if hidden else {}
    for row in index.match(rare or present_terms, CANDIDATES):
        present = set(row.terms.split())
        if rescale:
            matched = [t for t in wanted if t in present]
            if matched:
                row.rank *= sum(pooled[t] for t in matched) / sum(local[t] for t in matched)
        coverage = (
            sum(
                v
                for t, v in idf.items()
                if t in present or any(a in present for a in alternatives.get(t, ()))
            )
            / whole
        )
        if row.name in hidden:
            heir = successors.get(row.name)
            if heir is not None:
                best = inherited.get(heir, (0.0, 0.0))
                inherited[heir] = (
                    max(best[0], row.rank * coverage**COVERAGE_POWER),
                    max(best[1], coverage),
                )
            continue
        if types and row.type not in types:
            continue
        c = _Candidate(row, level)
        c.words = present
        c.coverage = coverage
        c.lexical = row.rank * coverage**COVERAGE_POWER
        found[row.name] = c
    missing = [name for name in inherited if name not in found]
    for row in index.rows(missing) if missing else []:
        if not types or row.type in types:
            found[row.name] = _Candidate(row, level)
    for name, (score, coverage) in inherited.items():
        successor = found.get(name)
        if successor is not None:
            successor.lexical = max(successor.lexical, score)
            successor.coverage = max(successor.coverage, coverage)
    return list(found.values())


#: Two notes of one type this similar (IDF-weighted cosine of their terms) are versions of
#: one note: the newer is taken as current and never ranks below the older.
NEAR_DUPLICATE = 0.4
# Only the best candidates of a store are compared (the pairs that could swap places).
_DUPLICATE_WINDOW = 10
# Their plain cosine (every term weighing 1) must reach this before the IDF one is computed.
_PLAIN_FLOOR = 0.2


def similarity(a: set[str], b: set[str], idf: dict[str, float]) -> float:
    """The IDF-weighted cosine of two term sets (0-1)."""
    both = sum(idf.get(t, 0.0) for t in a & b)
    if not both:
        return 0.0
    return both / math.sqrt(sum(idf.get(t, 0.0) for t in a) * sum(idf.get(t, 0.0) for t in b))


def _prefer_newer(index: Index, items: list[_Candidate]) -> None:
    """Drop the older of two near-duplicate candidates (same type) just below the newer.

    A fact that changed without a ``supersedes:`` link leaves two current-looking
    notes; the later one is what is true now. Only the older of such a pair
    moves, and only below its newer version (no other note rises or falls
    relative to the newer): recency among versions of one note, not globally.
    """
    top = sorted(
        (c for c in items if c.score > 0 and c.row.updated is not None),
        key=lambda c: -c.score,
    )[:_DUPLICATE_WINDOW]
    if len(top) < 2:
        return
    sets = {c.row.name: c.words or set(c.row.terms.split()) for c in top}
    pairs = []
    for newer in sorted(top, key=lambda c: -(c.row.updated or 0.0)):
        for older in top:
            if (
                older is newer
                or older.row.type != newer.row.type
                or (older.row.updated or 0.0) >= (newer.row.updated or 0.0)
            ):
                continue
            a, b = sets[older.row.name], sets[newer.row.name]
            # Cheap first: pairs sharing few terms at all are not versions of one note.
            if len(a & b) >= _PLAIN_FLOOR * math.sqrt(len(a) * len(b)):
                pairs.append((newer, older))
    if not pairs:
        return
    words = set().union(*(sets[c.row.name] for pair in pairs for c in pair))
    df = _frequencies(index, words)
    total = max(index.count(), 1)
    idf = {t: term_idf(total, df.get(t, 0)) for t in words}
    for newer, older in pairs:
        if older.score < newer.score:
            continue
        if similarity(sets[older.row.name], sets[newer.row.name], idf) >= NEAR_DUPLICATE:
            older.score = newer.score  # a tie, which goes to the note updated last


def _frequencies(index: Index, words: set[str]) -> dict[str, int]:
    """Document frequencies, cached per index generation (a store's terms repeat)."""
    cache = index.cache.get("df")
    if not isinstance(cache, dict):
        cache = index.cache["df"] = {}
    missing = [w for w in words if w not in cache]
    if missing:
        found = index.document_frequency(missing)
        for w in missing:
            cache[w] = found.get(w, 0)
    return {w: int(cache[w]) for w in words}


def _add_semantic(
    candidates: dict[tuple[str, str], _Candidate],
    per_store: list[tuple[Index, Level, set[str]]],
    query: str,
    types: Sequence[str] | None,
) -> bool:
    """Give candidates their similarity to the query, adding the closest notes; False if none.

    A store whose notes all have a vector but a few (at most ``embedder.INLINE``,
    such as a note just written; with the resident embedder, also a small store
    with none yet) has those embedded first; otherwise only vectors
    that exist are used: a store with more notes lacking one gets a background
    embedder (:mod:`mdmem.recall.embedder`), and those notes take part lexically
    only until then.
    """
    from mdmem.recall import semantic

    ready = []
    for index, level, hidden in per_store:
        have, total = semantic.present(index)
        if have < total:
            from mdmem.recall import embedder, resident  # only when a note lacks a vector

            # A few fresh notes in a store otherwise embedded: embedded now, so the note just
            # written is found by its meaning at once; more (a first build) in the background.
            # A store with no vector yet too, when that loads no model in this process.
            if (
                (have or resident.enabled())
                and total - have <= embedder.INLINE
                and embedder.embed_inline(index)
            ):
                have, total = semantic.present(index)
            if have < total:
                embedder.request(index.store)
        if have:
            ready.append((index, level, hidden))
    if not ready:
        return False  # nothing to compare with: not even the model is loaded
    # A cold process has the resident embedder score the query (no numpy import here).
    every = semantic.query_scores([index for index, _, _ in ready], query)
    for (index, level, hidden), scores in zip(ready, every, strict=True):
        closest = [
            (name, score)
            for name, score in scores.top(CANDIDATES, hidden, types)
            if score >= SEMANTIC_FLOOR
        ]
        new = [name for name, _ in closest if (level.value, name) not in candidates]
        rows = {row.name: row for row in index.rows(new)} if new else {}
        for name, score in closest:
            key = (level.value, name)
            c = candidates.get(key)
            if c is None:
                row = rows.get(name)
                if row is None:
                    continue
                c = candidates[key] = _Candidate(row, level)
            c.cosine = score
        # The lexical candidates get their similarity too, however low: it places them
        # in the semantic ranking.
        for (lvl, name), c in candidates.items():
            if lvl == level.value and c.cosine is None:
                c.cosine = scores.of(name)
    return True


def _fuse(candidates: Iterable[_Candidate], use_semantic: bool) -> None:
    items = list(candidates)
    if not use_semantic:
        for c in items:
            c.score = c.lexical
        return
    lexical = sorted((c for c in items if c.lexical > 0), key=lambda c: -c.lexical)
    meaning = sorted((c for c in items if c.cosine is not None), key=lambda c: -(c.cosine or 0))
    for c in items:
        c.score = 0.0
    for rank, c in enumerate(lexical, 1):
        c.score += _LEXICAL_WEIGHT * c.coverage / (_K + rank)
    for rank, c in enumerate(meaning, 1):
        c.score += _SEMANTIC_WEIGHT / (_K + rank)


def _snippet(body: str, qset: set[str], fallback: str) -> str:
    sentences = [s.strip() for s in _SENTENCE.split(body) if s.strip()]
    if not sentences:
        return clean_inline(fallback, SNIPPET_CHARS)
    if len(sentences) == 1:
        return clean_inline(sentences[0], SNIPPET_CHARS)
    # Substrings, not terms: a stem ("deploy") is in each of its forms, and this is cheap.
    best = max(sentences, key=lambda s: sum(1 for t in qset if t in s.casefold()))
    return clean_inline(best, SNIPPET_CHARS)


def _hit(c: _Candidate, qset: set[str], snippet: bool = True) -> Hit:
    row = c.row
    return Hit.dated(
        filename=row.name,
        level=c.level,
        type=row.type,
        title=row.title,
        summary=row.summary,
        score=c.score,
        updated_at=row.updated,
        snippet=_snippet(row.body, qset, row.summary or row.title) if snippet else "",
    )


# -- the budgeted block -----------------------------------------------------------

HEADING = "## Recalled memory"


def render_hit(hit: Hit) -> str:
    """A hit as block lines: its index line (with level and date), then its snippet."""
    title = clean_inline(hit.title, 120) or hit.filename
    summary = clean_inline(hit.summary, 240)
    text = f"{title} — {summary}" if summary else title
    day = hit.updated_date
    when = f", {day}" if day else ""
    line = f"- [{hit.type}] {text} ({hit.filename}; {hit.level.value}{when})"
    snippet = clean_inline(hit.snippet, SNIPPET_CHARS)
    if snippet and snippet not in (summary, title):
        return f"{line}\n  > {snippet}"
    return line


def _more_line(count: int, hint: str) -> str:
    noun = "note" if count == 1 else "notes"
    way = HINTS.get(hint, hint)
    return f"({count} more {noun} matched; {way} to see them)"


def _select(
    ranked: list[_Candidate], qset: set[str], budget_tokens: int, hint: str, snippets: bool = True
) -> tuple[list[str], list[Hit]]:
    """The block lines of the best hits that fit the budget with the heading and the "more" line.

    Hits are made (snippets found, unless ``snippets`` is false) only for the candidates
    looked at.
    """
    parts: list[str] = [HEADING]
    used = estimate_tokens(HEADING) + 1
    shown: list[Hit] = []
    for i, candidate in enumerate(ranked):
        hit = _hit(candidate, qset, snippets)
        piece = render_hit(hit)
        cost = estimate_tokens(piece) + 1
        left = len(ranked) - i - 1
        reserve = estimate_tokens(_more_line(len(ranked), hint)) + 1 if left else 0
        if used + cost + reserve > budget_tokens:
            # Its index line alone may fit: a note in Chinese spends a token a character,
            # and its summary and snippet together can fill a small budget by themselves.
            line = piece.split("\n", 1)[0]
            cost = estimate_tokens(line) + 1
            if line == piece or used + cost + reserve > budget_tokens:
                break
            piece = line
        parts.append(piece)
        used += cost
        shown.append(hit)
    if not shown:
        return [], []
    return parts, shown


def recall(
    stores: Iterable[Store],
    query: str,
    budget_tokens: int = 1200,
    limit: int | None = None,
    *,
    semantic: bool | None = None,
    min_coverage: float = 0.0,
    exclude: Iterable[str] = (),
    relative: float = 0.0,
    listed: Iterable[str] = (),
    per_prompt: bool = False,
    snippets: bool = True,
) -> list[Hit]:
    """The best hits for ``query`` whose block lines fit within ``budget_tokens``.

    ``exclude`` names notes (by file name) the reader has already seen;
    ``relative``, ``listed`` and ``per_prompt`` are :func:`recalled`'s. Without
    ``snippets``, no hit gets one (its ``snippet`` is ``""``) and the budget counts
    the hits' index lines alone: for a caller that shows only those.
    """
    _, hits = recalled(
        stores,
        query,
        budget_tokens,
        semantic=semantic,
        min_coverage=min_coverage,
        exclude=exclude,
        limit=limit,
        relative=relative,
        listed=listed,
        per_prompt=per_prompt,
        snippets=snippets,
    )
    return hits


def _candidates(
    stores: Iterable[Store],
    query: str,
    limit: int | None,
    semantic: bool | None,
    min_coverage: float,
    exclude: Iterable[str],
    relative: float = 0.0,
    listed: Iterable[str] = (),
    per_prompt: bool = False,
) -> tuple[list[_Candidate], set[str]]:
    ranked, qset = _rank(
        stores, query, None, semantic, 0.0, None, crowd=per_prompt, floor=min_coverage
    )
    chosen = gate(
        ranked,
        min_coverage=min_coverage,
        relative=relative,
        exclude=exclude,
        listed=listed,
        per_prompt=per_prompt,
    )
    return chosen[: limit if limit is not None else 50], qset


def recalled(
    stores: Iterable[Store],
    query: str,
    budget_tokens: int = 1200,
    *,
    hint: str = "cli",
    semantic: bool | None = None,
    min_coverage: float = 0.0,
    exclude: Iterable[str] = (),
    limit: int | None = None,
    relative: float = 0.0,
    listed: Iterable[str] = (),
    per_prompt: bool = False,
    snippets: bool = True,
) -> tuple[str, list[Hit]]:
    """The block :func:`recall_block` returns, and the hits it shows (``snippets``:
    :func:`recall`'s).

    The notes shown are those :func:`gate` keeps: ``relative`` (0-1) keeps only
    the notes whose :func:`evidence` is at least that share of the best
    candidate's, the best counted before ``exclude`` (no padding with weak
    matches when the answer was shown already); ``listed`` names notes the
    reader saw only listed (title and summary, as the session's start lists
    them), recalled when the query is about them; ``per_prompt`` is the
    automatic path's stricter decision (a prompt nobody asked to search).
    """
    ranked, qset = _candidates(
        stores, query, limit, semantic, min_coverage, exclude, relative, listed, per_prompt
    )
    parts, shown = _select(ranked, qset, budget_tokens, hint, snippets)
    if not parts:
        return "", []
    if len(shown) < len(ranked):
        parts.append(_more_line(len(ranked) - len(shown), hint))
    return "\n".join(parts), shown


def recall_block(
    stores: Iterable[Store],
    query: str,
    budget_tokens: int = 1200,
    *,
    hint: str = "cli",
    semantic: bool | None = None,
    min_coverage: float = 0.0,
    exclude: Iterable[str] = (),
    limit: int | None = None,
) -> str:
    """The Markdown block of the notes recalled for ``query``, within ``budget_tokens``.

    Whole lines only: a heading, each note's index line and snippet, and, when
    more notes matched than fit, a last line saying how many and how to search
    for them (``hint``: ``cli``, ``mcp`` or any text). ``""`` when nothing matched
    or nothing fits. ``exclude`` names notes the reader has already seen.
    """
    block, _ = recalled(
        stores,
        query,
        budget_tokens,
        hint=hint,
        semantic=semantic,
        min_coverage=min_coverage,
        exclude=exclude,
        limit=limit,
    )
    return block
