"""The catalog's face for the floors above ``store/``: what they may use of it.

The catalog itself (``store/_catalog.py``: the SQLite rows of every note, the
settled fingerprint, the change log; ``store/_catalog_reads.py``: its one-query
readers) is private to ``store/``; the search index
(``recall/``), ``mdmem stats`` and ``mdmem prune`` read a store's listing and
fingerprint through these names, and ``mdmem doctor`` checks and resets the
catalog (:func:`reset`, the one write), as httpx's ``__init__`` hands on its
private modules' names.
"""

from __future__ import annotations

from mdmem.store import _catalog
from mdmem.store._catalog import (
    CatalogRow,
    Fingerprint,
    Scan,
    Stat,
    content_hash,
    fs_now,
    key_of,
    read_fingerprint,
    store_key,
)
from mdmem.store._catalog_check import check
from mdmem.store._catalog_reads import iter_listing, load, present, type_counts

__all__ = [
    "CatalogRow",
    "Fingerprint",
    "Scan",
    "Stat",
    "check",
    "content_hash",
    "fs_now",
    "iter_listing",
    "key_of",
    "load",
    "present",
    "read_fingerprint",
    "reset",
    "store_key",
    "type_counts",
]


def reset(root: str, *, private: bool) -> None:
    """Throw the catalog of the store at ``root`` away; the next read rebuilds it from the notes."""
    cat = _catalog.Catalog(root, private=private)
    try:
        cat.reset()
    finally:
        cat.close()
