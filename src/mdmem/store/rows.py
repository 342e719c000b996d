"""A note's row in the catalog, and the rows the coherence engine derives from it.

:func:`note_row` reads (or is handed) a note's bytes and makes its row: stat,
content hash, MEMORY.md line, fields, and the marks (supersedes, expires) that
hide it from the block. :func:`marked` and :func:`superseded` read the marked
rows back for ``marks``; :func:`head_names` lists the notes the fingerprint's
quick check rests on.
"""

from __future__ import annotations

import os

from mdmem._lines import MAX_BYTES, MAX_LINES
from mdmem.errors import InvalidNote
from mdmem.store import _catalog, files, quicknote
from mdmem.store._catalog import CatalogRow
from mdmem.store.quicknote import MAX_NOTE_BYTES
from mdmem.store.state import StateDir

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from mdmem.store.note import Note

__all__ = ["head_names", "marked", "note_row", "superseded"]


def marked(cat: _catalog.Catalog) -> dict[str, _catalog.CatalogRow]:
    """The entries ``marks`` needs: notes with supersedes/expires, and the notes they name."""
    found = cat.marked()
    targets = {t for e in found.values() for t in e.supersedes}
    for name in cat.present(targets - set(found)):
        found[name] = _catalog.CatalogRow(line="-")  # there, and valid: all marks reads
    return found


def superseded(cat: _catalog.Catalog) -> dict[str, str]:
    """Note name -> the note that supersedes it, from the catalog's marked rows."""
    from mdmem.store.marks import superseded_by

    return superseded_by(marked(cat))


def note_row(
    root: str | StateDir,
    name: str,
    st: _catalog.Stat,
    prev: _catalog.CatalogRow | None,
    known: Mapping[str, bytes],
    parsed: Note | None = None,
) -> _catalog.CatalogRow:
    """A note's catalog row, from its file (or ``known[name]``, bytes just written).

    ``prev``: its row before (unchanged bytes keep it, with the new stat);
    ``parsed``: the note the bytes ``known[name]`` were rendered from (a write's
    own), used instead of parsing them again. A note changed behind mdmem's back
    has its version before recorded in history first. ``root`` is the store's
    state (``store.state``) or its root.
    """
    from mdmem.store.dedupe import number_key
    from mdmem.store.note import format_time, index_line

    path = os.path.join(root.root if isinstance(root, StateDir) else root, name)
    data = known.get(name)
    if data is None:
        try:
            data = files.read_bytes(path, MAX_NOTE_BYTES)
        except ValueError as exc:
            return CatalogRow(st, error=f"too large: {exc}")
        except OSError as exc:
            return CatalogRow(st, error=f"cannot be read: {exc.strerror}")
    sha = _catalog.content_hash(data)
    if prev is not None and prev.sha == sha:
        return prev.with_stat(st)
    if prev is not None and prev.sha and name not in known:
        from mdmem.store import history

        # Changed behind mdmem's back: the version before is in history already.
        history.record_if_unknown(root, name, data, source="hand-edit")
    try:
        # A note as mdmem writes it read without YAML (the same values: quicknote), a
        # third of a first load's time at 10,000 notes; any other through the full parse.
        note = (
            parsed if parsed is not None and name in known else quicknote.parse(data.decode(), name)
        )
    except UnicodeDecodeError as exc:
        return CatalogRow(st, sha=sha, error=f"not UTF-8 (byte {exc.start})")
    except InvalidNote as exc:
        return CatalogRow(st, sha=sha, error=exc.reason)
    from mdmem.store.marks import note_marks

    supersedes, expires, expires_ts = note_marks(note)
    return CatalogRow(
        st,
        sha=sha,
        line=index_line(note),
        type=note.type.value,
        title=note.title,
        summary=note.summary,
        updated=format_time(note.updated) if note.updated else None,
        supersedes=supersedes,
        expires=expires,
        expires_ts=expires_ts,
        nums=number_key(note.title, note.summary, note.body),  # its dedupe group
    )


def head_names(cat: _catalog.Catalog) -> list[tuple[str, _catalog.Stat]] | None:
    """The notes (valid or not) whose lines make the first block's worth of MEMORY.md."""
    head: list[tuple[str, _catalog.Stat]] = []
    count = size = 0
    for name, entry in cat.rows(where="mtime IS NOT NULL"):
        if len(head) >= _catalog.HEAD_NAMES:
            return None
        assert entry.st is not None  # the query asks for rows with a stat
        head.append((name, entry.st))
        if entry.line:
            count += 1
            size += len(entry.line.encode("utf-8")) + 1
            if count > MAX_LINES or size > MAX_BYTES:
                break
    return head
