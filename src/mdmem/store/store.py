"""Store: one directory of Markdown notes plus its MEMORY.md index.

The notes are the source of truth; MEMORY.md and everything in mdmem's state folder
follow them and can be rebuilt at any time (:meth:`Store.reindex`). Every
read-modify-write happens under the store's file lock, so several processes
(agents, a person's CLI, a git hook) can share one store.

:class:`Store` is the facade (DESIGN.md's names): reads, writes, the trash and
history. What keeps the notes, the catalog and MEMORY.md in agreement is the
coherence engine (``store/sync.py``), the locks are ``store/locks.py``, the
planner and the batch journal are ``_planner`` and ``_txn``.
"""

from __future__ import annotations

import os

from mdmem._kinds import Level
from mdmem._lines import MAX_BYTES, MAX_LINES
from mdmem.errors import (
    InvalidNote,
    InvalidPath,
    NoteExists,
    NoteNotFound,
    StoreError,
)
from mdmem.store import _catalog, files, watch
from mdmem.store.locks import Held, Locks
from mdmem.store.paths import (
    INDEX_NAME,
    MAX_INDEX_BYTES,
    note_path,
    project_problem,
)
from mdmem.store.quicknote import MAX_NOTE_BYTES, read_note_text
from mdmem.store.rows import superseded
from mdmem.store.state import StateDir
from mdmem.store.sync import Coherence

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
    from datetime import datetime
    from pathlib import Path

    from mdmem.store._planner import Planner
    from mdmem.store.history import Version
    from mdmem.store.note import IndexEntry, Note
    from mdmem.store.operations import Operation, ValidOperation
    from mdmem.store.results import ApplyResult, Hit, Problem, ReindexReport, TrashItem

    Progress = Callable[[int, int], None] | None
    Near = tuple[str, str, str]  # a dedupe candidate: name, title, summary

__all__ = ["MAX_NOTE_BYTES", "Store", "prepare_writes"]


