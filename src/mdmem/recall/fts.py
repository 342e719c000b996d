"""The derived search index of one store: SQLite FTS5 in the store's state folder.

``recall.sqlite`` beside the catalog (``mdmem.store.paths.state_dir``) holds,
per note, its content hash, its fields as the recall engine needs them, and
its terms (:func:`mdmem.recall.text.terms`) in an FTS5 table. It is derived
state: :meth:`Index.sync` brings it in line with the notes, re-indexing only
the notes whose content hash changed; :meth:`Index.rebuild` starts over; a
damaged, foreign or outdated file is rebuilt, and a state folder that cannot be
written gives an index in memory, so recall always answers.

Freshness (the contract, see docs/concepts/recall.md). A full check lists the
store (one ``lstat`` per note: the store's fingerprint, see ``_catalog``) and
re-indexes the notes whose content hash changed; once the store is settled it
records each note's stat and a *key*: the stat of the store's directory, of
MEMORY.md, of the marks files and of the catalog's files and fingerprint. A
later query whose key is equal, within :data:`MAX_AGE`, skips the listing and
checks only the notes it returns (:meth:`Index.refresh`): one ``lstat`` each,
re-indexing any whose stat and content changed, and the query runs again. So

* a create, delete or rename (how mdmem, most editors, ``git checkout`` and
  ``git pull`` write) changes the directory, hence the key: always seen;
* any write through mdmem changes the key and is in the store's change log
  (``Store.changes_since``): always seen, by the names the log holds
  (:meth:`Index._catch_up`), without a listing;
* a note edited in place is seen by the next query in a store of up to
  :data:`SWEEP_MAX` notes: a trusted key is followed by a sweep of the notes'
  ctimes (:meth:`Index._sweep`, one ``lstat`` each, no read; a process that
  swept less than :data:`SWEEP_AGAIN` ago does not sweep again, as a warm
  process trusts an unchanged directory as long, and the prompt server's
  ``recheck`` has it sweep for every prompt); in a larger one at
  the next full check, unless the user's watcher runs (``store/watcher.py``): it
  names the notes changed since the time the index was last in step with it
  (meta ``checked``), and only those are checked, at any size. A returned note
  is checked by its stat when the query's sync checked no note itself (its
  content is never stale; :meth:`Index.checked_after`).

Derived and rebuilt from the notes, the file is in WAL mode with
``synchronous=OFF``: no query, even one that re-indexes, makes an fsync.
"""

from __future__ import annotations

import contextlib
import os
import time

from mdmem import _json
from mdmem._sqlite import sqlite3
from mdmem.errors import InvalidNote, InvalidPath, NoteNotFound
from mdmem.recall import tally
from mdmem.recall.text import terms
from mdmem.store import files, quicknote
from mdmem.store import watcher as _watcher
from mdmem.store.paths import INDEX_NAME
from mdmem.store.state import FINGERPRINT, StateDir

TYPE_CHECKING = False  # not typing's: this module is on the cold `mdmem search` path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from datetime import datetime

    from mdmem.recall.view import StoreView as Store
    from mdmem.store import catalog
    from mdmem.store.note import NoteFields

__all__ = [
    "FILE",
    "MAX_AGE",
    "SCHEMA_VERSION",
    "SWEEP_ENV",
    "SWEEP_MAX",
    "Index",
    "Row",
    "changed_notes",
    "discard",
    "sweep_max",
]

FILE = "recall.sqlite"
# Bump when the schema or the terms change: an index of another version is rebuilt.
SCHEMA_VERSION = "5"
#: How long (seconds) an unchanged key stands for a settled store before a full check.
MAX_AGE = 600.0
# Seconds before a full check whose changes the in-place sweep re-checks (Index._sweep).
_SWEEP_MARGIN = 2.0
#: A process whose sync checked every note this recently (seconds) does not sweep again
#: (Index._sweep): a turn's four syncs sweep once per store; what a query returns is
#: still checked. As long as a warm process trusts an unchanged directory (engine).
SWEEP_AGAIN = 2.0
#: Up to this many notes a query sweeps the notes' ctimes for in-place edits (Index._sweep):
#: ~10 us an lstat on a shared VM, 10-50 ms here; a larger store keeps the older contract
#: (a returned note is checked, the rest at the next full check) until a watcher does it.
SWEEP_MAX = 5000
#: Sets another :data:`SWEEP_MAX` for a process (a test's way to make a small store "large").
SWEEP_ENV = "MDMEM_SWEEP_MAX"


def sweep_max() -> int:
    """:data:`SWEEP_MAX`, or ``$MDMEM_SWEEP_MAX`` when that is a number."""
    value = os.environ.get(SWEEP_ENV, "")
    return int(value) if value.isdigit() else SWEEP_MAX


_TOKENIZE = "unicode61 remove_diacritics 0 tokenchars '_./-:@#+'"
#: Field weights of the BM25 ranking: title, summary, body, type.
WEIGHTS = (4.0, 2.0, 1.0, 1.0)
# Past this many notes to (re-)index, a sync reads and inserts them a chunk at a time.
_BULK = 256
_CHUNK = 256

