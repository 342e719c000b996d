"""A recalled note (:class:`Hit`), without ``dataclasses``: every cold search returns some.

``dataclasses`` (with ``inspect``, which it imports) costs a cold ``mdmem
search`` or prompt hook more than everything else recall imports, and a hit
needs none of it. So :class:`Hit` is a plain frozen class: equal by value,
hashable, with a dataclass's ``repr``; ``dataclasses.fields``, ``asdict``,
``replace`` and ``is_dataclass`` still work on it (the fields are made, and
``dataclasses`` imported, on first use). :mod:`mdmem.store.results` re-exports it.
"""

from __future__ import annotations

from mdmem._kinds import Level

TYPE_CHECKING = False  # not typing's: this module is on the cold `mdmem search` path
if TYPE_CHECKING:
    from datetime import datetime

__all__ = ["Hit"]

_FIELDS = ("filename", "level", "type", "title", "summary", "score", "updated", "snippet")


class _DataclassFields:
    """``Hit.__dataclass_fields__``, made on first access, so ``dataclasses`` sees a dataclass."""

    def __get__(self, obj: object, owner: type) -> dict[str, object]:
        import dataclasses

        twin = dataclasses.make_dataclass(
            "Hit",
            [
                ("filename", str),
                ("level", Level),
                ("type", str),
                ("title", str),
                ("summary", str),
                ("score", float),
                ("updated", "datetime | None", dataclasses.field(default=None)),
                ("snippet", str, dataclasses.field(default="")),
            ],
            frozen=True,
        )
        fields: dict[str, object] = getattr(twin, "__dataclass_fields__")  # noqa: B009
        type.__setattr__(owner, "__dataclass_fields__", fields)
        type.__setattr__(owner, "__dataclass_params__", getattr(twin, "__dataclass_params__"))  # noqa: B009
        return fields


class Hit:
    """One recalled note: which note, how well it matched, and a piece of it to show.

    ``score`` only orders hits of one search (higher is better); it is not a
    probability and not comparable across queries. Immutable.
    """

    # ``updated`` is a property over ``_updated`` (the datetime, None until made) and ``_at``
    # (its seconds since the epoch, when the hit was made from them): see :meth:`dated`.
    __slots__ = (*(f for f in _FIELDS if f != "updated"), "_at", "_updated")
    __match_args__ = (
        "filename",
        "level",
        "type",
        "title",
        "summary",
        "score",
        "updated",
        "snippet",
    )
    __dataclass_fields__ = _DataclassFields()

    filename: str
    level: Level
    type: str
    title: str
    summary: str
    score: float
    snippet: str
    _updated: datetime | None
    _at: float | None

    def __init__(
        self,
        filename: str,
        level: Level,
        type: str,
        title: str,
        summary: str,
        score: float,
        updated: datetime | None = None,
        snippet: str = "",
    ) -> None:
        values = (filename, level, type, title, summary, score, updated, snippet)
        for name, value in zip(_FIELDS, values, strict=True):
            object.__setattr__(self, "_updated" if name == "updated" else name, value)
        object.__setattr__(self, "_at", None)

    @classmethod
    def dated(
        cls,
        filename: str,
        level: Level,
        type: str,
        title: str,
        summary: str,
        score: float,
        updated_at: float | None,
        snippet: str = "",
    ) -> Hit:
        """A hit whose ``updated`` is given as seconds since the epoch (UTC): the
        ``datetime`` is made, and its module imported, only when asked for (a prompt's
        hook shows :attr:`updated_date` and needs none)."""
        hit = cls(filename, level, type, title, summary, score, None, snippet)
        if updated_at is not None:
            object.__setattr__(hit, "_at", float(updated_at))
        return hit

    @property
    def updated(self) -> datetime | None:
        """When the note was last updated (None: not known)."""
        if self._updated is None and self._at is not None:
            from datetime import datetime, timezone

            object.__setattr__(self, "_updated", datetime.fromtimestamp(self._at, timezone.utc))
        return self._updated

    @property
    def updated_date(self) -> str | None:
        """``updated``'s date as ``YYYY-MM-DD`` (None: not known)."""
        if self._updated is None and self._at is not None:
            from mdmem._dates import iso_date

            return iso_date(self._at)
        return self._updated.date().isoformat() if self._updated is not None else None

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r}")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, Hit)
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={getattr(self, name)!r}" for name in _FIELDS)
        return f"Hit({inner})"

    def __reduce__(self) -> tuple[object, tuple[object, ...]]:
        return (Hit, self._values())
