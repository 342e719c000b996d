"""Store: one directory of Markdown notes plus its MEMORY.md index.

The notes are the source of truth; MEMORY.md and everything in mdmem's state folder
follow them and can be rebuilt at any time (:meth:`Store.reindex`). Every
read-modify-write happens under the store's file lock, so several processes
(agents, a person's CLI, a git hook) can share one store.
"""

from __future__ import annotations

import os
from _thread import RLock, _local, allocate_lock

from mdmem._kinds import Level
from mdmem._lines import MAX_BYTES, MAX_LINES
from mdmem.errors import (
    InvalidNote,
    InvalidPath,
    LockTimeout,
    NoteExists,
    NoteNotFound,
    StoreError,
)
from mdmem.store import _catalog, _index_file, files
from mdmem.store.paths import (
    INDEX_NAME,
    MAX_INDEX_BYTES,
    note_path,
    project_problem,
)
from mdmem.store.state import StateDir

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import contextlib
    import logging
    from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
    from datetime import datetime
    from pathlib import Path
    from types import TracebackType

    from filelock import BaseFileLock

    from mdmem.store import _txn
    from mdmem.store.history import Version
    from mdmem.store.note import IndexEntry, Note
    from mdmem.store.operations import Operation
    from mdmem.store.results import ApplyResult, Hit, Problem, ReindexReport, TrashItem

__all__ = ["MAX_NOTE_BYTES", "Store", "prepare_writes"]

MAX_NOTE_BYTES = 256 * 1024
_LOCK = "lock"
_TURN_LOCK = "turn.lock"


