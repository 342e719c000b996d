"""The coherence engine: keeps a store's notes, its catalog and MEMORY.md in agreement.

The notes are the truth. A *pass* (:meth:`Coherence.sync`) walks a listing of the
store (``_catalog.Scan``) beside the catalog's rows, both sorted by name, re-reads
only the notes whose stat changed, re-parses only those whose bytes changed, then
makes MEMORY.md say what the rows say (:meth:`Coherence.write_index`, with the
helpers of ``_memory_md``): patched line by line when the file is still exactly
what mdmem last wrote, rebuilt a chunk at a time otherwise. A write
(:meth:`Coherence.record`) changes the rows of the notes it touched and nothing
else. Each pass appends what it changed to the catalog's change log, and, when it
found the store settled, writes the fingerprint the fast paths check
(``_catalog.Fingerprint``).

A pass that finds MEMORY.md wrong without the write lock retries once under it
(``lock(0)``); if someone else holds it, the right text is returned and the file
catches up on the next write. With ``keep``, a pass whose rows could not be saved
leaves them in an open transaction for the caller to read, then roll back.

:class:`~mdmem.store.store.Store` owns one :class:`Coherence` and reads through it.
"""

from __future__ import annotations

import os
from _thread import RLock

from mdmem.errors import LockTimeout
from mdmem.store import _catalog, _index_file, _memory_md, _watched, files, rows
from mdmem.store import watcher as _watcher
from mdmem.store.paths import INDEX_NAME, is_candidate_name

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import contextlib
    import logging
    from collections.abc import Callable, Iterator, Mapping

    from mdmem.store import _txn
    from mdmem.store.results import ReindexReport
    from mdmem.store.state import StateDir

__all__ = ["Coherence", "Request"]

# Parsed entries an unlocked pass hands to the locked one, at most: a first load of
# a large store must not hold every note's entry in memory at once.
_CACHE_ENTRIES = 5_000
# Rows written to the catalog per statement while a pass reads many notes.
_BATCH = 500


def _log() -> logging.Logger:
    # logging costs ~15 ms to import; only paths that report something pay it.
    import logging

    return logging.getLogger("mdmem")


class Request:
    """What a pass is asked to do (the keywords of :meth:`Coherence.sync`)."""

    __slots__ = ("answer", "at", "cache", "full", "keep", "known", "locked", "progress")

    def __init__(
        self,
        known: Mapping[str, bytes],
        at: int,
        *,
        full: bool,
        locked: bool,
        keep: bool,
        progress: Callable[[int, int], None] | None,
        cache: Mapping[str, _catalog.CatalogRow],
        answer: bool = False,
    ) -> None:
        self.known = known
        self.at = at
        self.full = full
        self.locked = locked
        self.keep = keep
        self.progress = progress
        self.cache = cache
        self.answer = answer


def _are_the_rows(listed: set[str], cat: _catalog.Catalog) -> bool:
    """Whether a folder's names (case folded) are the rows' notes and names no note has:
    a ``*.md`` name with no row is not vouched for (folded, "X.MD" looks like a note)."""
    others = {n for n in listed if not is_candidate_name(n)}
    known = cat.folded_names(len(listed) - len(others))
    return known is not None and known | others == listed


