"""Operations: what a model (or a person) asks the store to do, and their validation.

An :class:`Operation` is the raw request, as loose as the JSON it came from.
:func:`validate` turns it into one of three checked, frozen forms
(:class:`Create`, :class:`Update`, :class:`Delete`) or ``None`` for a no-op;
past that point nothing checks it again: its names are
:class:`~mdmem.store.paths.NoteName` values, and ``validate`` returns a checked
operation as it is. :func:`format_op` writes a checked operation back as the JSON
object ``validate`` reads (the pair a turn journal and a proposal keep on disk):
``validate(format_op(op)) == op``. :func:`parse_answer` finds the array of
operations in whatever a model answered.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone

from mdmem._kinds import Level, NoteType
from mdmem._record import record, values
from mdmem.errors import InvalidOperation, InvalidPath, ProviderError
from mdmem.store.note import MAX_SUMMARY_CHARS, MAX_TITLE_CHARS, clean_inline
from mdmem.store.paths import NoteName, check_name

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "ACTIONS",
    "MAX_CONTENT_BYTES",
    "VALID",
    "Create",
    "Delete",
    "Operation",
    "Update",
    "ValidOperation",
    "format_op",
    "parse_answer",
    "validate",
]

ACTIONS = ("create", "update", "delete", "noop", "")
MAX_CONTENT_BYTES = 64 * 1024
_FIELDS = ("action", "level", "type", "title", "summary", "slug", "filename", "content")
# A hostile answer must not make the scanner quadratic on megabytes of brackets.
_MAX_ANSWER_CHARS = 2_000_000
_MAX_SCAN_STARTS = 2_000
_MAX_SUPERSEDES = 20


@record
class Operation:
    """A create / update / delete request, as received; check it with :func:`validate`."""

    action: str
    level: Level | str | None = None
    type: NoteType | str | None = None
    title: str | None = None
    summary: str | None = None
    slug: str | None = None
    filename: str | None = None
    content: str | None = None
    supersedes: str | tuple[str, ...] | None = None
    """File names of notes (of the same store) this create or update replaces."""
    expires: str | None = None
    """An ISO 8601 date or date-time after which the note is no longer shown."""

    @classmethod
    def from_dict(cls, data: object) -> Operation:
        """Build an operation from a decoded JSON object.

        Raises:
            InvalidOperation: not an object, or a field that is not text.
        """
        if isinstance(data, Operation):
            return data
        if not isinstance(data, dict):
            raise InvalidOperation(f"expected a JSON object, got {type(data).__name__}")
        values: dict[str, str | None] = {}
        for key in _FIELDS:
            value = data.get(key)
            if value is not None and not isinstance(value, str):
                raise InvalidOperation(f"expected text, got {type(value).__name__}", key)
            values[key] = value
        action = values.pop("action")
        supersedes = data.get("supersedes")
        if isinstance(supersedes, list):
            if len(supersedes) > _MAX_SUPERSEDES:
                raise InvalidOperation(f"more than {_MAX_SUPERSEDES} names", "supersedes")
            if not all(isinstance(v, str) for v in supersedes):
                raise InvalidOperation("expected file names", "supersedes")
            supersedes = tuple(supersedes)
        elif supersedes is not None and not isinstance(supersedes, str):
            raise InvalidOperation(f"expected text, got {type(supersedes).__name__}", "supersedes")
        expires = data.get("expires")
        if expires is not None and not isinstance(expires, str):
            raise InvalidOperation(f"expected text, got {type(expires).__name__}", "expires")
        return cls(
            action=action if action is not None else "",
            supersedes=supersedes or None,
            expires=expires,
            **values,
        )

    def to_dict(self) -> dict[str, object]:
        """The operation as a JSON-ready dict, without empty fields."""
        out: dict[str, object] = {}
        for key, value in values(self).items():
            if value is None:
                continue
            out[key] = list(value) if isinstance(value, tuple) else str(value)
        return out


@record
class Create:
    """A checked request for a new note."""

    level: Level
    type: NoteType
    title: str
    content: str
    summary: str = ""
    slug: str | None = None
    filename: NoteName | None = None
    """An exact file name, when the caller must have one (the memory tool); else from the slug."""
    supersedes: tuple[NoteName, ...] = ()
    expires: datetime | None = None


@record
class Update:
    """A checked request to replace a note's body (and maybe its title, summary or type)."""

    level: Level
    filename: NoteName
    content: str
    title: str | None = None
    summary: str | None = None
    type: NoteType | None = None
    supersedes: tuple[NoteName, ...] = ()
    expires: datetime | None = None


