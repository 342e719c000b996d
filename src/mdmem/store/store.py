"""Store: one directory of Markdown notes plus its MEMORY.md index.

The notes are the source of truth; MEMORY.md and everything in mdmem's state folder
follow them and can be rebuilt at any time (:meth:`Store.reindex`). Every
read-modify-write happens under the store's file lock, so several processes
(agents, a person's CLI, a git hook) can share one store.
"""

from __future__ import annotations

import os
from _thread import _local, allocate_lock

from mdmem._kinds import Level
from mdmem.errors import (
    InvalidNote,
    InvalidPath,
    LockTimeout,
    NoteExists,
    NoteNotFound,
    StoreError,
)
from mdmem.store import _catalog, _fs
from mdmem.store.paths import (
    INDEX_NAME,
    MAX_INDEX_BYTES,
    note_path,
    project_problem,
    state_dir,
)

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from collections.abc import Callable, Iterable, Mapping
    from datetime import datetime
    from pathlib import Path
    from types import TracebackType

    from filelock import BaseFileLock

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
        self._root_fd = _local()  # this thread's flock on the store directory, and its depth
        if lock_timeout is None:
            lock_timeout = float(os.environ.get("MDMEM_LOCK_TIMEOUT", "10"))
        self.lock_timeout = lock_timeout
        self._redact = redact
        self._locks: dict[str, BaseFileLock] = {}
        self._locks_guard = allocate_lock()

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
                    _fs.ensure_dir(self._root, private=self.private)
                state = _catalog.ensure_state_dir(self._root, private=self.private)
                lock = FileLock(os.path.join(state, name), mode=0o600 if self.private else 0o644)
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
        if scan.fingerprint() == _catalog.read_fingerprint(self._root):
            return _fs.read_text(os.path.join(self._root, INDEX_NAME), MAX_INDEX_BYTES) or ""
        return self._refresh(scan)[0]

    def entries(self) -> list[IndexEntry]:
        """Every readable note's index entry, sorted by file name, without parsing settled notes."""
        from mdmem.store.marks import superseded_by
        from mdmem.store.note import IndexEntry

        _, entries = self._refresh(_catalog.Scan(self._root))
        superseded = superseded_by(entries)
        return [
            IndexEntry(
                filename=name,
                type=str(e["type"]),
                title=str(e["title"]),
                summary=str(e["summary"]),
                updated=e.get("updated"),  # type: ignore[arg-type]
                supersedes=tuple(e.get("supersedes") or ()),  # type: ignore[arg-type]
                expires=e.get("expires"),  # type: ignore[arg-type]
                superseded_by=superseded.get(name),
            )
            for name, e in sorted(entries.items())
            if e.get("line")
        ]

    def problems(self) -> list[Problem]:
        """Files that look like notes but cannot be read as notes."""
        from mdmem.store.results import Problem

        _, entries = self._refresh(_catalog.Scan(self._root))
        return [
            Problem(name, str(e["error"])) for name, e in sorted(entries.items()) if e.get("error")
        ]

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
        out = []
        for entry in self.entries():
            try:
                out.append(self.read(entry.filename))
            except (NoteNotFound, InvalidNote, InvalidPath):
                continue  # changed under our feet; the next refresh reports it
        return out

    def search(self, query: str, limit: int = 10) -> list[Hit]:
        """This store's notes that best answer ``query``, best first (see :mod:`mdmem.recall`).

        Superseded and expired notes are left out.
        """
        # The one call up the floors: the recall engine sits above the store and
        # is bound by name at call time, so the store never depends on it (see
        # docs/architecture.md).
        from importlib import import_module

        engine = import_module("mdmem.recall.engine")
        hits: list[Hit] = engine.search([self], query, limit=limit)
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
            data = _fs.read_bytes(path, MAX_NOTE_BYTES)
        except ValueError as exc:
            raise InvalidNote(filename, f"too large: {exc}") from None
        except FileNotFoundError:
            raise NoteNotFound(filename, self._root) from None
        except _fs.NotRegularFile as exc:  # swapped for a link or a FIFO since the check
            raise InvalidPath(filename, str(exc.strerror)) from None
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidNote(filename, f"not UTF-8 (byte {exc.start})") from None

    # -- the catalog ---------------------------------------------------------------

    def _entry(
        self, name: str, st: _catalog.Stat, prev: _catalog.Entry | None, known: Mapping[str, bytes]
    ) -> _catalog.Entry:
        from mdmem.store.note import format_time, index_line, parse

        path = os.path.join(self._root, name)
        data = known.get(name)
        if data is None:
            try:
                data = _fs.read_bytes(path, MAX_NOTE_BYTES)
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
            note = parse(data.decode("utf-8"), name)
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
        }
        from mdmem.store.marks import note_marks

        entry.update(note_marks(note))
        return entry

    def _refresh(
        self,
        scan: _catalog.Scan,
        *,
        known: Mapping[str, bytes] | None = None,
        full: bool = False,
        locked: bool = False,
        progress: Callable[[int, int], None] | None = None,
        baseline: dict[str, _catalog.Entry] | None = None,
        catalog: tuple[dict[str, _catalog.Entry], int] | None = None,
    ) -> tuple[str, dict[str, _catalog.Entry]]:
        """Bring the catalog and MEMORY.md in line with the notes; return (index text, entries)."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return "", {}  # reading a store that does not exist must not create it
        if catalog is not None:
            saved, written = catalog  # already read by the unlocked pass
        else:
            saved, written = ({}, 0) if full else _catalog.load(self._root)
        old = saved if baseline is None else baseline
        known = known or {}
        entries: dict[str, _catalog.Entry] = {}
        total = len(scan.stats)
        fresh = False  # a note as new as the catalog: its stat proves nothing yet
        for done, (name, st) in enumerate(scan.stats.items(), 1):
            prev = old.get(name)
            trusted = max(st[0], st[3]) < written
            fresh = fresh or not trusted
            if trusted and prev is not None and prev.get("st") == list(st):
                entry = prev
            else:
                entry = self._entry(name, st, prev, known)
                if entry.get("error") and (prev is None or prev.get("error") != entry["error"]):
                    _log().warning(
                        "%s/%s is not a valid note: %s", self._root, name, entry["error"]
                    )
            entries[name] = entry
            if progress is not None:
                progress(done, total)
        for name, reason in scan.rejected.items():
            entries[name] = {"error": reason}
        lines = [str(e["line"]) for _, e in sorted(entries.items()) if e.get("line")]
        text = "\n".join(lines) + "\n" if lines else ""
        index_path = os.path.join(self._root, INDEX_NAME)
        current = _fs.read_text(index_path, MAX_INDEX_BYTES)
        rewrote = False
        if current != text and not (current is None and not text):
            if not locked:
                try:
                    with self.lock(timeout=0):
                        # Scan again inside the lock; what was just parsed is not parsed twice.
                        return self._refresh(
                            _catalog.Scan(self._root),
                            known=known,
                            locked=True,
                            baseline=entries,
                            catalog=(saved, written),
                        )
                except (LockTimeout, OSError):
                    # Someone else is writing, or the store is read-only: the text
                    # is still right, MEMORY.md catches up on the next write.
                    return text, entries
            _fs.atomic_write(index_path, text.encode("utf-8"), private=self.private)
            rewrote = True

        def fingerprint(catalog_written: int) -> str | None:
            # Only a store whose every file is older than the catalog just saved
            # may be recognised by its stats alone from now on.
            stats = [*scan.stats.values(), scan.index_stat or (0, 0, 0, 0)]
            if rewrote or any(max(st[0], st[3]) >= catalog_written for st in stats):
                return None
            return scan.fingerprint()

        # A fresh note makes the catalog be saved again, so its mtime moves past
        # the note's and the note's stat becomes trustworthy.
        if fresh or entries != saved or _catalog.read_fingerprint(self._root) is None:
            from mdmem.store import marks

            marks.save(self._root, entries)  # before the fingerprint that vouches for it
            _catalog.save(self._root, entries, fingerprint, private=self.private)
        return text, entries

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
            before = _read_text(index_path, MAX_INDEX_BYTES)
            text, entries = self._refresh(
                _catalog.Scan(self._root), full=True, locked=True, progress=progress
            )
        problems = tuple(
            Problem(name, str(e["error"])) for name, e in sorted(entries.items()) if e.get("error")
        )
        count = sum(1 for e in entries.values() if e.get("line"))
        return ReindexReport(count, problems, changed=(before or "") != text)

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
                lost = _txn.commit(self._root, planner.plan, private=self.private, source=source)
                for name in lost:
                    planner.lost_race(name)
            if planner.plan or not os.path.exists(os.path.join(self._root, INDEX_NAME)):
                self._refresh(_catalog.Scan(self._root), known=planner.plan.writes, locked=True)
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
            if _txn.commit(self._root, plan, private=self.private, source=source):
                raise NoteExists(note.filename, self._root)
            self._refresh(_catalog.Scan(self._root), known=plan.writes, locked=True)
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

            data = _fs.read_bytes(source_path, MAX_NOTE_BYTES)
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
            _fs.fsync_dir(self._root)
            history.record(self._root, new, data, source=source, action="rename")
            self._refresh(_catalog.Scan(self._root), locked=True)
        return new

    # -- the trash -----------------------------------------------------------------

    def trash(self) -> list[TrashItem]:
        """Deleted notes that can still be restored, newest first."""
        from mdmem.store import _txn
        from mdmem.store.results import TrashItem

        folder = os.path.join(state_dir(self._root), _txn.TRASH_DIR)
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
        from mdmem.store import _txn

        self._writable()
        path = note_path(self._root, filename)
        with self.lock():
            candidates = [item for item in self.trash() if item.filename == filename]
            if not candidates:
                raise NoteNotFound(filename, os.path.join(state_dir(self._root), _txn.TRASH_DIR))
            if os.path.lexists(path):
                raise NoteExists(filename, self._root)
            # An exclusive create, not a rename: a note that appears meanwhile is never
            # replaced (and the trash may be on another file system than the store).
            data = _fs.read_bytes(candidates[0].path, 64 * MAX_NOTE_BYTES)
            try:
                _fs.create_new(path, data, private=self.private)
            except FileExistsError:
                raise NoteExists(filename, self._root) from None
            os.unlink(candidates[0].path)
            _fs.fsync_dir(self._root)
            from mdmem.store import history

            history.record(self._root, filename, data, source="api", action="restore")
            self._refresh(_catalog.Scan(self._root), locked=True)
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
            self._refresh(_catalog.Scan(self._root))  # notice a hand edit first
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
            self._refresh(_catalog.Scan(self._root), known=plan.writes, locked=True)
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
                self._lock.acquire(timeout=remaining)
            except Timeout:
                raise LockTimeout(store.path, self._timeout) from None
            except FileNotFoundError:  # the state folder was removed: make it again
                _catalog.ensure_state_dir(store.path, private=store.private)
                continue
            if _same_file(self._lock):
                return
            # The lock file was removed (with its folder) between its open and our
            # flock: the lock we hold guards nothing. Take the one at the path now.
            self._lock.release()
            _catalog.ensure_state_dir(store.path, private=store.private)
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
    from mdmem.extract.privacy import redact

    return redact


def _redact_extra(extra: Mapping[str, object], redact: Callable[[str], str]) -> dict[str, object]:
    """A person's own front-matter keys, with secrets taken out of their names and values."""
    from mdmem.extract.privacy import redact_data

    clean = redact_data(dict(extra), redact)
    assert isinstance(clean, dict)
    return clean


def _read_text(path: str, limit: int = MAX_NOTE_BYTES) -> str | None:
    return _fs.read_text(path, limit)


def _read_bytes_or_none(path: str) -> bytes | None:
    try:
        return _fs.read_bytes(path, MAX_NOTE_BYTES)
    except FileNotFoundError:
        return None


def __getattr__(name: str) -> object:
    # The result records used to live here; they moved to mdmem.store.results.
    if name in ("Applied", "ApplyResult", "Problem", "ReindexReport", "Rejected", "TrashItem"):
        from mdmem.store import results

        return getattr(results, name)
    raise AttributeError(f"module 'mdmem.store.store' has no attribute {name!r}")