class Store:
    """One store of notes: a directory, its MEMORY.md and its lock.

    ``Store(root, Level.PROJECT)``; the user store's files are private to
    their owner (``0600``, directories ``0700``).

    A project store that must not be used (:func:`~mdmem.store.paths.project_problem`:
    it is the user store, or a committed symlink) has its reason in
    :attr:`unavailable`: it reads as empty, and every write raises ``StoreError``.
    ``user_store`` is the user store this project store is checked against.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        level: Level | str,
        *,
        lock_timeout: float | None = None,
        redact: Callable[[str], str] | None = None,
        user_store: str | None = None,
    ) -> None:
        self._root = os.path.abspath(os.fspath(root))
        self.level = Level(level)
        self.private = self.level is Level.USER
        self.unavailable: str | None = (
            project_problem(self._root, user_store) if self.level is Level.PROJECT else None
        )
        #: mdmem's own folder for this store (catalog, journals, trash, history...): named once.
        self.state = StateDir.of(self._root)
        if lock_timeout is None:
            lock_timeout = float(os.environ.get("MDMEM_LOCK_TIMEOUT", "10"))
        self._redact = redact
        self._locks = Locks(
            self._root, self.state, private=self.private, usable=self.unavailable is None
        )
        #: What keeps the notes, the catalog and MEMORY.md in agreement (store/sync.py).
        self._engine = Coherence(
            self._root,
            state=self.state,
            private=self.private,
            usable=self.unavailable is None,
            lock_timeout=lock_timeout,
            lock=self._locks.write,
        )
        # Where the store's watch stood at this object's last stat pass (store/watch.py).
        self._watch_point: tuple[int, int] | None = None

    @property
    def lock_timeout(self) -> float:
        """Seconds a write waits for the store's lock (``MDMEM_LOCK_TIMEOUT``, 10)."""
        return self._engine.lock_timeout

    @lock_timeout.setter
    def lock_timeout(self, seconds: float) -> None:
        self._engine.lock_timeout = seconds

    def __repr__(self) -> str:
        return f"Store({self._root!r}, {self.level.value!r})"

    @property
    def root(self) -> Path:
        """The store's directory."""
        from pathlib import Path

        return Path(self._root)

    @property
    def path(self) -> str:
        """The store's directory, as a string."""
        return self._root

    # -- locking -------------------------------------------------------------------

    def lock(self, timeout: float | None = None) -> Held:
        """Hold the store's write lock (re-entrant in one thread), finishing any interrupted batch.

        Use as ``with store.lock():``.

        Raises:
            LockTimeout: another process held it for longer than ``timeout``.
        """
        return self._locks.write(self.lock_timeout if timeout is None else timeout)

    def turn_lock(self, timeout: float) -> Held:
        """Hold the lock that serialises memory updates of whole turns across processes.

        Separate from :meth:`lock`: it is held across a model call, which may
        take a while, and a person's edits must not wait for that.

        Raises:
            LockTimeout: another process held it for longer than ``timeout``.
        """
        return self._locks.turn(timeout)

    # -- reading -------------------------------------------------------------------

    def load_index(self) -> str:
        """MEMORY.md's text, first brought up to date with notes changed behind mdmem's back."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return ""
        # Watched (a long-lived process): from this stat pass on, the watch names what
        # changes, so catalog_current need not make another (store/watch.py).
        self._watch_point = watch.since(self._root, None)[0] if watch.active(self._root) else None
        index_path = os.path.join(self._root, INDEX_NAME)
        if self._watch_point is None and self._engine.catalog_current(0, vouched=True):
            # The user's watcher named every change since the last stat pass, and the
            # rows (so MEMORY.md) are in step with them: no listing (store/watcher.py).
            text = files.read_text(index_path, MAX_INDEX_BYTES)
            if text is not None:
                return text
        scan = _catalog.Scan(self._root)
        fp = _catalog.read_fingerprint(self.state)
        if fp is not None and scan.fingerprint() == fp.full:
            text = files.read_text(index_path, MAX_INDEX_BYTES)
            if text is not None or scan.index_stat is None:
                return text or ""
        text, _ = self._engine.sync(scan)
        if text is None:
            text = files.read_text(index_path, MAX_INDEX_BYTES) or ""
        return text

    def _settle_index(self) -> None:
        """:meth:`load_index`'s stat pass without reading MEMORY.md: a large store's
        prompt block takes its lines from the catalog (``marks.ranked_index``), and
        MEMORY.md's whole text at 100,000 notes is ~50 MB once read and decoded."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return
        self._watch_point = watch.since(self._root, None)[0] if watch.active(self._root) else None
        present = os.path.isfile(os.path.join(self._root, INDEX_NAME))
        watched = self._watch_point is not None
        if not watched and present and self._engine.catalog_current(0, vouched=True):
            return
        scan = _catalog.Scan(self._root)
        fp = _catalog.read_fingerprint(self.state)
        if (
            fp is not None
            and scan.fingerprint() == fp.full
            and (present or scan.index_stat is None)
        ):
            return
        self._engine.sync(scan)

    def index_head(
        self, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES, *, verify: bool = True
    ) -> tuple[list[str], int]:
        """The first lines of MEMORY.md, enough for a block of these limits, and how many in all.

        Reads only what a block can show. With ``verify`` (the default) the
        lines are first checked against the notes: on a settled store by the
        stats of the directory, MEMORY.md and the notes of those lines alone;
        otherwise as :meth:`load_index` does. Without it, MEMORY.md is read as
        it is (a Manager just wrote it, under the turn lock).
        """
        if self.unavailable is not None or not os.path.isdir(self._root):
            return [], 0
        path = os.path.join(self._root, INDEX_NAME)
        if verify:
            fp = _catalog.read_fingerprint(self.state)
            if fp is None or not _catalog.head_is_current(self._root, fp):
                scan = _catalog.Scan(self._root)
                if fp is not None and scan.fingerprint() == fp.full:
                    text = None
                else:
                    text, _ = self._engine.sync(scan)
                if text is not None:  # MEMORY.md could not be written
                    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
                    return lines[: max_lines + 1], len(lines)
            count: int | None = None
        else:
            count = None
        try:
            head, whole = _catalog.read_head(path, max_lines, max_bytes)
        except (OSError, UnicodeDecodeError):  # absent, or not a regular file
            return [], 0
        if whole:
            return head, len(head)
        if count is None:
            count = _count_lines(path)
        return head, max(count, len(head))

    def entries(self) -> list[IndexEntry]:
        """Every readable note's index entry, sorted by file name, without parsing settled notes."""
        return list(self.iter_entries())

    def iter_entries(
        self,
        offset: int = 0,
        limit: int | None = None,
        *,
        settle: bool = True,
        progress: Progress = None,
    ) -> Iterator[IndexEntry]:
        """The index entries sorted by file name, from ``offset``, at most ``limit``: streamed.

        A stat pass brings the catalog up to date (``progress(done, total)``), then it is read
        a page at a time; ``settle=False`` skips the pass (entries as last recorded: dedupe)."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return
        rows = None
        with self._engine.guard:
            overlay = self._engine.settle(keep=True, progress=progress) if settle else False
            hidden = superseded(self._engine.cat())
            if overlay:  # not saved (another process is writing): read it before letting go
                rows = list(self._engine.cat().rows(offset=offset, limit=limit))
                self._engine.cat().rollback()
        source = rows if rows is not None else self._engine.rows(offset, limit)
        for name, e in source:
            yield _index_entry(name, e, hidden)

    def query(
        self,
        *,
        type: str | None = None,
        order: str = "updated",
        offset: int = 0,
        limit: int = 50,
        max_age: float = 0.0,
    ) -> tuple[int, list[IndexEntry]]:
        """How many readable notes of ``type`` (None: any) there are, and the index entries
        of one page of them: filtered, counted and sorted by the catalog, never by
        reading every entry (the web page's list at any store size).

        ``order``: ``updated`` (newest first), ``oldest``, ``title`` or ``name``.
        ``max_age``: skip the stat pass when this object's last one found the store
        settled less than that many seconds ago and neither the directory nor
        MEMORY.md changed since (a note edited in place meanwhile shows after that).

        Raises:
            ValueError: an unknown ``order``, or a negative ``offset`` or ``limit``.
        """

        if order not in _catalog.ORDERS or offset < 0 or limit < 0:
            raise ValueError(f"order {order!r}, offset {offset}, limit {limit}")
        if self.unavailable is not None or not os.path.isdir(self._root):
            return 0, []
        with self._engine.guard:
            overlay = self._engine.settle_unless_current(max_age)
            cat = self._engine.cat()
            total, rows = cat.select(type=type, order=order, offset=offset, limit=limit)
            hidden = superseded(cat)
            if overlay:
                cat.rollback()
        return total, [_index_entry(name, e, hidden) for name, e in rows]

    def order_keys(
        self,
        *,
        type: str | None = None,
        order: str = "updated",
        limit: int = 50,
        max_age: float = 0.0,
    ) -> list[tuple[str, str]]:
        """(file name, the value ``order`` sorts by) of the first ``limit`` notes that
        :meth:`query` would list: for merging the pages of two stores without decoding
        every entry before the page (arguments as for :meth:`query`).

        Raises:
            ValueError: an unknown ``order``, or a negative ``limit``.
        """
        if order not in _catalog.ORDERS or limit < 0:
            raise ValueError(f"order {order!r}, limit {limit}")
        if self.unavailable is not None or not os.path.isdir(self._root):
            return []
        with self._engine.guard:
            overlay = self._engine.settle_unless_current(max_age)
            keys = self._engine.cat().keys(type=type, order=order, limit=limit)
            if overlay:
                self._engine.cat().rollback()
        return keys

    def _near_titles(self, title: str, summary: str, numbers: str) -> list[Near] | None:
        """Dedupe's candidates (see ``Coherence.near``): the planner asks for them."""
        return self._engine.near(title, summary, numbers)

    def entry_versions(self, *, scan: _catalog.Scan | None = None) -> dict[str, str]:
        """Every note's content hash by file name, from the catalog brought up to date.

        Cheap on a settled store (a stat pass and one query): a derived index
        (full-text search) compares it with what it indexed to learn which
        notes changed or went away. ``scan``: a listing of the store the caller
        has just taken (the catalog is brought up to date from it, not from a
        second listing).
        """
        if self.unavailable is not None or not os.path.isdir(self._root):
            return {}
        with self._engine.guard:
            overlay = self._engine.settle(keep=True, scan=scan)
            versions = self._engine.cat().versions()
            if overlay:
                self._engine.cat().rollback()
        return versions

    def iter_versions(self, *, scan: _catalog.Scan | None = None) -> Iterator[tuple[str, str]]:
        """:meth:`entry_versions` as (name, content hash) pairs sorted by name, streamed from
        the catalog a row at a time (a first build of a derived index at 100,000 notes
        need not hold a map of every note)."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return
        held = None
        with self._engine.guard:
            if self._engine.settle(keep=True, scan=scan):  # not saved: read it before letting go
                held = sorted(self._engine.cat().versions().items())
                self._engine.cat().rollback()
        if held is not None:
            yield from held
            return
        from mdmem.store._catalog_reads import iter_listing

        for name, _, sha in iter_listing(self.state):
            if sha:
                yield name, sha

    def problems(self, *, max_age: float = 0.0) -> list[Problem]:
        """Files that look like notes but cannot be read as notes (``max_age``: as in
        :meth:`query`)."""
        from mdmem.store.results import Problem

        if self.unavailable is not None or not os.path.isdir(self._root):
            return []
        with self._engine.guard:
            overlay = self._engine.settle_unless_current(max_age)
            rows = list(self._engine.cat().rows(where="error IS NOT NULL"))
            if overlay:
                self._engine.cat().rollback()
        return [Problem(name, str(e.error)) for name, e in rows]

    def read(self, filename: str) -> Note:
        """Read one note.

        Raises:
            InvalidPath: not a note name, or it escapes the store.
            NoteNotFound: no such note.
            InvalidNote: the file cannot be read as a note.
        """
        from mdmem.store.note import parse

        return parse(read_note_text(self._root, filename), filename)

    def read_text(self, filename: str) -> str:
        """The text of a note's file as it is on disk, valid note or not (for editors).

        Raises:
            InvalidPath: not a note name, or it escapes the store.
            NoteNotFound: no such note.
            InvalidNote: too large, or not UTF-8.
        """
        return read_note_text(self._root, filename)

    def notes(self) -> list[Note]:
        """Every readable note, sorted by file name (malformed ones are in :meth:`problems`)."""
        return list(self.iter_notes())

    def iter_notes(self) -> Iterator[Note]:
        """Every readable note, sorted by file name, read one at a time."""
        for entry in self.iter_entries():
            try:
                yield self.read(entry.filename)
            except (NoteNotFound, InvalidNote, InvalidPath):
                continue  # changed under our feet; the next refresh reports it

    def name_taken(self, filename: str) -> bool:
        """Whether a note ``filename``, or one whose name differs only in case, is in the store.

        One ``lstat`` and one catalog look-up while the directory is as the
        catalog last saw it; a listing of the directory otherwise.
        """
        return self._engine.taken(filename)

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """This store's notes that best answer ``query``, best first (see :mod:`mdmem.recall`).

        Superseded and expired notes are left out.
        """
        # The one call up the floors (stated in tests/test_boundaries.py): the recall
        # engine sits above the store and reads stores only through a protocol
        # (recall/view.py), so this import makes no circle.
        from mdmem.recall.engine import search

        hits: list[Hit] = search([self], query, limit=limit)
        return hits

    def exists(self, filename: str) -> bool:
        """Whether a note of that name exists (the name is validated first).

        Raises:
            InvalidPath: not a note name.
        """
        try:
            note_path(self._root, filename, must_exist=True)
        except FileNotFoundError:
            return False
        return True

    def log_position(self) -> tuple[str, int] | None:
        """Where the store's change log stands (for a derived index to record), or None."""
        return self._engine.log_position()

    def changes_since(
        self, position: tuple[str, int], key: str
    ) -> tuple[tuple[str, int], str, set[str]] | None:
        """The notes whose rows changed since the change log stood at ``position`` and
        the store's key (``_catalog.store_key``) was ``key``: (the position now, the
        key now, their names), or None when the log cannot vouch for that (catch up
        in full).

        The rows of those names are current as far as mdmem knows: a note edited
        in place behind mdmem's back is not among them until a read notices it
        (see docs/concepts/index.md, "The change log").
        """
        return self._engine.changes_since(position, key)

    def versions_of(self, names: Collection[str]) -> dict[str, str]:
        """The content hash of each of ``names`` that is a note, as the catalog records it
        (no stat pass: for a reader that learned the names from :meth:`changes_since`)."""
        if not names or not self._engine.here():
            return {}
        with self._engine.guard:
            return self._engine.cat().versions(names)

    def catalog_current(self, max_age: float = 600.0, *, watched: bool = False) -> int | None:
        """How many notes the catalog lists (MEMORY.md's lines), when it may be read as
        the notes are without a stat pass; None otherwise.

        It may when a stat pass found the store settled less than ``max_age``
        seconds ago and the change log accounts for every change of the store's
        key since. A note edited in place meanwhile is not seen (the prompt
        block's contract, see ``blockcache``), unless this process watches the
        store (``store/watch.py``): then every note file changed since this
        object's last stat pass must still have the stat its row records, and
        the stat pass's age does not matter; else the watcher's (store/watcher.py).
        With ``watched``, None unless one of those two compared every note changed
        since with its row: then a row is as current as its note, edited in place or not.
        """
        if inside := watch.active(self._root):
            point = watch.unchanged(self._root, self._watch_point, self._engine.recorded_stat)
            if point is None:
                return None
            self._watch_point, max_age = point, float("inf")
        return self._engine.catalog_current(max_age, ask=not inside, vouched=watched and not inside)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> ReindexReport:
        """Rebuild MEMORY.md and the catalog from the notes, parsing every one.

        Malformed notes are reported, never changed or deleted. ``progress``
        is called with (done, total) as notes are read.

        Raises:
            LockTimeout: the store is locked by someone else.
        """
        return self._engine.reindex(progress)

    # -- writing -------------------------------------------------------------------

    def _writable(self) -> None:
        if self.unavailable is not None:
            raise StoreError(self._root, f"not used as a project store: {self.unavailable}")

    def apply(
        self,
        ops: Iterable[Operation | ValidOperation | Mapping[str, object]],
        now: datetime | None = None,
        *,
        source: str = "api",
        provenance: str | None = None,
    ) -> ApplyResult:
        """Validate each operation and apply the valid ones, as one batch, under the lock.

        Returns what was applied and what was rejected, with the reason. A
        create never overwrites a note; an update or delete of a missing note
        is rejected. ``source`` is who asks (``worker``, ``cli``, ``mcp`` ...),
        as history records it.
        ``provenance`` (the worker's provenance line) is written as the
        ``source`` front-matter key of every note created or changed.

        Raises:
            LockTimeout: the store is locked by someone else.
        """
        from datetime import datetime, timezone

        from mdmem.store._planner import Planner
        from mdmem.store.results import ApplyResult

        moment = (now or datetime.now(timezone.utc)).replace(microsecond=0)
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=timezone.utc)
        ops = list(ops)
        self._writable()
        with self.lock():
            planner = Planner(self, moment, self._redact, provenance=provenance)
            for op in ops:
                planner.add(op)
            if planner.plan:
                _carry_out(self, planner, source)
            elif os.path.isdir(self._root) and not os.path.exists(
                os.path.join(self._root, INDEX_NAME)
            ):
                self._engine.sync(_catalog.Scan(self._root), locked=True)
        return ApplyResult(tuple(planner.applied), tuple(planner.rejected))

    def save(
        self,
        note: Note,
        *,
        expect: str | None = None,
        now: datetime | None = None,
        source: str = "api",
    ) -> str:
        """Write a whole note as given (front matter included), for editors and tools.

        Unlike an update operation, this keeps what the caller set: its own
        keys, ``created``, an emptied summary. Title, summary and body are
        redacted like every write; ``updated`` is refreshed. With ``expect``
        (the file's text when the caller read it), nothing is written if the
        file changed since. Returns ``create``, ``update`` or ``unchanged``.

        Raises:
            InvalidPath: not a note name, or it escapes the store.
            StoreError: ``expect`` was given and the file changed meanwhile.
            LockTimeout: the store is locked by someone else.
        """
        from datetime import datetime, timezone

        from mdmem.store import _txn
        from mdmem.store.note import clean_inline, parse, render

        self._writable()
        path = note_path(self._root, note.filename)
        redact = self._redact or _default_redact()
        moment = (now or datetime.now(timezone.utc)).replace(microsecond=0)
        clean = note.with_changes(
            title=clean_inline(redact(note.title)),
            summary=clean_inline(redact(note.summary)),
            body=redact(note.body).strip(),
            extra=_redact_extra(note.extra, redact),
        )
        with self.lock():
            current = _read_text(path)
            if expect is not None and current != expect:
                raise StoreError(path, "changed on disk since it was read; nothing was written")
            if current is not None:
                try:
                    if parse(current, note.filename) == clean:
                        return "unchanged"
                except InvalidNote:
                    pass  # a broken note being repaired
            final = clean.with_changes(created=clean.created or moment, updated=moment)
            data = render(final).encode("utf-8")
            plan = _txn.Plan(writes={note.filename: data})
            if current is None and not os.path.lexists(path):
                plan.before[note.filename] = None  # a create: exclusive, never a clobber
            at = _catalog.fs_now(self.state, private=self.private)
            complete = self._engine.dir_known()
            before = _catalog.store_key(self._root)
            if _txn.commit(self.state, plan, private=self.private, source=source):
                raise NoteExists(note.filename, self._root)
            self._engine.record(plan, at, complete, before)
        return "create" if current is None else "update"

    def rename(self, old: str, new: str, *, source: str = "api") -> str:
        """Give a note a new file name, keeping its content (front matter included); return it.

        Raises:
            InvalidPath: either name is not a note name.
            NoteNotFound: there is no note ``old``.
            NoteExists: a note ``new`` exists already (mdmem never overwrites one).
            LockTimeout: the store is locked by someone else.
        """
        self._writable()
        source_path = note_path(self._root, old)
        target = note_path(self._root, new)
        with self.lock():
            if not os.path.lexists(source_path):
                raise NoteNotFound(old, self._root)
            taken = {n.casefold() for n in os.listdir(self._root)} - {old.casefold()}
            # On a case-insensitive file system a case-only rename finds "itself".
            itself = os.path.lexists(target) and os.path.samestat(
                os.lstat(source_path), os.lstat(target)
            )
            if (os.path.lexists(target) and not itself) or new.casefold() in taken:
                raise NoteExists(new, self._root)
            from mdmem.store import history

            data = files.read_bytes(source_path, MAX_NOTE_BYTES)
            history.record_if_unknown(self.state, old, data)
            # The same directory, and the note's bytes do not change. A link, not a
            # rename: a note that appears at ``new`` meanwhile is never replaced.
            if itself:
                os.rename(source_path, target)
            else:
                try:
                    os.link(source_path, target, follow_symlinks=False)
                except FileExistsError:
                    raise NoteExists(new, self._root) from None
                os.unlink(source_path)
            files.fsync_dir(self._root)
            history.record(self.state, new, data, source=source, action="rename")
            self._engine.sync(_catalog.Scan(self._root), locked=True)
        return new

    # -- the trash -----------------------------------------------------------------

    def trash(self) -> list[TrashItem]:
        """Deleted notes that can still be restored, newest first."""
        from mdmem.store.results import TrashItem

        folder = self.state.trash
        try:
            names = os.listdir(folder)
        except FileNotFoundError:
            return []
        items = []
        for entry in names:
            stamp, sep, name = entry.partition("~")
            if sep:
                items.append(TrashItem(name, stamp, os.path.join(folder, entry)))
        return sorted(items, key=lambda item: item.deleted_at, reverse=True)

    def restore(self, filename: str) -> str:
        """Bring back the most recently deleted note of that name; return its file name.

        Raises:
            InvalidPath: not a note name.
            NoteNotFound: nothing of that name in the trash.
            NoteExists: a note of that name exists again; move it away first.
            LockTimeout: the store is locked by someone else.
        """

        self._writable()
        path = note_path(self._root, filename)
        with self.lock():
            candidates = [item for item in self.trash() if item.filename == filename]
            if not candidates:
                raise NoteNotFound(filename, self.state.trash)
            if os.path.lexists(path):
                raise NoteExists(filename, self._root)
            # An exclusive create, not a rename: a note that appears meanwhile is never
            # replaced (and the trash may be on another file system than the store).
            data = files.read_bytes(candidates[0].path, 64 * MAX_NOTE_BYTES)
            try:
                files.create_new(path, data, private=self.private)
            except FileExistsError:
                raise NoteExists(filename, self._root) from None
            os.unlink(candidates[0].path)
            files.fsync_dir(self._root)
            from mdmem.store import history

            history.record(self.state, filename, data, source="api", action="restore")
            self._engine.sync(_catalog.Scan(self._root), locked=True)
        return filename

    # -- history -------------------------------------------------------------------

    def history(self, filename: str) -> list[Version]:
        """Every recorded version of a note (present or deleted), oldest first.

        Raises:
            InvalidPath: not a note name.
        """
        from mdmem.store import history
        from mdmem.store.paths import check_name

        check_name(filename)
        if os.path.isdir(self._root):
            self._engine.sync(_catalog.Scan(self._root))  # notice a hand edit first
        return history.list_versions(self.state, filename)

    def restore_version(self, filename: str, version: int | str, *, source: str = "api") -> str:
        """Write a recorded version back, byte for byte; the restore is itself a new version.

        A deleted note comes back too. Returns ``update``, ``create`` or ``unchanged``.

        Raises:
            InvalidPath: not a note name.
            NoteNotFound: no such version.
            InvalidOperation: ``version`` is not a version number.
            LockTimeout: the store is locked by someone else.
        """
        from mdmem.store import _txn, history

        self._writable()
        path = note_path(self._root, filename)
        data = history.read_version(self.state, filename, version)
        with self.lock():
            current = _read_bytes_or_none(path)
            if current == data:
                return "unchanged"
            plan = _txn.Plan(
                writes={filename: data},
                before={filename: _catalog.content_hash(current) if current is not None else None},
                actions={filename: "restore"},
            )
            if _txn.commit(self.state, plan, private=self.private, source=source):
                raise NoteExists(filename, self._root)  # appeared meanwhile: left as is
            self._engine.sync(_catalog.Scan(self._root), known=plan.writes, locked=True)
        return "create" if current is None else "update"