class Coherence:
    """The coherence engine of the store at ``root``, and the catalog connection it uses.

    ``usable``: False for a store that must not be read (a refused project store) or
    written; ``lock(timeout)``: the store's write lock, taken when an unlocked pass
    must write MEMORY.md. One thread at a time uses the catalog: hold :attr:`guard`.
    """

    def __init__(
        self,
        root: str,
        *,
        state: StateDir,
        private: bool,
        usable: bool,
        lock_timeout: float,
        lock: Callable[[float], contextlib.AbstractContextManager[None]],
    ) -> None:
        self.root = root
        #: The store's state folder (store.state): where it is, worked out once.
        self.state = state
        self.private = private
        self.usable = usable
        self.lock_timeout = lock_timeout
        self._lock = lock
        # The catalog's connection, per process; one thread at a time uses it.
        self._catalog: _catalog.Catalog | None = None
        self._catalog_pid = 0
        self.guard = RLock()
        # MEMORY.md as this object last wrote it (its stat, its bytes): the next write
        # checks the file against these bytes instead of hashing it.
        self._written: tuple[_catalog.Stat, bytes] | None = None
        # When this object's last stat pass found the store settled, and the store's key then.
        self._fresh: tuple[float, str] | None = None
        # The directory's names, folded, by its stat: ``taken`` without a catalog.
        self._listing: tuple[str, set[str]] | None = None
        self._relisted = False  # listed again after its own write: see dir_known

    def here(self) -> bool:
        """Whether there is a store to read: usable, and its directory exists."""
        return self.usable and os.path.isdir(self.root)

    def cat(self) -> _catalog.Catalog:
        """The catalog, opened on first use (and again in a forked child)."""
        if self._catalog is None or self._catalog_pid != os.getpid():
            # A forked child must not share its parent's SQLite connection.
            self._catalog = _catalog.Catalog(self.root, private=self.private, state=self.state)
            self._catalog_pid = os.getpid()
        return self._catalog

    # -- bringing the catalog up to date -------------------------------------------------

    def settle(
        self,
        *,
        keep: bool,
        scan: _catalog.Scan | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> bool:
        """Bring the catalog up to date (nothing to do on a settled store); True: an overlay.

        ``scan``: a listing the caller just took, used instead of taking another;
        ``progress(done, total)`` as the pass goes through the notes.
        """
        scan = scan if scan is not None else _catalog.Scan(self.root)
        fp = _catalog.read_fingerprint(self.state)
        if fp is not None and scan.fingerprint() == fp.full:
            # Settled, and if the catalog is the one that saw it settle (it still
            # records this MEMORY.md), its rows are exactly the notes.
            try:
                recorded = _index_file.IndexRecord.parse(self.cat().meta("index"))
            except _catalog.CatalogError:
                recorded = None
            if recorded is not None and recorded.same_stat(fp.index):
                return False
        return self.sync(scan, keep=keep, progress=progress)[1]

    def settle_unless_current(self, max_age: float) -> bool:
        """:meth:`settle`, unless this object's own stat pass found the store settled less
        than ``max_age`` seconds ago and neither the directory nor MEMORY.md changed since
        (any write, create, delete or rename by mdmem or an editor's save changes one)."""
        import time

        key = _catalog.store_key(self.root)
        if max_age > 0 and self._fresh is not None:
            at, known = self._fresh
            if known == key and 0 <= time.monotonic() - at < max_age:
                return False
        overlay = self.settle(keep=True)
        # The key from before the pass: a change during it makes the next call look again.
        self._fresh = None if overlay else (time.monotonic(), key)
        return overlay

    def sync(
        self,
        scan: _catalog.Scan,
        *,
        known: Mapping[str, bytes] | None = None,
        at: int = 0,
        full: bool = False,
        locked: bool = False,
        keep: bool = False,
        progress: Callable[[int, int], None] | None = None,
        cache: dict[str, _catalog.CatalogRow] | None = None,
        answer: bool = False,
    ) -> tuple[str | None, bool]:
        """Bring the catalog and MEMORY.md in line with the notes of ``scan``.

        ``known``: notes this process just wrote (name -> bytes), stamped ``at``
        (the file-system time before they were written); ``full``: every row
        rebuilt (a reindex); ``locked``: the caller holds the write lock;
        ``progress``: called with (done, total); ``cache``: rows an earlier
        unlocked pass parsed; ``answer``: an unlocked pass that never takes the
        lock (MEMORY.md could not be written under it): the text only.

        Returns (text, overlay): ``text`` is MEMORY.md's right text when the
        file could not be written (None: the file is right); ``overlay`` is
        True when, with ``keep``, the catalog's changes could not be saved and
        are left in an open transaction for the caller to read, then roll back.
        """
        if not self.here():
            return "", False  # reading a store that does not exist must not create it
        with self.guard:
            asked = Request(
                known or {},
                at,
                full=full,
                locked=locked,
                keep=keep,
                progress=progress,
                cache=cache or {},
                answer=answer,
            )
            try:
                with _RollBack(self):
                    return self._walk(self.cat(), scan, asked)
            except _catalog.CatalogError as exc:
                if exc.busy:
                    # Held by another connection: answer from a private catalog
                    # in memory this once; never throw a live catalog away.
                    return self._walk(self._in_memory(), scan, asked)
                _log().warning("%s: the catalog was unusable (%s); rebuilding it", self.root, exc)
                self.cat().reset()
            try:
                with _RollBack(self):
                    return self._walk(self.cat(), scan, asked)
            except _catalog.CatalogError:
                pass  # the state folder cannot hold a catalog: answer from one in memory
            self._catalog = self._in_memory()
            return self._walk(self._catalog, scan, asked)

    def _in_memory(self) -> _catalog.Catalog:
        return _catalog.Catalog(self.root, private=self.private, memory=True, state=self.state)

    # One loop on purpose: the listing and the rows side by side, with the state it shares
    # (batch, changes, touched) in locals, is the 100,000-note stat pass.
    def _walk(
        self, cat: _catalog.Catalog, scan: _catalog.Scan, asked: Request
    ) -> tuple[str | None, bool]:
        """The pass itself: rows of the notes that changed, then MEMORY.md."""
        # Locals, not attributes: the loop reads them once per note.
        known, at, locked, progress, cache = (
            asked.known,
            asked.at,
            asked.locked,
            asked.progress,
            asked.cache,
        )
        if not cat.begin(self.lock_timeout if locked else 0.5):
            # Another process is rewriting the catalog: work from a private, empty one.
            cat = self._in_memory()
            cat.begin(0)
        now = _catalog.fs_now(self.state, private=self.private) if not cat.memory else 0
        if asked.full:
            cat.clear()
        # Names are validated once: the catalog is asked about a name the quick check
        # cannot vouch for, instead of holding every recorded name.
        scan.classify(cat.valid_names())
        changes: dict[str, str | None] = {}
        computed: dict[str, _catalog.CatalogRow] = {}
        fresh = False  # a note as new as its row: its stat proves nothing yet
        total = scan.count()
        many = False  # more changed lines than a patch is worth: MEMORY.md is rebuilt
        rejected = scan.rejected
        seen_rejected: set[str] = set()
        gone: list[str] = []
        batch: list[tuple[str, _catalog.CatalogRow]] = []
        written = 0  # rows put so far, but the last batch's
        # The names whose rows this pass changes, for the change log (None: too many,
        # or a rebuild: readers catch up in full).
        touched: set[str] | None = None if asked.full else set()

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
            batch.append((name, _catalog.CatalogRow(error=reason)))

        # The listing and the rows, both sorted by name, side by side: nothing holds
        # every note's row, and rows go to SQLite in key order, a batch at a time.
        stats = cat.iter_stats()
        row = next(stats, None)
        for done, (name, st) in enumerate(scan.sorted_notes(), 1):
            while row is not None and row[0] < name:
                unmatched(row[0], row[1])
                row = next(stats, None)
            rec: tuple[str, _catalog.Stat | None, int] | None = None
            if row is not None and row[0] == name:
                rec, row = row, next(stats, None)
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
            if hit is not None and hit.st == st and name not in known:
                entry = hit.stamped(stamp)
            else:
                entry = rows.note_row(self.state, name, st, prev, known).stamped(stamp)
                if entry.error and (prev is None or prev.error != entry.error):
                    _log().warning("%s/%s is not a valid note: %s", self.root, name, entry.error)
            fresh = fresh or max(st[0], st[3]) >= stamp
            if entry != prev:
                batch.append((name, entry))
                if touched is not None:
                    touched.add(name)
                    if len(touched) > _catalog.LOG_NAMES:
                        touched = None
                if len(batch) >= _BATCH:
                    cat.put_many(batch)
                    written += len(batch)
                    batch.clear()
                if len(computed) < _CACHE_ENTRIES:
                    computed[name] = entry
            if not many and entry.line != (prev.line if prev is not None else None):
                changes[name] = entry.line
                many = len(changes) > _index_file.PATCH_LIMIT
            if progress is not None:
                progress(done, total)
        while row is not None:
            unmatched(row[0], row[1])
            row = next(stats, None)
        for name, reason in rejected.items():
            if name not in seen_rejected:  # rejected, and new to the catalog
                batch.append((name, _catalog.CatalogRow(error=reason)))
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
        done_pass = _memory_md.Pass(
            changes, now, fresh=fresh, computed=computed, rebuild=many, touched=touched
        )
        out = self.write_index(
            cat, scan, done_pass, locked=locked, keep=asked.keep, answer=asked.answer
        )
        self._keys_after(cat, written + len(batch))
        return out

    # -- MEMORY.md ----------------------------------------------------------------------

    def write_index(
        self,
        cat: _catalog.Catalog,
        scan: _catalog.Scan | None,
        done: _memory_md.Pass,
        *,
        locked: bool,
        keep: bool = False,
        answer: bool = False,
    ) -> tuple[str | None, bool]:
        """Make MEMORY.md say what the catalog (in its open transaction) says, then commit.

        MEMORY.md is patched line by line when it is still exactly what mdmem
        last wrote (its hash is in the catalog), and rebuilt from the catalog
        otherwise. ``scan`` (None after a write that scanned nothing) lets a
        settled store be fingerprinted.

        The change log (``Catalog.log``) gets the names whose rows changed
        (``done.touched``; None: maybe any) between the store's key
        ``done.key_before`` (a write's, taken before its first note was written;
        a scan's own otherwise) and the key after MEMORY.md is written.
        """
        index_path = os.path.join(self.root, INDEX_NAME)
        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
        draft = _memory_md.draft(
            self.root, self.private, self._written, cat, scan, done, recorded, locked=locked
        )
        if draft.differs:
            if not locked:
                return self._hand_over(cat, scan, done, draft.new, answer=answer, keep=keep)
            before = _catalog.stat_of(self.root)
            data = draft.new if draft.new is not None else _index_file.chunks(cat.lines())
            files.atomic_write(index_path, data, private=self.private, derived=True)
            draft.rewrote = True
            if scan is not None and before == scan.dir_stat:
                # Only our own MEMORY.md moved the directory since the scan.
                draft.complete, draft.scan_dir = True, _catalog.stat_of(self.root)
            else:
                draft.scan_dir = None
        if draft.lines is None:
            assert draft.new is not None
            draft.lines = draft.new.count(b"\n")
        index_stat = _memory_md.index_stat(self.root)
        if draft.rewrote and index_stat is not None:
            self._written = None if draft.new is None else (index_stat, draft.new)
        if draft.rewrote or draft.streamed is not None or draft.ours in ("hash", "bytes"):
            _memory_md.remember(self.state, self.private, cat, draft, done.now, index_stat)
        _memory_md.finish(self.state, self.private, cat, scan, done, draft, index_stat)
        if index_stat is not None:
            return None, False
        if draft.streamed is not None:  # MEMORY.md could not be written: the text, if any
            text = _index_file.join(cat.lines()).decode("utf-8") if draft.streamed[1] else None
            return text, False
        return (draft.new.decode("utf-8") if draft.new else None), False

    def _hand_over(
        self,
        cat: _catalog.Catalog,
        scan: _catalog.Scan | None,
        done: _memory_md.Pass,
        new: bytes | None,
        *,
        answer: bool,
        keep: bool,
    ) -> tuple[str | None, bool]:
        """MEMORY.md is behind: a locked pass writes it, reusing what was parsed; if it cannot
        (the lock held, or ``answer``: unwritable), the text, built only then."""
        lock = None if answer else _entered(self._lock(0))
        if lock is None:
            text = (new if new is not None else _index_file.join(cat.lines())).decode("utf-8")
            cat.rollback()
            return text, keep and _memory_md.redo(done, cat)
        try:
            cat.rollback()
            again = _rescan(self.root, scan, done.now)
            try:
                return self.sync(again, locked=True, keep=keep, cache=done.computed)
            except OSError:
                return self.sync(again, keep=keep, cache=done.computed, answer=True)
        finally:
            lock.__exit__(None, None, None)

    # -- after a write -----------------------------------------------------------------

    def dir_known(self) -> bool:
        """Whether the catalog's rows know every name in the directory as it is now: it is
        as they last knew it, or it was listed for a second name check since it moved (a
        pull, an editor's save) and the rows are each note listed: the write records it."""
        try:
            st = os.lstat(self.root)
            here = f"{st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"
            with self.guard:
                cat = self.cat()
                if cat.meta("dir") == here:
                    return True
                again = self._relisted or cat.meta("unknown") == here
                listing = self._listing if again else None
                return listing is not None and listing[0] == here and _are_the_rows(listing[1], cat)
        except (OSError, _catalog.CatalogError):
            return False

    def record(self, plan: _txn.Plan, at: int, complete: bool, before: str | None) -> None:
        """After a batch: update the rows of the notes it touched, and their MEMORY.md lines.

        The rest of the store is not looked at (that is what makes a write cost
        what it touches); a note someone edited by hand meanwhile is caught by
        the next read. When MEMORY.md is not what mdmem last wrote, or the
        catalog is new, a full refresh runs instead. ``complete``: the rows knew
        every name before the batch (:meth:`dir_known`); ``before``: the store's
        key then.
        """
        with self.guard:
            try:
                with _RollBack(self):
                    cat = self.cat()
                    if cat.meta("index") is not None and cat.begin(self.lock_timeout):
                        changes: dict[str, str | None] = {}
                        for name, data in plan.writes.items():
                            st = os.stat(os.path.join(self.root, name))
                            row = rows.note_row(
                                self.state,
                                name,
                                (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns),
                                cat.get(name),
                                {name: data},
                                plan.notes.get(name),
                            ).stamped(at)
                            cat.put(name, row)
                            changes[name] = row.line
                        cat.remove(list(plan.deletes))
                        changes.update(dict.fromkeys(plan.deletes))
                        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
                        if recorded is not None and _memory_md.index_stat(self.root) is not None:
                            done = _memory_md.Pass(
                                changes,
                                at,
                                complete=complete,
                                touched=set(changes) if before is not None else None,
                                key_before=before,
                            )
                            self.write_index(cat, None, done, locked=True)
                            return
                        cat.rollback()
            except _catalog.CatalogError:
                pass  # a damaged catalog: the full refresh below rebuilds it
        self.sync(_catalog.Scan(self.root), known=plan.writes, at=at, locked=True)

    def reindex(self, progress: Callable[[int, int], None] | None) -> ReindexReport:
        """Rebuild MEMORY.md and the rows from every note, under the write lock
        (``Store.reindex``)."""
        from mdmem.store.results import Problem, ReindexReport

        if not self.here():
            return ReindexReport(0, (), False)
        with self._lock(self.lock_timeout):
            index_path = os.path.join(self.root, INDEX_NAME)
            before = _memory_md.hash_file(index_path)
            text, _ = self.sync(_catalog.Scan(self.root), full=True, locked=True, progress=progress)
            after = _catalog.content_hash(text.encode("utf-8")) if text is not None else None
            if text is None:
                after = _memory_md.hash_file(index_path)
            with self.guard:
                problems = tuple(
                    Problem(name, str(e.error))
                    for name, e in self.cat().rows(where="error IS NOT NULL")
                )
        with self.guard:
            count = sum(1 for _ in self.cat().rows())
        empty = _catalog.content_hash(b"")
        return ReindexReport(count, problems, changed=(before or empty) != (after or empty))

    # -- the change log ------------------------------------------------------------------

    def log_position(self) -> tuple[str, int] | None:
        """Where the change log stands (``Store.log_position``), or None."""
        if not self.here():
            return None
        with self.guard:
            return _catalog.log_position(self.cat())

    def changes_since(
        self, position: tuple[str, int], key: str
    ) -> tuple[tuple[str, int], str, set[str]] | None:
        """What changed since ``position`` and ``key`` (``Store.changes_since``)."""
        if not self.here():
            return None
        with self.guard:
            return _catalog.changes_since(self.cat(), self.root, position, key)

    def recorded_stat(self, name: str) -> _catalog.Stat | None:
        """A note's stat as its row records it (None: no row, or not a valid note)."""
        with self.guard:
            row = self.cat().get(name)
        return None if row is None or row.line is None else row.st

    def catalog_current(
        self, max_age: float, *, ask: bool = True, vouched: bool = False
    ) -> int | None:
        """MEMORY.md's line count when the rows may be read without a stat pass
        (``Store.catalog_current``); None otherwise.

        With ``ask``, the user's watcher (``store/watcher.py``) is asked what changed
        since the last stat pass's listing: its names are compared with their rows
        (one ``lstat`` each) and those that differ are brought up to date alone
        (:meth:`refresh_named`), whatever the stat pass's age. With ``vouched``, None
        unless the watcher answered.
        """
        if not self.here() or (vouched and not (ask and _watcher.enabled())):
            return None
        import time

        with self.guard:
            try:
                cat = self.cat()
                settled = (cat.meta("settled") or "").split(" ", 3)
                if len(settled) != 4:
                    return None
                at = float(settled[2])
                position = (settled[0], int(settled[1]))
                now_key = _catalog.store_key(self.root)
                chained = cat.changes_after(position, settled[3], now_key, names=False) is not None
                joined = " ".join(settled)
                since = _watched.since(cat, joined, at)
                told = self._told(since) if ask else None
                if told is not None and told.kind == _watcher.UNKNOWN:
                    if _watcher.vouches_from_now(self.root):
                        # It cannot vouch for our last stat pass's time, and never will
                        # (a checkout rewrote more notes since than it names): a stat
                        # pass now gets us a time it vouches for. Not the rows as they
                        # are: an edit in place since would be missed for max_age.
                        return None
                    told = None  # it catches up (its own stat pass): our usual check
                if vouched and told is None:
                    return None
                if told is not None and (told.kind == _watcher.COMPLETE or chained):
                    return self._vouched(cat, told, joined, since)
                if not chained or not 0 <= time.time() - at < max_age:
                    return None
                recorded = _index_file.IndexRecord.parse(cat.meta("index"))
                return None if recorded is None else recorded.lines
            except (_catalog.CatalogError, ValueError):
                return None

    def _told(self, since: int) -> _watcher.Answer | None:
        """The watcher's answer since ``since`` (``_watched.since``); None: no watcher."""
        if not _watcher.enabled():
            return None
        answers = _watcher.ask([(self.root, since)])
        return None if isinstance(answers, str) else answers[0]

    def _vouched(
        self, cat: _catalog.Catalog, told: _watcher.Answer, settled: str, since: int
    ) -> int | None:
        """MEMORY.md's line count once every note the watcher named has the row its file
        says (those that differ refreshed alone); None when that cannot be done."""
        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
        if recorded is None:
            return None
        differ = _watched.differing(self.root, cat, told, recorded.stat)
        if differ is None:
            return None  # MEMORY.md edited by hand: a full pass puts it right
        if not differ:
            if _watched.steps(told, since):
                _watched.step(cat, told.now, settled)
            return recorded.lines
        if not self.refresh_named(
            differ, told.now, settled, complete=told.kind == _watcher.COMPLETE
        ):
            return None
        recorded = _index_file.IndexRecord.parse(cat.meta("index"))
        return None if recorded is None else recorded.lines

    def refresh_named(self, names: list[str], now: int, settled: str, *, complete: bool) -> bool:
        """Bring the rows of ``names`` (and their MEMORY.md lines) up to date from their
        files, and nothing else: what the watcher named as changed behind mdmem's back.
        Under the write lock if it is free at once; whether it was done. ``now`` (the
        watcher's time) is recorded, beside ``settled``, as the point the rows are in
        step with (``meta watched``)."""
        try:
            with self._lock(0), self.guard, _RollBack(self):
                cat = self.cat()
                if cat.meta("index") is None or not cat.begin(0.5):
                    return False
                at = _catalog.fs_now(self.state, private=self.private)
                before = _catalog.store_key(self.root)
                changes: dict[str, str | None] = {}
                gone = []
                for name in sorted(names):
                    prev = cat.get(name)
                    plain = _plain_note(self.root, name)
                    st = _catalog.stat_of(os.path.join(self.root, name)) if plain else None
                    if plain is None:
                        cat.rollback()
                        return False
                    if st is None:
                        if prev is not None:
                            gone.append(name)
                            changes[name] = None
                        continue
                    row = rows.note_row(self.state, name, st, prev, {}).stamped(at)
                    if row != prev:
                        cat.put(name, row)
                        changes[name] = row.line
                cat.remove(gone)
                cat.set_meta("watched", f"{now} {settled}")
                done = _memory_md.Pass(
                    changes, at, complete=complete, touched=set(changes), key_before=before
                )
                self.write_index(cat, None, done, locked=True)
                return True
        except (LockTimeout, OSError, _catalog.CatalogError):
            return False

    # -- reading the rows ----------------------------------------------------------------

    def rows(
        self, offset: int, limit: int | None, where: str = "line IS NOT NULL"
    ) -> Iterator[tuple[str, _catalog.CatalogRow]]:
        """The rows ``where`` selects, sorted by name: a page at a time under the guard,
        so that other threads may use the catalog between; each page starts after the
        last name of the one before."""
        done, after = 0, None
        while limit is None or done < limit:
            size = 500 if limit is None else min(500, limit - done)
            with self.guard:
                page = list(
                    self.cat().rows(
                        where=where, offset=offset if after is None else 0, limit=size, after=after
                    )
                )
            yield from page
            done += len(page)
            if len(page) < size:
                return
            after = page[-1][0]

    def taken(self, filename: str) -> bool:
        """Whether a note ``filename``, or one whose name differs only in case, is there
        (``Store.name_taken``)."""
        if os.path.lexists(os.path.join(self.root, filename)):
            return True
        folded = filename.casefold()
        try:
            st = os.lstat(self.root)
        except FileNotFoundError:
            return False
        here = f"{st.st_mtime_ns} {st.st_ctime_ns} {st.st_ino}"
        with self.guard:
            try:
                cat = self.cat()
                if cat.meta("dir") == here:
                    return cat.taken(folded)
            except _catalog.CatalogError:
                pass  # a damaged catalog: the listing answers
            if self._listing is None or self._listing[0] != here:
                self._relisted = self._listing is not None
                self._listing = (here, {n.casefold() for n in os.listdir(self.root)})
            return folded in self._listing[1]

    def near(self, title: str, summary: str, numbers: str) -> list[tuple[str, str, str]] | None:
        """Dedupe's candidates: (name, title, summary) of the few notes, not superseded,
        that name ``numbers`` (``dedupe.number_key``) and share the most with ``title`` and
        ``summary`` (``_dedupe_keys.near``), as the catalog last recorded them (no stat
        pass). None when the catalog cannot say; then every entry is read."""
        if not self.here():
            return []
        with self.guard:
            try:
                with _RollBack(self):
                    cat = self.cat()
                    found = cat.near(title, summary, numbers, self.lock_timeout)
                    if cat.keys_wanted:
                        cat.keys_wanted = False
                        self.build_keys()
                    if found is None:
                        return None
                    hidden = rows.superseded(cat)
            except _catalog.CatalogError:
                return None
        return [row for row in found if row[0] not in hidden]

    def _keys_after(self, cat: _catalog.Catalog, written: int) -> None:
        """After a pass that wrote ``written`` rows: a first load (a clone's, an upgrade's)
        has the dedupe keys built in the background now, not by the first create."""
        if written > _BATCH and not cat.memory:
            from mdmem.store import _dedupe_keys

            if written > _dedupe_keys.INLINE and cat.keys_unbuilt():
                self.build_keys()

    def build_keys(self) -> None:
        """Start the background build of the catalog's dedupe keys (unless one runs)."""
        from mdmem.store import _dedupe_keys

        _dedupe_keys.start(self.state.path)


class _RollBack:
    """Roll the catalog's open transaction back on any error, then let the error go on.

    Whatever the error (a damaged catalog, or MEMORY.md that cannot be written), no
    transaction may stay open for the next call; only a ``CatalogError`` is then
    caught by the caller.
    """

    __slots__ = ("_engine",)

    def __init__(self, engine: Coherence) -> None:
        self._engine = engine

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None:
            with _suppress():
                self._engine.cat().rollback()


def _suppress() -> contextlib.AbstractContextManager[None]:
    import contextlib

    return contextlib.suppress(Exception)


def _plain_note(root: str, name: str) -> bool | None:
    """True: a regular file with a plain note's name; False: no such file; None: something
    else (a link, a name the full validator must judge): for a full pass to decide."""
    import stat

    from mdmem.store._scan import _plain_name

    try:
        mode = os.lstat(os.path.join(root, name)).st_mode
    except FileNotFoundError:
        return False
    except OSError:
        return None
    return True if stat.S_ISREG(mode) and _plain_name(name) else None


def _entered(
    lock: contextlib.AbstractContextManager[None],
) -> contextlib.AbstractContextManager[None] | None:
    """``lock`` taken (the caller leaves it), or None when it is held elsewhere or cannot be."""
    try:
        lock.__enter__()
    except (LockTimeout, OSError):
        return None
    return lock


def _rescan(root: str, scan: _catalog.Scan | None, now: int) -> _catalog.Scan:
    """The listing for a pass under the lock: ``scan`` again while the folder is as it
    listed it and older than the clock ``now`` read after (no create, delete or rename
    since, even in the same clock tick); else a new one. A note edited in place since
    ``scan`` has another stat than it recorded: the next pass reads it."""
    listed = scan.dir_stat if scan is not None else None
    if (
        scan is not None
        and listed is not None
        and now > 0
        and max(listed[0], listed[3]) < now
        and _catalog.stat_of(root) == listed
    ):
        return scan
    return _catalog.Scan(root)
