"""What the web page shows and does, without any HTTP: rows, markers, the overview, the edits.

Every change goes through the stores' own API (``Store.save``, ``Store.apply``,
``Store.restore``), exactly as the command line does, so the page validates,
redacts, locks and journals the same way and keeps no state of its own.

Features that other parts of mdmem may or may not offer yet (a note's history,
proposals waiting for review, more markers) are looked up with ``getattr`` on
the store: a section of the page appears only when its API is there.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidNote, InvalidPath, NoteNotFound, StoreError
from mdmem.extract.turn import estimate_tokens
from mdmem.store.block import MAX_BYTES, MAX_LINES, prompt_block
from mdmem.store.note import clean_inline, parse, parse_time, render
from mdmem.ui import features

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from mdmem.store.note import IndexEntry, Note
    from mdmem.store.results import Problem, TrashItem
    from mdmem.store.store import Store

__all__ = [
    "FRESH_SECONDS",
    "PAGE_SIZE",
    "SORTS",
    "Edited",
    "Overview",
    "Row",
    "Stores",
    "digest",
    "expire",
    "marked_notes",
    "markers_of",
    "note_markers",
    "overview",
    "page_rows",
    "save_fields",
    "save_source",
    "search_rows",
    "trash_of",
    "version",
]

_MARKER_KEYS = ("supersedes", "expires")
SORTS = {
    "updated": "newest first",
    "oldest": "oldest first",
    "title": "title",
    "name": "file name",
}
_OLDEST = datetime.min.replace(tzinfo=timezone.utc)


@dataclass(frozen=True)
class Stores:
    """The workspace and its two stores: everything the page reads and writes."""

    workspace: str
    project: Store
    user: Store

    def get(self, level: str) -> Store:
        """The store of that level.

        Raises:
            ValueError: not ``project`` or ``user``.
        """
        return self.project if Level(level) is Level.PROJECT else self.user

    def both(self) -> tuple[Store, Store]:
        """The project store, then the user store."""
        return self.project, self.user


@dataclass(frozen=True)
class Row:
    """One note as the list shows it."""

    level: Level
    filename: str
    type: str
    title: str
    summary: str
    updated: datetime | None
    markers: Mapping[str, str] = field(default_factory=dict)
    """Marker name (``superseded``, ``expired``, ...) to the words shown for it."""
    snippet: str = ""
    score: float | None = None


def digest(text: str) -> str:
    """The hash a form carries of the file it was opened on, to notice a change meanwhile."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


# -- markers -----------------------------------------------------------------------


def _names(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)):
        return [v for v in value if isinstance(v, str)]
    return []


def markers_of(store: Store, notes: Iterable[Note], now: datetime) -> dict[str, dict[str, str]]:
    """File name to its markers, from the front matter and from whatever else the store offers.

    ``superseded`` when another note of the store names it in ``supersedes:``;
    ``expired`` once its ``expires:`` date is past (``expires`` before that).
    Then whatever else mdmem keeps about notes (stale, disputed, a proposal
    waiting): see :func:`mdmem.ui.features.markers`.
    """
    notes = list(notes)
    out: dict[str, dict[str, str]] = {}
    for note in notes:
        for target in _names(note.extra.get("supersedes")):
            out.setdefault(target, {})["superseded"] = f"superseded by {note.filename}"
    for note in notes:
        raw = note.extra.get("expires")
        if raw is None:
            continue
        try:
            moment = parse_time(raw, "expires", note.filename)
        except InvalidNote:
            out.setdefault(note.filename, {})["expires"] = "expires: not a date"
            continue
        if moment is None:
            continue
        when = moment.date().isoformat()
        key, words = ("expired", f"expired {when}") if moment <= now else ("expires", when)
        out.setdefault(note.filename, {})[key] = words
    for name, more in features.markers(store).items():
        out.setdefault(name, {}).update(more)
    return out


# -- listing and searching ---------------------------------------------------------


def marked_notes(store: Store) -> list[Note]:
    """The notes whose front matter may hold a marker key, parsed; the others are not.

    A text scan for the keys (``supersedes``, ``expires``) comes first: a key
    cannot be in the front matter without its name being in the file, and
    reading a small file is much cheaper than parsing its YAML.
    """
    out = []
    for entry in store.entries():
        try:
            text = store.read_text(entry.filename)
            if any(key in text for key in _MARKER_KEYS):
                out.append(parse(text, entry.filename))
        except (NoteNotFound, InvalidNote, InvalidPath):
            continue  # changed under our feet; the next listing shows it
    return out


