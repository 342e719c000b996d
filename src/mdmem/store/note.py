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
from datetime import date, datetime, timezone

from mdmem._kinds import Level, NoteType
from mdmem._lines import clean_inline
from mdmem._record import field, record, replace
from mdmem.errors import InvalidNote

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, Protocol

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


__all__ = [
    "KNOWN_KEYS",
    "MAX_SUMMARY_CHARS",
    "MAX_TITLE_CHARS",
    "IndexEntry",
    "Level",
    "Note",
    "NoteType",
    "clean_inline",
    "first_sentence",
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


@record
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
        return replace(self, **changes)


@record
class IndexEntry:
    """What MEMORY.md knows of a note: enough to list it without reading it."""

    filename: str
    type: str
    title: str
    summary: str
    updated: str | None = None
    supersedes: tuple[str, ...] = ()
    """Notes of the same store this one replaces (front matter ``supersedes``)."""
    expires: str | None = None
    """When the note stops being shown (front matter ``expires``), ISO 8601."""
    superseded_by: str | None = None
    """The note that replaces this one, if any: it is left out of the prompt block."""


# -- inline text (titles and summaries) -------------------------------------------


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
            raise InvalidNote(
                path, f"{key}: {_short(value)} is not an ISO 8601 date-time"
            ) from None
    else:
        raise InvalidNote(path, f"{key}: expected an ISO 8601 date-time")
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    try:
        # Year 1 at +05:00 or year 9999 at -05:00 cannot be compared with another time.
        moment.astimezone(timezone.utc)
    except (OverflowError, ValueError):
        raise InvalidNote(path, f"{key}: {_short(value)} is out of range") from None
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
        # A checked note name (paths.NoteName) is a str subclass, which the safe
        # dumper refuses by default: a name in ``supersedes`` is written as text.
        Dumper.add_multi_representer(str, lambda dumper, data: dumper.represent_str(str(data)))
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


# Bounds on one note's front matter: a note is a few keys, not a data set.
MAX_YAML_NODES = 10_000
MAX_YAML_DEPTH = 64


def _short(value: object, limit: int = 60) -> str:
    """A value for an error message: its repr, cut (a 5,000-digit number is not a message)."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails is itself a bad value
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_graph(node: Any, filename: str) -> None:
    """Refuse aliases (a shared node: the way to a "billion laughs" blow-up) and huge trees."""
    from yaml.nodes import MappingNode, SequenceNode

    seen: set[int] = set()
    stack: list[tuple[Any, int]] = [(node, 0)]
    while stack:
        current, depth = stack.pop()
        if id(current) in seen:
            raise InvalidNote(filename, "YAML aliases (*name) are not allowed in front matter")
        seen.add(id(current))
        if len(seen) > MAX_YAML_NODES:
            raise InvalidNote(filename, f"the front matter has more than {MAX_YAML_NODES} values")
        if depth > MAX_YAML_DEPTH:
            raise InvalidNote(filename, f"the front matter nests deeper than {MAX_YAML_DEPTH}")
        if isinstance(current, SequenceNode):
            stack.extend((child, depth + 1) for child in current.value)
        elif isinstance(current, MappingNode):
            for key, value in current.value:
                stack.append((key, depth + 1))
                stack.append((value, depth + 1))


def _load_yaml(fm: str, filename: str, first_line: int = 1) -> object:
    """Safe-load front matter, every failure as :class:`InvalidNote` (never another exception).

    Safe loading alone builds no objects but plain data, yet its constructors
    raise whatever a bad scalar makes them raise (``2026-02-30``: ValueError;
    ``!!bool maybe``: KeyError; a 5,000-digit number: ValueError); and an
    alias bomb is cheap to load but blows up whoever walks the result. So the
    node graph is composed first and checked, then constructed. ``first_line``
    is the file's line (1-based) that ``fm`` starts on, for the error's line number.
    """
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)(fm)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check_graph(node, filename)
        data = loader.construct_document(node)
    except InvalidNote:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        # fm starts on the opening '---' line (the rest of it), so its line 0 is first_line.
        where = f" (line {mark.line + first_line})" if mark is not None else ""
        problem = getattr(exc, "problem", None) or exc.__class__.__name__
        raise InvalidNote(filename, f"bad YAML in the front matter{where}: {problem}") from None
    except Exception as exc:
        # A scalar the constructors choke on: an impossible date, hour or offset,
        # a number too long to convert, a !!bool that is not one, an explicit
        # tag on a value it does not fit (AttributeError inside PyYAML).
        reason = _short(str(exc), 80)
        raise InvalidNote(filename, f"a bad value in the front matter: {reason}") from None
    finally:
        loader.dispose()
    _check_values(data, filename)
    return data


# A number longer than this cannot even be printed back (Python refuses int -> str
# past 4,300 digits), and no note needs one: 0x followed by 5,000 digits is an attack.
_MAX_INT_BITS = 1024


def _check_values(data: object, filename: str) -> None:
    """Refuse constructed values mdmem could not write back or show: huge numbers."""
    stack = [data]
    while stack:
        value = stack.pop()
        if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
            raise InvalidNote(filename, "a number in the front matter is too long")
        if isinstance(value, dict):
            stack.extend(value.keys())
            stack.extend(value.values())
        elif isinstance(value, (list, tuple, set, frozenset)):
            stack.extend(value)


def parse(text: str, filename: str = "<note>") -> Note:
    """Parse the text of a note file.

    Raises:
        InvalidNote: no front matter, bad YAML, a missing or wrong field.
    """
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
    # The file's lines before the opening '---' (blank ones that strip() took away).
    first_line = 1 + text[: len(text) - len(text.lstrip())].count("\n")
    meta = _load_yaml(fm, filename, first_line)
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
        note_type = NoteType(raw_type) if isinstance(raw_type, str) else None
    except ValueError:
        note_type = None
    if note_type is None:
        choices = ", ".join(t.value for t in NoteType)
        raise InvalidNote(filename, f"type: {_short(raw_type)} is not one of {choices}")
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


# Front matter YAML writes as it is, written here without importing YAML (~10 ms, a
# sixth of a plain `mdmem add`): only the known keys, each value a time or a text that
# YAML's dumper writes in plain style and reads back as that text (it begins with a
# letter, holds no indicator ``: # [ ] { } ? & * ! | > " % @ `` ` ``, no other character,
# no space at either end, and is not a word YAML reads as a boolean or null). Anything
# else goes to YAML; tests/store/test_note.py checks the two agree on any text.
_PLAIN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9 .,()/+'_-]{0,999}")
# The other keys mdmem itself writes, plain when their value is: the worker's provenance
# line and the one note a note supersedes (a list of them goes to YAML).
_PLAIN_EXTRA = frozenset({"source", "supersedes"})
# The provenance line (manager/provenance.py: "turn <id> · <model> · <when> ..."), which
# YAML writes plain too: ':' only inside a word, '·' as it is (allow_unicode).
_PLAIN_SOURCE = re.compile(r"turn [A-Za-z0-9 .,()/+'_:\u00b7-]{1,999}")
_NOT_TEXT = frozenset(
    f(word)
    for word in ("yes", "no", "true", "false", "on", "off", "null")
    for f in (str.lower, str.title, str.upper)
)


def _plain_text(key: str, value: str) -> bool:
    """Whether YAML writes ``value`` of ``key`` as it is (plain style) and reads it back."""
    if _PLAIN_TEXT.fullmatch(value):
        return value[-1] != " " and value not in _NOT_TEXT
    return (
        key == "source"
        and _PLAIN_SOURCE.fullmatch(value) is not None
        and value[-1] not in " :"
        and ": " not in value
    )


def _plain_header(meta: Mapping[str, object]) -> str | None:
    lines = []
    for key, value in meta.items():
        if key not in KNOWN_KEYS and key not in _PLAIN_EXTRA:
            return None
        if isinstance(value, datetime):
            text = format_time(value)
        elif type(value) is str and _plain_text(key, value):
            text = value
        else:
            return None
        lines.append(f"{key}: {text}\n")
    return "".join(lines)


def render(note: Note) -> str:
    """The canonical text of a note file."""
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
    header = _plain_header(meta)
    if header is None:
        import yaml

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


def index_line(note: NoteFields) -> str:
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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s|(?<=[。！？])")


def first_sentence(text: str, limit: int = 160) -> str:
    """The first sentence of a note's body, as a one-line summary (headings are skipped)."""
    lines = [ln for ln in text.strip().splitlines() if not ln.lstrip().startswith("#")]
    paragraph = "\n".join(lines).strip().split("\n\n", 1)[0]
    if not paragraph:  # nothing but headings
        paragraph = text.strip().split("\n", 1)[0]
    line = clean_inline(paragraph.lstrip("#>-* "))
    match = _SENTENCE_END.search(line)
    sentence = line[: match.start()].strip() if match else line
    return clean_inline(sentence or line, limit)