def _log() -> logging.Logger:
    # logging costs ~15 ms to import; only paths that report something pay it.
    import logging

    return logging.getLogger("mdmem")


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
        self._root_fd = _local()  # this thread's flock on the store directory, and its depth
        if lock_timeout is None:
            lock_timeout = float(os.environ.get("MDMEM_LOCK_TIMEOUT", "10"))
        self.lock_timeout = lock_timeout
        self._redact = redact
        self._locks: dict[str, BaseFileLock] = {}
        self._locks_guard = allocate_lock()
        # The catalog's connection, per process; one thread at a time uses it.
        self._catalog: _catalog.Catalog | None = None
        self._catalog_pid = 0
        self._catalog_guard = RLock()
        self._listing: tuple[str, set[str]] | None = None
        # MEMORY.md as this object last wrote it (its stat, its bytes): the next write
        # checks the file against these bytes instead of hashing it.
        self._written: tuple[_catalog.Stat, bytes] | None = None
        # When this object's last stat pass found the store settled, and the store's key then.
        self._fresh: tuple[float, str] | None = None

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

    def _filelock(self, name: str) -> BaseFileLock:
        with self._locks_guard:
            lock = self._locks.get(name)
            if lock is None:
                from filelock import FileLock

                # The lock is taken to write: the store itself must exist by then
                # (but never through a refused store's symlink).
                if self.unavailable is None:
                    files.ensure_dir(self._root, private=self.private)
                state = self.state.ensure()
                lock = FileLock(os.path.join(state, name), mode=0o600)
                self._locks[name] = lock
            return lock

    def lock(self, timeout: float | None = None) -> _Held:
        """Hold the store's write lock (re-entrant in one thread), finishing any interrupted batch.

        Use as ``with store.lock():``.

        Raises:
            LockTimeout: another process held it for longer than ``timeout``.
        """
        return _Held(self, _LOCK, self.lock_timeout if timeout is None else timeout, recover=True)

    def _hold_root(self, deadline: float | None, timeout: float) -> None:
        """Take this thread's flock on the store directory (re-entrant), by ``deadline``."""
        held = self._root_fd
        depth = getattr(held, "depth", 0)
        if depth:
            held.depth = depth + 1
            return
        fd = None
        if self.unavailable is None and os.path.isdir(self._root):
            import fcntl
            from time import monotonic, sleep

            fd = os.open(self._root, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if deadline is not None and monotonic() >= deadline:
                        os.close(fd)
                        raise LockTimeout(self._root, timeout) from None
                    sleep(0.005)
                except OSError:
                    break  # a file system without flock on directories: the file lock alone
        held.fd, held.depth = fd, 1

    def _release_root(self) -> None:
        held = self._root_fd
        held.depth -= 1
        if held.depth == 0 and held.fd is not None:
            os.close(held.fd)  # closing drops the flock
            held.fd = None

    def turn_lock(self, timeout: float) -> _Held:
        """Hold the lock that serialises memory updates of whole turns across processes.

        Separate from :meth:`lock`: it is held across a model call, which may
        take a while, and a person's edits must not wait for that.

        Raises:
            LockTimeout: another process held it for longer than ``timeout``.
        """
        return _Held(self, _TURN_LOCK, timeout)

    # -- reading -------------------------------------------------------------------

    def load_index(self) -> str:
        """MEMORY.md's text, first brought up to date with notes changed behind mdmem's back."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return ""
        scan = _catalog.Scan(self._root)
        fp = _catalog.read_fingerprint(self._root)
        index_path = os.path.join(self._root, INDEX_NAME)
        if fp is not None and scan.fingerprint() == fp.full:
            text = files.read_text(index_path, MAX_INDEX_BYTES)
            if text is not None or scan.index_stat is None:
                return text or ""
        text, _ = self._sync(scan)
        if text is None:
            text = files.read_text(index_path, MAX_INDEX_BYTES) or ""
        return text

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
            fp = _catalog.read_fingerprint(self._root)
            if fp is None or not _catalog.head_is_current(self._root, fp):
                scan = _catalog.Scan(self._root)
                if fp is not None and scan.fingerprint() == fp.full:
                    text = None
                else:
                    text, _ = self._sync(scan)
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

    def _settle(
        self,
        *,
        keep: bool,
        scan: _catalog.Scan | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> bool:
        """Bring the catalog up to date (nothing to do on a settled store); True: an overlay.

        ``scan``: a listing the caller just took, used instead of taking another.
        """
        scan = scan if scan is not None else _catalog.Scan(self._root)
        fp = _catalog.read_fingerprint(self._root)
        if fp is not None and scan.fingerprint() == fp.full:
            # Settled, and if the catalog is the one that saw it settle (it still
            # records this MEMORY.md), its rows are exactly the notes.
            try:
                recorded = _index_file.IndexRecord.parse(self._cat().meta("index"))
            except _catalog.CatalogError:
                recorded = None
            if recorded is not None and recorded.same_stat(fp.index):
                return False
        return self._sync(scan, keep=keep, progress=progress)[1]

    def entries(self) -> list[IndexEntry]:
        """Every readable note's index entry, sorted by file name, without parsing settled notes."""
        return list(self.iter_entries())

    def iter_entries(
        self,
        offset: int = 0,
        limit: int | None = None,
        *,
        settle: bool = True,
        progress: Callable[[int, int], None] | None = None,
    ) -> Iterator[IndexEntry]:
        """The index entries sorted by file name, from ``offset``, at most ``limit``: streamed.

        The catalog is brought up to date first (a stat pass; ``progress(done,
        total)`` as it goes through the notes); then entries are read from it a
        page at a time, never all at once. With ``settle=False`` the stat pass
        is skipped and the entries are as the catalog last recorded them: for a
        caller that checks each one it uses against the file anyway (dedupe
        inside a write).
        """

        if self.unavailable is not None or not os.path.isdir(self._root):
            return
        rows = None
        with self._catalog_guard:
            overlay = self._settle(keep=True, progress=progress) if settle else False
            superseded = self._superseded(self._cat())
            if overlay:  # not saved (another process is writing): read it before letting go
                rows = list(self._cat().rows(offset=offset, limit=limit))
                self._cat().rollback()
        source = rows if rows is not None else self._rows(offset, limit)
        for name, e in source:
            yield _index_entry(name, e, superseded)

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
        with self._catalog_guard:
            overlay = self._settle_unless_current(max_age)
            cat = self._cat()
            total, rows = cat.select(type=type, order=order, offset=offset, limit=limit)
            superseded = self._superseded(cat)
            if overlay:
                cat.rollback()
        return total, [_index_entry(name, e, superseded) for name, e in rows]

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
        with self._catalog_guard:
            overlay = self._settle_unless_current(max_age)
            keys = self._cat().keys(type=type, order=order, limit=limit)
            if overlay:
                self._cat().rollback()
        return keys

    def _settle_unless_current(self, max_age: float) -> bool:
        """:meth:`_settle`, unless this object's own stat pass found the store settled less
        than ``max_age`` seconds ago and neither the directory nor MEMORY.md changed since
        (any write, create, delete or rename by mdmem or an editor's save changes one)."""
        import time

        key = _catalog.store_key(self._root)
        if max_age > 0 and self._fresh is not None:
            at, known = self._fresh
            if known == key and 0 <= time.monotonic() - at < max_age:
                return False
        overlay = self._settle(keep=True)
        # The key from before the pass: a change during it makes the next call look again.
        self._fresh = None if overlay else (time.monotonic(), key)
        return overlay

    @staticmethod
    def _marked(cat: _catalog.Catalog) -> dict[str, _catalog.Entry]:
        """The entries ``marks`` needs: notes with supersedes/expires, and the notes they name."""
        marked = cat.marked()
        targets = {
            str(t)
            for e in marked.values()
            for t in (e.get("supersedes") or ())  # type: ignore[attr-defined]
            if isinstance(t, str)
        }
        for name in cat.present(targets - set(marked)):
            marked[name] = {"line": "-"}
        return marked

    def _superseded(self, cat: _catalog.Catalog) -> dict[str, str]:
        from mdmem.store.marks import superseded_by

        return superseded_by(self._marked(cat))

    def _rows(
        self, offset: int, limit: int | None, where: str = "line IS NOT NULL"
    ) -> Iterator[tuple[str, _catalog.Entry]]:
        # A page at a time under the guard, so that other threads may use the catalog
        # between; each page starts after the last name of the one before.
        done, after = 0, None
        while limit is None or done < limit:
            size = 500 if limit is None else min(500, limit - done)
            with self._catalog_guard:
                cat = self._cat()
                page = list(
                    cat.rows(
                        where=where, offset=offset if after is None else 0, limit=size, after=after
                    )
                )
            yield from page
            done += len(page)
            if len(page) < size:
                return
            after = page[-1][0]

    def _near_titles(
        self, title: str, numbers: str | None = None
    ) -> list[tuple[str, str, str]] | None:
        """Dedupe's candidates: (name, title, summary) of the notes, not superseded, that name
        ``numbers`` (``dedupe.number_key``; None: any) and whose title may be near ``title``,
        as the catalog last recorded them (no stat pass: the planner reads each one it uses).
        None when the catalog cannot say; then every entry is read.
        """
        if self.unavailable is not None or not os.path.isdir(self._root):
            return []
        with self._catalog_guard:
            try:
                with _RollBack(self):
                    cat = self._cat()
                    rows = cat.near(title, self.lock_timeout, numbers)
                    if rows is None:
                        return None
                    superseded = self._superseded(cat)
            except _catalog.CatalogError:
                return None
        return [row for row in rows if row[0] not in superseded]

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
        with self._catalog_guard:
            overlay = self._settle(keep=True, scan=scan)
            versions = self._cat().versions()
            if overlay:
                self._cat().rollback()
        return versions

    def iter_versions(self, *, scan: _catalog.Scan | None = None) -> Iterator[tuple[str, str]]:
        """:meth:`entry_versions` as (name, content hash) pairs sorted by name, streamed from
        the catalog a row at a time (a first build of a derived index at 100,000 notes
        need not hold a map of every note)."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return
        held = None
        with self._catalog_guard:
            if self._settle(keep=True, scan=scan):  # not saved: read it before letting go
                held = sorted(self._cat().versions().items())
                self._cat().rollback()
        if held is not None:
            yield from held
            return
        for name, _, sha in _catalog.iter_listing(self._root):
            if sha:
                yield name, sha

    def problems(self, *, max_age: float = 0.0) -> list[Problem]:
        """Files that look like notes but cannot be read as notes (``max_age``: as in
        :meth:`query`)."""
        from mdmem.store.results import Problem

        if self.unavailable is not None or not os.path.isdir(self._root):
            return []
        with self._catalog_guard:
            overlay = self._settle_unless_current(max_age)
            rows = list(self._cat().rows(where="error IS NOT NULL"))
            if overlay:
                self._cat().rollback()
        return [Problem(name, str(e["error"])) for name, e in rows]

    def read(self, filename: str) -> Note:
        """Read one note.

        Raises:
            InvalidPath: not a note name, or it escapes the store.
            NoteNotFound: no such note.
            InvalidNote: the file cannot be read as a note.
        """
        from mdmem.store.note import parse

        try:
            path = note_path(self._root, filename, must_exist=True)
        except FileNotFoundError:
            raise NoteNotFound(filename, self._root) from None
        return parse(self._decode(path, filename), filename)

    def read_text(self, filename: str) -> str:
        """The text of a note's file as it is on disk, valid note or not (for editors).

        Raises:
            InvalidPath: not a note name, or it escapes the store.
            NoteNotFound: no such note.
            InvalidNote: too large, or not UTF-8.
        """
        try:
            path = note_path(self._root, filename, must_exist=True)
        except FileNotFoundError:
            raise NoteNotFound(filename, self._root) from None
        return self._decode(path, filename)

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
        if os.path.lexists(os.path.join(self._root, filename)):
            return True
        folded = filename.casefold()
        try:
            st = os.lstat(self._root)
        except FileNotFoundError:
            return False
        here = f"{st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"
        with self._catalog_guard:
            try:
                cat = self._cat()
                if cat.meta("dir") == here:
                    return cat.taken(folded)
            except _catalog.CatalogError:
                pass  # a damaged catalog: the listing answers
            if self._listing is None or self._listing[0] != here:
                self._listing = (here, {n.casefold() for n in os.listdir(self._root)})
            return folded in self._listing[1]

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

    def _decode(self, path: str, filename: str) -> str:
        try:
            data = files.read_bytes(path, MAX_NOTE_BYTES)
        except ValueError as exc:
            raise InvalidNote(filename, f"too large: {exc}") from None
        except FileNotFoundError:
            raise NoteNotFound(filename, self._root) from None
        except files.NotRegularFile as exc:  # swapped for a link or a FIFO since the check
            raise InvalidPath(filename, str(exc.strerror)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidNote(filename, f"not UTF-8 (byte {exc.start})") from None

    # -- the catalog ---------------------------------------------------------------

    def _entry(
        self,
        name: str,
        st: _catalog.Stat,
        prev: _catalog.Entry | None,
        known: Mapping[str, bytes],
        parsed: Note | None = None,
    ) -> _catalog.Entry:
        """A note's catalog row. ``parsed``: the note the bytes ``known[name]`` were
        rendered from (a write's own): used instead of parsing them again."""
        from mdmem.store.dedupe import number_key
        from mdmem.store.note import format_time, index_line, parse

        path = os.path.join(self._root, name)
        data = known.get(name)
        if data is None:
            try:
                data = files.read_bytes(path, MAX_NOTE_BYTES)
            except ValueError as exc:
                return {"st": list(st), "error": f"too large: {exc}"}
            except OSError as exc:
                return {"st": list(st), "error": f"cannot be read: {exc.strerror}"}
        sha = _catalog.content_hash(data)
        if prev is not None and prev.get("sha") == sha:
            return {**prev, "st": list(st)}
        if prev is not None and prev.get("sha") and name not in known:
            from mdmem.store import history

            # Changed behind mdmem's back: the version before is in history already.
            history.record_if_unknown(self._root, name, data, source="hand-edit")
        try:
            note = parsed if parsed is not None and name in known else parse(data.decode(), name)
        except UnicodeDecodeError as exc:
            return {"st": list(st), "sha": sha, "error": f"not UTF-8 (byte {exc.start})"}
        except InvalidNote as exc:
            return {"st": list(st), "sha": sha, "error": exc.reason}
        entry: _catalog.Entry = {
            "st": list(st),
            "sha": sha,
            "line": index_line(note),
            "type": note.type.value,
            "title": note.title,
            "summary": note.summary,
            "updated": format_time(note.updated) if note.updated else None,
            "nums": number_key(note.title, note.summary, note.body),  # dedupe's group
        }
        from mdmem.store.marks import note_marks

        entry.update(note_marks(note))
        return entry

    def _cat(self) -> _catalog.Catalog:
        if self._catalog is None or self._catalog_pid != os.getpid():
            # A forked child must not share its parent's SQLite connection.
            self._catalog = _catalog.Catalog(self._root, private=self.private)
            self._catalog_pid = os.getpid()
        return self._catalog

    def _sync(
        self,
        scan: _catalog.Scan,
        *,
        known: Mapping[str, bytes] | None = None,
        at: int = 0,
        full: bool = False,
        locked: bool = False,
        keep: bool = False,
        progress: Callable[[int, int], None] | None = None,
        cache: dict[str, _catalog.Entry] | None = None,
    ) -> tuple[str | None, bool]:
        """Bring the catalog and MEMORY.md in line with the notes.

        Returns (text, overlay): ``text`` is MEMORY.md's right text when the
        file could not be written (None: the file is right); ``overlay`` is
        True when, with ``keep``, the catalog's changes could not be saved and
        are left in an open transaction for the caller to read, then roll back.
        """
        if self.unavailable is not None or not os.path.isdir(self._root):
            return "", False  # reading a store that does not exist must not create it
        with self._catalog_guard:
            args = (known or {}, at, full, locked, keep, progress, cache or {})
            try:
                with _RollBack(self):
                    return self._sync_with(self._cat(), scan, *args)
            except _catalog.CatalogError as exc:
                if exc.busy:
                    # Held by another connection: answer from a private catalog
                    # in memory this once; never throw a live catalog away.
                    return self._sync_with(
                        _catalog.Catalog(self._root, private=self.private, memory=True),
                        scan,
                        *args,
                    )
                _log().warning("%s: the catalog was unusable (%s); rebuilding it", self._root, exc)
                self._cat().reset()
            try:
                with _RollBack(self):
                    return self._sync_with(self._cat(), scan, *args)
            except _catalog.CatalogError:
                pass  # the state folder cannot hold a catalog: answer from one in memory
            self._catalog = _catalog.Catalog(self._root, private=self.private, memory=True)
            return self._sync_with(self._catalog, scan, *args)

    def _sync_with(
        self,
        cat: _catalog.Catalog,
        scan: _catalog.Scan,
        known: Mapping[str, bytes],
        at: int,
        full: bool,
        locked: bool,
        keep: bool,
        progress: Callable[[int, int], None] | None,
        cache: dict[str, _catalog.Entry],
    ) -> tuple[str | None, bool]:
        if not cat.begin(self.lock_timeout if locked else 0.5):
            # Another process is rewriting the catalog: work from a private, empty one.
            cat = _catalog.Catalog(self._root, private=self.private, memory=True)
            cat.begin(0)
        now = _catalog.fs_now(self._root, private=self.private) if not cat.memory else 0
        if full:
            cat.clear()
        # Names are validated once: the catalog is asked about a name the quick check
        # cannot vouch for, instead of holding every recorded name.
        scan.classify(cat.valid_names())
        changes: dict[str, str | None] = {}
        computed: dict[str, _catalog.Entry] = {}
        fresh = False  # a note as new as its row: its stat proves nothing yet
        total = scan.count()
        many = False  # more changed lines than a patch is worth: MEMORY.md is rebuilt
        rejected = scan.rejected
        seen_rejected: set[str] = set()
        gone: list[str] = []
        batch: list[tuple[str, _catalog.Entry]] = []
        # The names whose rows this pass changes, for the change log (None: too many,
        # or a rebuild: readers catch up in full).
        touched: set[str] | None = None if full else set()

        def unmatched(name: str, st: _catalog.Stat | None) -> None:
            # A row no note of the listing matched: a rejected name, or a file gone.
            reason = rejected.get(name)
            if reason is None:
                gone.append(name)
                return
            seen_rejected.add(name)
            if st is None:
                return  # rejected before, and the name cannot change
            changes[name] = None
            batch.append((name, {"error": reason}))

        # The listing and the rows, both sorted by name, side by side: nothing holds
        # every note's row, and rows go to SQLite in key order, a batch at a time.
        rows = cat.iter_stats()
        row = next(rows, None)
        for done, (name, st) in enumerate(scan.sorted_notes(), 1):
            while row is not None and row[0] < name:
                unmatched(row[0], row[1])
                row = next(rows, None)
            rec: tuple[str, _catalog.Stat | None, int] | None = None
            if row is not None and row[0] == name:
                rec, row = row, next(rows, None)
            stamp = at if name in known else now
            if (
                rec is not None
                and rec[1] == st
                and max(st[0], st[3]) < rec[2]
                and name not in known
            ):
                if progress is not None:
                    progress(done, total)
                continue  # recorded, and the stat is old enough to prove it unchanged
            prev = cat.get(name) if rec is not None else None
            hit = cache.get(name)
            if hit is not None and hit.get("st") == list(st) and name not in known:
                entry = dict(hit)
            else:
                entry = self._entry(name, st, prev, known)
                if entry.get("error") and (prev is None or prev.get("error") != entry["error"]):
                    _log().warning(
                        "%s/%s is not a valid note: %s", self._root, name, entry["error"]
                    )
            entry["at"] = stamp
            fresh = fresh or max(st[0], st[3]) >= stamp
            if entry != prev:
                batch.append((name, entry))
                if touched is not None:
                    touched.add(name)
                    if len(touched) > _catalog.LOG_NAMES:
                        touched = None
                if len(batch) >= _BATCH:
                    cat.put_many(batch)
                    batch.clear()
                if len(computed) < _CACHE_ENTRIES:
                    computed[name] = entry
            if not many and entry.get("line") != (prev or {}).get("line"):
                changes[name] = entry.get("line")  # type: ignore[assignment]
                many = len(changes) > _index_file.PATCH_LIMIT
            if progress is not None:
                progress(done, total)
        while row is not None:
            unmatched(row[0], row[1])
            row = next(rows, None)
        for name, reason in rejected.items():
            if name not in seen_rejected:  # rejected, and new to the catalog
                batch.append((name, {"error": reason}))
        if touched is not None:
            touched.update(name for name, _ in batch)
            touched.update(gone)
            if len(touched) > _catalog.LOG_NAMES:
                touched = None
        cat.put_many(batch)
        if gone:  # rows of files that are gone
            cat.remove(gone)
            if not many:
                changes.update(dict.fromkeys(gone))
        return self._write_index(
            cat,
            scan,
            changes,
            now,
            locked=locked,
            keep=keep,
            fresh=fresh,
            computed=computed,
            rebuild=many,
            touched=touched,
        )

    def _write_index(
        self,
        cat: _catalog.Catalog,
        scan: _catalog.Scan | None,
        changes: dict[str, str | None],
        now: int,
        *,
        locked: bool,
        keep: bool = False,
        fresh: bool = True,
        computed: dict[str, _catalog.Entry] | None = None,
        complete: bool = False,
        rebuild: bool = False,
        touched: Collection[str] | None = None,
        key_before: str | None = None,
    ) -> tuple[str | None, bool]:
        """Make MEMORY.md say what the catalog (in its open transaction) says, then commit.

        MEMORY.md is patched line by line when it is still exactly what mdmem
        last wrote (its hash is in the catalog), and rebuilt from the catalog
        otherwise. ``scan`` (None after a write that scanned nothing) lets a
        settled store be fingerprinted.

        The change log (``Catalog.log``) gets the names whose rows changed
        (``touched``; None: maybe any) between the store's key ``key_before`` (a
        write's, taken before its first note was written; a scan's own
        otherwise) and the key after MEMORY.md is written.
        """
        index_path = os.path.join(self._root, INDEX_NAME)
        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
        current: bytes | None = None
        new: bytes | None = None
        ours = ""
        lines: int | None = None
        rewrote = False
        scan_dir: _catalog.Stat | None = None
        spliced = None
        # A rebuild from the catalog (a first load, a reindex, many changes) goes a
        # chunk at a time: neither the old file nor the new one is held whole.
        stream = rebuild or recorded is None or len(changes) > _index_file.PATCH_LIMIT
        streamed: tuple[str, int, int] | None = None
        if (
            locked
            and recorded is not None
            and not stream
            and recorded.stat_proves(_index_stat(self._root))
        ):
            # Exactly what mdmem wrote, by its stat alone: change the lines in place, never
            # reading, rendering or hashing the rest (see _index_file.splice).
            before = _catalog.stat_of(self._root)
            try:
                spliced = _index_file.splice(index_path, changes, private=self.private)
            except OSError:
                spliced = None
        if spliced is not None:
            assert recorded is not None
            ours, lines, rewrote = "stat", recorded.lines + spliced[0], spliced[1]
            if rewrote and scan is not None and before == scan.dir_stat:
                complete, scan_dir = True, _catalog.stat_of(self._root)
            differs = False
        elif stream:
            streamed = _index_file.digest(_index_file.chunks(cat.lines()))
            lines = streamed[2]
            differs = streamed[:2] != _file_digest(index_path)
        else:
            try:
                current = files.read_bytes(index_path, MAX_INDEX_BYTES)
            except (OSError, ValueError):  # absent, not a regular file, too large: replaced
                current = None
            ours = self._index_is_ours(current, recorded) if current is not None else ""
            if ours:
                assert current is not None and recorded is not None
                patched = _index_file.patch(current, changes)
                if patched is not None:
                    new, delta = patched
                    lines = recorded.lines + delta
            if new is None:
                new = _index_file.join(cat.lines())
            differs = new != (current or b"")
        if differs:
            if not locked:
                if new is None:  # for the answer, should the locked pass below fail
                    new = _index_file.join(cat.lines())
                cat.rollback()
                try:
                    with self.lock(timeout=0):
                        # Scan again inside the lock; what was just parsed is not parsed twice.
                        return self._sync(
                            _catalog.Scan(self._root), locked=True, keep=keep, cache=computed
                        )
                except (LockTimeout, OSError):
                    # Someone else is writing, or the store is read-only: the text
                    # is right all the same, MEMORY.md catches up on the next write.
                    if keep:
                        return new.decode("utf-8"), self._redo(changes, computed, scan, cat)
                    return new.decode("utf-8"), False
            before = _catalog.stat_of(self._root)
            data = new if new is not None else _index_file.chunks(cat.lines())
            files.atomic_write(index_path, data, private=self.private, derived=True)
            rewrote = True
            if scan is not None and before == scan.dir_stat:
                # Only our own MEMORY.md moved the directory since the scan.
                complete, scan_dir = True, _catalog.stat_of(self._root)
            else:
                scan_dir = None
        if lines is None:
            assert new is not None
            lines = new.count(b"\n")
        index_stat = _index_stat(self._root)
        if rewrote and index_stat is not None:
            self._written = None if new is None else (index_stat, new)
        if rewrote or stream or ours in ("hash", "bytes"):
            # What mdmem wrote: its stat, hash, line count, and a time after which its stat
            # alone proves it (see _index_is_ours).
            when = now
            if rewrote and index_stat is not None and files.stamped(index_stat):
                # Stamped as it was written: its stat proves it from now on (files.stamped).
                when = max(index_stat[0], index_stat[3]) + 1
            elif rewrote and index_stat is not None and not cat.memory:
                # Read after the file was renamed and its stat taken: once the clock is
                # past its times, any later change of it shows in its stat.
                later = _catalog.fs_now(self._root, private=self.private)
                if later > max(index_stat[0], index_stat[3]):
                    when = later
            if new is not None:
                digest = _catalog.content_hash(new)
            elif streamed is not None:
                digest = streamed[0]
            elif when != now:
                digest = "-"  # spliced: the stat proves it; a changed stat means a rebuild
            else:
                digest = _hash_file(index_path) or "-"
            record = _index_file.IndexRecord(index_stat or (0, 0, 0, 0), digest, lines, when)
            cat.set_meta("index", record.format())
        # What the directory looked like when the rows were last complete: while it
        # is unchanged, the rows know every name (see name_taken).
        directory = scan.dir_stat if scan is not None else None
        if rewrote and scan is not None:
            directory = scan_dir
        elif scan is None and complete:
            d = os.lstat(self._root)
            directory = (d.st_mtime_ns, d.st_size, d.st_ino, d.st_ctime_ns)
        cat.set_meta(
            "dir", None if directory is None else f"{directory[0]} {directory[3]} {directory[2]}"
        )
        from mdmem.store import marks

        marks.save(self._root, self._marked(cat))  # before the fingerprint that vouches for it
        fingerprint = None
        if scan is not None and not fresh and not rewrote and not cat.memory:
            stats = [scan.dir_stat or (0, 0, 0, 0), index_stat or (0, 0, 0, 0)]
            if scan.index_stat == index_stat and all(max(s[0], s[3]) < now for s in stats):
                fingerprint = _catalog.Fingerprint(
                    scan.fingerprint(),
                    scan.dir_stat or (0, 0, 0, 0),
                    index_stat or (0, 0, 0, 0),
                    lines,
                    self._head_names(cat),
                )
        self._log(cat, scan, key_before, touched, rewrote, scan_dir, index_stat, fingerprint)
        cat.commit()
        _catalog.write_fingerprint(self._root, fingerprint, private=self.private)
        if index_stat is not None:
            return None, False
        if streamed is not None:  # MEMORY.md could not be written: the text, if any
            return (_index_file.join(cat.lines()).decode("utf-8") if streamed[1] else None), False
        return (new.decode("utf-8") if new else None), False

    def _log(
        self,
        cat: _catalog.Catalog,
        scan: _catalog.Scan | None,
        before: str | None,
        touched: Collection[str] | None,
        rewrote: bool,
        scan_dir: _catalog.Stat | None,
        index_stat: _catalog.Stat | None,
        fingerprint: _catalog.Fingerprint | None,
    ) -> None:
        """Append this pass to the change log, and, when it found the store settled,
        record where the log stood then (``Store.catalog_current``)."""
        if cat.memory:
            return
        now_dir = _catalog.stat_of(self._root)
        if scan is not None:
            before = _catalog.key_of(scan.dir_stat, scan.index_stat)
            # Someone else's create, delete or rename since the listing would hide behind
            # the names of this pass: then readers catch up in full.
            if (scan_dir if rewrote else scan.dir_stat) != now_dir:
                touched = None
        if touched is None or touched or rewrote:
            after = _catalog.key_of(now_dir, index_stat)
            cat.log(before if before is not None else "", after, touched)
        if fingerprint is not None:
            import time

            epoch, seq = cat.position()
            key = _catalog.key_of(fingerprint.dir, fingerprint.index)
            cat.set_meta("settled", f"{epoch} {seq} {time.time()!r} {key}")

    def log_position(self) -> tuple[str, int] | None:
        """Where the store's change log stands (for a derived index to record), or None."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return None
        with self._catalog_guard:
            try:
                return self._cat().position()
            except _catalog.CatalogError:
                return None

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
        if self.unavailable is not None or not os.path.isdir(self._root):
            return None
        now_key = _catalog.store_key(self._root)
        with self._catalog_guard:
            try:
                found = self._cat().changes_after(position, key, now_key)
            except _catalog.CatalogError:
                return None
        return None if found is None else (found[0], now_key, found[1])

    def versions_of(self, names: Collection[str]) -> dict[str, str]:
        """The content hash of each of ``names`` that is a note, as the catalog records it
        (no stat pass: for a reader that learned the names from :meth:`changes_since`)."""
        if self.unavailable is not None or not os.path.isdir(self._root) or not names:
            return {}
        with self._catalog_guard:
            return self._cat().versions(names)

    def catalog_current(self, max_age: float = 600.0) -> int | None:
        """How many notes the catalog lists (MEMORY.md's lines), when it may be read as
        the notes are without a stat pass; None otherwise.

        It may when a stat pass found the store settled less than ``max_age``
        seconds ago and the change log accounts for every change of the store's
        key since. A note edited in place meanwhile is not seen (the prompt
        block's contract, see ``blockcache``).
        """
        if self.unavailable is not None or not os.path.isdir(self._root):
            return None
        import time

        with self._catalog_guard:
            try:
                cat = self._cat()
                settled = (cat.meta("settled") or "").split(" ", 3)
                if len(settled) != 4 or not 0 <= time.time() - float(settled[2]) < max_age:
                    return None
                position = (settled[0], int(settled[1]))
                now_key = _catalog.store_key(self._root)
                if cat.changes_after(position, settled[3], now_key) is None:
                    return None
                recorded = _index_file.IndexRecord.parse(cat.meta("index"))
                return None if recorded is None else recorded.lines
            except (_catalog.CatalogError, ValueError):
                return None

    def _redo(
        self,
        changes: dict[str, str | None],
        computed: dict[str, _catalog.Entry] | None,
        scan: _catalog.Scan | None,
        cat: _catalog.Catalog,
    ) -> bool:
        # The unlocked pass rolled back; put its rows back, uncommitted, for the caller.
        cat.begin(0.5)
        for name, entry in (computed or {}).items():
            cat.put(name, entry)
        gone = [n for n, line in changes.items() if line is None and n not in (computed or {})]
        cat.remove(gone)
        return True

    @staticmethod
    def _head_names(cat: _catalog.Catalog) -> list[tuple[str, _catalog.Stat]] | None:
        """The notes (valid or not) whose lines make the first block's worth of MEMORY.md."""
        head: list[tuple[str, _catalog.Stat]] = []
        count = size = 0
        for name, entry in cat.rows(where="mtime IS NOT NULL"):
            if len(head) >= _catalog.HEAD_NAMES:
                return None
            st = entry["st"]
            assert isinstance(st, list)
            head.append((name, (st[0], st[1], st[2], st[3])))
            line = entry.get("line")
            if line:
                count += 1
                size += len(str(line).encode("utf-8")) + 1
                if count > MAX_LINES or size > MAX_BYTES:
                    break
        return head

    def _index_is_ours(self, current: bytes, recorded: _index_file.IndexRecord | None) -> str:
        """How MEMORY.md is known to be exactly what mdmem last wrote: "stat", "hash" or "".

        Its stat proves it when older than the time recorded (the racy-clean rule
        again); otherwise its bytes are hashed, and once they match, the time of
        this pass is recorded so that the next write can go by the stat.
        """
        if recorded is None:
            return ""
        st = _index_stat(self._root)
        if recorded.stat_proves(st):
            return "stat"
        if recorded.same_stat(st) and self._written is not None and self._written == (st, current):
            return "bytes"  # what this process wrote, byte for byte
        return "hash" if recorded.digest == _catalog.content_hash(current) else ""

    def _dir_known(self) -> bool:
        """Whether the catalog's rows know every name in the directory as it is now."""
        try:
            st = os.lstat(self._root)
            with self._catalog_guard:
                return self._cat().meta("dir") == f"{st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"
        except (OSError, _catalog.CatalogError):
            return False

    def _record(self, plan: _txn.Plan, at: int, complete: bool, before: str | None) -> None:
        """After a batch: update the rows of the notes it touched, and their MEMORY.md lines.

        The rest of the store is not looked at (that is what makes a write cost
        what it touches); a note someone edited by hand meanwhile is caught by
        the next read. When MEMORY.md is not what mdmem last wrote, or the
        catalog is new, a full refresh runs instead.
        """
        with self._catalog_guard:
            try:
                with _RollBack(self):
                    cat = self._cat()
                    if cat.meta("index") is not None and cat.begin(self.lock_timeout):
                        changes: dict[str, str | None] = {}
                        for name, data in plan.writes.items():
                            st = os.stat(os.path.join(self._root, name))
                            prev = cat.get(name)
                            entry = self._entry(
                                name,
                                (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns),
                                prev,
                                {name: data},
                                plan.notes.get(name),
                            )
                            entry["at"] = at
                            cat.put(name, entry)
                            changes[name] = entry.get("line")  # type: ignore[assignment]
                        cat.remove(list(plan.deletes))
                        changes.update(dict.fromkeys(plan.deletes))
                        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
                        if recorded is not None and _index_stat(self._root) is not None:
                            self._write_index(
                                cat,
                                None,
                                changes,
                                at,
                                locked=True,
                                complete=complete,
                                touched=set(changes) if before is not None else None,
                                key_before=before,
                            )
                            return
                        cat.rollback()
            except _catalog.CatalogError:
                pass  # a damaged catalog: the full refresh below rebuilds it
        self._sync(_catalog.Scan(self._root), known=plan.writes, at=at, locked=True)

    def reindex(self, progress: Callable[[int, int], None] | None = None) -> ReindexReport:
        """Rebuild MEMORY.md and the catalog from the notes, parsing every one.

        Malformed notes are reported, never changed or deleted. ``progress``
        is called with (done, total) as notes are read.

        Raises:
            LockTimeout: the store is locked by someone else.
        """
        from mdmem.store.results import Problem, ReindexReport

        if self.unavailable is not None or not os.path.isdir(self._root):
            return ReindexReport(0, (), False)
        with self.lock():
            index_path = os.path.join(self._root, INDEX_NAME)
            before = _hash_file(index_path)
            text, _ = self._sync(
                _catalog.Scan(self._root), full=True, locked=True, progress=progress
            )
            after = _catalog.content_hash(text.encode("utf-8")) if text is not None else None
            if text is None:
                after = _hash_file(index_path)
            with self._catalog_guard:
                problems = tuple(
                    Problem(name, str(e["error"]))
                    for name, e in self._cat().rows(where="error IS NOT NULL")
                )
        with self._catalog_guard:
            count = sum(1 for _ in self._cat().rows())
        empty = _catalog.content_hash(b"")
        return ReindexReport(count, problems, changed=(before or empty) != (after or empty))

    # -- writing -------------------------------------------------------------------

    def _writable(self) -> None:
        if self.unavailable is not None:
            raise StoreError(self._root, f"not used as a project store: {self.unavailable}")

    def apply(
        self,
        ops: Iterable[Operation | Mapping[str, object]],
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

        from mdmem.store import _txn
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
                # The file-system time before the notes are written: their rows are
                # not trusted until a read finds them older than a later "now".
                at = _catalog.fs_now(self._root, private=self.private)
                complete = self._dir_known()
                before = _catalog.store_key(self._root)  # for the change log
                lost = _txn.commit(self._root, planner.plan, private=self.private, source=source)
                for name in lost:
                    planner.lost_race(name)
                for name, other in planner.plan.renamed.items():
                    planner.renamed(name, other)
                if lost or planner.plan.renamed:
                    self._sync(_catalog.Scan(self._root), locked=True)
                else:
                    self._record(planner.plan, at, complete, before)
            elif os.path.isdir(self._root) and not os.path.exists(
                os.path.join(self._root, INDEX_NAME)
            ):
                self._sync(_catalog.Scan(self._root), locked=True)
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
            at = _catalog.fs_now(self._root, private=self.private)
            complete = self._dir_known()
            before = _catalog.store_key(self._root)
            if _txn.commit(self._root, plan, private=self.private, source=source):
                raise NoteExists(note.filename, self._root)
            self._record(plan, at, complete, before)
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
            history.record_if_unknown(self._root, old, data)
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
            history.record(self._root, new, data, source=source, action="rename")
            self._sync(_catalog.Scan(self._root), locked=True)
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

            history.record(self._root, filename, data, source="api", action="restore")
            self._sync(_catalog.Scan(self._root), locked=True)
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
            self._sync(_catalog.Scan(self._root))  # notice a hand edit first
        return history.list_versions(self._root, filename)

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
        data = history.read_version(self._root, filename, version)
        with self.lock():
            current = _read_bytes_or_none(path)
            if current == data:
                return "unchanged"
            plan = _txn.Plan(
                writes={filename: data},
                before={filename: _catalog.content_hash(current) if current is not None else None},
                actions={filename: "restore"},
            )
            if _txn.commit(self._root, plan, private=self.private, source=source):
                raise NoteExists(filename, self._root)  # appeared meanwhile: left as is
            self._sync(_catalog.Scan(self._root), known=plan.writes, locked=True)
        return "create" if current is None else "update"


class _Held:
    """A held store lock, as a context manager (contextlib is not imported for this)."""

    __slots__ = ("_lock", "_recover", "_store", "_timeout")

    def __init__(self, store: Store, name: str, timeout: float, *, recover: bool = False) -> None:
        self._store = store
        self._lock = store._filelock(name)
        self._timeout = timeout
        self._recover = recover

    def __enter__(self) -> None:
        from time import monotonic

        store = self._store
        deadline = None if self._timeout < 0 else monotonic() + self._timeout
        self._acquire(deadline)
        if self._recover:
            try:
                # The write lock also holds an flock on the store directory itself:
                # deleting the state folder (and the lock file with it) cannot
                # delete that, so it never lets a second writer in.
                store._hold_root(deadline, self._timeout)
            except BaseException:
                self._lock.release()
                raise
            try:
                from mdmem.store import _txn

                for message in _txn.recover(store.path, private=store.private):
                    _log().warning("%s: %s", store.path, message)
            except BaseException:
                store._release_root()
                self._lock.release()
                raise

    def _acquire(self, deadline: float | None) -> None:
        from time import monotonic

        from filelock import Timeout

        store = self._store
        for _ in range(100):
            remaining = -1.0 if deadline is None else max(0.0, deadline - monotonic())
            try:
                if self._recover:  # the write lock: taken in turn (see mdmem.store._queue)
                    from mdmem.store import _queue

                    _queue.acquire(self._lock, remaining, Timeout)
                else:
                    self._lock.acquire(timeout=remaining)
            except Timeout:
                raise LockTimeout(store.path, self._timeout) from None
            except FileNotFoundError:  # the state folder was removed: make it again
                store.state.ensure()
                continue
            if _same_file(self._lock):
                return
            # The lock file was removed (with its folder) between its open and our
            # flock: the lock we hold guards nothing. Take the one at the path now.
            self._lock.release()
            store.state.ensure()
        raise LockTimeout(store.path, self._timeout)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._recover:
            self._store._release_root()
        self._lock.release()


def _same_file(lock: BaseFileLock) -> bool:
    """Whether the file ``lock`` holds is still the one at its path."""
    fd = getattr(getattr(lock, "_context", None), "lock_file_fd", None)
    if not isinstance(fd, int):
        return True  # this filelock does not say; the directory flock still guards writes
    try:
        held, now = os.fstat(fd), os.stat(lock.lock_file)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def prepare_writes() -> None:
    """Import now what writing to a store needs.

    A background worker may first write during interpreter shutdown, when some
    imports fail: filelock pulls in concurrent.futures' thread pool, which
    registers an exit hook, and that is refused once shutdown has begun.
    """
    import filelock  # noqa: F401

    from mdmem.store import _planner, _txn  # noqa: F401


def _default_redact() -> Callable[[str], str]:
    from mdmem.privacy import redact

    return redact


def _redact_extra(extra: Mapping[str, object], redact: Callable[[str], str]) -> dict[str, object]:
    """A person's own front-matter keys, with secrets taken out of their names and values."""
    from mdmem.privacy import redact_data

    clean = redact_data(dict(extra), redact)
    assert isinstance(clean, dict)
    return clean


_ABSENT = object()
# Parsed entries an unlocked pass hands to the locked one, at most: a first load of
# a large store must not hold every note's entry in memory at once.
_CACHE_ENTRIES = 5_000
# Rows written to the catalog per statement while a pass reads many notes.
_BATCH = 500


class _RollBack:
    """Roll the catalog's open transaction back on any error, then let the error go on.

    Whatever the error (a damaged catalog, or MEMORY.md that cannot be written), no
    transaction may stay open for the next call; only a ``CatalogError`` is then
    caught by the caller.
    """

    __slots__ = ("_store",)

    def __init__(self, store: Store) -> None:
        self._store = store

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            with _suppress():
                self._store._cat().rollback()


def _suppress() -> contextlib.AbstractContextManager[None]:
    import contextlib

    return contextlib.suppress(Exception)


def _index_stat(root: str) -> _catalog.Stat | None:
    try:
        st = os.lstat(os.path.join(root, INDEX_NAME))
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def _hash_file(path: str) -> str | None:
    try:
        return _catalog.content_hash(files.read_bytes(path, MAX_INDEX_BYTES))
    except (OSError, ValueError):
        return None


def _file_digest(path: str) -> tuple[str, int]:
    """(content hash, size) of a file read in chunks; of no bytes when it cannot be read."""
    try:
        with _catalog.open_regular(path) as f:
            found = _index_file.digest(iter(lambda: f.read(1 << 16), b""))
    except OSError:
        found = None
    if found is None or found[1] > MAX_INDEX_BYTES:
        return _index_file.digest(())[:2]
    return found[:2]


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


def _index_entry(name: str, e: Mapping[str, object], superseded: Mapping[str, str]) -> IndexEntry:
    """A catalog row as the index entry the store hands out."""
    from mdmem.store.note import IndexEntry

    return IndexEntry(
        filename=name,
        type=str(e["type"]),
        title=str(e["title"]),
        summary=str(e["summary"]),
        updated=e.get("updated"),  # type: ignore[arg-type]
        supersedes=tuple(e.get("supersedes") or ()),  # type: ignore[arg-type]
        expires=e.get("expires"),  # type: ignore[arg-type]
        superseded_by=superseded.get(name),
    )
