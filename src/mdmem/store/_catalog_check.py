"""The catalog file's read-only check, for ``mdmem doctor`` (``catalog.check``).

Every other command repairs a damaged catalog by rebuilding it from the notes;
doctor must see the damage first, without changing anything.
"""

from __future__ import annotations

import os

from mdmem.store._catalog import is_busy
from mdmem.store.state import CATALOG, StateDir

__all__ = ["check"]


def check(root: str) -> str | None:
    """What is wrong with the store's catalog file (None: nothing, or there is none yet).

    Read-only (a damaged catalog is reported, not repaired, by the caller): for
    ``mdmem doctor``, which must see the damage every other command repairs.
    """
    import sqlite3

    path = os.path.join(StateDir.of(root).path, CATALOG)
    if not os.path.isfile(path):
        return None
    from pathlib import Path

    # Without a WAL the file is the whole catalog: opened immutable, SQLite creates no
    # -wal or -shm file (a look changes nothing). With one, a reader shares its -shm.
    live = os.path.exists(path + "-wal")
    if not live and (short := _cut_short(path)) is not None:
        return short
    try:
        con = sqlite3.connect(
            Path(path).as_uri() + ("?mode=ro" if live else "?immutable=1"), uri=True, timeout=1
        )
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = con.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error as exc:
        return None if is_busy(exc) else str(exc)
    finally:
        con.close()
    return None if rows == [("ok",)] else str(rows[0][0])


def _cut_short(path: str) -> str | None:
    """Why a catalog file without a WAL is shorter than its header says (None: it is not).

    Opened immutable, SQLite takes the file's size as it finds it; a file cut short
    can then pass ``quick_check``, which a normal open would have refused.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        return exc.strerror or str(exc)
    if not head:
        return None  # SQLite takes an empty file for an empty database
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        return "file is not a database"
    page = int.from_bytes(head[16:18], "big")
    page = 65_536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is valid while its two change counters agree.
    if pages and head[24:28] == head[92:96] and pages * page > size:
        return f"the file is cut short ({size} bytes of {pages * page})"
    return None
