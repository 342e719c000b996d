"""Derived state that makes a store cheap to read and to write: it changes by the note.

The notes are the truth; this module only remembers what it learnt from them,
in the store's state folder (outside the repository, see ``paths.state_dir``):

- ``catalog.sqlite`` (SQLite in WAL mode): one row per note, with its stat,
  content hash, index line and fields, plus what MEMORY.md was when mdmem last
  wrote it. A write changes the rows of the notes it touched, nothing else.
- ``fingerprint``: written only when the store is *settled*; a hash of every
  note's stat, and the stats of what the prompt block is made of (the store
  directory, MEMORY.md, the notes of its first lines).
- ``clock``: a file whose mtime is the file-system clock "now" (see below).

Deleting any of them at any moment loses nothing: the next read rebuilds them.

A settled ``load_index`` scans the directory, hashes the stats and compares
with ``fingerprint``; ``head`` (what ``mdmem index`` needs) checks only the
directory, MEMORY.md and the notes of the block's lines, then reads MEMORY.md
up to the block's limits. Neither imports ``sqlite3`` nor YAML. Anything else
goes through the catalog, which re-reads only files whose stat changed, and
re-parses only files whose bytes changed.

Like git's index, this must not be fooled by a file rewritten twice within one
tick of the file-system clock with the same size. Each row records ``at``, the
file-system time (the ``clock`` file touched) taken *before* its bytes were
read; the recorded stat proves the note unchanged only while the note's mtime
and ctime are strictly older than ``at``: any later change of the note gets an
mtime and ctime of at least ``at``, so a different stat. A note as new as its
row is hashed again next time, and while any is, no fingerprint is written.
"""

from __future__ import annotations

import contextlib
import os
import stat

from mdmem.errors import MdmemError
from mdmem.store import _row
from mdmem.store._row import CatalogRow
from mdmem.store._scan import (
    _VERSION,
    HEAD_NAMES,
    Fingerprint,
    Scan,
    Stat,
    fs_now,
    head_is_current,
    key_of,
    open_regular,
    read_fingerprint,
    read_head,
    stat_of,
    store_key,
    write_fingerprint,
)
from mdmem.store.files import content_hash
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Collection, Iterable, Iterator
    from typing import Any, TypeVar

    _C = TypeVar("_C")

# The scan's names (store/_scan.py) are re-exported: store/ and the floors above say
# ``_catalog.Scan`` (or ``catalog.Scan``), and tests count listings by patching it here.
__all__ = [
    "HEAD_NAMES",
    "Catalog",
    "CatalogError",
    "CatalogRow",
    "Fingerprint",
    "Scan",
    "Stat",
    "content_hash",
    "fs_now",
    "head_is_current",
    "is_busy",
    "is_damage",
    "key_of",
    "open_regular",
    "read_fingerprint",
    "read_head",
    "stat_of",
    "store_key",
    "write_fingerprint",
]


_COLUMNS = _row.COLUMNS

# -- the catalog: SQLite, one row per note ------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    name TEXT PRIMARY KEY,
    folded TEXT NOT NULL,
    mtime INTEGER, size INTEGER, ino INTEGER, ctime INTEGER,
    at INTEGER NOT NULL DEFAULT 0,
    sha TEXT, line TEXT, type TEXT, title TEXT, summary TEXT, updated TEXT, error TEXT,
    nums TEXT, extra TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS notes_folded ON notes (folded);
