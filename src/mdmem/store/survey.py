"""What every note of a store says now, without writing anything: for whole-store checks.

``mdmem doctor`` must see the store as it is (a hand edit since the last read
included) and must not change it, nor mdmem's state, while it looks. Reading
and parsing every note costs what the store holds (102 s at 100,000 notes);
the catalog (``store/_catalog.py``) already knows each note's index line or
why it cannot be read, and its recorded stat proves a note unchanged exactly
when a refresh would trust it (same stat, and older than the row). So a
:class:`Survey` takes one listing (an ``lstat`` per entry), reads the
catalog's rows beside it through a read-only connection, and parses only the
notes whose row is missing or unproven. Nothing is written: no row, no
fingerprint, no MEMORY.md, no version in history (a refresh would do those;
doctor reports the drift instead).

``mdmem stats``' notes not used for a while start from those written before a
moment: :func:`iter_written_before` and :func:`count_written_before` compare
times in SQLite, in one query, and hand no row to Python for it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mdmem.errors import InvalidNote, InvalidPath, NoteNotFound
from mdmem.store import _catalog, _catalog_reads
from mdmem.store._scan import _VERSION
from mdmem.store.state import CATALOG, StateDir

if TYPE_CHECKING:
    import sqlite3
    from collections.abc import Callable, Collection, Iterator

    from mdmem.store.store import Store

__all__ = ["Survey", "bind_written", "count_written_before", "iter_written_before"]

_PAGE = 2_000


class Survey:
    """One look at a store: its rejected names, then every note's index line or error.

    ``parsed`` counts the notes read from their file (the rest came from the
    catalog): a settled store is surveyed with none.
    """

    def __init__(self, store: Store) -> None:
        self._store = store
        self._scan = _catalog.Scan(store.path)
        self._con = _read_only(store.path)
        valid = _catalog._ValidNames(self._con) if self._con is not None else ()
        try:
            self._scan.classify(valid)
        except Exception as exc:  # a damaged catalog: every name is checked instead
            if not _catalog.is_damage(exc):
                raise
            self._close()
            self._scan = _catalog.Scan(store.path)
            self._scan.classify()
        self.parsed = 0

    @property
    def total(self) -> int:
        """How many notes (regular files with a note's name) the listing holds."""
        return self._scan.count()

    @property
    def rejected(self) -> dict[str, str]:
        """Entries that look like notes but are not (a symlink, a bad name): name -> why."""
        return self._scan.rejected

    def notes(
        self, progress: Callable[[int, int], None] | None = None
    ) -> Iterator[tuple[str, str | None, str | None]]:
        """(name, index line, error) of every note, sorted by name; exactly one of the two is set
        (both None for a note gone since the listing). ``progress(done, total)`` as it goes."""
        total = self.total
        rows = self._rows()
        row = next(rows, None)
        try:
            for done, (name, st) in enumerate(self._scan.sorted_notes(), 1):
                while row is not None and row[0] < name:
                    row = next(rows, None)
                found: tuple[str | None, str | None] | None = None
                if row is not None and row[0] == name:
                    _, recorded, at, line, error = row
                    row = next(rows, None)
                    # As a refresh trusts a row: the same stat, older than the row's clock.
                    if recorded == st and max(st[0], st[3]) < at and (line or error):
                        found = (line, error)
                if found is None:
                    found = self._parse(name)
                if progress is not None:
                    progress(done, total)
                yield name, found[0], found[1]
        finally:
            self._close()

    def _parse(self, name: str) -> tuple[str | None, str | None]:
        from mdmem.store.note import index_line

        self.parsed += 1
        try:
            return index_line(self._store.read(name)), None
        except InvalidNote as exc:
            return None, exc.reason
        except InvalidPath as exc:  # swapped for a link or a FIFO since the listing
            return None, f"not a note: {exc.reason}"
        except NoteNotFound:
            return None, None

    def _rows(self) -> Iterator[tuple[str, _catalog.Stat | None, int, str | None, str | None]]:
        con = self._con
        if con is None:
            return
        after, first = "", True
        try:
            while True:
                page = con.execute(
                    "SELECT name, mtime, size, ino, ctime, at, line, error FROM notes"
                    f" WHERE {'1' if first else 'name > ?'} ORDER BY name LIMIT ?",
                    (_PAGE,) if first else (after, _PAGE),
                ).fetchall()
                first = False
                for name, mtime, size, ino, ctime, at, line, error in page:
                    st = None if mtime is None else (mtime, size, ino, ctime)
                    yield name, st, at, line, error
                if len(page) < _PAGE:
                    return
                after = page[-1][0]
        except Exception as exc:  # damaged or busy: the rest is read from the files
            if not _catalog.is_damage(exc):
                raise

    def _close(self) -> None:
        if self._con is not None:
            self._con.close()
            self._con = None


def _read_only(root: str) -> sqlite3.Connection | None:
    """The catalog opened read-only (None when there is none, or it cannot be read).

    Looking must change nothing in the state folder. Without a ``-wal`` file the
    database file is the whole catalog, and it is opened ``immutable`` (SQLite then
    takes no lock and creates no ``-wal`` or ``-shm`` file). With one, another
    connection may hold rows there: it is opened read-only and shares the WAL's
    files, which exist already. A row read while a writer moves on may be an older
    one: that is safe, because a row is used only while its recorded stat is the
    note's stat now (an older row with the note's stat describes the same bytes);
    the notes whose row is missing or unproven are parsed.
    """
    import sqlite3
    from pathlib import Path

    path = os.path.join(StateDir.of(root).path, CATALOG)
    if not os.path.isfile(path):
        return None  # and never created here
    mode = "?mode=ro" if os.path.exists(path + "-wal") else "?immutable=1"
    try:
        con = sqlite3.connect(Path(path).as_uri() + mode, uri=True, timeout=1)
        version = con.execute("PRAGMA user_version").fetchone()[0]
    except sqlite3.Error:
        return None
    if version != _VERSION:
        con.close()
        return None  # another mdmem's layout: its rows prove nothing here
    return con


#: Whether a row's note was last written before ``:iso`` / ``:moment``. An ``updated`` that
#: ``note.format_time`` wrote in UTC (``2026-11-29T10:12:00+00:00``, the one spelling mdmem
#: writes) is compared as text, in SQLite; any other row (another offset, no ``updated``)
#: asks ``mdmem_written(name, updated)``, the caller's own reading of it.
_WRITTEN_BEFORE = (
    "line IS NOT NULL AND CASE WHEN length(updated) = 25 AND substr(updated, 20) = '+00:00'"
    " THEN updated < :iso ELSE mdmem_written(name, updated) < :moment END"
)


def bind_written(
    con: sqlite3.Connection, moment: float, written: Callable[[str, str | None], float]
) -> dict[str, object]:
    """The parameters of :data:`_WRITTEN_BEFORE` for ``moment``, its function made on ``con``."""
    import math
    from datetime import datetime, timezone

    def asked(name: str, updated: str | None) -> float:
        try:
            return float(written(str(name), None if updated is None else str(updated)))
        except (OverflowError, ValueError, OSError):
            return 0.0

    con.create_function("mdmem_written", 2, asked)
    # mdmem writes whole seconds: such a time is before ``moment`` exactly when it is
    # before the next whole second, and its text compares as the times do.
    iso = datetime.fromtimestamp(math.ceil(moment), timezone.utc).isoformat()
    return {"iso": iso, "moment": moment}


def iter_written_before(
    root: StateDir, moment: float, written: Callable[[str, str | None], float]
) -> Iterator[str]:
    """The valid notes last written before ``moment`` (a Unix time), sorted by name, from the
    query's cursor. ``written(name, updated)`` says when a note was written where its row's
    ``updated`` is missing or not in UTC (a few rows, if any): the rest is compared in SQLite,
    without a row handed to Python."""
    cat = _catalog_reads._reader(root)
    try:
        con = cat._open()
        params = bind_written(con, moment, written)
        rows = con.execute(f"SELECT name FROM notes WHERE {_WRITTEN_BEFORE} ORDER BY name", params)
        for (name,) in rows:
            yield str(name)
    except Exception as exc:
        if _catalog.is_damage(exc):
            return
        raise
    finally:
        cat.close()


def count_written_before(
    root: StateDir,
    moment: float,
    written: Callable[[str, str | None], float],
    names: Collection[str] | None = None,
) -> int:
    """How many notes :func:`iter_written_before` yields (among ``names`` only, if given):
    one query, counted in SQLite."""
    if names is not None and not names:
        return 0
    cat = _catalog_reads._reader(root)
    try:
        con = cat._open()
        params = bind_written(con, moment, written)
        if names is None:
            return int(
                con.execute(
                    f"SELECT COUNT(*) FROM notes WHERE {_WRITTEN_BEFORE}", params
                ).fetchone()[0]
            )
        wanted, total = sorted(set(names)), 0
        for start in range(0, len(wanted), 500):  # one statement for a block's names
            chunk = {f"n{i}": name for i, name in enumerate(wanted[start : start + 500])}
            marks = ",".join(f":{key}" for key in chunk)
            total += int(
                con.execute(
                    f"SELECT COUNT(*) FROM notes WHERE name IN ({marks}) AND {_WRITTEN_BEFORE}",
                    {**params, **chunk},
                ).fetchone()[0]
            )
        return total
    except Exception as exc:
        if _catalog.is_damage(exc):
            return 0
        raise
    finally:
        cat.close()
