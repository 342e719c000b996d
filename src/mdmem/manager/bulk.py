"""Many notes into the stores at once: ``mdmem import notes``.

A source is a JSON Lines file (``-`` for stdin), one note a line::

    {"title": "Build", "content": "Run make test.", "type": "project_knowledge",
     "summary": "How to build.", "level": "project"}

(``body`` may stand for ``content``; ``type``, ``summary`` and ``level`` are
optional), or a folder of Markdown files: mdmem's own note format (front matter
with ``type``, ``title``, ``summary``), or plain Markdown, titled by its first
``# `` heading or else its file name.

Each note is a create through :meth:`mdmem.Store.apply`, so it is validated,
redacted and deduplicated like every write (the same text again is
``unchanged``, a near-duplicate updates the note it repeats), a batch at a time:
one lock, one journal and one MEMORY.md change per :data:`BATCH` notes, not per
note. A line or file that cannot be read is reported with its place and the
reason, and the others go in. Nothing here prints.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdmem._kinds import Level, NoteType
from mdmem.store import files

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping

    from mdmem.store.store import Store

__all__ = ["BATCH", "Item", "Report", "import_items", "read_source"]

#: Notes per Store.apply: large enough that the batch's fixed costs (lock, journal,
#: MEMORY.md, the catalog's transaction) are shared, small enough to show progress.
BATCH = 500
_MAX_FILE = 4 * 1024 * 1024  # a Markdown note larger than this is no note
_TYPES = {t.value for t in NoteType}


@dataclass(frozen=True)
class Item:
    """One note to import, or why its place in the source could not be read (``error``)."""

    source: str
    """Where it came from: ``file:line`` or a file's path."""
    title: str = ""
    body: str = ""
    summary: str = ""
    type: str | None = None
    level: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Report:
    """What an import did: counts by outcome, and each item refused with its reason."""

    created: int = 0
    unchanged: int = 0
    updated: int = 0
    refused: tuple[tuple[str, str], ...] = field(default=())
    """(source, reason) of every item that was not imported."""


def read_source(path: str, read_stdin: Callable[[], str] | None = None) -> list[Item]:
    """The notes of a JSON Lines file, of stdin (``-``), or of a folder of Markdown files.

    Raises:
        FileNotFoundError: no such file or folder.
        InvalidNote: a JSON Lines file that is no text (not UTF-8).
    """
    from mdmem.errors import InvalidNote

    if path == "-":
        text = read_stdin() if read_stdin is not None else ""
        return list(_json_lines(text, "stdin"))
    if os.path.isdir(path):
        return [_markdown(os.path.join(path, name)) for name in _markdown_files(path)]
    data = files.read_bytes(path, 1 << 31)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidNote(path, f"not UTF-8 (byte {exc.start})") from None
    return list(_json_lines(text, path))


def _json_lines(text: str, where: str) -> Iterator[Item]:
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        source = f"{where}:{number}"
        try:
            record = json.loads(line)
        except ValueError as exc:
            yield Item(source, error=f"not JSON ({exc})")
            continue
        yield _item(record, source)


def _item(record: object, source: str) -> Item:
    if not isinstance(record, dict):
        return Item(source, error="not a JSON object")
    fields = {k: record.get(k) for k in ("title", "content", "body", "summary", "type", "level")}
    body = fields["content"] if fields["content"] is not None else fields["body"]
    for key, value in (*fields.items(), ("content", body)):
        if value is not None and not isinstance(value, str):
            return Item(source, error=f"{key!r} is not a string")
    if not fields["title"] or not body:
        return Item(source, error="a note needs a title and a content")
    return Item(
        source,
        title=str(fields["title"]),
        body=str(body),
        summary=str(fields["summary"] or ""),
        type=fields["type"],
        level=fields["level"],
    )


def _markdown_files(folder: str) -> list[str]:
    return sorted(
        name
        for name in os.listdir(folder)
        if name.endswith(".md") and not name.startswith(".") and name.casefold() != "memory.md"
    )


def _markdown(path: str) -> Item:
    from mdmem.errors import InvalidNote
    from mdmem.store.note import parse

    try:
        text = files.read_bytes(path, _MAX_FILE).decode("utf-8")
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return Item(path, error=f"cannot be read: {reason}")
    if text.startswith("---"):
        try:
            note = parse(text, os.path.basename(path))
        except InvalidNote as exc:
            return Item(path, error=exc.reason)
        return Item(path, note.title, note.body, note.summary, note.type.value)
    lines = text.splitlines()
    heading = next((i for i, line in enumerate(lines) if line.startswith("# ")), None)
    if heading is not None:
        title = lines[heading][2:].strip()
        body = "\n".join(lines[:heading] + lines[heading + 1 :]).strip()
    else:
        title = os.path.splitext(os.path.basename(path))[0].replace("-", " ").replace("_", " ")
        body = text.strip()
    if not title or not body:
        return Item(path, error="a note needs a title and a text")
    return Item(path, title, body)


def import_items(
    stores: Mapping[Level, Store],
    items: Iterable[Item],
    *,
    level: Level = Level.PROJECT,
    batch: int = BATCH,
    progress: Callable[[int, int], None] | None = None,
) -> Report:
    """Create a note for every item, ``batch`` at a time; ``progress(done, total)`` after each.

    An item's own ``level`` wins over ``level``; its type defaults to the level's
    (``project_knowledge``, ``user_preference``).

    Raises:
        LockTimeout: a store is locked by someone else (the batches before are in).
    """
    todo = list(items)
    refused = [(i.source, i.error) for i in todo if i.error is not None]
    ops: dict[Level, list[tuple[Item, dict[str, object]]]] = {Level.PROJECT: [], Level.USER: []}
    for item in todo:
        if item.error is not None:
            continue
        where = Level(item.level) if item.level in ("project", "user") else None
        if item.level is not None and where is None:
            refused.append((item.source, f"level {item.level!r} is not project or user"))
            continue
        chosen = where or level
        kind = (
            item.type
            or (
                NoteType.PROJECT_KNOWLEDGE if chosen is Level.PROJECT else NoteType.USER_PREFERENCE
            ).value
        )
        if kind not in _TYPES:
            refused.append((item.source, f"type {kind!r} is not one of {sorted(_TYPES)}"))
            continue
        op = {"action": "create", "level": chosen.value, "type": kind, "title": item.title}
        ops[chosen].append((item, {**op, "summary": item.summary, "content": item.body}))
    total = sum(len(v) for v in ops.values())
    done = created = unchanged = updated = 0
    for chosen, pending in ops.items():
        for start in range(0, len(pending), max(1, batch)):
            chunk = pending[start : start + max(1, batch)]
            result = stores[chosen].apply([op for _, op in chunk], source="import")
            for applied in result.applied:
                if applied.action == "create":
                    created += 1
                elif applied.action == "update":
                    updated += 1
                else:
                    unchanged += 1
            for rejected in result.rejected:
                source = next((i.source for i, op in chunk if op is rejected.operation), "?")
                refused.append((source, rejected.reason))
            done += len(chunk)
            if progress is not None:
                progress(done, total)
    return Report(created, unchanged, updated, tuple(refused))