@record
class Delete:
    """A checked request to move a note to the trash."""

    level: Level
    filename: NoteName


ValidOperation = Create | Update | Delete
#: The checked forms, for ``isinstance``.
VALID = (Create, Update, Delete)


def format_op(op: ValidOperation) -> dict[str, object]:
    """A checked operation as the JSON object it is read back from: ``validate`` is its parse.

    Canonical (fields in one order, empty ones left out, ``expires`` in ISO 8601):
    ``validate(format_op(op)) == op`` for every operation ``validate`` returned.
    """
    if isinstance(op, Delete):
        return {"action": "delete", "level": op.level.value, "filename": str(op.filename)}
    out: dict[str, object] = {
        "action": "create" if isinstance(op, Create) else "update",
        "level": op.level.value,
    }
    if op.type is not None:
        out["type"] = op.type.value
    if op.title is not None:
        out["title"] = op.title
    if op.summary:
        out["summary"] = op.summary
    if isinstance(op, Create) and op.slug is not None:
        out["slug"] = op.slug
    if op.filename is not None:
        out["filename"] = str(op.filename)
    # A body of control characters only is kept as an empty body (an empty note);
    # written as one such character, the check empties it again instead of calling
    # it missing, so the round trip holds for it too.
    out["content"] = op.content or "\x00"
    if op.supersedes:
        out["supersedes"] = [str(name) for name in op.supersedes]
    if op.expires is not None:
        out["expires"] = op.expires.isoformat()
    return out


def _level(value: object, expected: Level | None) -> Level:
    if value is None or value == "":
        raise InvalidOperation("missing", "level")
    try:
        level = Level(value)
    except ValueError:
        raise InvalidOperation(f"{value!r} is not 'project' or 'user'", "level") from None
    if expected is not None and level is not expected:
        raise InvalidOperation(
            f"{level.value} operation sent to the {expected.value} store", "level"
        )
    return level


def _type(value: object, *, required: bool) -> NoteType | None:
    if value is None or value == "":
        if required:
            raise InvalidOperation("missing", "type")
        return None
    try:
        return NoteType(value)
    except ValueError:
        choices = ", ".join(t.value for t in NoteType)
        raise InvalidOperation(f"{value!r} is not one of {choices}", "type") from None


def _inline(value: str | None, key: str, limit: int, *, required: bool) -> str | None:
    if value is None or not value.strip():
        if required:
            raise InvalidOperation("missing", key)
        return None
    if len(value) > limit * 4:
        raise InvalidOperation(f"longer than {limit} characters", key)
    text = clean_inline(value, limit)
    if not text:
        raise InvalidOperation("empty after removing control characters", key)
    return text


# Control characters but tab and newline, and DEL: what a note's body never keeps.
_CONTROL = dict.fromkeys([*(c for c in range(32) if c not in (9, 10)), 127])


def _content(value: str | None) -> str:
    if value is None or not value.strip():
        raise InvalidOperation("missing", "content")
    if len(value.encode("utf-8", "surrogatepass")) > MAX_CONTENT_BYTES:
        raise InvalidOperation(f"larger than {MAX_CONTENT_BYTES} bytes", "content")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidOperation("not valid Unicode", "content") from None
    # Keep line structure, drop characters that have no business in Markdown.
    return value.translate(_CONTROL).strip()


def _filename(value: str | None) -> NoteName:
    if value is None or value == "":
        raise InvalidOperation("missing", "filename")
    try:
        return check_name(value)
    except InvalidPath as exc:
        raise InvalidOperation(exc.reason, "filename") from None


def _supersedes(value: str | tuple[str, ...] | None) -> tuple[NoteName, ...]:
    if value is None:
        return ()
    names = (value,) if isinstance(value, str) else value
    out: list[NoteName] = []
    for name in names:
        if not name.strip():
            continue
        try:
            checked = check_name(name.strip())
        except InvalidPath as exc:
            raise InvalidOperation(f"{name!r}: {exc.reason}", "supersedes") from None
        if checked not in out:
            out.append(checked)
    return tuple(out)


