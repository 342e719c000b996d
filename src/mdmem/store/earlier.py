"""The state an earlier clone at a store's path left: found and offered, taken only on request.

A new clone at an old clone's path gets a state folder of its own
(:func:`mdmem.store.paths.state_dir`), so nothing of the old clone's (trash,
waiting turns, history) reaches the new repository by itself. A person who
knows the old clone was this repository may take a deleted note back, one at a
time: :func:`take` moves it from the earlier trash into this store's trash,
from where :meth:`Store.restore <mdmem.store.store.Store.restore>` brings it back.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from mdmem.errors import NoteNotFound, StoreError
from mdmem.store import files
from mdmem.store._txn import TRASH_DIR
from mdmem.store.paths import check_name, earlier_states
from mdmem.store.results import TrashItem

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = ["take", "trash"]


def trash(root: str) -> list[TrashItem]:
    """Deleted notes in the trash of earlier clones at ``root``'s path, newest first."""
    items = []
    for folder in earlier_states(root):
        where = os.path.join(folder, TRASH_DIR)
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for entry in names:
            stamp, sep, name = entry.partition("~")
            if sep:
                items.append(TrashItem(name, stamp, os.path.join(where, entry)))
    return sorted(items, key=lambda item: item.deleted_at, reverse=True)


def take(store: Store, filename: str) -> str:
    """Move the newest deleted ``filename`` of an earlier clone into ``store``'s trash.

    Returns its new path. The note is not in the store yet: ``store.restore(filename)``.

    Raises:
        InvalidPath: not a note name.
        StoreError: ``store`` is a refused project store (``Store.unavailable``).
        NoteNotFound: no earlier clone's trash holds it.
    """
    check_name(filename)
    if store.unavailable is not None:
        raise StoreError(store.path, f"not used as a project store: {store.unavailable}")
    root = store.path
    found = [item for item in trash(root) if item.filename == filename]
    if not found:
        raise NoteNotFound(filename, "the trash of an earlier clone at this path")
    mine = store.state.trash
    files.ensure_dir(mine, private=True)
    target = os.path.join(mine, os.path.basename(found[0].path))
    os.rename(found[0].path, target)  # sibling folders of one state tree: one file system
    return target
