"""The records of a reindex and of the trash; :mod:`mdmem.store.results` hands them out.

Apart from ``results.py`` only because a write makes none of them, and defining
a frozen dataclass costs ~0.6 ms: ``from mdmem.store.results import Problem``
loads this module on first use.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Problem", "ReindexReport", "TrashItem"]


@dataclass(frozen=True)
class Problem:
    """A file that looks like a note but cannot be read as one; it is left untouched."""

    filename: str
    reason: str


@dataclass(frozen=True)
class ReindexReport:
    """What :meth:`Store.reindex` found."""

    notes: int
    problems: tuple[Problem, ...]
    changed: bool


@dataclass(frozen=True)
class TrashItem:
    """A deleted note, kept in the trash (in the store's state) until restored or emptied."""

    filename: str
    deleted_at: str
    path: str