_SCHEMA = f"""
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS notes(
    id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL, sha TEXT NOT NULL,
    type TEXT NOT NULL, title TEXT NOT NULL, summary TEXT NOT NULL, body TEXT NOT NULL,
    updated REAL, expires REAL, supersedes TEXT NOT NULL, terms TEXT NOT NULL);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(
    title, summary, body, type, tokenize="{_TOKENIZE}");
CREATE INDEX IF NOT EXISTS notes_special ON notes(name)
    WHERE expires IS NOT NULL OR supersedes != '[]';
CREATE VIRTUAL TABLE IF NOT EXISTS vocab USING fts5vocab(fts, 'row');
CREATE TABLE IF NOT EXISTS stats(name TEXT PRIMARY KEY, st TEXT NOT NULL) WITHOUT ROWID;
-- In how many notes each term occurs: kept as notes come and go (fts5vocab counts it
-- by walking the term's postings, a pass over most notes for a common word).
CREATE TABLE IF NOT EXISTS df(term TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS vectors(sha TEXT NOT NULL, model TEXT NOT NULL, v BLOB NOT NULL,
    PRIMARY KEY (sha, model));
"""


class Row:
    """One indexed note, as a query returns it."""

    __slots__ = (
        "body",
        "expires",
        "name",
        "rank",
        "sha",
        "summary",
        "supersedes",
        "terms",
        "title",
        "type",
        "updated",
    )

    def __init__(self, values: tuple[object, ...]) -> None:
        (name, sha, kind, title, summary, body, updated, expires, supersedes, words, rank) = values
        self.name = str(name)
        self.sha = str(sha)
        self.type = str(kind)
        self.title = str(title)
        self.summary = str(summary)
        self.body = str(body)
        self.updated = float(updated) if isinstance(updated, (int, float)) else None
        self.expires = float(expires) if isinstance(expires, (int, float)) else None
        text = str(supersedes)
        self.supersedes: list[str] = [] if text == "[]" else _json.loads(text)  # most: none
        self.terms = str(words)
        self.rank = float(rank) if isinstance(rank, (int, float)) else 0.0


_COLUMNS = "n.name, n.sha, n.type, n.title, n.summary, n.body, n.updated, n.expires, n.supersedes"


def changed_notes(
    store: Store, indexed: dict[str, str], scan: catalog.Scan | None = None
) -> tuple[dict[str, str], list[str]]:
    """Which notes must be (re-)indexed, and which indexed notes are gone.

    ``indexed`` maps note names to the content hash they were indexed with;
    the answer is (name -> current hash for every new or changed note, gone names).
    This is the one place that knows where the store keeps its content hashes:
    today its catalog (read through the store, which brings it up to date from
    ``scan`` when given: a listing just taken, so the store is not listed twice).
    """
    current = store.entry_versions(scan=scan)
    if not indexed:  # a first build: everything, without a second map of every note
        return current, []
    changed = {name: sha for name, sha in current.items() if indexed.get(name) != sha}
    gone = [name for name in indexed if name not in current]
    return changed, gone


def _lstat(path: str) -> str:
    """A file's stat as text (mtime, size, inode, ctime); ``""`` when it cannot be seen."""
    try:
        st = os.lstat(path)
    except OSError:
        return ""
    return f"{st.st_mtime_ns} {st.st_size} {st.st_ino} {st.st_ctime_ns}"


def freshness_key(root: str, state: StateDir | None = None) -> str:
    """What a settled store's index may be trusted on: a few ``lstat``, no listing.

    The store's directory (any create, delete or rename of a note changes it),
    MEMORY.md, the marks files, and the catalog's database, log and
    fingerprint (any write or refresh through mdmem changes one of them).
    """
    folder = state or StateDir.of(root)
    paths = [
        root,
        os.path.join(root, INDEX_NAME),
        folder.marks,
        folder.stale_marks,
        folder.catalog,
        folder.catalog + "-wal",
        folder / FINGERPRINT,
    ]
    return "|".join(_lstat(p) for p in paths)


def _count_terms(db: sqlite3.Connection, words: list[str], step: int) -> None:
    """Add ``step`` to the note count of each of a note's (distinct) terms."""
    db.executemany(
        "INSERT INTO df VALUES (?, ?) ON CONFLICT(term) DO UPDATE SET n = n + excluded.n",
        [(w, step) for w in words],
    )
    if step < 0:
        db.executemany("DELETE FROM df WHERE term = ? AND n <= 0", [(w,) for w in words])


def _timestamp(value: object, key: str, name: str) -> float | None:
    if value is None:
        return None  # the usual case: note.py's import (YAML's, dataclasses') not needed
    from mdmem.store.note import parse_time

    try:
        moment = parse_time(value, key, name)
    except InvalidNote:
        return None
    return moment.timestamp() if moment is not None else None


def _supersedes(value: object) -> list[str]:
    items = value if isinstance(value, list) else [value]
    return sorted({i.strip() for i in items if isinstance(i, str) and i.strip()})


def _type_words(kind: str) -> str:
    return f"{kind} {kind.replace('_', ' ')}"