def note_markers(store: Store, note: Note, now: datetime) -> dict[str, str]:
    """The markers of one note, for its page: from its front matter, the store's marks file
    (superseded) and whatever else mdmem keeps (never a pass over every note)."""
    out = markers_of(store, [note], now).get(note.filename, {})
    from mdmem.store.marks import left_out

    why = left_out(store).get(note.filename, "")
    if why.startswith("superseded"):
        out["superseded"] = why
    return out


#: Notes on one page of the list (and of search results).
PAGE_SIZE = 50
#: A page reads the catalog without a stat pass of every note when one ran this
#: recently (and mdmem's change log accounts for every change since): a note edited
#: in place behind mdmem's back shows on the list within this many seconds.
FRESH_SECONDS = 5.0


def _entry_marks(entry: IndexEntry, now: datetime) -> dict[str, str]:
    """The markers an index entry itself carries: superseded, expired or expiring."""
    out: dict[str, str] = {}
    if entry.superseded_by:
        out["superseded"] = f"superseded by {entry.superseded_by}"
    if entry.expires:
        try:
            moment = parse_time(entry.expires, "expires", entry.filename)
        except InvalidNote:
            out["expires"] = "expires: not a date"
        else:
            if moment is not None:
                when = moment.date().isoformat()
                out.update({"expired": f"expired {when}"} if moment <= now else {"expires": when})
    return out


def _fold_ascii(text: str) -> str:
    # The catalog sorts titles COLLATE NOCASE: ASCII letters folded, nothing else.
    return "".join(c.lower() if c.isascii() else c for c in text)


def page_rows(
    stores: Iterable[Store],
    *,
    level: str | None = None,
    note_type: str | None = None,
    sort: str = "updated",
    page: int = 1,
    size: int = PAGE_SIZE,
    now: datetime | None = None,
) -> tuple[int, list[Row]]:
    """How many notes match, and page ``page`` (from 1) of them as rows with their markers.

    Filtered, counted and sorted by each store's catalog (:meth:`Store.query`);
    with both stores, their first ``page * size`` sort keys (two columns,
    :meth:`Store.order_keys`) are merged to learn which rows of each are on the
    page, and only those are read: a page never costs a pass over every note.
    """
    moment = now or datetime.now(timezone.utc)
    order = sort if sort in SORTS else "updated"
    chosen = [s for s in stores if not level or s.level.value == level]
    offset = (page - 1) * size
    total = 0
    ranges: dict[Level, tuple[int, int]] = {}
    if len(chosen) == 1:
        ranges[chosen[0].level] = (offset, size)
    else:
        # Merge the two stores' orders on their sort keys alone, to learn which rows of
        # each fall on this page; then read only those rows.
        merged: list[tuple[str, str, Level]] = []
        for store in chosen:
            keys = store.order_keys(
                type=note_type, order=order, limit=offset + size, max_age=FRESH_SECONDS
            )
            merged += [(name, key, store.level) for name, key in keys]
        merged.sort(key=lambda k: (k[0], k[2].value))
        if order == "title":
            merged.sort(key=lambda k: _fold_ascii(k[1]))
        elif order in ("updated", "oldest"):
            merged.sort(key=lambda k: k[1], reverse=order == "updated")
        for store in chosen:
            before = sum(1 for k in merged[:offset] if k[2] is store.level)
            shown = sum(1 for k in merged[offset : offset + size] if k[2] is store.level)
            ranges[store.level] = (before, shown)
    found: list[tuple[Store, IndexEntry]] = []
    for store in chosen:
        start, count = ranges[store.level]
        number, entries = store.query(
            type=note_type, order=order, offset=start, limit=count, max_age=FRESH_SECONDS
        )
        total += number
        found += [(store, e) for e in entries]
    found.sort(key=lambda p: (p[1].filename, p[0].level.value))
    if order == "title":
        found.sort(key=lambda p: _fold_ascii(p[1].title))
    elif order in ("updated", "oldest"):
        found.sort(key=lambda p: p[1].updated or "", reverse=order == "updated")
    marks = {s.level: features.markers(s) for s in chosen}
    out = []
    for store, entry in found:
        try:
            updated = parse_time(entry.updated, "updated", entry.filename)
        except InvalidNote:
            updated = None
        out.append(
            Row(
                level=store.level,
                filename=entry.filename,
                type=entry.type,
                title=clean_inline(entry.title),
                summary=clean_inline(entry.summary),
                updated=updated,
                markers={
                    **_entry_marks(entry, moment),
                    **marks[store.level].get(entry.filename, {}),
                },
            )
        )
    return total, out


