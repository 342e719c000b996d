"""What store operations report back: frozen records, loaded only when an operation runs.

Kept out of ``store.py`` because defining dataclasses costs milliseconds at
import, and ``mdmem index`` (run at every agent session start) needs none.
"""

from __future__ import annotations

from dataclasses import dataclass

from mdmem._kinds import Level
from mdmem.store.hit import Hit  # re-exported: no dataclass, see mdmem.store.hit

__all__ = ["Applied", "ApplyResult", "Hit", "Problem", "ReindexReport", "Rejected", "TrashItem"]


@dataclass(frozen=True)
class Applied:
    """One operation that took effect: ``action`` is create, update, delete or unchanged."""

    action: str
    filename: str
    level: Level
    detail: str = ""
    """Why, when it is not plain: e.g. a create found to repeat an existing note."""


@dataclass(frozen=True)
class Rejected:
    """One operation that was dropped, and why."""

    operation: object
    reason: str


@dataclass(frozen=True)
class ApplyResult:
    """What :meth:`Store.apply` did."""

    applied: tuple[Applied, ...] = ()
    rejected: tuple[Rejected, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether any note was written or deleted."""
        return any(a.action != "unchanged" for a in self.applied)


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
