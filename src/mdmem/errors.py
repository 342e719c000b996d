"""The one error tree of mdmem.

Every error mdmem raises on purpose derives from :class:`MdmemError`; each leaf
also derives from the built-in exception that matches its meaning, so callers
may catch either::

    MdmemError
    ├── InvalidPath          (ValueError)   a note name that is not a bare *.md name in the store
    ├── InvalidNote          (ValueError)   a note file that cannot be read as a note
    ├── InvalidOperation     (ValueError)   an operation that fails validation
    ├── InvalidSettings      (ValueError)   an agent's settings file mdmem cannot safely edit
    ├── NoteNotFound         (KeyError)     no note of that name in the store
    ├── NoteExists           (FileExistsError) a note of that name is already there
    ├── LockTimeout          (TimeoutError) a store's lock could not be had in time
    ├── StoreError           (OSError)      the store's files could not be read or written
    └── ProviderError        (RuntimeError) the model provider failed or answered garbage

Third-party errors (yaml, filelock, anthropic) are translated into these where
the library is called; nothing else catches them.
"""

from __future__ import annotations

__all__ = [
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
]


class MdmemError(Exception):
    """Base class of every error mdmem raises on purpose."""


class InvalidPath(MdmemError, ValueError):
    """A note name is not a bare ``*.md`` name inside the store."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(name, reason)
        self.name = name
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid note name {self.name!r}: {self.reason}"


class InvalidNote(MdmemError, ValueError):
    """A note file cannot be read as a note (bad YAML, missing field, not UTF-8, too large)."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class InvalidOperation(MdmemError, ValueError):
    """An operation fails validation; ``field`` names the offending field, if any."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason, field)
        self.reason = reason
        self.field = field

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}" if self.field else self.reason


class InvalidSettings(MdmemError, ValueError):
    """An agent's settings file (Claude Code's ``settings.json``) that mdmem cannot safely edit."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class NoteNotFound(MdmemError, KeyError):
    """No note of that name exists in the store."""

    def __init__(self, name: str, store: str) -> None:
        super().__init__(name, store)
        self.name = name
        self.store = store

    def __str__(self) -> str:
        return f"no note {self.name!r} in {self.store}"


class NoteExists(MdmemError, FileExistsError):
    """A note of that name already exists, and mdmem never overwrites one silently."""

    def __init__(self, name: str, store: str) -> None:
        super().__init__(name, store)
        self.name = name
        self.store = store

    def __str__(self) -> str:
        return f"note {self.name!r} already exists in {self.store}"


class LockTimeout(MdmemError, TimeoutError):
    """The store's lock is held by someone else and could not be had in time."""

    def __init__(self, store: str, timeout: float) -> None:
        super().__init__(store, timeout)
        self.store = store
        self.timeout = timeout

    def __str__(self) -> str:
        return (
            f"the memory store {self.store} is locked by another process "
            f"(waited {self.timeout:g} s); try again, or run `mdmem doctor`"
        )


class StoreError(MdmemError, OSError):
    """The store's files could not be read or written."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(path, reason)
        self.path = path
        self.reason = reason

    def __str__(self) -> str:
        return f"{self.path}: {self.reason}"


class ProviderError(MdmemError, RuntimeError):
    """The model provider failed, or its answer could not be understood.

    ``raw`` keeps the provider's raw answer, when there was one, for a person
    to look at.
    """

    def __init__(self, reason: str, raw: str | None = None, *, retryable: bool = True) -> None:
        super().__init__(reason, raw)
        self.reason = reason
        self.raw = raw
        self.retryable = retryable

    def __str__(self) -> str:
        return self.reason
