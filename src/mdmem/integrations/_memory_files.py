"""The ``/memories`` tree of the Anthropic memory tool, without the SDK.

What :mod:`mdmem.integrations.anthropic` needs besides the SDK's classes:
parsing the paths Claude sends, reading the Markdown file Claude writes into a
note's fields, formatting views and listings as the SDK's own
``BetaLocalFilesystemMemoryTool`` does (which is what Claude is used to), and
the wording of every refusal. A refusal is a :class:`Refused`, whose message is
written for Claude; the public module turns it into the SDK's ``ToolError``,
since only that module may import ``anthropic``.
"""

from __future__ import annotations

import json
import os
import re
import unicodedata
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidNote, InvalidPath
from mdmem.store import files
from mdmem.store.note import MAX_SUMMARY_CHARS, Note, clean_inline, first_sentence, parse
from mdmem.store.paths import INDEX_NAME, check_name, is_candidate_name, note_path, slugify
from mdmem.store.store import MAX_NOTE_BYTES

if TYPE_CHECKING:
    from collections.abc import Iterable

    from mdmem.store.store import Store

ROOT = "/memories"
_LINE_NUMBER_WIDTH = 6  # as the SDK's tool: len(str(999999))
_DEFAULT_TYPES = {Level.PROJECT: NoteType.PROJECT_KNOWLEDGE, Level.USER: NoteType.USER_PREFERENCE}
_FENCE = re.compile(r"^-{3,}\s*$")
_HEADING = re.compile(r"^ {0,3}#{1,6}[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*$", re.MULTILINE)


class Refused(Exception):
    """A request the memory tool turns down; the message tells Claude what to do instead."""


def example(store: str = "project") -> str:
    """The hint that ends most refusals of a path."""
    return f"Use a path like {ROOT}/{store}/<name>.md"


# -- paths ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a /memories path names: the root (no store), a store directory (no name), or a file."""

    path: str
    store: Store | None = None
    name: str | None = None

    @property
    def is_index(self) -> bool:
        """Whether this is a store's MEMORY.md."""
        return self.name == INDEX_NAME


def vpath(store: Store, name: str) -> str:
    """The /memories path of note ``name`` in ``store``."""
    return f"{ROOT}/{store.level.value}/{name}"


def target(path: object, stores: Iterable[Store]) -> Target:
    """Parse a /memories path; the name of a file is checked by mdmem's one validator.

    Raises:
        Refused: anything but the root, a store, or a file directly in a store.
    """
    if not isinstance(path, str) or not path:
        raise Refused(f"A path is required. {example()}.")
    for ch in path:
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp"):
            raise Refused(
                f"The path {path!r} contains the control character U+{ord(ch):04X}. {example()}."
            )
    if "\\" in path:
        raise Refused(f"Paths use '/', not '\\': got {path}. {example()}.")
    if path != ROOT and not path.startswith(ROOT + "/"):
        raise Refused(f"Path must start with {ROOT}, got: {path}. {example()}.")
    parts = [part for part in path[len(ROOT) :].split("/") if part]
    if any(part in (".", "..") for part in parts):
        raise Refused(
            f"Path {path} would escape {ROOT} directory: '.' and '..' are not allowed. {example()}."
        )
    if not parts:
        return Target(ROOT)
    store = {store.level.value: store for store in stores}.get(parts[0])
    if store is None:
        if len(parts) == 1 and parts[0].endswith(".md"):
            raise Refused(
                f"Notes live in a store, not directly in {ROOT}: use {ROOT}/project/{parts[0]} "
                f"(about this repository, shared with everyone who works on it) or "
                f"{ROOT}/user/{parts[0]} (the user's own preferences, kept across projects)."
            )
        raise Refused(
            f"There is no {parts[0]!r} in {ROOT}: the two stores are {ROOT}/project and "
            f"{ROOT}/user. {example()}."
        )
    level = store.level.value
    if len(parts) == 1:
        return Target(f"{ROOT}/{level}", store)
    if len(parts) > 2:
        raise Refused(f"A store has no subdirectories, so {path} cannot exist. {example(level)}.")
    name = parts[1]
    if name.casefold() == INDEX_NAME.casefold():
        return Target(f"{ROOT}/{level}/{INDEX_NAME}", store, INDEX_NAME)
    try:
        check_name(name)
    except InvalidPath as exc:
        raise Refused(
            f"{path} is not a valid note path: {exc.reason}. {example(level)} "
            "(letters, digits, '-' and '_', ending in .md)."
        ) from None
    return Target(f"{ROOT}/{level}/{name}", store, name)