def sort_rows(items: list[Row], sort: str) -> list[Row]:
    """``items`` in the order ``sort`` names (one of :data:`SORTS`; else newest first)."""
    out = sorted(items, key=lambda r: (r.filename, r.level.value))
    if sort == "title":
        out.sort(key=lambda r: r.title.casefold())
    elif sort == "name":
        pass
    elif sort == "oldest":
        out.sort(key=lambda r: r.updated or _OLDEST)
    else:
        out.sort(key=lambda r: r.updated or _OLDEST, reverse=True)
    return out


def search_rows(
    query: str,
    stores: Iterable[Store],
    *,
    level: str | None = None,
    note_type: str | None = None,
    limit: int = 200,
    offset: int = 0,
) -> list[Row]:
    """The notes that match ``query``, best first, as rows with their markers and a snippet:
    the ``limit`` from ``offset`` on.

    Ranked by the recall engine where this mdmem has one (which leaves out
    superseded and expired notes, as recall does), else by keyword search.
    Nothing is read of the notes the page does not show.
    """
    chosen = [s for s in stores if not level or s.level.value == level]
    marks: dict[tuple[Level, str], Mapping[str, str]] = {}
    for store in chosen:
        for name, found in features.markers(store).items():
            marks[(store.level, name)] = found
    out = []
    hits = features.search(query, chosen, note_type=note_type, limit=offset + limit)
    for hit in hits[offset:]:
        key = (Level(hit.level), hit.filename)
        kind = str(getattr(hit, "type", ""))
        if note_type and kind and kind != note_type:
            continue
        out.append(
            Row(
                level=key[0],
                filename=hit.filename,
                type=kind,
                title=clean_inline(hit.title),
                summary=clean_inline(hit.summary),
                updated=hit.updated,
                markers=marks.get(key, {}),
                snippet=clean_inline(hit.snippet),
                score=hit.score,
            )
        )
    return out


# -- the overview ------------------------------------------------------------------


@dataclass(frozen=True)
class Overview:
    """Counts by level and type, the prompt block as the next session sees it, its size."""

    counts: Mapping[tuple[str, str], int]
    problems: Mapping[str, list[Problem]]
    trash: Mapping[str, int]
    block: str
    lines: int
    bytes: int
    tokens: int
    max_lines: int = MAX_LINES
    max_bytes: int = MAX_BYTES


def overview(stores: Stores) -> Overview:
    """The page's overview of both stores."""
    counts: Counter[tuple[str, str]] = Counter()
    problems: dict[str, list[Problem]] = {}
    trash: dict[str, int] = {}
    for store in stores.both():
        for entry in store.entries():
            counts[(store.level.value, entry.type)] += 1
        problems[store.level.value] = store.problems()
        trash[store.level.value] = len(store.trash())
    # The very function Manager.index uses.
    block = prompt_block(stores.project, stores.user)
    data = block.encode("utf-8")
    return Overview(
        counts=dict(counts),
        problems=problems,
        trash=trash,
        block=block,
        lines=len(block.splitlines()),
        bytes=len(data),
        tokens=estimate_tokens(block),
    )


# -- editing -----------------------------------------------------------------------


