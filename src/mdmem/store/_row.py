"""A note's row in the catalog (:class:`CatalogRow`), and how it maps onto SQLite's columns.

The catalog (``_catalog``) stores one row per note in the ``notes`` table;
:data:`COLUMNS` are the columns a row is read from, in order, and
:func:`from_columns` / :func:`to_columns` turn a result row into a
:class:`CatalogRow` and back. What hides a note from the block (``supersedes``,
``expires``) is kept as JSON in ``extra``: most rows have none.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from typing import Any

    from mdmem.store._scan import Stat

__all__ = ["COLUMNS", "CatalogRow", "from_columns", "to_columns"]

#: The columns of a row, as read (``name`` first), in :func:`from_columns`' order.
COLUMNS = (
    "name, mtime, size, ino, ctime, at, sha, line, type, title, summary, updated, error, extra,"
    " nums"
)


class CatalogRow(
    tuple[
        "Stat | None",
        int,
        "str | None",
        "str | None",
        "str | None",
        "str | None",
        "str | None",
        "str | None",
        "str | None",
        "tuple[str, ...]",
        "str | None",
        "float | None",
        "str | None",
    ]
):
    """A note's row in the catalog: immutable, compared by value.

    ``st``: the note's stat when it was read (None for a name rejected before a
    stat); ``at``: the file-system time taken before its bytes were read (the
    racy-stat rule, see the module docstring); ``sha``: its content hash;
    ``line``: its MEMORY.md line (None: not a valid note, then ``error`` says
    why); ``type``, ``title``, ``summary``, ``updated``: its fields; and what
    hides it from the block: the notes it ``supersedes``, when it ``expires``
    (and ``expires_ts``, that moment in epoch seconds); ``nums``: the numbers it
    names (``dedupe.number_key``), which group its dedupe keys.

    A NamedTuple written out: ``typing`` costs ~6 ms to import on the
    ``mdmem index`` path, and a tuple is built per row at the cost of one.
    """

    __slots__ = ()

    def __new__(
        cls,
        st: Stat | None = None,
        at: int = 0,
        sha: str | None = None,
        line: str | None = None,
        type: str | None = None,
        title: str | None = None,
        summary: str | None = None,
        updated: str | None = None,
        error: str | None = None,
        supersedes: tuple[str, ...] = (),
        expires: str | None = None,
        expires_ts: float | None = None,
        nums: str | None = None,
    ) -> CatalogRow:
        fields = (st, at, sha, line, type, title, summary, updated, error)
        return tuple.__new__(cls, (*fields, supersedes, expires, expires_ts, nums))

    @property
    def st(self) -> Stat | None:
        return self[0]

    @property
    def at(self) -> int:
        return self[1]

    @property
    def sha(self) -> str | None:
        return self[2]

    @property
    def line(self) -> str | None:
        return self[3]

    @property
    def type(self) -> str | None:
        return self[4]

    @property
    def title(self) -> str | None:
        return self[5]

    @property
    def summary(self) -> str | None:
        return self[6]

    @property
    def updated(self) -> str | None:
        return self[7]

    @property
    def error(self) -> str | None:
        return self[8]

    @property
    def supersedes(self) -> tuple[str, ...]:
        return self[9]

    @property
    def expires(self) -> str | None:
        return self[10]

    @property
    def expires_ts(self) -> float | None:
        return self[11]

    @property
    def nums(self) -> str | None:
        return self[12]

    def stamped(self, at: int) -> CatalogRow:
        """This row, read at ``at``."""
        return tuple.__new__(CatalogRow, (self[0], at, *self[2:]))

    def with_stat(self, st: Stat) -> CatalogRow:
        """This row, for the same bytes seen with another stat."""
        return tuple.__new__(CatalogRow, (st, *self[1:]))

    def __repr__(self) -> str:
        shown = ", ".join(f"{n}={v!r}" for n, v in zip(_ROW_FIELDS, self, strict=True))
        return f"CatalogRow({shown})"


_ROW_FIELDS = (
    *("st", "at", "sha", "line", "type", "title", "summary", "updated", "error"),
    *("supersedes", "expires", "expires_ts", "nums"),
)


def from_columns(row: tuple[Any, ...]) -> CatalogRow:
    """The row SQLite gave for :data:`COLUMNS`, as a :class:`CatalogRow`."""
    st = None if row[1] is None else (row[1], row[2], row[3], row[4])
    supersedes: tuple[str, ...] = ()
    expires = expires_ts = None
    if row[13]:
        import json

        # What hides the note (supersedes, expires), as JSON: most rows have none.
        marks = json.loads(str(row[13]))
        names = marks.get("supersedes")
        if isinstance(names, list):
            supersedes = tuple(n for n in names if isinstance(n, str))
        if isinstance(marks.get("expires"), str):
            expires = marks["expires"]
        if isinstance(marks.get("expires_ts"), (int, float)):
            expires_ts = float(marks["expires_ts"])
    return tuple.__new__(CatalogRow, (st, *row[5:13], supersedes, expires, expires_ts, row[14]))


def to_columns(name: str, row: CatalogRow) -> tuple[object, ...]:
    """The values of the ``folded`` column, then :data:`COLUMNS`, for ``row`` of note ``name``."""
    marks: dict[str, object] = {}
    if row.supersedes:
        marks["supersedes"] = list(row.supersedes)
    if row.expires is not None:
        marks["expires"] = row.expires
    if row.expires_ts is not None:
        marks["expires_ts"] = row.expires_ts
    extra = None
    if marks:
        import json

        extra = json.dumps(marks, ensure_ascii=False, sort_keys=True)
    return (
        name.casefold(),
        name,
        *(row.st or (None, None, None, None)),
        row.at,
        *row[2:9],
        extra,
        row.nums,
    )
