"""Dedupe keys in the catalog: a bounded handful of notes a create is compared with.

A create is compared with the notes that share its rarest *keys* (:func:`keys`):
its whole title and summary, its title, its title's words in any order, each
word of its title and summary and each pair of adjacent title words (a run of
Chinese or Japanese, which has no spaces, gives its pairs of characters as
words), each within its number group (:func:`mdmem.store.dedupe.number_key`: a
duplicate names what the note names, so "Note number 7" is never compared with
"Note number 8"). These tables keep them in ``catalog.sqlite``, changed with the
note's row (:meth:`~mdmem.store._catalog.Catalog.put`):

- ``dedupe_notes``: a note's id, name, and its keys (a blob of int64, to drop
  its postings);
- ``dedupe_keys``: postings (key, note id);
- ``dedupe_count``: how many notes hold each key.

Bounded at any size, whatever the titles: a key held by more than :data:`CAP`
notes says little (a store's everyday words: "the", "cache", "tests") and is
not looked up, so a create reads at most ``CAP`` postings a key; the notes are
ranked by the keys they share, each weighing ``1 / (the notes holding it)``,
and the best :data:`LIMIT` are returned. The planner then makes the same test
as ever (a near title, then ``find_duplicate``), so nothing is merged that the
full comparison would not merge.

What it may miss, and only this (``tests/store/test_dedupe_bounded.py`` holds
it against the full comparison): a duplicate that (a) shares with the create no
key held by at most ``CAP`` notes, that is, its title differs (in its words, in
any order), its title and summary differ, and every word and title word pair
they have in common is in more than ``CAP`` notes of the group; or (b) is
outranked by ``LIMIT`` other notes. A duplicate is a near repeat of the text,
so it shares its whole title, or its rarer words, nearly always; and a missed
merge costs a line of the index where a false merge would lose a fact.

Derived like the rest of the catalog: built on first use (a first load or a
rebuild does not pay for it), dropped with the rows, rebuilt from them; every
posting is kept (a key's count is exact), so the tables are always what a
build from the rows gives.

Built in steps, by name (:func:`build_some`): the tables hold the keys of every
valid note whose name is at most :func:`built_upto` (all of them once
:data:`BUILT` is set), and a write keeps the keys of the notes in that range
only (a later step reads the others from their rows). A small store is built at
its first create, inside the write; a large one (the first create after an
upgrade or a rebuilt catalog at 100,000 notes would stall for seconds) by a
background process (:func:`main`, started by the store's coherence engine), a
step of :data:`STEP` notes a transaction with a pause between, so no write waits on
it for long.
Meanwhile a create is compared with the keyed notes as above and with every
note not keyed yet by the full comparison's title test (:func:`unbuilt`): it
misses nothing the bounds above do not name.
"""

from __future__ import annotations

import functools
import heapq
import itertools
import os
from array import array

try:  # hashlib costs milliseconds to import (OpenSSL): blake2 alone is enough here
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b

from mdmem.store.dedupe import normalise

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    import sqlite3
    import subprocess
    from collections.abc import Iterable

    Near = tuple[str, str, str]  # a dedupe candidate: name, title, summary

__all__ = [
    "CAP",
    "ENTRY",
    "INLINE",
    "LIMIT",
    "SCHEMA",
    "STEP",
    "WILD",
    "Batch",
    "build",
    "build_some",
    "built_upto",
    "candidates",
    "clear",
    "dump",
    "is_built",
    "keeps",
    "keys",
    "main",
    "near",
    "put",
    "remove",
    "small",
    "start",
    "unbuilt",
]

