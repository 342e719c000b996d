"""What recall reads of a store: a protocol, so that ``recall/`` never imports the store class.

``mdmem.store.store.Store`` is one (mypy checks it wherever a store is passed
in). The store's ``search`` calls up into :mod:`mdmem.recall.engine`; were the
recall modules to import the store class back, even only for typing, the two
floors would make a circle.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from contextlib import AbstractContextManager

    from mdmem._kinds import Level
    from mdmem.store.catalog import Scan
    from mdmem.store.note import Note
    from mdmem.store.state import StateDir

__all__ = ["StoreView"]


class StoreView(Protocol):
    """The parts of a store that the search index, the ranking and the embedder use."""

    level: Level
    private: bool
    state: StateDir

    @property
    def path(self) -> str:
        """The store's directory."""
        ...

    def lock(self, timeout: float | None = None) -> AbstractContextManager[object]:
        """Hold the store's write lock."""
        ...

    def read(self, filename: str) -> Note:
        """The note ``filename``, parsed."""
        ...

    def read_text(self, filename: str) -> str:
        """The note's text, as on disk."""
        ...

    def log_position(self) -> tuple[str, int] | None:
        """Where the catalog's change log stands."""
        ...

    def changes_since(
        self, position: tuple[str, int], key: str
    ) -> tuple[tuple[str, int], str, set[str]] | None:
        """The notes changed since ``position``, or None when the log cannot tell."""
        ...

    def entry_versions(self, *, scan: Scan | None = None) -> dict[str, str]:
        """Every note's name -> its content hash."""
        ...

    def iter_versions(self, *, scan: Scan | None = None) -> Iterator[tuple[str, str]]:
        """(name, content hash) of every note, streamed."""
        ...

    def versions_of(self, names: Collection[str]) -> dict[str, str]:
        """The content hashes of ``names``."""
        ...
