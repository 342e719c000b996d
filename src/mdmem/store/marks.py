"""What the prompt block leaves out (superseded, expired notes) or marks (stale notes).

MEMORY.md on disk lists every note; a person reading it sees them all. The
prompt block is assembled from it by :func:`prompt_index`, which drops the
lines of notes that another note ``supersedes`` or whose ``expires`` time has
come, and marks the lines of notes that name files the code no longer has
(``[stale: path gone: …]``, from :mod:`mdmem.store.stale`'s cache).

Both facts are kept in small text files in the store's state folder, written
when the catalog is, so a settled store answers with two small reads and no
parse: ``marks`` (``S<TAB>note<TAB>by`` and ``E<TAB>note<TAB>epoch seconds``)
and ``stale.marks`` (see :mod:`mdmem.store.stale`). Only ``os`` and ``time`` are
imported at the top: this module is on the ``mdmem index`` path.
"""

from __future__ import annotations

import os
import time

from mdmem.store.paths import INDEX_NAME
from mdmem.store.state import MARKS, STALE_MARKS, StateDir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Protocol

    from mdmem.store._catalog import CatalogRow
    from mdmem.store.note import IndexEntry, NoteFields

    class Store(Protocol):
        """What this module needs of a store (``Store`` is one; not imported: no cycle)."""

        @property
        def path(self) -> str: ...

        @property
        def state(self) -> StateDir: ...

        def load_index(self) -> str: ...

        def _settle_index(self) -> None: ...

        def catalog_current(self, max_age: float = ..., *, watched: bool = ...) -> int | None: ...

        def entries(self) -> list[IndexEntry]: ...


__all__ = [
    "MARKS",
    "STALE_MARKS",
    "cached_marks",
    "dated_index",
    "hidden",
    "left_out",
    "note_marks",
    "prompt_index",
    "ranked_index",
    "save",
    "superseded_by",
    "tree_key",
    "visible_lines",
]

# The shortest MEMORY.md line there can be ("- [t] x (n.md)" and its newline), in bytes.
_MIN_LINE = 16


def note_marks(note: NoteFields) -> tuple[tuple[str, ...], str | None, float | None]:
    """What a note's ``supersedes`` and ``expires`` keys give its catalog row: the notes
    it supersedes, when it expires and that moment in epoch seconds (empty: none).

    Hand-written values are read leniently: a name that is not a note name, or
    a date that is not a date, is ignored rather than breaking the note.
    """
    from mdmem.errors import InvalidNote, InvalidPath
    from mdmem.store.note import format_time, parse_time
    from mdmem.store.paths import check_name

    raw = note.extra.get("supersedes")
    names = [raw] if isinstance(raw, str) else raw if isinstance(raw, list) else []
    valid = []
    for name in names:
        if not isinstance(name, str):
            continue
        # A name a write checked (a NoteName) is passed as it is, not checked again.
        name = name if name.strip() == name else name.strip()
        try:
            if check_name(name) != note.filename:
                valid.append(name)
        except InvalidPath:
            continue
    try:
        moment = parse_time(note.extra.get("expires"), "expires", note.filename)
    except InvalidNote:
        moment = None
    if moment is None:
        return tuple(valid), None, None
    return tuple(valid), format_time(moment), moment.timestamp()


def superseded_by(entries: Mapping[str, CatalogRow]) -> dict[str, str]:
    """Note name -> the note of the same store that supersedes it (the first, by name)."""
    out: dict[str, str] = {}
    for name in sorted(entries):
        row = entries[name]
        if not row.supersedes or not row.line:
            continue
        for target in row.supersedes:
            if target in entries and target != name:
                out.setdefault(target, name)
    return out


def hidden(entries: Mapping[str, CatalogRow], now: float | None = None) -> dict[str, str]:
    """Note name -> why it is left out of the prompt block and recall, at ``now`` (epoch s)."""
    moment = time.time() if now is None else now
    out = {name: f"superseded by {by}" for name, by in superseded_by(entries).items()}
    for name, row in entries.items():
        if row.expires_ts is not None and row.expires_ts <= moment and name not in out:
            out[name] = f"expired {row.expires}"
    return out


def save(root: str | StateDir, entries: Mapping[str, CatalogRow]) -> None:
    """Write the ``marks`` file of a store from its catalog entries (removed when empty).

    ``root`` is the store's state (``store.state``) or its root, as for every
    function here that reads the marks.
    """
    import contextlib

    from mdmem.store import files

    lines = [f"S\t{name}\t{by}" for name, by in sorted(superseded_by(entries).items())]
    for name, row in sorted(entries.items()):
        if row.expires_ts is not None and row.line:
            lines.append(f"E\t{name}\t{row.expires_ts!r}")
    state = StateDir.of(root)
    path = state.marks
    text = "".join(line + "\n" for line in lines)
    try:
        if not text:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
            return
        with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
        state.ensure()
        files.atomic_write(path, text.encode("utf-8"), private=True, durable=False)
    except OSError:
        pass