SCHEMA = """
CREATE TABLE IF NOT EXISTS dedupe_notes (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, keys BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS dedupe_keys (
    key INTEGER NOT NULL, id INTEGER NOT NULL, PRIMARY KEY (key, id)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS dedupe_count (key INTEGER PRIMARY KEY, n INTEGER NOT NULL);
"""
#: The group of notes whose numbers the catalog does not know: every create looks at it.
WILD = "\0wild"
#: The ``meta`` key present while the tables hold every valid note of the catalog.
BUILT = "dedupe"
#: The ``meta`` key of a build under way: the last note name its steps have keyed.
UPTO = "dedupe_upto"
#: Notes keyed in one step (one transaction): ~70 ms here, the longest a write waits on it.
STEP = 1_000
#: The pause between steps (s): longer than SQLite's busy handler sleeps between tries
#: (at most 100 ms), so a write waiting for the catalog always gets in before the next.
PAUSE = 0.11
#: A store with more notes than this to key has them keyed by :func:`main`, in the
#: background; fewer are keyed inside the first create that needs them (~0.1 s).
INLINE = 2_000
#: What the background builder runs (see :mod:`mdmem._spawn`).
ENTRY = "mdmem.store._dedupe_keys:main"
_CHILDREN: list[subprocess.Popen[bytes]] = []
#: A key held by more notes than this is not looked up: it says little (an everyday word).
CAP = 32
#: The most notes :func:`near` returns (the best ranked).
LIMIT = 16
# At most this many words of a title, and of a summary, make keys (a summary is at most
# 240 characters; a title is a line): a create's lookups stay bounded however long.
_WORDS = 40


def _tokens(text: str) -> list[str]:
    """The words of a normal form; a run of CJK (no spaces) gives its character pairs."""
    out: list[str] = []
    for word in text.split():
        if len(word) > 2 and max(word) >= "\u2e80":  # any character of CJK or above
            out += [word[i : i + 2] for i in range(len(word) - 1)]
        elif len(word) > 1 or ord(word) >= 0x2E80:
            out.append(word)
    return out[:_WORDS]