def note_target(path: object, stores: Iterable[Store], doing: str) -> tuple[Target, Store, str]:
    """A path that must name a note file (not a directory, not MEMORY.md).

    Raises:
        Refused: the path is bad, a directory, or an index.
    """
    found = target(path, stores)
    if found.store is None or found.name is None:
        raise Refused(
            f"{found.path} is a directory; {doing} a note file inside a store instead. {example()}."
        )
    if found.is_index:
        raise Refused(
            f"{found.path} is generated from the notes and cannot be changed by hand: {doing} a "
            f"note in {ROOT}/{found.store.level.value} instead, and the index follows."
        )
    return found, found.store, found.name


def taken(store: Store) -> dict[str, str]:
    """Existing note names, case-folded (as macOS and Windows compare them) -> real name."""
    if store.unavailable is not None:
        return {}
    try:
        names = os.listdir(store.path)
    except FileNotFoundError:
        return {}
    return {n.casefold(): n for n in names if is_candidate_name(n)}


def check_free(store: Store, name: str, wording: str, *, moving: str | None = None) -> None:
    """Refuse with ``wording`` if note ``name`` exists, also under a name that differs only in case.

    ``moving`` is a note of ``store`` being renamed, so its own name counts as free.

    Raises:
        Refused: the name is taken.
    """
    real = taken(store).get(name.casefold())
    if real is None or real == moving:
        return
    # Names that differ only in case are one name: the store may be shared,
    # through git, with a file system that cannot tell them apart.
    raise Refused(wording if real == name else f"{wording} (as {vpath(store, real)})")


def not_found(found: Target, wording: str | None = None) -> Refused:
    """The refusal for a note that is not there, pointing at the note Claude likely meant."""
    message = wording or f"The path {found.path} does not exist. Please provide a valid path."
    store, name = found.store, found.name
    if store is None or name is None:
        return Refused(message)
    near = _near(store, name)
    if near is not None:
        return Refused(f"{message} Did you mean {vpath(store, near)}?")
    return Refused(f"{message} View {ROOT}/{store.level.value} to see its notes.")


def _near(store: Store, name: str) -> str | None:
    """A note named ``name`` but for case, or as mdmem's Manager would name it (<type>_<slug>)."""
    names = taken(store)
    slug = slugify(_without_type(name[: -len(".md")]))
    for guess in (name, *(f"{note_type.value}_{slug}.md" for note_type in NoteType)):
        real = names.get(guess.casefold())
        if real is not None and real != name:
            return real
    return None


# -- reading and views ---------------------------------------------------------------


def read(found: Target) -> str:
    """The text of a note file, or of the store's index.

    Raises:
        Refused: no such note, or it is too large or not UTF-8.
        InvalidPath: a symlink that leads out of the store.
    """
    store, name = found.store, found.name
    assert store is not None and name is not None
    if found.is_index:
        return store.load_index()
    if store.unavailable is not None:
        raise not_found(found)
    try:
        path = note_path(store.path, name, must_exist=True)
    except FileNotFoundError:
        raise not_found(found) from None
    try:
        data = files.read_bytes(path, MAX_NOTE_BYTES)
    except FileNotFoundError:
        raise not_found(found) from None
    except files.NotRegularFile:  # swapped for a link or a FIFO since the check
        raise Refused(f"{found.path} is not a regular file and cannot be shown") from None
    except ValueError:  # read_bytes' "over the limit"
        raise Refused(f"{found.path} is larger than {MAX_NOTE_BYTES} bytes") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise Refused(f"{found.path} is not UTF-8 text and cannot be shown") from None


def _listing(store: Store) -> list[tuple[int, str]]:
    """(size, name) of the store's index and of each file that looks like a note."""
    if store.unavailable is not None:
        return []  # a refused project store (a symlink, the user store) shows as empty
    try:
        names = sorted(os.listdir(store.path))
    except FileNotFoundError:
        return []
    items = []
    for name in names:
        try:
            if name == INDEX_NAME:
                path = os.path.join(store.path, name)
            elif is_candidate_name(name):
                # The one validator: a symlink leading out of the store is not listed.
                path = note_path(store.path, name, must_exist=True)
            else:
                continue
            items.append((os.lstat(path).st_size, name))
        except (InvalidPath, OSError):
            continue
    return items