def _read_marks(root: str | StateDir, now: float) -> dict[str, str]:
    try:
        with open(StateDir.of(root).marks, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError):
        return {}
    out: dict[str, str] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        name, _, value = rest.partition("\t")
        if kind == "S":
            out[name] = f"superseded by {value}"
        elif kind == "E":
            try:
                if float(value) <= now and name not in out:
                    out[name] = "expired"
            except ValueError:
                continue
    return out


def left_out(store: Store, now: float | None = None) -> dict[str, str]:
    """Notes of ``store`` that recall and the prompt block leave out: name -> why.

    Superseded notes, and notes whose ``expires`` time has come; from the
    ``marks`` file, so it costs one small read (call ``store.load_index()``
    first if notes may have changed behind mdmem's back).
    """
    return _read_marks(store.state, time.time() if now is None else now)


# -- staleness marks: the tree's state, read from files (no git process) ----------


def _git_dir(workspace: str) -> str | None:
    dot = os.path.join(workspace, ".git")
    if os.path.isdir(dot):
        return dot
    try:
        with open(dot, encoding="utf-8") as f:
            line = f.read(4096).strip()
    except (OSError, UnicodeDecodeError):
        return None
    if line.startswith("gitdir:"):
        target = line[len("gitdir:") :].strip()
        return target if os.path.isabs(target) else os.path.join(workspace, target)
    return None


def tree_key(workspace: str) -> str:
    """What the cache is valid for: HEAD's commit and the git index's stat ("none": no git)."""
    git = _git_dir(workspace)
    if git is None:
        return "none"
    head = ""
    try:
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as f:
            head = f.read(4096).strip()
        if head.startswith("ref:"):
            ref = head[4:].strip()
            try:
                with open(os.path.join(git, ref), encoding="utf-8") as f:
                    head = f.read(100).strip()
            except FileNotFoundError:
                head = ref  # packed: the packed-refs stat below covers it
    except (OSError, UnicodeDecodeError):
        pass
    parts = [head]
    for name in ("index", "packed-refs"):
        try:
            st = os.stat(os.path.join(git, name))
            parts.append(f"{st.st_mtime_ns}:{st.st_size}")
        except OSError:
            parts.append("-")
    return "|".join(parts)


