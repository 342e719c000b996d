"""A note: Markdown with YAML front matter, and its one line in MEMORY.md.

``parse`` and ``render`` are a pair, like ``json.loads``/``dumps``: for a
canonical note, ``render(parse(text)) == text``. YAML is loaded safely (libyaml
when present), keys are written in a fixed order, and keys a person added by
hand are kept, in their order, after the known ones.

YAML and python-frontmatter are imported on first use: listing a settled store
never parses a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timezone
from typing import TYPE_CHECKING, Any

from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidNote

if TYPE_CHECKING:
    from collections.abc import Mapping

__all__ = [
    "KNOWN_KEYS",
    "MAX_SUMMARY_CHARS",
    "MAX_TITLE_CHARS",
    "IndexEntry",
    "Level",
    "Note",
    "NoteType",
    "clean_inline",
    "format_time",
    "index_line",
    "parse",
    "parse_index_line",
    "parse_time",
    "render",
]

KNOWN_KEYS = ("type", "title", "summary", "created", "updated")
MAX_TITLE_CHARS = 120
MAX_SUMMARY_CHARS = 240


@dataclass(frozen=True)
class Note:
    """One note: its file name, front matter and Markdown body."""

    filename: str
    type: NoteType
    title: str
    summary: str = ""
    body: str = ""
    created: datetime | None = None
    updated: datetime | None = None
    extra: Mapping[str, object] = field(default_factory=dict, hash=False)
    """Front-matter keys a person added, in their order; kept on every update."""

    def with_changes(self, **changes: object) -> Note:
        """A copy with some fields replaced."""
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass(frozen=True)
class IndexEntry:
    """What MEMORY.md knows of a note: enough to list it without reading it."""

    filename: str
    type: str
    title: str
    summary: str
    updated: str | None = None


# -- inline text (titles and summaries) -------------------------------------------

_INLINE_BREAKS = re.compile(r"[\s\u2028\u2029\x85]+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def clean_inline(text: str, limit: int | None = None) -> str:
    """One line of plain text: control characters removed, white space collapsed, cut to ``limit``.

    This is what keeps a title or summary from ever injecting a newline, a
    control character or a fake heading into MEMORY.md or the prompt.
    """
    text = _INLINE_BREAKS.sub(" ", _CONTROL.sub("", text)).strip()
    if limit is not None and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text


def format_time(moment: datetime) -> str:
    """ISO 8601 with an offset, to the second: ``2026-11-29T10:12:00+00:00``."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.replace(microsecond=0).isoformat()


def parse_time(value: object, key: str = "time", path: str = "<note>") -> datetime | None:
    """Read a front-matter time (YAML timestamp, date or ISO string) as an aware datetime.

    Raises:
        InvalidNote: the value is not a date or an ISO 8601 date-time.
    """
    if value is None:
        return None
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day)
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidNote(path, f"{key}: {value!r} is not an ISO 8601 date-time") from None
    else:
        raise InvalidNote(path, f"{key}: expected an ISO 8601 date-time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment


# -- YAML --------------------------------------------------------------------------

_yaml_dumper: Any = None


def _dumper() -> Any:
    """A safe dumper that writes date-times as ``2026-11-29T10:12:00+00:00``, unquoted."""
    global _yaml_dumper
    if _yaml_dumper is None:
        import yaml

        base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

        class Dumper(base):  # type: ignore[misc, valid-type]
            def ignore_aliases(self, data: object) -> bool:
                # created == updated is the same object; never write &id001 anchors.
                return True

        def represent_datetime(dumper: Any, data: datetime) -> Any:
            return dumper.represent_scalar("tag:yaml.org,2002:timestamp", format_time(data))

        Dumper.add_representer(datetime, represent_datetime)
        _yaml_dumper = Dumper
    return _yaml_dumper


def _text(value: object, key: str, path: str, *, required: bool) -> str:
    if value is None:
        if required:
            raise InvalidNote(path, f"missing field {key!r}")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise InvalidNote(path, f"{key}: expected text")
    text = str(value).strip()
    if required and not text:
        raise InvalidNote(path, f"missing field {key!r}")
    return text


def parse(text: str, filename: str = "<note>") -> Note:
    """Parse the text of a note file.

    Raises:
        InvalidNote: no front matter, bad YAML, a missing or wrong field.
    """
    import yaml
    from frontmatter.default_handlers import YAMLHandler

    handler = YAMLHandler()
    text = text.lstrip("\ufeff")
    stripped = text.strip()
    if not handler.detect(stripped):
        raise InvalidNote(filename, "no YAML front matter (the file must start with a '---' line)")
    try:
        fm, body = handler.split(stripped)
    except ValueError:
        raise InvalidNote(filename, "the front matter is not closed by a '---' line") from None
    try:
        meta = handler.load(fm)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 2})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise InvalidNote(filename, f"bad YAML in the front matter{where}: {problem}") from None
    if meta is None:
        meta = {}
    if not isinstance(meta, dict):
        raise InvalidNote(filename, "the front matter is not a mapping of keys to values")
    for key in meta:
        if not isinstance(key, str):
            raise InvalidNote(filename, f"front-matter key {key!r} is not text")
    raw_type = meta.get("type")
    if raw_type is None:
        raise InvalidNote(filename, "missing field 'type'")
    try:
        note_type = NoteType(raw_type)
    except ValueError:
        choices = ", ".join(t.value for t in NoteType)
        raise InvalidNote(filename, f"type: {raw_type!r} is not one of {choices}") from None
    return Note(
        filename=filename,
        type=note_type,
        title=_text(meta.get("title"), "title", filename, required=True),
        summary=_text(meta.get("summary"), "summary", filename, required=False),
        body=body.strip(),
        created=parse_time(meta.get("created"), "created", filename),
        updated=parse_time(meta.get("updated"), "updated", filename),
        extra={k: v for k, v in meta.items() if k not in KNOWN_KEYS},
    )


def render(note: Note) -> str:
    """The canonical text of a note file."""
    import yaml

    meta: dict[str, object] = {"type": note.type.value, "title": note.title}
    if note.summary:
        meta["summary"] = note.summary
    if note.created is not None:
        meta["created"] = note.created
    if note.updated is not None:
        meta["updated"] = note.updated
    for key, value in note.extra.items():
        if key not in KNOWN_KEYS:
            meta[key] = value
    header = yaml.dump(
        meta,
        Dumper=_dumper(),
        allow_unicode=True,
        sort_keys=False,
        default_flow_style=False,
        width=1_000_000,
    )
    body = note.body.strip()
    return f"---\n{header}---\n{body}\n" if body else f"---\n{header}---\n"


# -- index lines -------------------------------------------------------------------

_INDEX_LINE = re.compile(r"^- \[(?P<type>[^\]\n]*)\] (?P<text>.*) \((?P<filename>[^()\n]+)\)\s*$")


def index_line(note: Note) -> str:
    """The note's line in MEMORY.md: ``- [type] Title — Summary (filename)``."""
    title = clean_inline(note.title, MAX_TITLE_CHARS) or note.filename
    summary = clean_inline(note.summary, MAX_SUMMARY_CHARS)
    text = f"{title} — {summary}" if summary else title
    return f"- [{note.type.value}] {text} ({note.filename})"


def parse_index_line(line: str) -> IndexEntry | None:
    """Read an index line back; None for a line that is not one."""
    match = _INDEX_LINE.match(line)
    if match is None:
        return None
    title, _, summary = match["text"].partition(" — ")
    return IndexEntry(filename=match["filename"], type=match["type"], title=title, summary=summary)
