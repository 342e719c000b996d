"""The catalog's face for the floors above ``store/``: what they may read of it.

The catalog itself (``store/_catalog.py``: the SQLite rows of every note, the
settled fingerprint, the change log) is private to ``store/``; the search index
(``recall/``), ``mdmem stats`` and ``mdmem prune`` read a store's listing and
fingerprint through these names, as httpx's ``__init__`` hands on its
private modules' names. Nothing here writes.
"""

from __future__ import annotations

from mdmem.store._catalog import (
    Entry,
    Fingerprint,
    Scan,
    Stat,
    content_hash,
    fs_now,
    key_of,
    load,
    read_fingerprint,
)

__all__ = [
    "Entry",
    "Fingerprint",
    "Scan",
    "Stat",
    "content_hash",
    "fs_now",
    "key_of",
    "load",
    "read_fingerprint",
]
