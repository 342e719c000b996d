"""Dedupe keys in the catalog: the notes whose title is close to a new one's, asked of SQLite.

A create looks for a duplicate among the notes that name the same numbers
(:func:`mdmem.store.dedupe.number_key`: a duplicate always does) and whose title
shares at least :data:`~mdmem.store.dedupe.TITLE_CONTAINMENT` of the shorter
title's character trigrams (:meth:`mdmem.store.dedupe.Index.near`). Building
that index from every catalog row on each create costs what the store holds;
these tables keep it in ``catalog.sqlite`` instead, changed by the note with
the catalog's rows (:meth:`~mdmem.store._catalog.Catalog.put`), so a create
reads only postings that can matter:

- ``dedupe_notes``: a note's id, name, group (its number key, hashed), how many
  title trigrams it has, and those trigrams (a blob of int64, to drop its
  postings and count overlaps);
- ``dedupe_grams``: postings (group, trigram, title size, note id);
- ``dedupe_df``: how many titles of a group hold each trigram.

Everything below is within one group. Without it, a store of numbered titles
("Note number 1" ... "Note number 100000", "ADR 17", "Migration 0042") made
every title near every other: each create compared itself with all of them.

Exact, never a guess: a title ``B`` of ``s`` trigrams shares at least
``k = ceil(T * min(a, s))`` of the ``a`` trigrams of the new title ``A`` only
if it holds one of *any* ``a - k + 1`` of them (pigeonhole). So ``A``'s
trigrams are taken rarest first: the ``j``-th rarest is looked up only for
the title sizes whose ``k`` is at most ``a - j``, and common trigrams are
read only for short titles. Going ``E - 1`` trigrams further (:data:`_EXTRA`)
means a near title is hit at least ``min(E, k)`` times among those looked up,
a count SQLite checks (``HAVING``) before any id reaches Python. The ids left
are a superset of the near notes; their blobs give the exact overlap, and
``Index.near`` then decides as before.

Derived like the rest of the catalog: built on first use (a first load or a
rebuild does not pay for it), dropped with the rows, rebuilt from them.
"""

from __future__ import annotations

import functools
import math
from array import array

try:  # hashlib costs milliseconds to import (OpenSSL): blake2 alone is enough here
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b

from mdmem.store.dedupe import TITLE_CONTAINMENT, normalise

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Iterable