@dataclass(frozen=True)
class Edited:
    """What came of a save: the store's action, or why nothing was written.

    ``current`` is the file's text on disk when the save was refused because
    it changed since the form was opened; ``base`` the digest a new form should carry.
    """

    action: str | None = None
    error: str | None = None
    current: str | None = None
    base: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the note was saved (or was already as given)."""
        return self.action is not None


def _conflict(current: str) -> Edited:
    return Edited(
        error=(
            "the note changed on disk since this form was opened; nothing was saved. "
            "Your text is kept below, and the version on disk is shown under it: "
            "saving again replaces that version."
        ),
        current=current,
        base=digest(current),
    )


def _save(store: Store, note: Note, current: str) -> Edited:
    """Save through the store, with the same checks as ``mdmem edit``."""
    if not note.body:
        return Edited(error="the body is empty (to remove the note, delete it)")
    try:
        action = store.save(note, expect=current)
    except StoreError:
        try:
            again = store.read_text(note.filename)
        except NoteNotFound:
            return Edited(error="the note was deleted meanwhile; nothing was saved")
        return _conflict(again)
    return Edited(action=action)


def _current(store: Store, filename: str, base: str) -> tuple[str, Edited | None]:
    current = store.read_text(filename)
    return current, (None if digest(current) == base else _conflict(current))


def save_fields(
    store: Store, filename: str, base: str, *, title: str, summary: str, type: str, body: str
) -> Edited:
    """Save a note's title, summary, type and body, keeping the rest of its front matter.

    Nothing is written when ``base`` (the digest of the file the form was opened
    on) no longer matches the file, or when the result would not be a valid note.

    Raises:
        InvalidPath: not a note name, or it escapes the store.
        NoteNotFound: no such note.
        LockTimeout: the store is locked by someone else.
    """
    current, refused = _current(store, filename, base)
    if refused is not None:
        return refused
    try:
        before = parse(current, filename)
    except InvalidNote as exc:
        return Edited(error=f"{exc.reason}; fix the file in the source editor")
    try:
        kind = NoteType(type)
    except ValueError:
        choices = ", ".join(t.value for t in NoteType)
        return Edited(error=f"type: {type!r} is not one of {choices}")
    changed = before.with_changes(
        title=title.strip(), summary=summary.strip(), type=kind, body=body.strip()
    )
    try:
        # Through the file format and back: the same checks a file saved in an editor gets.
        note = parse(render(changed), filename)
    except InvalidNote as exc:
        return Edited(error=exc.reason)
    return _save(store, note, current)


def expire(store: Store, filename: str, base: str, now: datetime | None = None) -> Edited:
    """Mark a note expired as of now (``expires:`` in its front matter), keeping the rest.

    From then on it is left out of the prompt block and of recall, and
    ``mdmem prune`` moves it to the trash; removing the key brings it back.

    Raises:
        InvalidPath: not a note name, or it escapes the store.
        NoteNotFound: no such note.
        LockTimeout: the store is locked by someone else.
    """
    current, refused = _current(store, filename, base)
    if refused is not None:
        return refused
    try:
        note = parse(current, filename)
    except InvalidNote as exc:
        return Edited(error=f"{exc.reason}; fix the file in the source editor")
    moment = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    return _save(store, note.with_changes(extra={**note.extra, "expires": moment}), current)


def save_source(store: Store, filename: str, base: str, text: str) -> Edited:
    """Save a note's whole file text (front matter included), as ``mdmem edit`` does.

    Raises:
        InvalidPath: not a note name, or it escapes the store.
        NoteNotFound: no such note.
        LockTimeout: the store is locked by someone else.
    """
    current, refused = _current(store, filename, base)
    if refused is not None:
        return refused
    try:
        note = parse(text, filename)
    except InvalidNote as exc:
        return Edited(error=exc.reason)
    return _save(store, note, current)


# -- live pages ------------------------------------------------------------------


def version(stores: Stores) -> str:
    """A short stamp that changes when what the live pages show changes: a store's notes
    (its directory and MEMORY.md), the sessions' activity, disputes, proposals waiting."""
    import os

    from mdmem.recall.disputes import FEEDBACK_FILE
    from mdmem.store import activity, catalog

    parts: list[str] = []
    for store in stores.both():
        parts.append(catalog.store_key(store.path))
        base = store.state.path
        for path in (os.path.join(base, FEEDBACK_FILE), os.path.join(base, "review")):
            try:
                st = os.stat(path)
            except OSError:
                parts.append("-")
            else:
                parts.append(f"{st.st_mtime_ns}:{st.st_size}")
        parts.append(str(len(features.proposals_of(store) or [])))
    newest = max((s[2] for s in activity.sessions(stores.project.path)), default=0.0)
    parts.append(repr(newest))
    return hashlib.blake2b("|".join(parts).encode("utf-8", "replace"), digest_size=8).hexdigest()


# -- the trash --------------------------------------------------------------------


def trash_of(stores: Stores) -> list[tuple[Level, TrashItem]]:
    """Both stores' trash, newest first."""
    items = [(store.level, item) for store in stores.both() for item in store.trash()]
    return sorted(items, key=lambda pair: pair[1].deleted_at, reverse=True)
