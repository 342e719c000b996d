"""The catalog read by one query: the functions the block, the marks, the staleness check
and the passes over a whole store call with a store's state (``store.state``) or root.

Each reads what the last stat pass or write left in ``catalog.sqlite``
(:mod:`mdmem.store._catalog`); none brings it up to date first (the caller does, through
the store). A damaged catalog answers nothing rather than failing: it is rebuilt by the
next write. One-query readers share a connection per thread and store (:func:`_reading`);
those that yield rows as they go have their own (:func:`_reader`).
"""

from __future__ import annotations

import contextlib
import os
from _thread import _local

from mdmem.store._catalog import Catalog, is_damage
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from typing import Any

    from mdmem.store._row import CatalogRow

__all__ = [
    "dates_of",
    "iter_listing",
    "listing",
    "load",
    "present",
    "ranked_lines",
    "type_counts",
    "updated_times",
]


def _reader(root: str | StateDir) -> Catalog:
    """A catalog to read, for the functions below: ``root`` is the store's state
    (``store.state``, which knows where its folder is) or its root. Its own connection,
    for a reader that yields rows as it goes: close it."""
    state = StateDir.of(root)
    return Catalog(state.root, private=True, state=state)


#: Per thread, the catalogs :func:`_reading` keeps open: (pid, {path: (catalog, stat)}).
_SHARED = _local()
_SHARED_MAX = 4


@contextlib.contextmanager
def _reading(root: str | StateDir) -> Iterator[Catalog]:
    """A catalog for one query that reads its rows whole, kept open for this thread's next.

    Opening one (a connection, its schema read, a mode check) is ~0.4 ms, and a turn
    asks four to six times. It is opened again once the file is another or has changed
    on disk (inode and ctime: a checkpoint, a rebuild, a catalog thrown away and made
    again on a reused inode), after an error, in a forked child, and for the
    :data:`_SHARED_MAX` stores used least recently. Never for a generator: a cursor
    left open keeps its connection's snapshot, which a shared one would read.
    """
    state = StateDir.of(root)
    path = state.catalog
    pid, readers = getattr(_SHARED, "readers", (None, None))
    if pid != os.getpid() or readers is None:
        readers = {}
        _SHARED.readers = (os.getpid(), readers)
    kept = readers.pop(path, None)
    if kept is not None and kept[1] != _file_id(path):
        kept[0].close()
        kept = None
    if kept is None:
        cat = Catalog(state.root, private=True, state=state)
        try:
            cat._open()
        except BaseException:
            cat.close()
            raise
        kept = (cat, _file_id(path))
    try:
        yield kept[0]
    except BaseException:
        kept[0].close()
        raise
    readers[path] = kept  # the most recently used last
    while len(readers) > _SHARED_MAX:
        readers.pop(next(iter(readers)))[0].close()


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


def load(root: str | StateDir) -> tuple[dict[str, CatalogRow], int]:
    """Every row of the catalog by note name, and 0: for passes over the whole store.

    Call ``Store.entries()`` (or another read) first to bring it up to date.
    """
    try:
        with _reading(root) as cat:
            return dict(cat.rows(where="1")), 0
    except Exception as exc:
        if is_damage(exc):
            return {}, 0
        raise


def _query(root: str | StateDir, sql: str) -> list[tuple[Any, ...]]:
    """Every row of one read-only query of the catalog; none when the catalog is damaged."""
    try:
        with _reading(root) as cat:
            return cat._open().execute(sql).fetchall()
    except Exception as exc:
        if is_damage(exc):
            return []
        raise


def updated_times(root: str | StateDir) -> dict[str, str]:
    """Each valid note's ``updated`` time, by name: one query, no entry decoded."""
    rows = _query(
        root, "SELECT name, updated FROM notes WHERE line IS NOT NULL AND updated IS NOT NULL"
    )
    return {str(name): str(when) for name, when in rows}


#: The prompt block's order (see mdmem.store.block): behaviour rules, then project
#: knowledge, then references, newest first, then by name.
_RANK = (
    "CASE type WHEN 'correction_feedback' THEN 0 WHEN 'user_preference' THEN 0 "
    "WHEN 'project_knowledge' THEN 1 WHEN 'reference_material' THEN 2 ELSE 3 END, "
    "COALESCE(updated, '') DESC, name"
)