-- The rows of notes with supersedes/expires: every write reads them (marks), never all rows.
CREATE INDEX IF NOT EXISTS notes_marked ON notes (name) WHERE extra IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
-- Counts by type (mdmem stats) from a small index, not a pass over every row.
CREATE INDEX IF NOT EXISTS notes_type ON notes (type) WHERE line IS NOT NULL;
-- The prompt block's order (ranked_lines): its first lines without sorting every row.
CREATE INDEX IF NOT EXISTS notes_rank ON notes (
    CASE type WHEN 'correction_feedback' THEN 0 WHEN 'user_preference' THEN 0
    WHEN 'project_knowledge' THEN 1 WHEN 'reference_material' THEN 2 ELSE 3 END,
    COALESCE(updated, '') DESC, name
) WHERE line IS NOT NULL;
-- The change log (see Catalog.log): what each pass that changed rows changed, between
-- which store keys. names is a JSON list, or NULL: "too much to list, catch up in full".
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    before TEXT NOT NULL, after TEXT NOT NULL, names TEXT
);
"""
#: The orders :meth:`Catalog.select` sorts by (``title``: ASCII letters folded, as NOCASE).
ORDERS = {
    "updated": "COALESCE(updated, '') DESC, name",
    "oldest": "COALESCE(updated, '') ASC, name",
    "title": "title COLLATE NOCASE, name",
    "name": "name",
}
#: How many change-log entries are kept; a reader further behind catches up in full.
LOG_KEEP = 512
#: Past this many names, a pass logs "catch up in full" instead of the names.
LOG_NAMES = 1_000


def _sqlite_module() -> object | None:
    """SQLite's module as loaded (the C module, whose classes the package re-exports; the
    package where there is no C module), or None when SQLite was never used here."""
    import sys

    return sys.modules.get("_sqlite3") or sys.modules.get("sqlite3")


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the catalog file is damaged or unusable (then it is rebuilt).

    For this module's own code, where SQLite is called; above it, a catalog call
    raises :class:`CatalogError` and nothing else of SQLite's.
    """
    if isinstance(exc, CatalogError):
        return True
    sqlite3: Any = _sqlite_module()
    return sqlite3 is not None and isinstance(exc, sqlite3.Error)