__all__ = [
    "SCHEMA",
    "WILD",
    "build",
    "clear",
    "dump",
    "gram_ids",
    "group",
    "is_built",
    "near",
    "put",
    "remove",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS dedupe_notes (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, grp INTEGER NOT NULL,
    size INTEGER NOT NULL, grams BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS dedupe_grams (
    grp INTEGER NOT NULL, gram INTEGER NOT NULL, size INTEGER NOT NULL, id INTEGER NOT NULL,
    PRIMARY KEY (grp, gram, size, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dedupe_df (
    grp INTEGER NOT NULL, gram INTEGER NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (grp, gram)
) WITHOUT ROWID;
"""
#: The group of notes whose numbers the catalog does not know: every create looks at it.
WILD = 1
#: The ``meta`` key present while the tables hold every valid note of the catalog.
BUILT = "dedupe"
_CHUNK = 500
_MAX_SIZE = 1 << 62
_EXTRA = 5  # measured: fewer scans too many ids, more reads too many postings
# Count every posting when the titles left to check, times this, pass the postings that
# saves (measured: a title left to check costs about twenty postings' worth, a fifth of
# the bound is left).
_EXACT = 4


def gram_ids(title: str) -> list[int]:
    """A title's trigrams (``dedupe._trigrams``) as sorted integers: 21 bits a character."""
    padded = f" {normalise(title)} "
    if len(padded) < 3:  # an empty title's one "gram"; "\0" never survives normalise: no clash
        return [(ord(padded[0]) << 42) | (ord(padded[1]) << 21)]
    c = list(map(ord, padded))
    return sorted({(c[i] << 42) | (c[i + 1] << 21) | c[i + 2] for i in range(len(c) - 2)})


def group(key: str | None) -> int:
    """The group of notes of number key ``key`` (None: unknown, :data:`WILD`)."""
    if key is None:
        return WILD
    value = int.from_bytes(blake2b(key.encode("utf-8"), digest_size=8).digest(), "big", signed=True)
    return value if value != WILD else WILD + 1


def _need(m: int) -> int:
    """The fewest common trigrams that make titles of ``m`` (the smaller size) near."""
    k = math.ceil(TITLE_CONTAINMENT * m)
    while k > 0 and k - 1 >= TITLE_CONTAINMENT * m:
        k -= 1
    while k < TITLE_CONTAINMENT * m:
        k += 1
    return k


def is_built(con: sqlite3.Connection) -> bool:
    """Whether the keys are there (else :func:`build` makes them, inside a transaction)."""
    return con.execute("SELECT 1 FROM meta WHERE key = ?", (BUILT,)).fetchone() is not None


def _json(ids: Iterable[int]) -> str:
    """Trigram ids as a JSON array: one statement expands them (``json_each``), not one a gram."""
    return "[" + ",".join(map(str, ids)) + "]"


def _insert(con: sqlite3.Connection, name: str, grp: int, ids: list[int]) -> None:
    cur = con.execute(
        "INSERT INTO dedupe_notes (name, grp, size, grams) VALUES (?, ?, ?, ?)",
        (name, grp, len(ids), array("q", ids).tobytes()),
    )
    # Postings one row a statement: a statement of many rows costs SQLite a statement
    # journal (to undo half of it), which costs more than it saves here.
    size = len(ids)
    con.executemany(
        "INSERT INTO dedupe_grams (grp, gram, size, id) VALUES (?, ?, ?, ?)",
        [(grp, g, size, cur.lastrowid) for g in ids],
    )
    con.execute(
        "INSERT INTO dedupe_df (grp, gram, n) SELECT ?, value, 1 FROM json_each(?) WHERE 1"
        " ON CONFLICT (grp, gram) DO UPDATE SET n = n + 1",
        (grp, _json(ids)),
    )


def _drop(con: sqlite3.Connection, note: int, grp: int, size: int, blob: bytes) -> None:
    ids = array("q")
    ids.frombytes(blob)
    grams = _json(ids)
    con.execute("DELETE FROM dedupe_notes WHERE id = ?", (note,))
    con.execute(
        "DELETE FROM dedupe_grams WHERE grp = ? AND size = ? AND id = ?"
        " AND gram IN (SELECT value FROM json_each(?))",
        (grp, size, note, grams),
    )
    con.execute(
        "UPDATE dedupe_df SET n = n - 1 WHERE grp = ? AND gram IN (SELECT value FROM json_each(?))",
        (grp, grams),
    )
    con.execute(
        "DELETE FROM dedupe_df WHERE grp = ? AND n <= 0"
        " AND gram IN (SELECT value FROM json_each(?))",
        (grp, grams),
    )


def put(con: sqlite3.Connection, name: str, title: str | None, numbers: str | None = None) -> None:
    """Record the title and number key of note ``name`` (title None: it is not a valid note,
    forget it; numbers None: not known, the note is in :data:`WILD`)."""
    row = con.execute(
        "SELECT id, grp, size, grams FROM dedupe_notes WHERE name = ?", (name,)
    ).fetchone()
    ids = gram_ids(title) if title is not None else None
    grp = group(numbers)
    if row is not None:
        if ids is not None and row[1] == grp and array("q", ids).tobytes() == row[3]:
            return  # neither the title's trigrams nor the numbers changed (a body's words)
        _drop(con, *row)
    if ids is not None:
        _insert(con, name, grp, ids)


def remove(con: sqlite3.Connection, names: Iterable[str]) -> None:
    """Forget these notes."""
    for name in names:
        put(con, name, None)


def clear(con: sqlite3.Connection) -> None:
    """Drop every key (they are rebuilt on first use)."""
    for table in ("dedupe_notes", "dedupe_grams", "dedupe_df"):
        con.execute(f"DELETE FROM {table}")
    con.execute("DELETE FROM meta WHERE key = ?", (BUILT,))


def build(con: sqlite3.Connection) -> None:
    """Make the keys of every valid note from the catalog's rows (inside a transaction).

    Python computes each title's trigrams once; SQLite expands them into
    postings (``json_each``), sorts them and counts them, so a large store
    costs one row per note on the Python side, not one per posting.
    """
    clear(con)
    con.execute(
        "CREATE TEMP TABLE IF NOT EXISTS dedupe_new (id INTEGER, grp INTEGER, size INTEGER,"
        " ids TEXT)"
    )
    con.execute("DELETE FROM temp.dedupe_new")
    rows = con.execute("SELECT name, title, nums FROM notes WHERE line IS NOT NULL").fetchall()
    for start in range(0, len(rows), 5_000):
        notes, new = [], []
        for name, title, numbers in rows[start : start + 5_000]:
            ids = gram_ids(str(title))
            grp = group(None if numbers is None else str(numbers))
            notes.append((str(name), grp, len(ids), array("q", ids).tobytes()))
        first = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM dedupe_notes").fetchone()[0]
        con.executemany(
            "INSERT INTO dedupe_notes (name, grp, size, grams) VALUES (?, ?, ?, ?)", notes
        )
        for offset, (_, grp, size, blob) in enumerate(notes):
            grams = array("q")
            grams.frombytes(blob)
            new.append((first + offset, grp, size, "[" + ",".join(map(str, grams)) + "]"))
        con.executemany("INSERT INTO temp.dedupe_new (id, grp, size, ids) VALUES (?, ?, ?, ?)", new)
    con.execute(
        "INSERT INTO dedupe_grams (grp, gram, size, id) SELECT d.grp, j.value, d.size, d.id"
        " FROM temp.dedupe_new d, json_each(d.ids) j ORDER BY 1, 2, 3, 4"
    )
    con.execute(
        "INSERT INTO dedupe_df (grp, gram, n)"
        " SELECT grp, gram, COUNT(*) FROM dedupe_grams GROUP BY grp, gram"
    )
    con.execute("DELETE FROM temp.dedupe_new")
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (BUILT,))


@functools.lru_cache(maxsize=512)
def _needs(a: int) -> tuple[int, ...]:
    """:func:`_need` of every size up to ``a``."""
    return tuple(_need(m) for m in range(a + 1))


def near(
    con: sqlite3.Connection, title: str, numbers: str | None = None
) -> list[tuple[str, str, str]]:
    """(name, title, summary) of every valid note of number key ``numbers`` (and of
    :data:`WILD`) whose title is near ``title``.

    Exactly the notes ``Index.near`` keeps among them: every note whose title
    holds enough of ``title``'s trigrams (checked on its stored trigrams), none
    other. ``numbers`` None: every group (a caller that cannot say).
    """
    if numbers is None:
        groups = [g for (g,) in con.execute("SELECT DISTINCT grp FROM dedupe_df")]
    else:
        groups = sorted({group(numbers), WILD})
    close: list[int] = []
    for grp in groups:
        close += _close(con, title, grp)
    return _rows(con, close)


def _close(con: sqlite3.Connection, title: str, grp: int) -> list[int]:
    """The ids of the notes of group ``grp`` whose title is near ``title``."""
    wanted = gram_ids(title)
    a = len(wanted)
    df: dict[int, int] = {}
    for start in range(0, a, _CHUNK):
        part = wanted[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        df.update(
            con.execute(
                f"SELECT gram, n FROM dedupe_df WHERE grp = ? AND gram IN ({marks})", [grp, *part]
            )
        )
    if not df:
        return []  # no title of the group shares a trigram with this one
    order = sorted(wanted, key=lambda g: (df.get(g, 0), g))
    need = _needs(a)
    # Each size's lookups go EXTRA - 1 trigrams past the pigeonhole's minimum, so a near
    # title is hit at least min(EXTRA, its _need) times there: the count prunes in SQL.
    lookups: list[tuple[int, int]] = []  # (trigram, largest title size it is needed for)
    for j, gram in enumerate(order):
        if not df.get(gram):
            continue  # in no title: it cannot be the one a near title holds
        rest = a - j + _EXTRA - 1
        if need[a] <= rest:
            lookups.append((gram, _MAX_SIZE))
            continue
        # Only titles smaller than A need this one: the sizes whose _need is at most rest.
        top = a - 1
        while top > 0 and need[top] > rest:
            top -= 1
        if top == 0:
            break  # and no size needs the commoner ones that follow
        lookups.append((gram, top))
    if not lookups:
        return []
    if a <= _CHUNK and _by_count(df, lookups):
        return _near_by_count(con, wanted, grp)
    # Every near title is hit at least ``least`` times, but those below size ``small``.
    least = min(_EXTRA, need[a])
    small = next(m for m in range(1, a + 1) if need[m] >= least)
    wanted_set = set(wanted)
    grams = array("q")
    close: list[int] = []

    def keep(note: int, size: int, count: int, blob: bytes) -> None:
        k = need[min(a, size)]
        if count < min(_EXTRA, k):
            return
        del grams[:]
        grams.frombytes(blob)
        if len(wanted_set.intersection(grams)) >= k:
            close.append(note)

    step = 2_000
    if len(lookups) <= step:
        # One statement: the hits, pruned by their count, with each one's trigrams.
        values = ",".join(["(?, ?)"] * len(lookups))
        params = [x for pair in lookups for x in pair]
        for note, size, count, blob in con.execute(
            f"WITH q (gram, top) AS (VALUES {values}),"
            " h (id, size, hits) AS (SELECT g.id, g.size, COUNT(*)"
            " FROM q JOIN dedupe_grams g ON g.grp = ? AND g.gram = q.gram AND g.size <= q.top"
            " GROUP BY g.id HAVING COUNT(*) >= ? OR g.size < ?)"
            " SELECT h.id, h.size, h.hits, d.grams FROM h JOIN dedupe_notes d ON d.id = h.id",
            [*params, grp, least, small],
        ):
            keep(note, size, count, blob)
    else:
        # A very long title: its hits are counted over several statements, then kept.
        hits: dict[int, list[int]] = {}  # id -> [size, hits]
        for first in range(0, len(lookups), step):
            chunk = lookups[first : first + step]
            values = ",".join(["(?, ?)"] * len(chunk))
            params = [x for pair in chunk for x in pair]
            for note, size, count in con.execute(
                f"WITH q (gram, top) AS (VALUES {values}) SELECT g.id, g.size, COUNT(*)"
                " FROM q JOIN dedupe_grams g ON g.grp = ? AND g.gram = q.gram AND g.size <= q.top"
                " GROUP BY g.id",
                [*params, grp],
            ):
                seen = hits.setdefault(note, [size, 0])
                seen[1] += count
        found = sorted(
            n for n, (size, count) in hits.items() if count >= min(_EXTRA, need[min(a, size)])
        )
        for start in range(0, len(found), _CHUNK):
            part = found[start : start + _CHUNK]
            marks = ",".join("?" * len(part))
            for note, size, blob in con.execute(
                f"SELECT id, size, grams FROM dedupe_notes WHERE id IN ({marks})", part
            ):
                keep(note, size, hits[note][1], blob)
    return close


def _rows(con: sqlite3.Connection, ids: list[int]) -> list[tuple[str, str, str]]:
    """(name, title, summary) of the valid notes of these key ids, sorted."""
    out: list[tuple[str, str, str]] = []
    for start in range(0, len(ids), _CHUNK):
        part = ids[start : start + _CHUNK]
        marks = ",".join("?" * len(part))
        out += con.execute(
            "SELECT n.name, n.title, n.summary FROM dedupe_notes d JOIN notes n ON n.name = d.name"
            f" WHERE d.id IN ({marks}) AND n.line IS NOT NULL",
            part,
        ).fetchall()
    return sorted(out)


def _by_count(df: dict[int, int], lookups: list[tuple[int, int]]) -> bool:
    """Whether counting every posting of the title's trigrams is the cheaper way.

    It gives each title's exact overlap in one pass, and pays when the pruned
    lookups would leave many titles to check one by one. A title left to check
    holds ``_EXTRA`` looked-up trigrams, so one of all but the commonest
    ``_EXTRA - 1`` of them: their postings bound how many are left.
    """
    every = sorted(df[g] for g, top in lookups if top == _MAX_SIZE)
    left = sum(every[: max(0, len(every) - _EXTRA + 1)])
    return _EXACT * left > sum(df.values()) - sum(every)


def _near_by_count(con: sqlite3.Connection, wanted: list[int], grp: int) -> list[int]:
    """:func:`_close` by the overlap of every title of the group, counted on all of
    ``wanted``'s postings. The count is ``Index.near``'s, and so is the test (the same
    product of floats)."""
    marks = ",".join("?" * len(wanted))
    rows = con.execute(
        f"SELECT id FROM dedupe_grams WHERE grp = ? AND gram IN ({marks})"
        " GROUP BY id HAVING COUNT(*) >= ? * MIN(?, size)",
        [grp, *wanted, TITLE_CONTAINMENT, len(wanted)],
    ).fetchall()
    return [note for (note,) in rows]


def dump(
    con: sqlite3.Connection,
) -> tuple[list[tuple[str, int, int, bytes]], list[tuple[int, int, int]]]:
    """The keys as plain data, ids left out (for tests: they must equal a rebuild's)."""
    notes = con.execute("SELECT name, grp, size, grams FROM dedupe_notes ORDER BY name").fetchall()
    df = con.execute("SELECT grp, gram, n FROM dedupe_df ORDER BY grp, gram").fetchall()
    postings = con.execute(
        "SELECT n.name, g.grp, g.gram, g.size FROM dedupe_grams g"
        " JOIN dedupe_notes n ON n.id = g.id"
    ).fetchall()
    expected: set[tuple[str, int, int, int]] = set()
    for name, grp, size, blob in notes:
        grams = array("q")
        grams.frombytes(blob)
        expected.update((name, grp, g, size) for g in grams)
    if set(postings) != expected or len(postings) != len(expected):
        raise AssertionError("dedupe postings do not match the notes' trigrams")
    return notes, df