def ranked_lines(
    root: str | StateDir,
    limit: int,
    hidden: Collection[str] = (),
    *,
    count: int | None = None,
    verify: bool = False,
) -> tuple[int, list[tuple[str, str, str | None]]] | None:
    """How many notes not in ``hidden`` have an index line, and the first ``limit`` of
    those in the prompt block's order.

    ``(name, line, updated)`` each; one query on the ``notes_rank`` index, which
    reads only those rows, instead of ranking every line in Python. ``count``:
    how many notes have an index line, when the caller knows (counting them is a
    pass over every row). None when the catalog cannot answer (the caller ranks),
    and, with ``verify``, when a note of those lines is not as its row records it
    (one ``stat`` each: a note edited in place since the last stat pass; the
    caller does that pass rather than show a line that is no longer true).
    """
    try:
        with _reading(root) as cat:
            con = cat._open()
            if count is None:
                (count,) = con.execute(
                    "SELECT COUNT(*) FROM notes WHERE line IS NOT NULL"
                ).fetchone()
            shown_hidden = len(cat.present(hidden))
            rows = con.execute(
                "SELECT name, line, updated, mtime, size, ino, ctime FROM notes"
                f" WHERE line IS NOT NULL ORDER BY {_RANK} LIMIT ?",
                (limit + len(hidden),),
            ).fetchall()
            rows = [row for row in rows if row[0] not in hidden][:limit]
            folder = root.root if isinstance(root, StateDir) else root
            prefix = folder.rstrip(os.sep) + os.sep  # os.path.join's work, once
            if verify and not all(_as_recorded(prefix + row[0], row[3:7]) for row in rows):
                return None
            kept = [(str(n), str(line), str(u) if u else None) for n, line, u, *_ in rows]
            return int(count or 0) - shown_hidden, kept
    except Exception as exc:
        if is_damage(exc):
            return None
        raise


def _as_recorded(path: str, recorded: tuple[object, ...]) -> bool:
    """Whether a note's stat is the one its row records (as the block cache checks a
    shown note: an edit in the clock tick of mdmem's own write, on a kernel before Linux
    6.13, is the one that can hide, see docs/concepts/index.md)."""
    try:
        st = os.stat(path)  # followed, as the listing does
    except OSError:
        return False
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns) == recorded


def dates_of(
    root: str | StateDir, names: Collection[str]
) -> dict[str, tuple[str | None, str | None]]:
    """``(updated, expires)`` of the named notes that have an index line."""
    if not names:
        return {}
    import json

    out: dict[str, tuple[str | None, str | None]] = {}
    wanted = sorted(set(names))
    try:
        with _reading(root) as cat:
            con = cat._open()
            for start in range(0, len(wanted), 500):  # one statement for a block's names
                chunk = wanted[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = con.execute(
                    f"SELECT name, updated, extra FROM notes WHERE name IN ({marks})"
                    " AND line IS NOT NULL",
                    chunk,
                )
                for name, updated, extra in rows:
                    expires = None
                    if extra:
                        with contextlib.suppress(ValueError, TypeError, AttributeError):
                            value = json.loads(str(extra)).get("expires")
                            expires = str(value) if value else None
                    out[str(name)] = (str(updated) if updated else None, expires)
            return out
    except Exception as exc:
        if is_damage(exc):
            return {}
        raise


def listing(root: str | StateDir) -> list[tuple[str, str | None, str]]:
    """(name, ``updated``, content hash) of every valid note, sorted by name: one query.

    For passes over the whole store that need no more of each entry (a row
    decoded whole costs ten times the memory at 100,000 notes).
    """
    return list(iter_listing(root))


def iter_listing(root: str | StateDir) -> Iterator[tuple[str, str | None, str]]:
    """:func:`listing`, a row at a time (the query's cursor, never the whole result held)."""
    cat = _reader(root)
    try:
        rows = cat._open().execute(
            "SELECT name, updated, coalesce(sha, '') FROM notes"
            " WHERE line IS NOT NULL ORDER BY name"
        )
        for name, when, sha in rows:
            yield str(name), None if when is None else str(when), str(sha)
    except Exception as exc:
        if is_damage(exc):
            return
        raise
    finally:
        cat.close()


def type_counts(root: str | StateDir) -> dict[str, int]:
    """How many valid notes (those with an index line) there are of each type: one query."""
    rows = _query(root, "SELECT type, COUNT(*) FROM notes WHERE line IS NOT NULL GROUP BY type")
    return {str(kind): int(n) for kind, n in rows}


def present(root: str | StateDir, names: Collection[str]) -> set[str]:
    """Which of ``names`` are valid notes (an indexed look-up each, not a pass)."""
    if not names:
        return set()
    try:
        with _reading(root) as cat:
            return cat.present(names)
    except Exception as exc:
        if is_damage(exc):
            return set()
        raise