def discard(path: str) -> None:
    """Remove a derived SQLite file and its journals (WAL, shared memory, rollback)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path + suffix)


class Index:
    """The search index of one store (see the module docstring)."""

    def __init__(self, store: Store, path: str | None = None) -> None:
        self.store = store
        self._path = path
        self._db: sqlite3.Connection | None = None
        # Per sync: the note count, and the hidden notes with the time they were worked out.
        self._count: int | None = None
        self._hidden: tuple[float, set[str]] | None = None
        #: Bumped whenever the indexed notes change, so callers can cache what they derive.
        self.generation = 0
        self.cache: dict[str, object] = {}
        self._ident: tuple[int, int] | None = None  # of the file the connection has open
        # Where this index stands in the store's watch (mdmem.store.watch), when watched.
        self._point: tuple[int, int] | None = None
        self._absent = False  # this sync found no watcher to ask
        self._checked_at: float | None = None  # when a sync last checked every note
        self._swept: tuple[object, int] | None = None  # (the file then, ns) of _sweep

    @property
    def path(self) -> str:
        """Where the index file lives (it may not exist yet); ``:memory:`` for one in memory."""
        return self._path or self.store.state / FILE

    # -- the connection ------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        db: sqlite3.Connection | None = None
        with contextlib.suppress(OSError, sqlite3.Error):
            if self.path == ":memory:":
                db = self._open(":memory:")
            elif os.path.isdir(self.store.path):
                self.store.state.ensure()
                db = self._open(self.path)
        if db is None:  # a state folder that cannot be written: recall still works
            db = self._open(":memory:")
        elif self.path != ":memory:":
            self._ident = files.identity(self.path)
        self._db = db
        return db

    def _reopen_if_gone(self) -> None:
        """Start again from what is on disk when the file was deleted or replaced under the
        open connection (the state folder is derived: anyone may delete it at any moment)."""
        gone = self._ident is not None and files.identity(self.path) != self._ident
        if self._db is not None and gone:
            self.close()
            self._forget()

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        for attempt in (1, 2):
            if path != ":memory:":
                files.owner_only(path)
            db = sqlite3.connect(path, timeout=10, isolation_level=None, check_same_thread=False)
            try:
                # Derived, rebuilt from the notes: no fsync. WAL drops a torn frame on
                # recovery; a file damaged past that is made again (below); an index that
                # lost commits has older hashes and stats than the notes, which the next
                # sync re-indexes: a read that re-indexes writes nothing durable.
                with contextlib.suppress(sqlite3.OperationalError):  # busy: next open
                    db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=OFF")
                try:  # an index of this version is used as it is: no schema statements
                    row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
                except sqlite3.OperationalError:
                    row = None
                if row is not None and row[0] == SCHEMA_VERSION:
                    return db
                db.executescript(_SCHEMA + "".join(f"{sql};\n" for sql in tally.STATEMENTS))
                row = db.execute("SELECT value FROM meta WHERE key = 'version'").fetchone()
                if row is None:
                    db.execute(
                        "INSERT OR REPLACE INTO meta VALUES ('version', ?)", (SCHEMA_VERSION,)
                    )
                elif row[0] != SCHEMA_VERSION:
                    raise sqlite3.DatabaseError("another version")
                return db
            except sqlite3.DatabaseError:
                db.close()
                if path == ":memory:" or attempt == 2:
                    raise
                discard(path)  # derived state: a damaged or outdated index is made again
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the database (a later call opens it again)."""
        if self._db is not None:
            self._db.close()
        self._db = self._ident = None

    # -- upkeep --------------------------------------------------------------------

    def derived(self, name: str, key: str | None = None) -> str | None:
        """What :meth:`keep` recorded under ``name``, if derived at ``key`` (the stat of its
        source; None: any, for a caller that brings it up to date); None otherwise. For
        facts a fresh process would work out at each query (read counts). Never raises."""
        with contextlib.suppress(sqlite3.Error):
            stamp, found, value = (self._meta(f"derived {name}") or "").partition("\n")
            if found and (key is None or stamp == key):
                return value
        return None

    def keep(self, name: str, key: str, value: str) -> None:
        """Record ``value``, derived at ``key`` (one line), for :meth:`derived`. Never raises."""
        with contextlib.suppress(sqlite3.Error):
            self._connect().execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)", (f"derived {name}", f"{key}\n{value}")
            )

    def _meta(self, key: str) -> str | None:
        row = self._connect().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def checked_after(self, moment: float) -> bool:
        """Whether a sync since ``moment`` (monotonic) checked every note (a listing, the sweep,
        a watch or the watcher): then a query's hits need no check (:meth:`refresh`)."""
        return self._checked_at is not None and self._checked_at >= moment

    def doubt(self) -> None:
        """Have the next sync sweep however recently one checked every note."""
        self._checked_at = None

    def _checked(self, found: int, swept: tuple[object, int] | None = None) -> int:
        self._checked_at, self._swept = time.monotonic(), swept or self._swept
        return found

    def sync(
        self, progress: Callable[[int, int], None] | None = None, *, full: bool = False
    ) -> int:
        """Bring the index in line with the notes; return how many notes were (re-)indexed.

        Without ``full``, a settled store whose key (:func:`freshness_key`) is as
        recorded, within :data:`MAX_AGE`, is not listed at all: the notes a query
        returns are checked instead (:meth:`refresh`). A store too large to sweep
        whose reader found no watcher to ask starts one (``store/watcher.py``).
        """
        self._absent = False
        found = self._sync(progress, full)
        if self._absent and self.count() > sweep_max():
            # Too large to sweep, and no watcher to ask: start one for the next query.
            self._absent = False
            _watcher.start([self.store.path])
        return found

    def _sync(self, progress: Callable[[int, int], None] | None, full: bool) -> int:
        self._reopen_if_gone()
        db = self._connect()
        root = self.store.path
        if not os.path.isdir(root):
            with db:
                db.execute("DELETE FROM fts")
                db.execute("DELETE FROM notes")
                db.execute("DELETE FROM stats")
                db.execute("DELETE FROM df")
                db.execute("DELETE FROM meta WHERE key IN ('fingerprint', 'key', 'log', 'checked')")
            return 0
        # A watch of the store (a long-lived process, mdmem.store.watch) names every note
        # file changed since this index's point, after a barrier: taken before any check.
        point, named = self._watched() if not full else (None, None)
        if not full and progress is None:
            key = freshness_key(root, self.store.state)
            if named is not None and self._trusted(key, any_key=True):
                # The watch vouches for every note file since our point: check those alone.
                self._restamp(db, key)
                self._point = point
                return self._checked(int(self.refresh(named)))
            # No watch in this process: the user's watcher (store/watcher.py) may say.
            told = self._told() if point is None else None
            recorded = (self._meta("key") or "\n").partition("\n")[2]
            if told is not None and self._meta("key") and told.vouches(recorded == key):
                found = int(self.refresh(told.names))
                self._restamp(db, key, told.now)  # in step only once they are indexed
                return self._checked(found)
            if self._trusted(key):
                found = self._sweep()
                self._point = point
                return found
            caught = self._catch_up(db, key)
            if caught is not None:
                if told is not None and told.kind != _watcher.UNKNOWN:
                    # The log named mdmem's own writes, the watcher the hand edits.
                    found = self._checked(caught + int(self.refresh(told.names)))
                    self._restamp(db, key, told.now)
                else:
                    found = caught + self._sweep()
                self._point = point
                return found
        self._point = point  # the listing below starts after the point was taken
        # Where the store's change log stands before the listing: from there, a later
        # sync catches up by the names the log holds (see _catch_up).
        position = self.store.log_position()
        # The catalog's code only here, where the store is listed: a settled query (the
        # per-prompt hook) never loads it.
        from mdmem.store import catalog

        # The file-system clock before the listing: only a directory older than this
        # can vouch for the listing later (a change within the same tick could not).
        before = catalog.fs_now(self.store.state, private=self.store.private)
        scan = catalog.Scan(root)
        fingerprint = scan.fingerprint()
        if fingerprint == self._meta("fingerprint"):  # every note's stat as indexed
            self._trust(db, scan, before, position)
            return self._checked(0)
        self._forget()
        indexed = dict(db.execute("SELECT name, sha FROM notes").fetchall())
        listed = (fingerprint, scan, before, position)
        total = scan.count()
        if not indexed and total > _BULK:
            # A first build: every note, its hash streamed from the catalog in name order
            # (a map of every note's hash is a quarter of the peak at 100,000 notes).
            every = self.store.iter_versions(scan=scan)
            return self._bulk(db, every, total, [], {}, listed, progress)
        changed, gone = changed_notes(self.store, indexed, scan)
        if len(changed) > _BULK:
            items = sorted(changed.items())
            return self._bulk(db, items, len(items), gone, indexed, listed, progress)
        notes = []
        for done, name in enumerate(sorted(changed), 1):
            try:
                text = self.store.read_text(name)
                notes.append((quicknote.parse(text, name), changed[name]))
            except (NoteNotFound, InvalidNote, InvalidPath):
                gone.append(name)  # changed under our feet; the next sync sees it
            if progress is not None:
                progress(done, len(changed))
        settled = bool(self._change(db, gone, notes, lambda: self._stamp(db, scan, fingerprint)))
        if settled:
            self._trust(db, scan, before, position)
        return self._checked(len(notes))  # every listed note compared by its hash

    def _stamp(self, db: sqlite3.Connection, scan: catalog.Scan, fingerprint: str) -> bool:
        """Record, inside the caller's transaction, the fingerprint the index now matches.

        Only a settled store may be recognised by its fingerprint later: the
        store's own fingerprint says it is (see _catalog's racy-stat rule).
        Returns whether it was settled (then each note's stat is recorded too).
        """
        from mdmem.store import catalog

        saved = catalog.read_fingerprint(self.store.state)
        settled = saved is not None and saved.full == fingerprint
        db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('fingerprint', ?)",
            (fingerprint if settled else "",),
        )
        db.execute("DELETE FROM meta WHERE key IN ('key', 'log', 'checked')")
        if settled:
            self._record_stats(db, scan)
        return settled

    # -- freshness: the key, and the notes a query returns ---------------------------

    def _trusted(self, key: str, *, any_key: bool = False) -> bool:
        """Whether the recorded key is ``key`` (any key, with ``any_key``: a watch vouches
        for the changes) and young enough to skip the listing."""
        recorded = self._meta("key")
        if recorded is None:
            return False
        when, _, value = recorded.partition("\n")
        try:
            age = time.time() - float(when)
        except ValueError:
            return False
        return (any_key or value == key) and 0 <= age < MAX_AGE

    def _watched(self) -> tuple[tuple[int, int] | None, set[str] | None]:
        """(the watch's point now, the note files changed since this index's point), when
        this process watches the store; names None when the watch cannot vouch for them."""
        from mdmem.store import watch

        if not watch.active(self.store.path):
            return None, None
        point, names = watch.since(self.store.path, self._point)
        if names is None:
            return point, None
        return point, {n for n in names if watch.is_note_name(n)}

    def _restamp(self, db: sqlite3.Connection, key: str, checked: int | None = None) -> None:
        """Record ``key`` as the store's, keeping the time of the last full check (the
        watch explained the change; without the watcher the full check still comes within
        MAX_AGE); and ``checked``, the watcher's time the index is now in step with."""
        recorded = self._meta("key") or ""
        when, _, value = recorded.partition("\n")
        with contextlib.suppress(sqlite3.Error):  # busy: the next query records it
            if value != key:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('key', ?)", (f"{when}\n{key}",))
            if checked is not None:
                db.execute("INSERT OR REPLACE INTO meta VALUES ('checked', ?)", (str(checked),))

    def _told(self) -> _watcher.Answer | None:
        """The watcher's answer since this index was last in step with it (``checked``)."""
        since = self._meta("checked") or "-1"
        told = _watcher.notes_since(self.store.path, int(since) if since.isdigit() else -1)
        self._absent = told == "absent"
        return None if isinstance(told, str) else told

    def _sweep(self) -> int:
        """Re-index the notes edited in place since the last full check: 1 or 0.

        An in-place edit changes neither the directory nor anything of mdmem's, so
        the key cannot see it; its file's ctime can (no tool sets a ctime back). One
        ``lstat`` per note picks the notes changed since the full check or this process's
        last sweep (less a margin for the file system's coarser clock: a clone's new notes
        are compared once); :meth:`refresh` compares those to the stats recorded and
        re-indexes those whose content changed (not within :data:`SWEEP_AGAIN` of the last
        check of every note: the hits are checked)."""
        checked = self._checked_at
        recent = checked is not None and time.monotonic() - checked < SWEEP_AGAIN
        if recent or self.count() > sweep_max():
            return 0
        recorded = self._meta("key")
        try:
            since = int((float((recorded or "").partition("\n")[0]) - _SWEEP_MARGIN) * 1e9)
        except ValueError:
            return 0
        if self._swept is not None and self._swept[0] == self._ident:
            since = max(since, self._swept[1])
        start = time.time_ns() - int(_SWEEP_MARGIN * 1e9)
        root = self.store.path
        touched = []
        try:
            fd = os.open(root, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
            try:  # relative to the directory: no path walk per note
                for name in os.listdir(fd):
                    if name.endswith(".md") and name != INDEX_NAME:
                        with contextlib.suppress(OSError):
                            st = os.stat(name, dir_fd=fd, follow_symlinks=False)
                            if st.st_ctime_ns >= since:
                                touched.append(name)
            finally:
                os.close(fd)
        except OSError:
            return 0  # not listed: nothing is vouched for
        return self._checked(int(self.refresh(touched)), swept=(self._ident, start))

    def _trust(
        self,
        db: sqlite3.Connection,
        scan: catalog.Scan,
        before: int,
        position: tuple[str, int] | None,
    ) -> None:
        """Record the key, when the store is settled as ``scan`` listed it (stats recorded).

        The directory and MEMORY.md must still be as listed, and the directory
        older than the file-system clock read before the listing (``before``),
        else a change in the same clock tick could hide behind an equal stat.
        With the key goes the change log's ``position`` before the listing, so
        that a later sync can catch up from there (:meth:`_catch_up`).
        """
        key = freshness_key(self.store.path, self.store.state)
        parts = key.split("|")
        listed = scan.dir_stat
        if (
            listed is None
            or before <= 0
            or parts[0] != " ".join(map(str, listed))
            or parts[1] != (" ".join(map(str, scan.index_stat)) if scan.index_stat else "")
            or listed[0] >= before
            or listed[3] >= before
        ):
            return
        now = time.time()
        with contextlib.suppress(sqlite3.Error):
            db.execute("INSERT OR REPLACE INTO meta VALUES ('key', ?)", (f"{now!r}\n{key}",))
            # In step with every note as of the clock before the listing (store/watcher.py).
            db.execute("INSERT OR REPLACE INTO meta VALUES ('checked', ?)", (str(before),))
            if position is not None and position[0]:
                from mdmem.store import catalog

                listed_key = catalog.key_of(scan.dir_stat, scan.index_stat)
                db.execute(
                    "INSERT OR REPLACE INTO meta VALUES ('log', ?)",
                    (f"{position[0]} {position[1]} {now!r} {listed_key}",),
                )

    def _catch_up(self, db: sqlite3.Connection, key: str) -> int | None:
        """Catch up by the store's change log instead of listing it: how many notes were
        (re-)indexed, or None when the log cannot vouch for every change (list then).

        From the position recorded at the last full check (within :data:`MAX_AGE`
        of it), the log names the notes mdmem wrote or refreshed since; only
        those are compared (content hash) and re-indexed. Their stats are
        dropped, so a query that returns one checks its bytes.
        """
        recorded = self._meta("log")
        if recorded is None:
            return None
        try:
            epoch, seq, when, listed_key = recorded.split(" ", 3)
            checked = float(when)
            found = self.store.changes_since((epoch, int(seq)), listed_key)
        except ValueError:
            return None
        if found is None or not 0 <= time.time() - checked < MAX_AGE:
            return None
        (epoch, number), now_key, names = found
        current = self.store.versions_of(names)
        indexed: dict[str, str] = {}
        wanted = sorted(names)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT name, sha FROM notes WHERE name IN ({marks})"
            indexed.update(db.execute(query, chunk).fetchall())
        puts: list[tuple[NoteFields, str]] = []
        gone: list[str] = []
        for name in wanted:
            sha = current.get(name)
            if sha is not None and indexed.get(name) == sha:
                continue
            if sha is not None:
                try:
                    puts.append((quicknote.parse(self.store.read_text(name), name), sha))
                    continue
                except (NoteNotFound, InvalidNote, InvalidPath):
                    pass  # changed under our feet: gone for now, a later sync sees it
            if name in indexed:
                gone.append(name)
        if puts or gone:
            self._forget()

        def step_on() -> None:
            db.executemany("DELETE FROM stats WHERE name = ?", [(n,) for n in wanted])
            # The same full check, further on: its age still counts from the listing.
            db.execute("INSERT OR REPLACE INTO meta VALUES ('key', ?)", (f"{when}\n{key}",))
            db.execute(
                "INSERT OR REPLACE INTO meta VALUES ('log', ?)",
                (f"{epoch} {number} {when} {now_key}",),
            )

        self._change(db, gone, puts, step_on)
        return len(puts)

    def _change(
        self,
        db: sqlite3.Connection,
        gone: Iterable[str],
        puts: Iterable[tuple[NoteFields, str]],
        then: Callable[[], object] | None = None,
    ) -> object:
        """Drop ``gone``, (re-)index ``puts``, then run ``then``: one transaction, whose
        result is ``then``'s."""
        db.execute("BEGIN IMMEDIATE")
        try:
            for name in gone:
                self._remove(db, name)
            for note, sha in puts:
                self._put(db, note, sha)
            result = then() if then is not None else None
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return result

    @staticmethod
    def _record_stats(db: sqlite3.Connection, scan: catalog.Scan) -> None:
        """Record each note's stat as the (settled) listing saw it; only the differences.

        The listing goes to a temporary table a row at a time and SQLite works
        out the differences: neither side is held in Python (at 100,000 notes,
        two dicts of every name were a quarter of a cold search's memory).
        """
        db.execute("CREATE TEMP TABLE IF NOT EXISTS listed(name TEXT PRIMARY KEY, st TEXT)")
        db.execute("DELETE FROM temp.listed")
        db.executemany(
            "INSERT OR REPLACE INTO temp.listed VALUES (?, ?)",
            ((name, f"{m} {size} {ino} {c}") for name, (m, size, ino, c) in scan.notes()),
        )
        db.execute("DELETE FROM stats WHERE name NOT IN (SELECT name FROM temp.listed)")
        db.execute(
            "INSERT OR REPLACE INTO stats SELECT l.name, l.st FROM temp.listed l"
            " LEFT JOIN stats s ON s.name = l.name WHERE s.st IS NOT l.st"
        )
        db.execute("DELETE FROM temp.listed")

    def refresh(self, names: Iterable[str]) -> bool:
        """Re-index those of ``names`` whose file changed since it was indexed; whether any did.

        One ``stat`` per note; a note whose stat differs from the one recorded at
        the last full check is read and hashed, and re-indexed (or removed, when
        it is gone or no longer a note) only if its content changed. A caller
        that gets True runs its query again.
        """
        wanted = sorted(set(names))
        if not wanted:
            return False
        db = self._connect()
        known: dict[str, tuple[str, str | None]] = {}
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            for name, sha, st in db.execute(
                f"SELECT n.name, n.sha, s.st FROM notes n LEFT JOIN stats s ON s.name = n.name"
                f" WHERE n.name IN ({marks})",
                chunk,
            ):
                known[str(name)] = (str(sha), None if st is None else str(st))
        root = self.store.path
        suspects = []
        # A stat older than this (the file system's clock is coarse) may be recorded as
        # standing for the content read: a later edit within the same tick cannot hide.
        old = time.time_ns() - int(_SWEEP_MARGIN * 1e9)
        for name in wanted:
            sha, st = known.get(name, ("", None))
            seen = None
            try:
                # Followed, as the listing does for a note that is a link.
                now = os.stat(os.path.join(root, name))
                text = f"{now.st_mtime_ns} {now.st_size} {now.st_ino} {now.st_ctime_ns}"
                if st is not None and st == text:
                    continue
                if max(now.st_mtime_ns, now.st_ctime_ns) < old:
                    seen = text
            except OSError:
                pass
            suspects.append((name, sha, seen))
        if not suspects:
            return False
        return self._reindex(db, suspects)

    def _reindex(self, db: sqlite3.Connection, suspects: list[tuple[str, str, str | None]]) -> bool:
        puts: list[tuple[NoteFields, str]] = []
        gone: list[str] = []
        # The stats to record for notes read (their content is then known at that stat),
        # so that the next query (and the in-place sweep) does not read them again.
        stats: list[tuple[str, str]] = []
        for name, indexed_sha, seen in suspects:
            try:
                text = self.store.read_text(name)
                sha = files.content_hash(text.encode("utf-8"))
                if seen is not None:
                    stats.append((name, seen))
                if sha == indexed_sha:
                    continue
                puts.append((quicknote.parse(text, name), sha))
            except (NoteNotFound, InvalidNote, InvalidPath):
                if indexed_sha:
                    gone.append(name)
                stats = [p for p in stats if p[0] != name]

        def record() -> None:
            db.executemany("INSERT OR REPLACE INTO stats VALUES (?, ?)", stats)

        if not puts and not gone:
            if stats:
                with contextlib.suppress(sqlite3.Error):  # busy: the next query records them
                    self._change(db, (), (), record)
            return False
        self._forget()
        self._change(db, gone, puts, record)
        return True

    def rebuild(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Index every note again from scratch; return how many were indexed."""
        db = self._connect()
        self._forget()
        with db:
            db.execute("DELETE FROM fts")
            db.execute("DELETE FROM notes")
            db.execute("DELETE FROM stats")
            db.execute("DELETE FROM df")
            db.execute("DELETE FROM meta WHERE key IN ('fingerprint', 'key', 'log', 'checked')")
        return self.sync(progress, full=True)

    def _bulk(
        self,
        db: sqlite3.Connection,
        changed: Iterable[tuple[str, str]],
        total: int,
        gone: list[str],
        indexed: dict[str, str],
        listed: tuple[str, catalog.Scan, int, tuple[str, int] | None],
        progress: Callable[[int, int], None] | None,
    ) -> int:
        """Index many notes: read a chunk, insert it with one statement per table, repeat.

        ``changed``: (name, content hash) of the notes to index, sorted by name, about
        ``total`` of them (for ``progress``). No more than a chunk of notes is held at
        once, and it all happens in one transaction: a reader (or a kill) sees the old
        index or the new one. ``listed`` is what :meth:`sync` listed: (fingerprint,
        scan, clock before, the change log's position before).
        """
        from itertools import islice

        fingerprint, scan, before, position = listed
        pending = iter(changed)
        count = done = 0
        db.execute("BEGIN IMMEDIATE")
        try:
            for name in gone:
                self._remove(db, name, counts=False)
            next_id = int(db.execute("SELECT coalesce(max(id), 0) + 1 FROM notes").fetchone()[0])
            while chunk := list(islice(pending, _CHUNK)):
                rows: list[tuple[object, ...]] = []
                texts: list[tuple[object, ...]] = []
                for name, sha in chunk:
                    if name in indexed:
                        self._remove(db, name, counts=False)
                    try:
                        note = quicknote.parse(self.store.read_text(name), name)
                    except (NoteNotFound, InvalidNote, InvalidPath):
                        continue  # changed under our feet; the next sync sees it
                    row, fields = self._row(note, sha)
                    rows.append((next_id, *row))
                    texts.append((next_id, *fields))
                    next_id += 1
                db.executemany(
                    "INSERT INTO notes(id, name, sha, type, title, summary, body, updated,"
                    " expires, supersedes, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    rows,
                )
                db.executemany(
                    "INSERT INTO fts(rowid, title, summary, body, type) VALUES (?, ?, ?, ?, ?)",
                    texts,
                )
                count += len(rows)
                done += len(chunk)
                if progress is not None:
                    progress(min(done, total), max(total, done))
            # Counted again from FTS5's own vocabulary, once, rather than note by note.
            db.execute("DELETE FROM df")
            db.execute("INSERT INTO df SELECT term, doc FROM vocab")
            settled = self._stamp(db, scan, fingerprint)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        if settled:
            self._trust(db, scan, before, position)
        return count

    def _forget(self) -> None:
        self._count = None
        self._hidden = None
        self.generation += 1
        self.cache.clear()

    @staticmethod
    def _remove(db: sqlite3.Connection, name: str, *, counts: bool = True) -> None:
        row = db.execute("SELECT id, terms FROM notes WHERE name = ?", (name,)).fetchone()
        if row is not None:
            db.execute("DELETE FROM fts WHERE rowid = ?", (row[0],))
            db.execute("DELETE FROM notes WHERE id = ?", (row[0],))
            if counts:
                _count_terms(db, str(row[1]).split(), -1)

    @staticmethod
    def _row(note: NoteFields, sha: str) -> tuple[tuple[object, ...], tuple[str, str, str, str]]:
        """A note's row of ``notes`` (without its id), and its four FTS fields."""
        kind = note.type.value
        fields = (
            " ".join(terms(note.title)),
            " ".join(terms(note.summary)),
            " ".join(terms(note.body)),
            " ".join(terms(_type_words(kind))),
        )
        row = (
            note.filename,
            sha,
            kind,
            note.title,
            note.summary,
            note.body,
            quicknote.updated_at(note),
            _timestamp(note.extra.get("expires"), "expires", note.filename),
            _json.dumps(_supersedes(note.extra.get("supersedes"))),
            " ".join(sorted(set(" ".join(fields).split()))),
        )
        return row, fields

    def _put(self, db: sqlite3.Connection, note: NoteFields, sha: str) -> None:
        self._remove(db, note.filename)
        row, fields = self._row(note, sha)
        _count_terms(db, str(row[-1]).split(), 1)
        cursor = db.execute(
            "INSERT INTO notes(name, sha, type, title, summary, body, updated, expires,"
            " supersedes, terms) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            row,
        )
        db.execute(
            "INSERT INTO fts(rowid, title, summary, body, type) VALUES (?, ?, ?, ?, ?)",
            (cursor.lastrowid, *fields),
        )

    # -- queries -------------------------------------------------------------------

    def count(self) -> int:
        """How many notes are indexed: the tally SQLite keeps (``recall/tally.py``)."""
        if self._count is None:
            self._count = tally.notes(self._connect())
        return self._count

    def document_frequency(self, words: Iterable[str]) -> dict[str, int]:
        """In how many notes each term occurs (terms in no note are left out).

        From the ``df`` table, one indexed look-up a term: FTS5's own count
        (``fts5vocab``) walks the term's postings, most of the store for a word
        most notes hold. A test checks the two agree.
        """
        words = sorted(set(words))
        if not words:
            return {}
        marks = ",".join("?" * len(words))
        rows = self._connect().execute(
            f"SELECT term, n FROM df WHERE term IN ({marks}) AND n > 0", words
        )
        return {str(term): int(n) for term, n in rows}

    def match(
        self, words: Iterable[str], limit: int, *, heading: bool = False, every: bool = False
    ) -> list[Row]:
        """The ``limit`` notes sharing most with ``words`` by field-weighted BM25, best first.

        ``heading`` matches the title and summary only (what MEMORY.md shows);
        ``every`` only notes holding every one of ``words``.
        """
        words = sorted(set(words))
        if not words or limit <= 0:
            return []
        query = (" AND " if every else " OR ").join(f'"{w}"' for w in words)
        if heading:
            query = f"{{title summary}} : ({query})"
        weights = ", ".join(str(w) for w in WEIGHTS)
        # The best rows first, from the full-text table alone, then their notes: a word in
        # most notes makes the match rank most of the store, and joining every candidate
        # before the sort read each one's row (about half the time at 100,000 notes).
        rows = self._connect().execute(
            f"SELECT {_COLUMNS}, n.terms, top.r FROM"
            f" (SELECT rowid AS id, bm25(fts, {weights}) AS r FROM fts WHERE fts MATCH ?"
            " ORDER BY r LIMIT ?) AS top JOIN notes n ON n.id = top.id ORDER BY top.r",
            (query, limit),
        )
        # FTS5's bm25() is lower-is-better; the engine wants higher-is-better.
        out = [Row(row) for row in rows]
        for row in out:
            row.rank = -row.rank
        return out

    def rows(self, names: Iterable[str] | None = None) -> list[Row]:
        """Indexed notes by name (every note when ``names`` is None), with rank 0."""
        db = self._connect()
        sql = f"SELECT {_COLUMNS}, n.terms, 0 FROM notes n"
        if names is None:
            return [Row(r) for r in db.execute(sql)]
        wanted = sorted(set(names))
        out: list[Row] = []
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            out += [Row(r) for r in db.execute(f"{sql} WHERE n.name IN ({marks})", chunk)]
        return out

    def hidden(self, now: datetime | None = None) -> set[str]:
        """Notes recall leaves out: expired ones, and those a current note supersedes."""
        moment = now.timestamp() if now is not None else time.time()
        # Worked out again after a sync, and at least once a minute (notes expire).
        if now is None and self._hidden is not None and moment - self._hidden[0] < 60:
            return self._hidden[1]
        out: set[str] = set()
        for name, expires, supersedes in self._connect().execute(
            "SELECT name, expires, supersedes FROM notes INDEXED BY notes_special"
            " WHERE expires IS NOT NULL OR supersedes != '[]'"
        ):
            if expires is not None and expires <= moment:
                out.add(name)
            # As the prompt block does (mdmem.store.marks): a superseded note stays
            # hidden even when its successor has expired.
            out.update(n for n in _json.loads(supersedes) if n != name)
        if now is None:
            self._hidden = (moment, out)
        return out

    def versions(self) -> list[tuple[str, str, str]]:
        """(name, content hash, type) of every indexed note (what the semantic side binds to)."""
        return [
            (str(n), str(s), str(t))
            for n, s, t in self._connect().execute("SELECT name, sha, type FROM notes")
        ]

    def successors(self, now: datetime | None = None) -> dict[str, str]:
        """Superseded note -> the current note that replaced it (following chains).

        A note superseded by one that is itself hidden (superseded in turn, or
        expired) maps to the end of the chain when that end is current; to
        nothing when the chain ends in a hidden note.
        """
        hidden = self.hidden(now)
        cached = self.cache.get("successors")
        if now is None and isinstance(cached, tuple) and cached[0] is hidden:
            return dict(cached[1])
        direct: dict[str, str] = {}
        for name, supersedes in self._connect().execute(
            "SELECT name, supersedes FROM notes INDEXED BY notes_special"
            " WHERE supersedes != '[]' ORDER BY name"
        ):
            for old in _json.loads(supersedes):
                if old != name:
                    direct.setdefault(old, name)
        out: dict[str, str] = {}
        for old, new in direct.items():
            seen = {old}
            while new in hidden and new in direct and new not in seen:
                seen.add(new)
                new = direct[new]
            if new not in hidden:
                out[old] = new
        if now is None:
            self.cache["successors"] = (hidden, out)
        return out

    # -- embeddings cached here by earlier versions (now in mdmem.recall.semantic) ---

    def legacy_vectors(self, model: str) -> dict[str, bytes]:
        """Embeddings an earlier version cached in this file: content hash -> bytes."""
        rows = self._connect().execute(
            "SELECT v.sha, v.v FROM vectors v JOIN notes n ON n.sha = v.sha WHERE v.model = ?",
            (model,),
        )
        return {str(sha): bytes(blob) for sha, blob in rows}

    def drop_legacy_vectors(self) -> None:
        """Forget the embeddings an earlier version cached in this file."""
        with self._connect() as db:
            db.execute("DELETE FROM vectors")