def _hash(text: str) -> int:
    return int.from_bytes(blake2b(text.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


@functools.lru_cache(maxsize=4096)
def _parts(title: str, summary: str) -> tuple[int, ...]:
    """The hashes of what makes a note's keys, whatever its group (a create asks for them
    several times: its lookups, then its batch's and the catalog's records)."""
    t, s = normalise(title), normalise(summary)
    parts = [f"h\0{t}\0{s}", f"t\0{t}"]
    words = _tokens(t)
    parts.append(f"s\0{' '.join(sorted(set(words)))}")  # the title's words in any order
    parts += [f"w\0{w}" for w in words]
    parts += [f"p\0{a} {b}" for a, b in itertools.pairwise(words)]
    parts += [f"w\0{w}" for w in _tokens(s)]
    return tuple({_hash(p) for p in parts})


@functools.lru_cache(maxsize=1024)
def _group(numbers: str) -> int:
    return _hash(f"g\0{numbers}")


def keys(title: str, summary: str, numbers: str | None) -> list[int]:
    """The keys of a note (sorted, distinct) in number group ``numbers`` (None: :data:`WILD`).

    Its normalised title and summary together, its title, its title's words in any
    order, each word of both, and each pair of adjacent title words: what a repeat of
    the note shares with it; each mixed with its group's hash (XOR keeps a group's
    keys distinct).
    """
    group = _group(WILD if numbers is None else numbers)
    return sorted(p ^ group for p in _parts(title, summary))


def is_built(con: sqlite3.Connection) -> bool:
    """Whether the keys are there (else :func:`build` makes them, inside a transaction)."""
    return con.execute("SELECT 1 FROM meta WHERE key = ?", (BUILT,)).fetchone() is not None


def built_upto(con: sqlite3.Connection) -> str | None:
    """None when every note is keyed; else the last name keyed (``""``: none is): the
    tables hold the keys of the valid notes named up to it, and only those."""
    row = con.execute(
        "SELECT key, value FROM meta WHERE key IN (?, ?) ORDER BY key", (BUILT, UPTO)
    ).fetchone()
    if row is not None and row[0] == BUILT:
        return None
    return "" if row is None else str(row[1])


def keeps(upto: str | None, name: str) -> bool:
    """Whether a write must keep the keys of note ``name`` (it is in the built range)."""
    return upto is None or (upto != "" and name <= upto)


def _json(ids: Iterable[int]) -> str:
    """Keys as a JSON array: one statement expands them (``json_each``), not one a key."""
    return "[" + ",".join(map(str, ids)) + "]"


def _insert(con: sqlite3.Connection, name: str, ids: list[int]) -> None:
    cur = con.execute(
        "INSERT INTO dedupe_notes (name, keys) VALUES (?, ?)", (name, array("q", ids).tobytes())
    )
    # Postings one row a statement: a statement of many rows costs SQLite a statement
    # journal (to undo half of it), which costs more than it saves here.
    con.executemany(
        "INSERT INTO dedupe_keys (key, id) VALUES (?, ?)", [(k, cur.lastrowid) for k in ids]
    )
    con.execute(
        "INSERT INTO dedupe_count (key, n) SELECT value, 1 FROM json_each(?) WHERE 1"
        " ON CONFLICT (key) DO UPDATE SET n = n + 1",
        (_json(ids),),
    )


def _drop(con: sqlite3.Connection, note: int, blob: bytes) -> None:
    ids = array("q")
    ids.frombytes(blob)
    held = _json(ids)
    con.execute("DELETE FROM dedupe_notes WHERE id = ?", (note,))
    con.executemany("DELETE FROM dedupe_keys WHERE key = ? AND id = ?", [(k, note) for k in ids])
    con.execute(
        "UPDATE dedupe_count SET n = n - 1 WHERE key IN (SELECT value FROM json_each(?))", (held,)
    )
    con.execute(
        "DELETE FROM dedupe_count WHERE n <= 0 AND key IN (SELECT value FROM json_each(?))",
        (held,),
    )


def put(
    con: sqlite3.Connection,
    name: str,
    title: str | None,
    summary: str = "",
    numbers: str | None = None,
) -> None:
    """Record the keys of note ``name`` (title None: it is not a valid note, forget it;
    numbers None: not known, the note is in :data:`WILD`)."""
    row = con.execute("SELECT id, keys FROM dedupe_notes WHERE name = ?", (name,)).fetchone()
    ids = keys(title, summary, numbers) if title is not None else None
    if row is not None:
        if ids is not None and array("q", ids).tobytes() == row[1]:
            return  # neither the title, the summary nor the numbers changed (a body's words)
        _drop(con, *row)
    if ids is not None:
        _insert(con, name, ids)


def remove(con: sqlite3.Connection, names: Iterable[str]) -> None:
    """Forget these notes."""
    for name in names:
        put(con, name, None)


def clear(con: sqlite3.Connection) -> None:
    """Drop every key (they are rebuilt on first use)."""
    for table in ("dedupe_notes", "dedupe_keys", "dedupe_count"):
        con.execute(f"DELETE FROM {table}")
    con.execute("DELETE FROM meta WHERE key IN (?, ?)", (BUILT, UPTO))


def build(con: sqlite3.Connection) -> None:
    """Make the keys of every valid note from the catalog's rows (inside a transaction)."""
    clear(con)
    build_some(con, None)


def build_some(con: sqlite3.Connection, limit: int | None) -> bool:
    """Key the next ``limit`` notes (None: all) after :func:`built_upto`, by name, inside
    a transaction; True when every note is keyed now.

    Python computes each note's keys once; SQLite expands them into postings
    (``json_each``), sorts them and counts them, so a large store costs one row
    per note on the Python side, not one per posting.
    """
    upto = built_upto(con)
    if upto is None:
        return True
    if upto == "":
        clear(con)  # nothing is keyed: no posting may be left over (cheap when empty)
    query = "SELECT name, title, summary, nums, line FROM notes WHERE name > ? ORDER BY name"
    more = "" if limit is None else f" LIMIT {int(limit)}"
    rows = con.execute(query + more, (upto,)).fetchall()
    con.execute("CREATE TEMP TABLE IF NOT EXISTS dedupe_new (id INTEGER, ids TEXT)")
    con.execute("DELETE FROM temp.dedupe_new")
    for start in range(0, len(rows), 5_000):
        notes, held = [], []
        for name, title, summary, numbers, line in rows[start : start + 5_000]:
            if line is None:
                continue  # not a valid note: no keys
            ids = keys(str(title), str(summary or ""), None if numbers is None else str(numbers))
            notes.append((str(name), array("q", ids).tobytes()))
            held.append(_json(ids))
        first = con.execute("SELECT COALESCE(MAX(id), 0) + 1 FROM dedupe_notes").fetchone()[0]
        con.executemany("INSERT INTO dedupe_notes (name, keys) VALUES (?, ?)", notes)
        con.executemany(
            "INSERT INTO temp.dedupe_new (id, ids) VALUES (?, ?)",
            [(first + offset, ids) for offset, ids in enumerate(held)],
        )
    con.execute(
        "INSERT INTO dedupe_keys (key, id) SELECT j.value, d.id"
        " FROM temp.dedupe_new d, json_each(d.ids) j ORDER BY 1, 2"
    )
    con.execute(
        "INSERT INTO dedupe_count (key, n) SELECT j.value, COUNT(*)"
        " FROM temp.dedupe_new d, json_each(d.ids) j WHERE 1 GROUP BY j.value"
        " ON CONFLICT (key) DO UPDATE SET n = n + excluded.n"
    )
    con.execute("DELETE FROM temp.dedupe_new")
    if limit is None or len(rows) < limit:
        con.execute("DELETE FROM meta WHERE key = ?", (UPTO,))
        con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (BUILT,))
        return True
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (UPTO, rows[-1][0]))
    return False


