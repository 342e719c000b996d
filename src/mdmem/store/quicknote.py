"""A note as mdmem writes it, read without YAML: for a reader in a hurry (the prompt hook).

The per-prompt hook re-indexes the notes written since the last prompt (a
turn's worker wrote them); parsing one the full way (:func:`mdmem.store.note.parse`)
imports PyYAML, python-frontmatter and the dataclasses behind ``Note``, about
20 ms, more than the rest of the hook. A note mdmem wrote has a front matter of
plain ``key: value`` lines (``type``, ``title``, ``summary``, ``created``,
``updated``), which :func:`read` reads with ``str`` methods alone, into the same
values the full parse gives (a property test holds the two together). Anything
else (a quoted or folded value, a list, another key, a comment, a value YAML
would read as a number, a boolean or null, CRLF line ends) is None: the caller
then parses the note the full way, as before.
"""

from __future__ import annotations

from mdmem._kinds import NoteType

TYPE_CHECKING = False  # not typing's: this module is on the per-prompt hook's path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from datetime import datetime
    from typing import Protocol

    from mdmem.store.note import Note

    class NoteFields(Protocol):
        """What a reader of a note's fields uses, which ``Note`` and ``QuickNote`` both have."""

        @property
        def filename(self) -> str: ...
        @property
        def type(self) -> NoteType: ...
        @property
        def title(self) -> str: ...
        @property
        def summary(self) -> str: ...
        @property
        def body(self) -> str: ...
        @property
        def updated(self) -> datetime | None: ...
        @property
        def extra(self) -> Mapping[str, object]: ...


__all__ = ["QuickNote", "parse", "read"]

_TYPES = {t.value: t for t in NoteType}
_KEYS = ("type", "title", "summary", "created", "updated")
# Plain scalars YAML 1.1 reads as booleans or null (checked lower-cased: a superset).
_WORDS = {"yes", "no", "y", "n", "true", "false", "on", "off", "null"}


class QuickNote:
    """The fields of a note that :func:`read` read: those of ``Note`` that a reader of
    plain notes uses (no ``extra``: a note with other keys is never read here)."""

    __slots__ = ("body", "created", "extra", "filename", "summary", "title", "type", "updated")

    def __init__(
        self,
        filename: str,
        kind: NoteType,
        title: str,
        summary: str,
        body: str,
        created: datetime | None,
        updated: datetime | None,
    ) -> None:
        self.filename = filename
        self.type = kind
        self.title = title
        self.summary = summary
        self.body = body
        self.created = created
        self.updated = updated
        self.extra: dict[str, object] = {}


def _plain(value: str) -> bool:
    """Whether YAML reads ``value`` (a whole line's value) as exactly this string."""
    return (
        bool(value)
        and value == value.strip()
        and value[0].isalpha()  # no indicator, number, date, sign, '.', '~', '<', '='
        and value.lower() not in _WORDS
        and value.isprintable()  # no tab, control, line or paragraph separator
        and ": " not in value
        and " #" not in value
        and not value.endswith(":")
    )


def _time(value: str) -> datetime | bool:
    """A time as ``format_time`` writes it (``2026-11-29T10:12:00+00:00``); False otherwise."""
    if not (
        len(value) == 25
        and value[4] == value[7] == "-"
        and value[10] == "T"
        and value[13] == value[16] == value[22] == ":"
        and value[19] in "+-"
        and (value[:4] + value[5:7] + value[8:10] + value[11:13]).isdigit()
        and (value[14:16] + value[17:19] + value[20:22] + value[23:]).isdigit()
        and value.isascii()
    ):
        return False
    from datetime import datetime, timezone

    try:
        moment = datetime.fromisoformat(value)
        moment.astimezone(timezone.utc)  # as parse_time checks: comparable with any time
    except (ValueError, OverflowError):
        return False
    return moment


def read(text: str, filename: str) -> QuickNote | None:
    """The note in ``text`` when its front matter is plain ``key: value`` lines of the
    keys mdmem writes; None for anything else (parse it with :func:`mdmem.store.note.parse`,
    which also says what is wrong with a note that is not one)."""
    stripped = text.lstrip("\ufeff").strip()
    if not stripped.startswith("---\n"):
        return None
    end = stripped.find("\n---", 3)
    if end < 0 or stripped[end + 4 : end + 5] not in ("", "\n"):
        return None
    head = stripped[4:end]
    if "\r" in head or "\x85" in head:
        return None
    values: dict[str, str] = {}
    for line in head.split("\n"):
        key, sep, value = line.partition(": ")
        if not sep or key not in _KEYS or key in values:
            return None
        values[key] = value
    kind = _TYPES.get(values.get("type", ""))
    title = values.get("title", "")
    summary = values.get("summary")
    if kind is None or not _plain(title) or (summary is not None and not _plain(summary)):
        return None
    times: dict[str, datetime | None] = {}
    for key in ("created", "updated"):
        if key in values:
            moment = _time(values[key])
            if moment is False:
                return None
            times[key] = moment  # type: ignore[assignment]
    body = stripped[end + 4 :].strip()
    return QuickNote(
        filename,
        kind,
        title,
        summary or "",
        body,
        times.get("created"),
        times.get("updated"),
    )


def parse(text: str, filename: str) -> Note | QuickNote:
    """A note's text as a reader of its fields takes it: :func:`read` when it can, else
    :func:`mdmem.store.note.parse` (whose imports, YAML's, only then).

    Raises:
        InvalidNote: the text is not a note.
    """
    quick = read(text, filename)
    if quick is not None:
        return quick
    from mdmem.store.note import parse as full

    return full(text, filename)