def prepare_writes() -> None:
    """Import now what writing to a store needs.

    A background worker may first write during interpreter shutdown, when some
    imports fail: filelock pulls in concurrent.futures' thread pool, which
    registers an exit hook, and that is refused once shutdown has begun.
    """
    from mdmem.store import _planner, _txn, locks  # noqa: F401

    locks.prepare()


def _default_redact() -> Callable[[str], str]:
    from mdmem.privacy import redact

    return redact


def _redact_extra(extra: Mapping[str, object], redact: Callable[[str], str]) -> dict[str, object]:
    """A person's own front-matter keys, with secrets taken out of their names and values."""
    from mdmem.privacy import redact_data

    clean = redact_data(dict(extra), redact)
    assert isinstance(clean, dict)
    return clean


def _count_lines(path: str) -> int:
    count = 0
    with _catalog.open_regular(path) as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            count += chunk.count(b"\n")
    return count


def _read_text(path: str, limit: int = MAX_NOTE_BYTES) -> str | None:
    return files.read_text(path, limit)


def _read_bytes_or_none(path: str) -> bytes | None:
    try:
        return files.read_bytes(path, MAX_NOTE_BYTES)
    except FileNotFoundError:
        return None


def __getattr__(name: str) -> object:
    # The result records used to live here; they moved to mdmem.store.results.
    if name in ("Applied", "ApplyResult", "Problem", "ReindexReport", "Rejected", "TrashItem"):
        from mdmem.store import results

        return getattr(results, name)
    raise AttributeError(f"module 'mdmem.store.store' has no attribute {name!r}")