def small(con: sqlite3.Connection, upto: str) -> bool:
    """Whether at most :data:`INLINE` notes are left to key after ``upto``."""
    query = "SELECT COUNT(*) FROM (SELECT 1 FROM notes WHERE name > ? LIMIT ?)"
    return bool(con.execute(query, (upto, INLINE + 1)).fetchone()[0] <= INLINE)


def candidates(
    con: sqlite3.Connection, upto: str | None, title: str, summary: str, numbers: str | None
) -> list[Near]:
    """:func:`near` among the notes keyed up to ``upto`` (None: every one), and
    :func:`unbuilt` among the others: a create's candidates during a build too."""
    found = near(con, title, summary, numbers) if upto != "" else []
    if upto is not None:
        # A step the builder committed since upto was read is in both: once each.
        keyed = {name for name, _, _ in found}
        found += [row for row in unbuilt(con, upto, title, numbers) if row[0] not in keyed]
    return found


def unbuilt(con: sqlite3.Connection, upto: str, title: str, numbers: str | None) -> list[Near]:
    """(name, title, summary) of the valid notes not keyed yet (named after ``upto``) of
    number group ``numbers`` (and of :data:`WILD`) whose title is near ``title``: the full
    comparison's candidates among them (``dedupe.title_near``), read a row at a time."""
    from mdmem.store.dedupe import title_near

    rows = con.execute(
        "SELECT name, title, summary FROM notes WHERE name > ? AND line IS NOT NULL"
        " AND (nums IS NULL OR nums = ?)",
        (upto, numbers),
    )
    return list(title_near(title, ((str(n), str(t), str(s or "")) for n, t, s in rows)))