def cached_marks(root: str | StateDir) -> dict[str, str]:
    """Note -> short reason, from the last :func:`check`, if the tree is still as it was then."""
    try:
        with open(StateDir.of(root).stale_marks, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    if not lines:
        return {}
    key, _, workspace = lines[0].partition("\t")
    if tree_key(workspace) != key:
        return {}
    out = {}
    for line in lines[1:]:
        name, _, reason = line.partition("\t")
        if name and reason:
            out[name] = reason
    return out


def _filename_of(line: str) -> str | None:
    if not line.endswith(")"):
        return None
    start = line.rfind(" (")
    return line[start + 2 : -1] if start != -1 else None


def visible_lines(
    index: str, leave_out: Mapping[str, str], stale: Mapping[str, str] | None = None
) -> str:
    """MEMORY.md text without the lines of ``leave_out``, stale lines marked before the name."""
    if not leave_out and not stale:
        return index
    out = []
    for line in index.splitlines():
        name = _filename_of(line.rstrip())
        if name is not None and name in leave_out:
            continue
        if name is not None and stale and name in stale:
            line = line.rstrip()
            cut = line.rfind(" (")
            line = f"{line[:cut]} [stale: {stale[name]}]{line[cut:]}"
        out.append(line)
    return "\n".join(out) + "\n" if out else ""


def prompt_index(store: Store, now: float | None = None) -> str:
    """The store's index as the prompt block shows it: current notes only, stale ones marked.

    Reads MEMORY.md (brought up to date first, see :meth:`Store.load_index`)
    and two small state files; never parses a note of a settled store, never
    runs git.
    """
    text = store.load_index()
    if not text:
        return text
    moment = time.time() if now is None else now
    leave_out = _read_marks(store.state, moment)
    stale = cached_marks(store.state)
    return visible_lines(text, leave_out, stale)


def ranked_index(
    store: Store, limit: int, now: float | None = None
) -> tuple[str, int | None, dict[str, str]]:
    """The store's prompt index, or for a large store only its ``limit`` best lines.

    ``(text, total, times)``: for a store of more than ``2 * limit`` notes,
    ``text`` holds the first ``limit`` shown lines in the prompt block's order
    (as :func:`prompt_index` would show them, in MEMORY.md's order), ``total``
    how many lines :func:`prompt_index` would show, ``times`` their
    ``updated`` times; otherwise ``(prompt_index(store), None, {})``. A large
    store's lines come from its catalog, so they are there even when MEMORY.md
    is too large to read whole.
    """
    if getattr(store, "unavailable", None) is not None:
        return "", None, {}
    moment = time.time() if now is None else now
    # Only a MEMORY.md long enough for more than 2 * limit lines can be ranked by the
    # catalog: a small store's block is read without opening it.
    try:
        big = os.lstat(os.path.join(store.path, INDEX_NAME)).st_size > 2 * limit * _MIN_LINE
    except OSError:
        big = False
    # A watch (this process's or the user's watcher) compared every note changed since
    # the last stat pass with its row: then the rows are as current as the notes.
    count = store.catalog_current(watched=True) if big else None
    watched = count is not None
    if big and count is None:
        count = store.catalog_current()
    if count is not None and count > 2 * limit:
        # Settled at the last stat pass, and every change since is in the change log
        # (an mdmem write): the catalog is current, no stat pass needed.
        from mdmem.store._catalog_reads import ranked_lines

        hide = _read_marks(store.state, moment)
        # Unwatched, each line it shows checked against its note (an edit in place moves
        # no key).
        found = ranked_lines(store.state, limit, hide, count=count, verify=not watched)
        if found is not None and found[0] > 2 * limit:
            return _ranked(found, store.state)
    elif count is not None:
        # A small store whose catalog is current: its whole index is its rows' lines in
        # file-name order, MEMORY.md's (unwatched, each checked against its note): no
        # stat pass of the store, no write after mdmem's own.
        from mdmem.store._catalog_reads import ranked_lines

        hide = _read_marks(store.state, moment)
        found = ranked_lines(store.state, count, hide, count=count, verify=not watched)
        if found is not None and found[0] == len(found[1]) and found[0] <= 2 * limit:
            lines = sorted(found[1])
            text = "".join(f"{line}\n" for _, line, _ in lines)
            return visible_lines(text, {}, cached_marks(store.state)), None, {}
    if big:
        # The stat pass alone: the lines come from the catalog, MEMORY.md is not read
        # (its text at 100,000 notes is what took the first load past 100 MiB).
        store._settle_index()
        from mdmem.store._catalog_reads import ranked_lines

        leave_out = _read_marks(store.state, moment)
        found = ranked_lines(store.state, limit, leave_out) if os.path.isdir(store.path) else None
        if found is not None and found[0] > 2 * limit:
            return _ranked(found, store.state)
    text = store.load_index()  # the stat pass: brings the catalog up to date
    leave_out = _read_marks(store.state, moment)
    if text and text.count("\n") <= 2 * limit:
        return visible_lines(text, leave_out, cached_marks(store.state)), None, {}
    from mdmem.store._catalog_reads import ranked_lines

    found = ranked_lines(store.state, limit, leave_out) if os.path.isdir(store.path) else None
    if found is None or found[0] <= 2 * limit:
        return visible_lines(text, leave_out, cached_marks(store.state)) if text else "", None, {}
    return _ranked(found, store.state)


def _ranked(
    found: tuple[int, list[tuple[str, str, str | None]]], root: str | StateDir
) -> tuple[str, int, dict[str, str]]:
    """:func:`ranked_index`'s answer from the catalog's ranked rows."""
    total, rows = found
    kept = sorted(rows, key=lambda r: r[0])
    lines = "\n".join(line for _, line, _ in kept) + "\n"
    times = {name: updated for name, _, updated in kept if updated}
    return visible_lines(lines, {}, cached_marks(root)), total, times


def dated_index(store: Store, text: str | None = None) -> str:
    """Index lines with each note's last update (and expiry) before its file name.

    For the extraction prompt: the model sees how old a note is, so it can
    tell a fact that changed from one that is still true. Without ``text``,
    the whole prompt index (every note: grows with the store); with it, only
    those lines (the prompt block's, at most 200), each dated by one catalog
    lookup.
    """
    if text is None:
        text = prompt_index(store)
        names = None
    else:
        names = [n for n in map(_filename_of, text.splitlines()) if n is not None]
    if not text:
        return text
    dates: dict[str, str] = {}
    if names is None:
        found = {e.filename: (e.updated, e.expires) for e in store.entries()}
    else:
        from mdmem.store._catalog_reads import dates_of

        found = dates_of(store.state, names)
    for filename, (updated, expires) in found.items():
        parts = [f"updated {updated[:10]}"] if updated else []
        if expires:
            parts.append(f"expires {expires[:10]}")
        if parts:
            dates[filename] = ", ".join(parts)
    out = []
    for line in text.splitlines():
        name = _filename_of(line.rstrip())
        if name is not None and name in dates:
            cut = line.rstrip().rfind(" (")
            line = f"{line[:cut]} [{dates[name]}]{line.rstrip()[cut:]}"
        out.append(line)
    return "\n".join(out) + "\n"