def _expires(value: str | None) -> datetime | None:
    if value is None or not value.strip():
        return None
    text = value.strip()
    # Room for the longest datetime.isoformat() (42 characters, an offset with
    # microseconds), so what format_op() writes is always read back.
    if len(text) > 48:
        raise InvalidOperation("not an ISO 8601 date or date-time", "expires")
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise InvalidOperation(
            f"{text!r} is not an ISO 8601 date or date-time", "expires"
        ) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def validate(
    op: Operation | ValidOperation | Mapping[str, object], level: Level | None = None
) -> ValidOperation | None:
    """Check one operation; ``None`` means a no-op. ``level`` is the store it is meant for.

    An operation checked already (``Create``, ``Update``, ``Delete``) is returned
    as it is, once its level is the store's.

    Raises:
        InvalidOperation: a missing or wrong field; ``field`` names it.
    """
    if isinstance(op, VALID):
        _level(op.level, level)
        return op
    op = Operation.from_dict(op) if not isinstance(op, Operation) else op
    action = (op.action or "").strip().lower()
    if action in ("", "noop"):
        return None
    if action not in ACTIONS:
        raise InvalidOperation(f"unknown action {op.action!r}", "action")
    checked_level = _level(op.level, level)
    if action == "create":
        note_type = _type(op.type, required=True)
        assert note_type is not None
        title = _inline(op.title, "title", MAX_TITLE_CHARS, required=True)
        assert title is not None
        return Create(
            level=checked_level,
            type=note_type,
            title=title,
            content=_content(op.content),
            summary=_inline(op.summary, "summary", MAX_SUMMARY_CHARS, required=False) or "",
            slug=op.slug if op.slug and op.slug.strip() else None,
            filename=_filename(op.filename) if op.filename else None,
            supersedes=_supersedes(op.supersedes),
            expires=_expires(op.expires),
        )
    if action == "update":
        return Update(
            level=checked_level,
            filename=_filename(op.filename),
            content=_content(op.content),
            title=_inline(op.title, "title", MAX_TITLE_CHARS, required=False),
            summary=_inline(op.summary, "summary", MAX_SUMMARY_CHARS, required=False),
            type=_type(op.type, required=False),
            supersedes=_supersedes(op.supersedes),
            expires=_expires(op.expires),
        )
    return Delete(level=checked_level, filename=_filename(op.filename))


# -- reading a model's answer -------------------------------------------------------


def _unwrap(value: object) -> list[object] | None:
    """The list of operations in a decoded JSON value, or None if it holds none."""
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        for key in ("operations", "ops", "memories", "items", "result"):
            inner = value.get(key)
            if isinstance(inner, list):
                return inner
        lists = [v for v in value.values() if isinstance(v, list)]
        if len(lists) == 1:
            return lists[0]
        if "action" in value:
            return [value]
    return None


def _strip_fences(text: str) -> str:
    stripped = text.strip()
    if stripped.startswith("```"):
        first_newline = stripped.find("\n")
        body = stripped[first_newline + 1 :] if first_newline != -1 else ""
        end = body.rfind("```")
        return body[:end] if end != -1 else body
    return text


def parse_answer(answer: object) -> list[object]:
    """Find the array of operations in a model's answer.

    Accepts a decoded value (a list, or an object wrapping one) or text: the
    bare array, the array in a code fence, prose before and after it, brackets
    inside strings, an object wrapping the array.

    Raises:
        ProviderError: there is no JSON array of operations in the answer.
    """
    if not isinstance(answer, str):
        found = _unwrap(answer)
        if found is None:
            raise ProviderError("the answer holds no array of operations", raw=repr(answer)[:2000])
        return found
    text = answer[:_MAX_ANSWER_CHARS]
    if not text.strip():
        raise ProviderError("the answer is empty", raw=answer)
    candidates = [_strip_fences(text), text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        try:
            found = _unwrap(json.loads(candidate))
        except (ValueError, RecursionError):
            found = None
        if found is not None:
            return found
    starts = 0
    position = 0
    fallback: list[object] | None = None
    while starts < _MAX_SCAN_STARTS:
        brackets = [i for i in (text.find("[", position), text.find("{", position)) if i != -1]
        if not brackets:
            break
        index = min(brackets)
        starts += 1
        try:
            value, end = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):
            position = index + 1
            continue
        found = _unwrap(value)
        # Prefer an array that holds objects (or is empty) over an incidental
        # array of numbers or words in the prose.
        if found is not None and (not found or any(isinstance(x, dict) for x in found)):
            return found
        if found is not None and fallback is None:
            fallback = found
        position = end
    if fallback is not None:
        return fallback
    raise ProviderError("no JSON array of operations found in the answer", raw=answer[:20_000])
