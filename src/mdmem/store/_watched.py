"""A store's rows checked against what the user's watcher (``store/watcher.py``) names.

``Coherence.catalog_current`` asks the watcher which notes changed since the rows were
last found in step with the files (:func:`since`), compares those alone with their rows
(:func:`differing`), and records when they are in step again (:func:`step`), so that a
reader of a large store never lists it to see an edit made behind mdmem's back.
"""

from __future__ import annotations

import os

from mdmem.store import _catalog, files
from mdmem.store import watcher as _watcher
from mdmem.store.paths import INDEX_NAME

#: A COMPLETE answer naming more notes than this, each with the row its file says, moves
#: ``meta watched`` on (:func:`steps`): else every write until the next stat pass (up to
#: ten minutes) would add its names to every later answer, and an ``lstat`` each.
STEP_NAMES = 32


def since(cat: _catalog.Catalog, settled: str, at: float) -> int:
    """Since when (ns) the watcher is asked: the last stat pass's listing (``at``), or
    the last time the rows were found in step after it (``meta watched``)."""
    point = int(at * 1e9)
    stepped = (cat.meta("watched") or "").split(" ", 1)
    if len(stepped) == 2 and stepped[1] == settled and stepped[0].isdigit():
        point = max(point, int(stepped[0]))
    return point


def differing(
    root: str, cat: _catalog.Catalog, told: _watcher.Answer, index_stat: _catalog.Stat
) -> list[str] | None:
    """The notes ``told`` names whose files are not as their rows say; None when MEMORY.md
    is not the file the catalog records (``index_stat``: edited by hand)."""
    from mdmem.store import _memory_md

    differ = []
    rows_of = cat.get_many([name for name in told.names if name != INDEX_NAME])
    for name in told.names:
        if name == INDEX_NAME:
            if _memory_md.index_stat(root) != index_stat:
                return None
            continue
        row = rows_of.get(name)
        path = os.path.join(root, name)
        st = followed(path)
        proven = False
        if row is not None and row.st == st:
            # The pass's rule: the recorded stat, older than the row, proves the bytes;
            # too new for that (a note mdmem just wrote), the bytes do, the row kept.
            proven = st is None or max(st[0], st[3]) < row.at or holds(path, row.sha)
        if not proven and (row is not None or st is not None):
            differ.append(name)
    return differ


def steps(told: _watcher.Answer, point: int) -> bool:
    """Whether rows found in step with ``told`` (asked since ``point``) are worth recording
    so (:func:`step`): an IN_PLACE answer, so that the next counts from after the watch
    began (a COMPLETE one then costs a rename its names, not a pass); or one that names
    many notes, at most once per margin (an answer names what changed within it anyway)."""
    many = len(told.names) > STEP_NAMES and told.now - point > _watcher.MARGIN_NS
    return told.kind == _watcher.IN_PLACE or many


def step(cat: _catalog.Catalog, now: int, settled: str) -> None:
    """Record that the rows are in step with the notes at the watcher's ``now``
    (``meta watched``); a no-op when the catalog is busy. Derived state: no fsync."""
    try:
        if cat.begin(0):
            try:
                cat.set_meta("watched", f"{now} {settled}")
                cat.commit()
            except BaseException:
                cat.rollback()
                raise
    except _catalog.CatalogError:
        pass


def holds(path: str, sha: str | None) -> bool:
    """Whether the note at ``path`` (a regular file) holds the bytes of content hash ``sha``."""
    from mdmem.store.quicknote import MAX_NOTE_BYTES

    if not sha:
        return False
    try:
        return _catalog.content_hash(files.read_bytes(path, MAX_NOTE_BYTES)) == sha
    except (OSError, ValueError):
        return False


def followed(path: str) -> _catalog.Stat | None:
    """A note's stat as the listing records it (a link's target's); None when it is gone."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