def _index_entry(name: str, row: _catalog.CatalogRow, superseded: Mapping[str, str]) -> IndexEntry:
    """A catalog row (of a valid note: its fields are there) as the index entry the store
    hands out."""
    from mdmem.store.note import IndexEntry

    return IndexEntry(
        filename=name,
        type=str(row.type),
        title=str(row.title),
        summary=str(row.summary),
        updated=row.updated,
        supersedes=row.supersedes,
        expires=row.expires,
        superseded_by=superseded.get(name),
    )


def _carry_out(store: Store, planner: Planner, source: str) -> None:
    """Write what ``planner`` planned and record it (``Store.apply``, under the lock)."""
    from mdmem.store import _txn

    engine = store._engine
    # The file-system time before the notes are written: their rows are not trusted
    # until a read finds them older than a later "now".
    at = _catalog.fs_now(store.state, private=store.private)
    complete = engine.dir_known()
    before = _catalog.store_key(store.path)  # for the change log
    # A single write's last folder sync runs while it is recorded, and is waited for
    # before the lock goes and apply returns (_txn.Durable).
    with _txn.syncing() as pending:
        plan = planner.plan
        lost = _txn.commit(store.state, plan, private=store.private, source=source, pending=pending)
        for name in lost:
            planner.lost_race(name)
        for name, other in plan.renamed.items():
            planner.renamed(name, other)
        if lost or plan.renamed:
            engine.sync(_catalog.Scan(store.path), locked=True)
        else:
            engine.record(plan, at, complete, before)