def main(args: list[str]) -> int:
    """The background build, in the store's state folder (its working directory): key
    every note, :data:`STEP` at a time (``args``: another step, for tests), each step a
    transaction of its own; 0 when done, or when another builder runs or the catalog is
    not this version's (it is never made here)."""
    import fcntl
    import sqlite3
    import time

    from mdmem.store._scan import _VERSION
    from mdmem.store.state import CATALOG, KEYS_LOCK

    step = int(args[0]) if args else STEP
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
    lock = os.open(KEYS_LOCK, flags, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return 0  # another builder has it
    try:
        ino = os.stat(CATALOG).st_ino
        con = sqlite3.connect(f"file:{CATALOG}?mode=rw", uri=True, isolation_level=None)
    except (OSError, sqlite3.Error):
        return 0
    try:
        con.execute("PRAGMA busy_timeout=30000")
        con.execute("PRAGMA synchronous=OFF")  # derived, as the catalog's own writes
        while True:
            if os.stat(CATALOG).st_ino != ino:
                return 0  # replaced (reset): its first create or load starts again
            con.execute("BEGIN IMMEDIATE")
            try:
                if con.execute("PRAGMA user_version").fetchone()[0] != _VERSION:
                    con.execute("ROLLBACK")
                    return 0
                done = build_some(con, step)
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
            if done:
                return 0
            time.sleep(PAUSE)  # a waiting writer takes the catalog first
    except (OSError, sqlite3.Error):
        return 1
    finally:
        con.close()
        os.close(lock)


def start(state: str) -> None:
    """Start :func:`main` in state folder ``state`` unless a builder holds its lock;
    never raises (the write it serves goes on with the full comparison)."""
    from mdmem.store.cedict import _busy
    from mdmem.store.state import KEYS_LOCK

    if _busy(os.path.join(state, KEYS_LOCK)):
        return  # a builder runs
    try:
        from mdmem import _spawn

        # Held until it ends (a long-lived process reaps it at its next start).
        _CHILDREN[:] = [child for child in _CHILDREN if child.poll() is None]
        _CHILDREN.append(_spawn.start([], cwd=state, entry=ENTRY))
    except (OSError, ValueError):
        return


def near(
    con: sqlite3.Connection, title: str, summary: str, numbers: str | None
) -> list[tuple[str, str, str]]:
    """(name, title, summary) of the at most :data:`LIMIT` valid notes of number group
    ``numbers`` (and of :data:`WILD`) that share the most keys with this title and summary,
    by name.

    Only keys held by at most :data:`CAP` notes are looked up, so this reads a bounded
    number of postings whatever the store holds; a key weighs one over the notes holding
    it, ties go to the newer note (the larger id).
    """
    wanted = sorted({*keys(title, summary, numbers), *keys(title, summary, None)})
    score: dict[int, float] = {}
    for note, n in con.execute(
        "SELECT p.id, c.n FROM dedupe_count c JOIN dedupe_keys p ON p.key = c.key"
        " WHERE c.key IN (SELECT value FROM json_each(?)) AND c.n <= ?",
        (_json(wanted), CAP),
    ):
        score[note] = score.get(note, 0.0) + 1.0 / n
    best = _best(score)
    if not best:
        return []
    return sorted(
        con.execute(
            "SELECT n.name, n.title, n.summary FROM dedupe_notes d JOIN notes n ON n.name = d.name"
            f" WHERE d.id IN ({','.join('?' * len(best))}) AND n.line IS NOT NULL",
            best,
        ).fetchall()
    )


def _best(score: dict[int, float]) -> list[int]:
    """The :data:`LIMIT` best scored notes; ties go to the newer note (the larger id)."""
    return heapq.nsmallest(LIMIT, score, key=lambda n: (-score[n], -n))


class Batch:
    """The same keys for the notes one batch writes, in memory (they reach the catalog
    when the batch commits): a create is compared with at most :data:`LIMIT` of them too."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._names: dict[int, str] = {}
        self._held: dict[int, list[int]] = {}
        self._postings: dict[int, set[int]] = {}
        self._next = 1  # a later note has a larger id, as in the catalog

    def put(
        self, name: str, title: str | None, summary: str = "", numbers: str | None = ""
    ) -> None:
        """Record (title None: forget) note ``name`` as the batch wrote it."""
        old = self._ids.pop(name, None)
        if old is not None:
            for key in self._held.pop(old):
                self._postings[key].discard(old)
            del self._names[old]
        if title is None:
            return
        note, self._next = self._next, self._next + 1
        self._ids[name], self._names[note] = note, name
        self._held[note] = keys(title, summary, numbers)
        for key in self._held[note]:
            self._postings.setdefault(key, set()).add(note)

    def near(self, title: str, summary: str, numbers: str) -> list[str]:
        """The names of at most :data:`LIMIT` notes of the batch, ranked as :func:`near`
        ranks the catalog's."""
        score: dict[int, float] = {}
        for key in keys(title, summary, numbers):
            held = self._postings.get(key)
            if held and len(held) <= CAP:
                weight = 1.0 / len(held)
                for note in held:
                    score[note] = score.get(note, 0.0) + weight
        return [self._names[note] for note in _best(score)]


def dump(con: sqlite3.Connection) -> tuple[list[tuple[str, bytes]], list[tuple[int, int]]]:
    """The keys as plain data, ids left out (for tests: they must equal a rebuild's)."""
    notes = con.execute("SELECT name, keys FROM dedupe_notes ORDER BY name").fetchall()
    counts = con.execute("SELECT key, n FROM dedupe_count ORDER BY key").fetchall()
    postings = con.execute(
        "SELECT n.name, p.key FROM dedupe_keys p JOIN dedupe_notes n ON n.id = p.id"
    ).fetchall()
    expected: set[tuple[str, int]] = set()
    for name, blob in notes:
        held = array("q")
        held.frombytes(blob)
        expected.update((name, k) for k in held)
    if set(postings) != expected or len(postings) != len(expected):
        raise AssertionError("dedupe postings do not match the notes' keys")
    return notes, counts
