"""A note as mdmem writes it, read without YAML: for a reader in a hurry (the prompt hook).

The per-prompt hook re-indexes the notes written since the last prompt (a
turn's worker wrote them); parsing one the full way (:func:`mdmem.store.note.parse`)
imports PyYAML, python-frontmatter and the dataclasses behind ``Note``, about
20 ms, more than the rest of the hook. A note mdmem wrote has a front matter of
plain ``key: value`` lines (``type``, ``title``, ``summary``, ``created``,
``updated``; ``source``, the provenance line of every note the worker writes;
``supersedes``), which :func:`read` reads with ``str`` methods alone, into the same
values the full parse gives (a property test holds the two together). Anything
else (a quoted or folded value, a list, another key, a comment, a value YAML
would read as a number, a boolean or null, CRLF line ends) is None: the caller
then parses the note the full way, as before.
"""

from __future__ import annotations

from mdmem._dates import days
from mdmem._kinds import NoteType
from mdmem.errors import InvalidNote, InvalidPath, NoteNotFound
from mdmem.store import files

TYPE_CHECKING = False  # not typing's: this module is on the per-prompt hook's path
if TYPE_CHECKING:
    from datetime import datetime

    from mdmem.store.note import Note, NoteFields


__all__ = ["MAX_NOTE_BYTES", "QuickNote", "parse", "read", "read_note_text", "updated_at"]

#: The largest note file mdmem reads (a larger one is reported, never read).
MAX_NOTE_BYTES = 256 * 1024

_TYPES = {t.value: t for t in NoteType}
_KEYS = ("type", "title", "summary", "created", "updated")
#: The other keys read here, into ``extra`` as the full parse puts them: the worker's
#: provenance line (``manager/provenance.py``; without it, the prompt after every turn
#: that wrote a note imported PyYAML and python-frontmatter, ~20 ms, to re-index it) and
#: the one note a note supersedes (a list of them is YAML's).
_EXTRA = ("source", "supersedes")
# Plain scalars YAML 1.1 reads as booleans or null (checked lower-cased: a superset).
_WORDS = {"yes", "no", "y", "n", "true", "false", "on", "off", "null"}


class QuickNote:
    """The fields of a note that :func:`read` read: those of ``Note`` that a reader of
    plain notes uses (``extra`` holds ``source`` and ``supersedes`` at most: a note
    with other keys is never read here).

    ``created`` and ``updated`` are made ``datetime`` objects only when asked for;
    ``updated_at`` is ``updated`` as seconds since the epoch, without them.
    """

    __slots__ = (
        "_created",
        "_updated",
        "body",
        "extra",
        "filename",
        "summary",
        "title",
        "type",
        "updated_at",
    )

    def __init__(
        self,
        filename: str,
        kind: NoteType,
        title: str,
        summary: str,
        body: str,
        created: str | None,
        updated: str | None,
        updated_at: float | None,
        extra: dict[str, object] | None = None,
    ) -> None:
        self.filename = filename
        self.type = kind
        self.title = title
        self.summary = summary
        self.body = body
        self._created = created
        self._updated = updated
        self.updated_at = updated_at
        self.extra: dict[str, object] = {} if extra is None else extra

    @property
    def created(self) -> datetime | None:
        """When the note was created, as ``Note.created``."""
        return _moment(self._created)

    @property
    def updated(self) -> datetime | None:
        """When the note was last updated, as ``Note.updated``."""
        return _moment(self._updated)


def updated_at(note: NoteFields) -> float | None:
    """``note.updated`` as seconds since the epoch (a quick note's without ``datetime``)."""
    if isinstance(note, QuickNote):
        return note.updated_at
    return note.updated.timestamp() if note.updated is not None else None


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


#: The UTC seconds of 0001-01-01T00:00:00 and of 9999-12-31T23:59:59, ``datetime``'s range.
_FIRST, _LAST = days(1, 1, 1) * 86_400, days(9999, 12, 31) * 86_400 + 86_399
_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _time(value: str) -> float | bool:
    """A time as ``format_time`` writes it (``2026-11-29T10:12:00+00:00``), as seconds since
    the epoch; False otherwise.

    Worked out with integers, not ``datetime`` (whose import is a millisecond of the
    prompt right after a turn wrote a note); a value it declines (a day that does not
    exist, an offset of 60 minutes or more) goes to the full parse, which decides.
    """
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
    year, month, day = int(value[:4]), int(value[5:7]), int(value[8:10])
    hour, minute, second = int(value[11:13]), int(value[14:16]), int(value[17:19])
    off_hours, off_minutes = int(value[20:22]), int(value[23:])
    leap = month == 2 and year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (
        year >= 1
        and 1 <= month <= 12
        and 1 <= day <= _MONTH_DAYS[month - 1] + leap
        and hour < 24
        and minute < 60
        and second < 60
        and off_hours < 24
        and off_minutes < 60
    ):
        return False
    offset = (off_hours * 3_600 + off_minutes * 60) * (1 if value[19] == "+" else -1)
    moment = days(year, month, day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
    # As parse_time checks: comparable with any time (in range once made UTC).
    return float(moment) if _FIRST <= moment <= _LAST else False


def _moment(value: str | None) -> datetime | None:
    from datetime import datetime

    return None if value is None else datetime.fromisoformat(value)


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
        if not sep or (key not in _KEYS and key not in _EXTRA) or key in values:
            return None
        values[key] = value
    kind = _TYPES.get(values.get("type", ""))
    title = values.get("title", "")
    summary = values.get("summary")
    if kind is None or not _plain(title) or (summary is not None and not _plain(summary)):
        return None
    extra: dict[str, object] = {key: values[key] for key in _EXTRA if key in values}
    if not all(_plain(str(value)) for value in extra.values()):
        return None
    seconds: dict[str, float] = {}
    for key in ("created", "updated"):
        if key in values:
            moment = _time(values[key])
            if moment is False:
                return None
            seconds[key] = moment
    body = stripped[end + 4 :].strip()
    return QuickNote(
        filename,
        kind,
        title,
        summary or "",
        body,
        values.get("created"),
        values.get("updated"),
        seconds.get("updated"),
        extra,
    )


def read_note_text(root: str, filename: str) -> str:
    """The text of the note ``filename`` of the store at ``root``, as it is on disk
    (``Store.read_text``; the search index re-reads an edited note with it, without
    the store's code).

    Raises:
        InvalidPath: not a note name, or it escapes the store (or became a link).
        NoteNotFound: no such note.
        InvalidNote: too large, or not UTF-8.
    """
    from mdmem.store.paths import note_path

    try:
        path = note_path(root, filename, must_exist=True)
    except FileNotFoundError:
        raise NoteNotFound(filename, root) from None
    try:
        data = files.read_bytes(path, MAX_NOTE_BYTES)
    except ValueError as exc:
        raise InvalidNote(filename, f"too large: {exc}") from None
    except FileNotFoundError:
        raise NoteNotFound(filename, root) from None
    except files.NotRegularFile as exc:  # swapped for a link or a FIFO since the check
        raise InvalidPath(filename, str(exc.strerror)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidNote(filename, f"not UTF-8 (byte {exc.start})") from None


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
