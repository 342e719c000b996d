"""mdmem: long-term memory for coding agents, kept as plain Markdown notes.

The public API is the names in ``__all__``; they are loaded on first use, so
``import mdmem`` costs almost nothing and ``mdmem index`` starts fast.
"""

from __future__ import annotations

try:  # mdmem's locks are fcntl's: say so in one line where there is none (Windows)
    import fcntl as _fcntl  # noqa: F401
except ImportError:
    raise ImportError(
        "mdmem runs on POSIX systems only (Linux, macOS, WSL): this Python has no fcntl module"
    ) from None

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from mdmem._kinds import Level, NoteType
    from mdmem.errors import (
        InvalidNote,
        InvalidOperation,
        InvalidPath,
        InvalidSettings,
        LockTimeout,
        MdmemError,
        NoteExists,
        NoteNotFound,
        ProviderError,
        StoreError,
    )
    from mdmem.manager.manager import Manager
    from mdmem.store.note import IndexEntry, Note
    from mdmem.store.operations import Operation
    from mdmem.store.results import Applied, ApplyResult, Hit, Problem, ReindexReport, Rejected
    from mdmem.store.store import Store

__version__ = "0.1.0"

__all__ = [
    "Applied",
    "ApplyResult",
    "Hit",
    "IndexEntry",
    "InvalidNote",
    "InvalidOperation",
    "InvalidPath",
    "InvalidSettings",
    "Level",
    "LockTimeout",
    "Manager",
    "MdmemError",
    "Note",
    "NoteExists",
    "NoteNotFound",
    "NoteType",
    "Operation",
    "Problem",
    "ProviderError",
    "ReindexReport",
    "Rejected",
    "Store",
    "StoreError",
    "__version__",
]

_HOMES = {
    "Level": "mdmem._kinds",
    "NoteType": "mdmem._kinds",
    "Manager": "mdmem.manager.manager",
    "IndexEntry": "mdmem.store.note",
    "Note": "mdmem.store.note",
    "Operation": "mdmem.store.operations",
    "Applied": "mdmem.store.results",
    "ApplyResult": "mdmem.store.results",
    "Hit": "mdmem.store.results",
    "Problem": "mdmem.store.results",
    "ReindexReport": "mdmem.store.results",
    "Rejected": "mdmem.store.results",
    "Store": "mdmem.store.store",
    **{
        name: "mdmem.errors"
        for name in (
            "InvalidNote",
            "InvalidOperation",
            "InvalidPath",
            "InvalidSettings",
            "LockTimeout",
            "MdmemError",
            "NoteExists",
            "NoteNotFound",
            "ProviderError",
            "StoreError",
        )
    },
}


def __getattr__(name: str) -> object:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'mdmem' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(home), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