def _format_size(size: int) -> str:
    """A size as the SDK's tool shows it: 0B, 18B, 4.0K, 1.5M."""
    if size == 0:
        return "0B"
    units = ["B", "K", "M", "G"]
    i = min((size.bit_length() - 1) // 10, len(units) - 1)
    value = size / (1024**i)
    return f"{int(value)}{units[i]}" if value == int(value) else f"{value:.1f}{units[i]}"


def numbered(lines: list[str], start: int) -> str:
    """Lines with right-aligned line numbers, as the SDK's tool shows a file."""
    return "\n".join(
        f"{str(n).rjust(_LINE_NUMBER_WIDTH)}\t{line}" for n, line in enumerate(lines, start)
    )


def directory_view(found: Target, stores: Iterable[Store]) -> str:
    """The listing of /memories (both stores) or of one store, with sizes."""
    # A directory's size is the total of its files: that tells Claude how much
    # there is to read, where the size of a directory entry says nothing.
    rows: list[tuple[int, str]] = []
    for store in stores if found.store is None else (found.store,):
        listing = _listing(store)
        prefix = ""
        if found.store is None:
            prefix = f"{store.level.value}/"
            rows.append((sum(size for size, _ in listing), prefix))
        rows.extend((size, prefix + name) for size, name in listing)
    total = sum(size for size, path in rows if not path.endswith("/"))
    lines = [f"{_format_size(total)}\t{found.path}"]
    lines += [f"{_format_size(size)}\t{found.path}/{path}" for size, path in rows]
    return (
        f"Here're the files and directories up to 2 levels deep in {found.path}, "
        "excluding hidden items:\n" + "\n".join(lines)
    )


def file_view(found: Target, text: str, view_range: object) -> str:
    """A file with line numbers, all of it or ``view_range`` ([first, last], -1: to the end).

    Raises:
        Refused: ``view_range`` is not a list of line numbers.
    """
    lines, start = text.split("\n"), 1
    if view_range is not None and (
        not isinstance(view_range, list) or not all(type(n) is int for n in view_range)
    ):
        raise Refused("view_range must be two line numbers, like [1, 20] (-1: to the end).")
    if view_range and len(view_range) == 2:
        first = max(1, view_range[0]) - 1
        last = len(lines) if view_range[1] == -1 else view_range[1]
        lines, start = lines[first:last], first + 1
    return f"Here's the content of {found.path} with line numbers:\n" + numbered(lines, start)


# -- the file Claude writes ----------------------------------------------------------


def fields_of(text: str, name: str, level: Level) -> Note:
    """The note in a file Claude wrote, with or without front matter (not yet stored).

    Front matter that lacks ``type`` or ``title`` gets them as if there were none:
    the type from a ``<type>_`` prefix of the name, else the store's usual type;
    the title from the first heading, else the name.

    Raises:
        Refused: front matter is there but cannot be read.
    """
    fallback_type = _type_prefix(name) or _DEFAULT_TYPES[level]
    split = _split_front_matter(text)
    if split is None and not text.lstrip("\ufeff").lstrip().startswith("---"):
        title = _first_heading(text) or _title_from_name(name)
        return Note(filename=name, type=fallback_type, title=title, body=text)
    try:
        note = parse(text, name)
    except InvalidNote as first:
        if split is None:
            raise Refused(front_matter_help(first.reason)) from None
        header, body = split
        title = _first_heading(body) or _title_from_name(name)
        # YAML keeps the last of duplicate keys, so Claude's own values win over these.
        # A JSON string is a YAML double-quoted scalar.
        defaults = [
            f"type: {fallback_type.value}",
            f"title: {json.dumps(title, ensure_ascii=False)}",
        ]
        try:
            note = parse("\n".join(["---", *defaults, *header, "---", body]), name)
        except InvalidNote:
            raise Refused(front_matter_help(first.reason)) from None
    return note


def update_of(
    level: Level, name: str, before: str, after: str, doing: str, path: str
) -> dict[str, object]:
    """The update operation that stores the edit ``before`` -> ``after`` of note ``name``.

    Raises:
        Refused: the note on disk, or the edited one, is not a valid note.
    """
    try:
        old = parse(before, name)
    except InvalidNote as exc:
        raise Refused(
            f"{doing}: {path} is not a valid note on disk ({exc.reason}), so mdmem cannot "
            "update it; view it, delete it, and create it again."
        ) from None
    try:
        note = parse(after, name)
    except InvalidNote as exc:
        raise Refused(
            f"{doing}: the edit would break the note. {front_matter_help(exc.reason)} "
            "Nothing was written."
        ) from None
    if not note.body.strip():
        raise Refused(
            f"{doing}: the note would have no text below its front matter. "
            "To remove the note, use delete."
        )
    summary = note.summary
    if summary == old.summary and summary == first_sentence(old.body, MAX_SUMMARY_CHARS):
        # A summary mdmem derived from the text follows the text, unless Claude edited it.
        summary = first_sentence(note.body, MAX_SUMMARY_CHARS) or summary
    return {
        "action": "update",
        "level": level.value,
        "filename": name,
        "type": note.type.value,
        "title": note.title,
        "summary": summary or None,
        "content": note.body,
    }


def front_matter_help(reason: str) -> str:
    """What is wrong with the front matter, and what a note's front matter looks like."""
    types = ", ".join(t.value for t in NoteType)
    return (
        f"The front matter is not valid: {reason}. A note starts with a '---' line, then YAML "
        f"with `type` (one of {types}) and `title`, optionally `summary`, then a '---' line, "
        "then the text. You may also leave the front matter out; mdmem then adds it."
    )


def _type_prefix(name: str) -> NoteType | None:
    for note_type in NoteType:
        if name.startswith(f"{note_type.value}_"):
            return note_type
    return None


def _without_type(stem: str) -> str:
    note_type = _type_prefix(stem)
    return stem[len(note_type.value) + 1 :] if note_type else stem


def _title_from_name(name: str) -> str:
    stem = _without_type(name[: -len(".md")])
    words = re.sub(r"[-_\s]+", " ", stem).strip()
    return (words[:1].upper() + words[1:]) if words else stem


def _split_front_matter(text: str) -> tuple[list[str], str] | None:
    """The front-matter lines and the body, if ``text`` opens with a closed '---' block."""
    lines = text.lstrip("\ufeff").strip().split("\n")
    if not _FENCE.match(lines[0]):
        return None
    for i in range(1, len(lines)):
        if _FENCE.match(lines[i]):
            return lines[1:i], "\n".join(lines[i + 1 :])
    return None


def _first_heading(text: str) -> str:
    match = _HEADING.search(text)
    return clean_inline(match.group(1)) if match else ""


# -- what Claude sees and edits ------------------------------------------------------


@dataclass(frozen=True)
class Shown:
    """The text of a note as ``view`` shows it and the edit commands change it.

    ``note`` is set when that text is the note's body alone: the front matter
    holds nothing but what mdmem derives from the body and the name (as for a
    file Claude wrote without one), so it is kept by mdmem and not shown.
    """

    text: str
    note: Note | None = None


def _raw_body(text: str) -> str:
    """The text after the closing '---' line of the front matter, as written."""
    lines = text.lstrip("\ufeff").split("\n")
    for i in range(1, len(lines)):
        if _FENCE.match(lines[i]):
            return "\n".join(lines[i + 1 :])
    return text


def _derived(note: Note, level: Level) -> bool:
    """Whether the note's front matter only says what mdmem would derive for a bare file."""
    if note.extra:
        return False
    if note.type is not (_type_prefix(note.filename) or _DEFAULT_TYPES[level]):
        return False
    if note.title not in (_first_heading(note.body), _title_from_name(note.filename)):
        return False
    return note.summary in ("", first_sentence(note.body, MAX_SUMMARY_CHARS))


def shown(text: str, name: str, level: Level) -> Shown:
    """What Claude sees of note ``name`` (whose file holds ``text``): see :class:`Shown`."""
    try:
        note = parse(text, name)
    except InvalidNote:
        return Shown(text)
    if not _derived(note, level):
        return Shown(text)
    return Shown(_raw_body(text), note)


def body_update(level: Level, name: str, note: Note, body: str, doing: str) -> dict[str, object]:
    """The update operation that gives note ``name`` the new ``body``, front matter derived anew.

    Raises:
        Refused: the body would be empty.
    """
    if not body.strip():
        raise Refused(f"{doing}: the note would have no text left. To remove the note, use delete.")
    title = note.title
    if title in (_first_heading(note.body), _title_from_name(name)):
        # A derived title follows the text: the first heading, else the name.
        title = _first_heading(body) or _title_from_name(name)
    return {
        "action": "update",
        "level": level.value,
        "filename": name,
        "type": note.type.value,
        "title": title,
        "summary": first_sentence(body, MAX_SUMMARY_CHARS) or None,
        "content": body,
    }
