"""What store operations report back: frozen records, loaded only when an operation runs.

Kept out of ``store.py`` because defining dataclasses costs milliseconds at
import, and ``mdmem index`` (run at every agent session start) needs none. The
records of a reindex and of the trash (:class:`Problem`, :class:`ReindexReport`,
:class:`TrashItem`) are defined in ``store/_reports.py`` and loaded from here on
first use: a write needs none of them, and each frozen dataclass costs ~0.6 ms
to define (a sixth of `mdmem add`'s own imports were these records).
"""

from __future__ import annotations

from mdmem._kinds import Level
from mdmem._record import record
from mdmem.store.hit import Hit  # re-exported: no dataclass, see mdmem.store.hit

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from mdmem.store._reports import Problem, ReindexReport, TrashItem

__all__ = ["Applied", "ApplyResult", "Hit", "Problem", "ReindexReport", "Rejected", "TrashItem"]


@record
class Applied:
    """One operation that took effect: ``action`` is create, update, delete or unchanged."""

    action: str
    filename: str
    level: Level
    detail: str = ""
    """Why, when it is not plain: e.g. a create found to repeat an existing note."""


@record
class Rejected:
    """One operation that was dropped, and why."""

    operation: object
    reason: str


@record
class ApplyResult:
    """What :meth:`Store.apply` did."""

    applied: tuple[Applied, ...] = ()
    rejected: tuple[Rejected, ...] = ()

    @property
    def changed(self) -> bool:
        """Whether any note was written or deleted."""
        return any(a.action != "unchanged" for a in self.applied)


_REPORTS = frozenset({"Problem", "ReindexReport", "TrashItem"})


def __getattr__(name: str) -> object:
    # The records a write never makes, defined on first use (see the module's docstring).
    if name in _REPORTS:
        from mdmem.store import _reports

        return getattr(_reports, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