def _log_damage(root: str, exc: BaseException) -> None:
    import logging

    logging.getLogger("mdmem").warning(
        "%s: the catalog was unusable (%s); rebuilding it from the notes", root, exc
    )


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` only says another connection holds the catalog right now.

    Such a catalog is not damaged: it must never be thrown away (unlinking a WAL
    database's files under a live connection of another thread or process can
    make SQLite map a different -shm file, and a later truncation of it is a
    SIGBUS), only worked around for this call.
    """
    if isinstance(exc, CatalogError):
        return exc.busy
    sqlite3: Any = _sqlite_module()
    if sqlite3 is None or not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


_PUT = (
    f"INSERT OR REPLACE INTO notes (folded, {_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


class _ValidNames:
    """``name in`` the rows recorded as valid notes: one indexed look-up per question."""

    __slots__ = ("_con",)

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con

    def __contains__(self, name: object) -> bool:
        try:
            row = self._con.execute(
                "SELECT 1 FROM notes WHERE name = ? AND mtime IS NOT NULL", (name,)
            ).fetchone()
        except UnicodeEncodeError:  # not UTF-8: never recorded as valid
            return False
        return row is not None


#: Seconds a connection waits out a moment's lock of the whole catalog (see ``_connect``).
OPEN_WAIT = 2.0


class CatalogError(MdmemError):
    """The one error a catalog call raises for SQLite's (internal to ``store/``).

    An ``MdmemError``, so that one that gets past the store (it catches them all
    where it can rebuild or fall back) is shown as one line, not a traceback.

    The file is damaged or unusable (the store rebuilds it from the notes), or,
    when :attr:`busy`, another connection holds it right now (the store answers
    from a catalog in memory this once, and never throws a live one away). The
    SQLite error is its ``__cause__``.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the catalog: {cause}")
        self.busy = is_busy(cause)


class _Translated:
    """Where SQLite's errors become :class:`CatalogError`: every public method of
    :class:`Catalog` runs inside it (httpx's ``map_httpcore_exceptions``), so the
    store catches one named error instead of asking each exception what it is."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None and not isinstance(exc, CatalogError) and is_damage(exc):
            raise CatalogError(exc) from exc


translated = _Translated()
_CO_GENERATOR = 0x20  # inspect.CO_GENERATOR, without importing inspect on the fast path


def _at_the_edge(cls: type[_C]) -> type[_C]:
    """Run every public method of ``cls`` (generators too) inside :data:`translated`."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        if method.__code__.co_flags & _CO_GENERATOR:

            def generator(*args: Any, **kwargs: Any) -> Any:
                with translated:
                    yield from method(*args, **kwargs)

            wrapped = generator
        else:

            def call(*args: Any, **kwargs: Any) -> Any:
                with translated:
                    return method(*args, **kwargs)

            wrapped = call
        wrapped.__name__ = method.__name__
        wrapped.__qualname__ = method.__qualname__
        wrapped.__doc__ = method.__doc__
        wrapped.__wrapped__ = method  # type: ignore[attr-defined]
        return wrapped

    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and callable(value) and hasattr(value, "__code__"):
            setattr(cls, name, wrap(value))
    return cls


@_at_the_edge
class Catalog:
    """The store's rows, in SQLite; opened on first use, rebuilt when damaged.

    One connection per store object and process. All writes happen in one
    transaction per refresh (:meth:`begin` ... :meth:`commit`).
    """

    def __init__(
        self,
        root: str,
        *,
        private: bool,
        memory: bool = False,
        state: StateDir | None = None,
    ) -> None:
        self._root = root
        # The store's own (store.state), which knows where its folder is.
        self._state = state if state is not None else StateDir(root)
        self._private = private
        self._con: sqlite3.Connection | None = None
        self._ino: int | None = None
        self.memory = memory  # True when the state folder cannot hold the catalog
        self._keys: tuple[str | None] | None = None  # this transaction's _keys_upto()
        self.keys_wanted = False  # set by near(): the keys' background build is due

    @property
    def path(self) -> str:
        return self._state.catalog

    def _open(self) -> sqlite3.Connection:
        from mdmem._sqlite import sqlite3

        con = self._con
        if con is None and self.memory:
            con = self._con = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False
            )
            self._setup(con)
            return con
        if con is not None:
            # Inside a transaction the connection is kept whatever became of the file:
            # dropping it would drop the transaction's writes unseen (checked after).
            if self.memory or con.in_transaction:
                return con
            try:
                if os.stat(self.path).st_ino == self._ino:
                    return con
            except OSError:
                pass
            # Deleted or replaced behind our back: start again from what is on disk.
            self.close()
        try:
            self._state.ensure()
            try:
                con = self._connect()
            except sqlite3.Error as exc:
                if is_busy(exc):
                    raise
                # Not a database, or a damaged one: the catalog is derived from the
                # notes, so it is thrown away and rebuilt, never a reason to fail.
                _log_damage(self._root, exc)
                self.reset()
                con = self._connect()
            self._ino = os.stat(self.path).st_ino
            self.memory = False
        except sqlite3.Error:
            raise
        except OSError:
            con = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._setup(con)
            self.memory = True
        self._con = con
        return con

    def _connect(self) -> sqlite3.Connection:
        from mdmem._sqlite import sqlite3

        # A WAL database is locked whole only for moments (another connection's last close
        # checkpoints and truncates it, a recovery of its -shm): opening it and reading wait
        # those out instead of failing a write or a read. begin() sets its own wait.
        con = sqlite3.connect(
            self.path, timeout=OPEN_WAIT, isolation_level=None, check_same_thread=False
        )
        try:
            # Only when it differs: a chmod changes the file's ctime, which the recall
            # index's freshness key holds, so a chmod on every open made every later
            # query distrust (and re-commit) the index.
            if stat.S_IMODE(os.stat(self.path).st_mode) != 0o600:
                os.chmod(self.path, 0o600)
            self._setup(con)
        except BaseException:
            con.close()
            raise
        return con

    @staticmethod
    def _setup(con: sqlite3.Connection) -> None:
        # Derived state: no fsync (synchronous=OFF). A catalog lost or damaged by a
        # power cut is noticed (it is checksummed in WAL mode, or fails to open)
        # and rebuilt from the notes; stale rows only cost a re-read.
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=OFF")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version != _VERSION:
            from mdmem.store import _dedupe_keys

            con.executescript(
                "DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS meta;"
                "DROP TABLE IF EXISTS dedupe_notes; DROP TABLE IF EXISTS dedupe_grams;"
                "DROP TABLE IF EXISTS dedupe_df; DROP TABLE IF EXISTS dedupe_keys;"
                "DROP TABLE IF EXISTS dedupe_count; DROP TABLE IF EXISTS changes;"
            )
            con.executescript(_SCHEMA + _dedupe_keys.SCHEMA)
            # Which catalog this is: a reader's place in the log means nothing in another.
            con.execute("INSERT OR REPLACE INTO meta VALUES ('epoch', ?)", (os.urandom(8).hex(),))
            con.execute(f"PRAGMA user_version={_VERSION}")

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
        self._con = None
        self._ino = None
        self._keys = None

    def reset(self) -> None:
        """Throw the catalog away (it is damaged); the next use starts an empty one."""
        self.close()
        if self.memory:
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(self.path + suffix)

    # -- transactions -------------------------------------------------------------

    def begin(self, timeout: float) -> bool:
        """Start the write transaction; False if another process holds it past ``timeout``."""
        from mdmem._sqlite import sqlite3

        con = self._open()
        con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        self._keys = None
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise
        return True

    def commit(self) -> None:
        con = self._open()
        if con.in_transaction:
            con.execute("COMMIT")

    def rollback(self) -> None:
        self._keys = None
        if self._con is not None and self._con.in_transaction:
            self._con.execute("ROLLBACK")

    # -- reading ------------------------------------------------------------------

    def stats(self) -> dict[str, tuple[int, int, int, int, int] | None]:
        """name -> (mtime, size, ino, ctime, at) for every row; None for a rejected name."""
        rows = self._open().execute("SELECT name, mtime, size, ino, ctime, at FROM notes")
        return {
            name: None if mtime is None else (mtime, size, ino, ctime, at)
            for name, mtime, size, ino, ctime, at in rows
        }

    def iter_stats(self, page: int = 2_000) -> Iterator[tuple[str, Stat | None, int]]:
        """(name, stat or None for a rejected name, at) of every row, sorted by name.

        A page at a time, each fetched whole before it is handed out: rows the
        caller writes meanwhile (names up to the last one handed out) are never
        read back, and no more than a page is held.
        """
        con = self._open()
        after = ""
        first = True
        while True:
            rows = con.execute(
                "SELECT name, mtime, size, ino, ctime, at FROM notes"
                f" WHERE {'1' if first else 'name > ?'} ORDER BY name LIMIT ?",
                (page,) if first else (after, page),
            ).fetchall()
            first = False
            for name, mtime, size, ino, ctime, at in rows:
                yield name, None if mtime is None else (mtime, size, ino, ctime), at
            if len(rows) < page:
                return
            after = rows[-1][0]

    def valid_names(self) -> _ValidNames:
        """The names recorded as valid notes, asked one at a time (see :meth:`Scan.classify`)."""
        return _ValidNames(self._open())

    def get(self, name: str) -> CatalogRow | None:
        row = (
            self._open().execute(f"SELECT {_COLUMNS} FROM notes WHERE name = ?", (name,)).fetchone()
        )
        return None if row is None else _row.from_columns(row)

    def get_many(self, names: Collection[str]) -> dict[str, CatalogRow]:
        """The rows of those of ``names`` the catalog holds: a statement per 500 names."""
        con, wanted, out = self._open(), sorted(set(names)), {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for row in con.execute(f"SELECT {_COLUMNS} FROM notes WHERE name IN ({marks})", chunk):
                out[str(row[0])] = _row.from_columns(row)
        return out

    def rows(
        self,
        *,
        where: str = "line IS NOT NULL",
        offset: int = 0,
        limit: int | None = None,
        after: str | None = None,
    ) -> Iterator[tuple[str, CatalogRow]]:
        """(name, entry) sorted by name, for the rows ``where`` selects (names past ``after``)."""
        clause = where if after is None else f"({where}) AND name > ?"
        params: tuple[object, ...] = () if after is None else (after,)
        cursor = self._open().execute(
            f"SELECT {_COLUMNS} FROM notes WHERE {clause} ORDER BY name LIMIT ? OFFSET ?",
            (*params, -1 if limit is None else limit, offset),
        )
        while True:
            batch = cursor.fetchmany(500)
            if not batch:
                return
            for row in batch:
                yield str(row[0]), _row.from_columns(row)

    def select(
        self, *, type: str | None, order: str, offset: int, limit: int
    ) -> tuple[int, list[tuple[str, CatalogRow]]]:
        """(how many valid notes of ``type`` there are, one page of them in ``order``).

        ``order`` is a key of :data:`ORDERS`. Filtered, counted and sorted by
        SQLite: a page costs the same whatever the store's size (but the sort).
        """
        where = "line IS NOT NULL" + ("" if type is None else " AND type = ?")
        params: tuple[object, ...] = () if type is None else (type,)
        con = self._open()
        (total,) = con.execute(f"SELECT COUNT(*) FROM notes WHERE {where}", params).fetchone()
        rows = con.execute(
            f"SELECT {_COLUMNS} FROM notes WHERE {where} ORDER BY {ORDERS[order]} LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()
        return int(total), [(str(row[0]), _row.from_columns(row)) for row in rows]

    def keys(self, *, type: str | None, order: str, limit: int) -> list[tuple[str, str]]:
        """(name, what ``order`` sorts by) of the first ``limit`` valid notes of ``type`` in
        that order: two columns, no entry decoded (to merge the pages of two stores)."""
        column = {"updated": "COALESCE(updated, '')", "oldest": "COALESCE(updated, '')"}
        key = column.get(order, "title" if order == "title" else "name")
        where = "line IS NOT NULL" + ("" if type is None else " AND type = ?")
        params: tuple[object, ...] = () if type is None else (type,)
        rows = self._open().execute(
            f"SELECT name, {key} FROM notes WHERE {where} ORDER BY {ORDERS[order]} LIMIT ?",
            (*params, limit),
        )
        return [(str(name), str(value or "")) for name, value in rows]

    def lines(self) -> Iterator[str]:
        """Every index line, sorted by note name."""
        cursor = self._open().execute("SELECT line FROM notes WHERE line IS NOT NULL ORDER BY name")
        while True:
            batch = cursor.fetchmany(1000)
            if not batch:
                return
            for (line,) in batch:
                yield line

    def taken(self, folded: str) -> bool:
        """Whether a note whose case-folded name is ``folded`` is known."""
        row = self._open().execute("SELECT 1 FROM notes WHERE folded = ? LIMIT 1", (folded,))
        return row.fetchone() is not None

    def folded_names(self, expect: int) -> set[str] | None:
        """The case-folded name of every note with a row; None when there are not
        ``expect`` rows (counted first: the names are read only when they may match)."""
        con = self._open()
        if con.execute("SELECT COUNT(*) FROM notes").fetchone()[0] != expect:
            return None
        return {folded for (folded,) in con.execute("SELECT folded FROM notes")}

    def versions(self, names: Collection[str] | None = None) -> dict[str, str]:
        """name -> content hash of every valid note (one with an index line), or of those
        of ``names`` that are."""
        valid = "sha IS NOT NULL AND line IS NOT NULL"
        con = self._open()
        if names is None:
            return dict(con.execute(f"SELECT name, sha FROM notes WHERE {valid}"))
        out: dict[str, str] = {}
        wanted = sorted(names)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT name, sha FROM notes WHERE name IN ({marks}) AND {valid}"
            out.update(con.execute(query, chunk))
        return out

    def meta(self, key: str) -> str | None:
        row = self._open().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- writing (inside begin/commit) -----------------------------------------------

    def put(self, name: str, entry: CatalogRow) -> None:
        self._open().execute(_PUT, _row.to_columns(name, entry))

        self._keep_keys([(name, entry)])

    def put_many(self, items: Iterable[tuple[str, CatalogRow]]) -> None:
        """:meth:`put` for many rows: one statement, run for each (a bulk load's batch)."""
        items = list(items)
        if not items:
            return  # nothing to write, and no dedupe module to import
        self._open().executemany(_PUT, [_row.to_columns(name, entry) for name, entry in items])
        self._keep_keys(items)

    def _keep_keys(self, items: list[tuple[str, CatalogRow]]) -> None:
        upto = self._keys_upto() if items else ""
        if upto != "":
            from mdmem.store import _dedupe_keys

            for name, entry in items:
                if _dedupe_keys.keeps(upto, name):
                    title = entry.title if entry.line is not None else None
                    _dedupe_keys.put(self._open(), name, title, entry.summary or "", entry.nums)

    def marked(self) -> dict[str, CatalogRow]:
        """The rows with more than the usual fields (supersedes, expires), by name."""
        cursor = self._open().execute(
            f"SELECT {_COLUMNS} FROM notes INDEXED BY notes_marked WHERE extra IS NOT NULL"
        )
        return {str(row[0]): _row.from_columns(row) for row in cursor}

    def present(self, names: Collection[str]) -> set[str]:
        """Which of ``names`` are notes with an index line."""
        con = self._open()
        out: set[str] = set()
        for name in names:
            row = con.execute(
                "SELECT 1 FROM notes WHERE name = ? AND line IS NOT NULL", (name,)
            ).fetchone()
            if row is not None:
                out.add(name)
        return out

    def remove(self, names: Collection[str]) -> None:
        self._open().executemany("DELETE FROM notes WHERE name = ?", [(n,) for n in names])
        upto = self._keys_upto() if names else ""
        if upto != "":
            from mdmem.store import _dedupe_keys

            _dedupe_keys.remove(self._open(), [n for n in names if _dedupe_keys.keeps(upto, n)])

    def clear(self) -> None:
        from mdmem.store import _dedupe_keys

        con = self._open()
        con.execute("DELETE FROM notes")
        con.execute("DELETE FROM meta WHERE key != 'epoch'")
        _dedupe_keys.clear(con)
        self._keys = ("",)

    # -- the change log ---------------------------------------------------------------

    def log(self, before: str, after: str, names: Collection[str] | None) -> None:
        """Record, in the open transaction, that the rows of ``names`` (None: of any
        note) changed while the store's key (:func:`store_key`) went from ``before`` to
        ``after``.

        Derived readers (the recall index, the prompt block) that were in step
        at ``before`` catch up by those names alone (:meth:`changes_after`),
        instead of listing the store. Only the last :data:`LOG_KEEP` entries are kept.
        """
        import json

        listed = None
        if names is not None and len(names) <= LOG_NAMES:
            listed = json.dumps(sorted(names), ensure_ascii=False)
        con = self._open()
        cur = con.execute(
            "INSERT INTO changes (before, after, names) VALUES (?, ?, ?)", (before, after, listed)
        )
        if cur.lastrowid is not None and cur.lastrowid % 64 == 0:
            con.execute("DELETE FROM changes WHERE seq <= ?", (cur.lastrowid - LOG_KEEP,))

    def position(self) -> tuple[str, int]:
        """Where the log is now: (this catalog's epoch, the last entry's number)."""
        con = self._open()
        row = con.execute("SELECT MAX(seq) FROM changes").fetchone()
        return self.meta("epoch") or "", int(row[0] or 0)

    def changes_after(
        self, position: tuple[str, int], key: str, now_key: str, *, names: bool = True
    ) -> tuple[tuple[str, int], set[str]] | None:
        """What changed since ``position``, when the store's key was ``key``: (the log's
        position now, the names whose rows changed); None when the log cannot say.
        Without ``names``, whether it can say alone (the names are not read: an empty set).

        The log can say when its entries since then follow each other from
        ``key`` to ``now_key`` (the store's key now): each entry starts at the
        key the one before ended at, and none says "catch up in full". A change
        the log does not hold (a note created, deleted or renamed behind mdmem's
        back moves the directory, hence the key) breaks that chain.
        """
        from mdmem import _json as json  # the C scanner: the prompt hook's path

        epoch, seq = position
        if epoch != (self.meta("epoch") or "") or not epoch:
            return None
        con = self._open()
        first, last = con.execute("SELECT MIN(seq), MAX(seq) FROM changes").fetchone()
        if last is not None and last > seq and (first is None or first > seq + 1):
            return None  # entries since then were pruned: none need be read
        # Without the names, whether each entry lists them: a catch-up as often as the
        # prompt block asks whether the catalog is current (up to LOG_KEEP entries).
        listing = "names" if names else "names IS NOT NULL"
        rows = con.execute(
            f"SELECT seq, before, after, {listing} FROM changes WHERE seq > ? ORDER BY seq",
            (seq,),
        ).fetchall()
        changed: set[str] = set()
        at = key
        for number, before, after, listed in rows:
            if before != at or not listed:  # NULL (or, without names, 0): catch up in full
                return None
            if names:
                changed.update(json.loads(listed))
            at, seq = after, number
        if at != now_key:
            return None
        return (epoch, seq), changed

    # -- the dedupe keys (see store/_dedupe_keys.py) ---------------------------------

    def _keys_upto(self) -> str | None:
        """Up to which name this transaction keeps dedupe keys (``_dedupe_keys.built_upto``)."""
        if self._keys is None:
            from mdmem.store import _dedupe_keys

            self._keys = (_dedupe_keys.built_upto(self._open()),)
        return self._keys[0]

    def keys_unbuilt(self) -> bool:
        """Whether some note's dedupe keys are not built (``_dedupe_keys.built_upto``)."""
        from mdmem.store import _dedupe_keys

        return _dedupe_keys.built_upto(self._open()) is not None

    def near(
        self, title: str, summary: str, numbers: str | None, timeout: float
    ) -> list[tuple[str, str, str]] | None:
        """(name, title, summary) of the few valid notes of number key ``numbers`` that
        share the most with ``title`` and ``summary`` (``_dedupe_keys.near``: at most
        ``LIMIT``, whatever the store holds).

        Keys what is left to key first when it is little (``_dedupe_keys.small``); else
        :attr:`keys_wanted` asks for the background build, and the notes not keyed yet
        come by the full comparison's test (``_dedupe_keys.candidates``). None when
        another process holds the catalog past ``timeout``.
        """
        from mdmem.store import _dedupe_keys

        con = self._open()
        upto = _dedupe_keys.built_upto(con)
        if upto is not None and (self.memory or _dedupe_keys.small(con, upto)):
            if not self.begin(timeout):
                return None
            try:
                _dedupe_keys.build_some(con, None)
                self.commit()
            except BaseException:
                self.rollback()
                raise
            upto = None
        self.keys_wanted = self.keys_wanted or upto is not None
        return _dedupe_keys.candidates(con, upto, title, summary, numbers)

    def set_meta(self, key: str, value: str | None) -> None:
        con = self._open()
        if value is None:
            con.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def log_position(cat: Catalog) -> tuple[str, int] | None:
    """Where ``cat``'s change log stands (``Store.log_position``), or None when the
    catalog cannot say."""
    try:
        return cat.position()
    except CatalogError:
        return None


def changes_since(
    cat: Catalog, root: str, position: tuple[str, int], key: str
) -> tuple[tuple[str, int], str, set[str]] | None:
    """What changed in the store at ``root`` since its log stood at ``position`` and its
    key was ``key`` (``Store.changes_since``): (the position now, the key now, the names),
    or None when the log cannot vouch for it."""
    now_key = store_key(root)
    try:
        found = cat.changes_after(position, key, now_key)
    except CatalogError:
        return None
    return None if found is None else (found[0], now_key, found[1])
