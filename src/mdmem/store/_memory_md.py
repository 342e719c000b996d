"""Making MEMORY.md say what the catalog says, for the coherence engine (``sync``).

:func:`draft` works out how the file must change: spliced in place when its
stat alone proves it is what mdmem wrote (``_index_file.splice``), rebuilt a
chunk at a time from the catalog on a first load or after many changes,
patched in memory otherwise. :func:`remember` records what was written (stat,
hash, line count, and when its stat alone vouches for it); :func:`finish`
ends the pass: the directory the rows know, the marks file, the change log,
the commit, and the fingerprint when the store was seen settled. A pass's
outcome reaches them as a :class:`Pass`.
"""

from __future__ import annotations

import os

from mdmem.store import _catalog, _index_file, files, rows
from mdmem.store.paths import INDEX_NAME, MAX_INDEX_BYTES
from mdmem.store.state import StateDir

__all__ = ["Draft", "Pass", "draft", "finish", "hash_file", "index_stat", "redo", "remember"]


class Pass:
    """What a pass changed in the catalog's open transaction, for :meth:`Coherence.write_index`.

    ``changes``: note name -> its new MEMORY.md line (None: gone, or no line);
    ``now``: the file-system time the pass started at; ``fresh``: a note as new as
    its row was seen (its stat proves nothing yet: no fingerprint); ``computed``:
    rows parsed, for a locked retry not to parse them again; ``rebuild``: more
    changes than a patch is worth; ``touched``: the names whose rows changed, for
    the change log (None: maybe any); ``complete``: the rows know every name in
    the directory (a write's, see ``dir_known``); ``key_before``: the store's key
    before a write's first note was written (None: the scan's own).
    """

    __slots__ = (
        "changes",
        "complete",
        "computed",
        "fresh",
        "key_before",
        "now",
        "rebuild",
        "touched",
    )

    def __init__(
        self,
        changes: dict[str, str | None],
        now: int,
        *,
        fresh: bool = True,
        computed: dict[str, _catalog.CatalogRow] | None = None,
        rebuild: bool = False,
        touched: set[str] | None = None,
        complete: bool = False,
        key_before: str | None = None,
    ) -> None:
        self.changes = changes
        self.now = now
        self.fresh = fresh
        self.computed = computed if computed is not None else {}
        self.rebuild = rebuild
        self.touched = touched
        self.complete = complete
        self.key_before = key_before


class Draft:
    """MEMORY.md as :meth:`Coherence.write_index` works it out: how it is known to be
    mdmem's (``ours``), its new bytes or digest, its line count, whether it was written."""

    __slots__ = ("complete", "differs", "lines", "new", "ours", "rewrote", "scan_dir", "streamed")

    def __init__(self, complete: bool) -> None:
        self.complete = complete
        self.differs = False
        self.lines: int | None = None
        self.new: bytes | None = None
        self.ours = ""
        self.rewrote = False
        self.scan_dir: _catalog.Stat | None = None
        # A rebuild streamed from the catalog: (content hash, size, lines).
        self.streamed: tuple[str, int, int] | None = None


def draft(
    root: str,
    private: bool,
    written: tuple[_catalog.Stat, bytes] | None,
    cat: _catalog.Catalog,
    scan: _catalog.Scan | None,
    done: Pass,
    recorded: _index_file.IndexRecord | None,
    *,
    locked: bool,
) -> Draft:
    """How MEMORY.md must change: spliced in place, streamed, patched or rebuilt."""
    index_path = os.path.join(root, INDEX_NAME)
    draft = Draft(done.complete)
    changes = done.changes
    # A rebuild from the catalog (a first load, a reindex, many changes) goes a
    # chunk at a time: neither the old file nor the new one is held whole.
    stream = done.rebuild or recorded is None or len(changes) > _index_file.PATCH_LIMIT
    spliced = None
    ours = ""
    st = index_stat(root)
    # Too large to hold (18 MB at 100,000 notes, and a copy to patch): hashed a chunk
    # at a time, then changed in place like a file its stat vouches for; not mdmem's
    # (a pull, another checkout's write), or not spliceable: compared and rebuilt in chunks.
    large = st is not None and st[1] >= _index_file.STREAM_BYTES
    hashed = None  # the file's (hash, size), when worked out: hashed once a pass
    if recorded is not None and not stream:
        if recorded.stat_proves(st):
            ours = "stat"
        elif large:
            hashed = _file_digest(index_path)
            ours = "hash" if hashed[0] == recorded.digest else ""
    if ours:
        # Exactly what mdmem wrote: change the lines in place, never reading, rendering
        # or hashing the rest (see _index_file.splice); an unlocked pass only finds out
        # whether they would change, and the locked one it hands over to writes them.
        before = _catalog.stat_of(root)
        try:
            spliced = _index_file.splice(index_path, changes, private=private, dry=not locked)
        except OSError:
            spliced = None
    if spliced is not None:
        assert recorded is not None
        draft.ours, draft.lines = ours, recorded.lines + spliced[0]
        if not locked:
            draft.differs = spliced[1]
        elif spliced[1]:
            draft.rewrote = True
            if scan is not None and before == scan.dir_stat:
                draft.complete, draft.scan_dir = True, _catalog.stat_of(root)
    elif stream or large:
        draft.streamed = _index_file.digest(_index_file.chunks(cat.lines()))
        draft.lines = draft.streamed[2]
        if ours or hashed is None:  # else not ours by its hash above, and left alone since
            hashed = _file_digest(index_path)
        draft.differs = draft.streamed[:2] != hashed
    else:
        try:
            current = files.read_bytes(index_path, MAX_INDEX_BYTES)
        except (OSError, ValueError):  # absent, not a regular file, too large: replaced
            current = None
        draft.ours = _index_is_ours(root, written, current, recorded) if current is not None else ""
        if draft.ours:
            assert current is not None and recorded is not None
            patched = _index_file.patch(current, changes)
            if patched is not None:
                draft.new, delta = patched
                draft.lines = recorded.lines + delta
        if draft.new is None:
            draft.new = _index_file.join(cat.lines())
        draft.differs = draft.new != (current or b"")
    return draft


def remember(
    root: str | StateDir,
    private: bool,
    cat: _catalog.Catalog,
    draft: Draft,
    now: int,
    index_stat: _catalog.Stat | None,
) -> None:
    """Record what mdmem wrote: its stat, hash, line count, and a time after which
    its stat alone proves it (see :meth:`_index_is_ours`). ``root`` is the store's
    state (``store.state``) or its root, as for :func:`finish`."""
    state = StateDir.of(root)
    root = state.root
    when = now
    if draft.rewrote and index_stat is not None and files.stamped(index_stat):
        # Stamped as it was written: its stat proves it from now on (files.stamped).
        when = max(index_stat[0], index_stat[3]) + 1
    elif draft.rewrote and index_stat is not None and not cat.memory:
        # Read after the file was renamed and its stat taken: once the clock is
        # past its times, any later change of it shows in its stat.
        later = _catalog.fs_now(state, private=private)
        if later > max(index_stat[0], index_stat[3]):
            when = later
    if draft.new is not None:
        digest = _catalog.content_hash(draft.new)
    elif draft.streamed is not None:
        digest = draft.streamed[0]
    elif when != now:
        digest = "-"  # spliced: the stat proves it; a changed stat means a rebuild
    else:
        digest = hash_file(os.path.join(root, INDEX_NAME)) or "-"
    assert draft.lines is not None
    record = _index_file.IndexRecord(index_stat or (0, 0, 0, 0), digest, draft.lines, when)
    cat.set_meta("index", record.format())


def finish(
    root: str | StateDir,
    private: bool,
    cat: _catalog.Catalog,
    scan: _catalog.Scan | None,
    done: Pass,
    draft: Draft,
    index_stat: _catalog.Stat | None,
) -> None:
    """The end of a pass: the directory the rows know, the marks, the change log, the
    commit, and the fingerprint when the pass found the store settled."""
    state = StateDir.of(root)
    root = state.root
    # What the directory looked like when the rows were last complete: while it
    # is unchanged, the rows know every name (see Store.name_taken).
    directory = scan.dir_stat if scan is not None else None
    if draft.rewrote and scan is not None:
        directory = draft.scan_dir
    elif scan is None:
        d = os.lstat(root)
        directory = (d.st_mtime_ns, d.st_size, d.st_ino, d.st_ctime_ns)
    # A write that did not know the directory says so by how it left it: the next
    # write, which must list it, then asks whether the rows are what it lists (dir_known).
    unknown = scan is None and not draft.complete
    text = None if directory is None else f"{directory[0]} {directory[3]} {directory[2]}"
    cat.set_meta("dir", None if unknown else text)
    cat.set_meta("unknown", text if unknown else None)
    from mdmem.store import marks

    marks.save(state, rows.marked(cat))  # before the fingerprint that vouches for it
    fingerprint = None
    if scan is not None and not done.fresh and not draft.rewrote and not cat.memory:
        stats = [scan.dir_stat or (0, 0, 0, 0), index_stat or (0, 0, 0, 0)]
        if scan.index_stat == index_stat and all(max(s[0], s[3]) < done.now for s in stats):
            assert draft.lines is not None
            fingerprint = _catalog.Fingerprint(
                scan.fingerprint(),
                scan.dir_stat or (0, 0, 0, 0),
                index_stat or (0, 0, 0, 0),
                draft.lines,
                rows.head_names(cat),
            )
    elif (
        scan is not None
        and draft.rewrote
        and draft.scan_dir is not None
        and not cat.memory
        and not done.fresh
        and index_stat is not None
    ):
        fingerprint = _settled_after_rewrite(state, private, cat, scan, draft, index_stat)
    _log_pass(root, cat, scan, done, draft, index_stat, fingerprint)
    cat.commit()
    _catalog.write_fingerprint(state, fingerprint, private=private)


def _settled_after_rewrite(
    state: StateDir,
    private: bool,
    cat: _catalog.Catalog,
    scan: _catalog.Scan,
    draft: Draft,
    index_stat: _catalog.Stat,
) -> _catalog.Fingerprint | None:
    """The fingerprint of a store a pass found settled but for MEMORY.md, which it
    rewrote (only that moved the folder since the listing): the listing with the new
    MEMORY.md, once the clock is past the folder's and MEMORY.md's new times (so a
    change in the same tick cannot hide). Without it the next read would do the whole
    stat pass again only to find nothing changed."""
    import time

    assert draft.scan_dir is not None and draft.lines is not None
    newest = max(draft.scan_dir[0], draft.scan_dir[3], index_stat[0], index_stat[3])
    later = 0
    for _ in range(50):  # the clock just stamped them: wait out its tick (a few ms)
        later = _catalog.fs_now(state, private=private)
        if later <= 0 or later > newest:
            break
        time.sleep(0.001)
    if later <= newest:
        return None
    listed = scan.index_stat
    scan.index_stat = index_stat
    try:
        full = scan.fingerprint()
    finally:
        scan.index_stat = listed
    return _catalog.Fingerprint(full, draft.scan_dir, index_stat, draft.lines, rows.head_names(cat))


def _log_pass(
    root: str,
    cat: _catalog.Catalog,
    scan: _catalog.Scan | None,
    done: Pass,
    draft: Draft,
    index_stat: _catalog.Stat | None,
    fingerprint: _catalog.Fingerprint | None,
) -> None:
    """Append this pass to the change log, and, when it found the store settled,
    record where the log stood then (``Store.catalog_current``)."""
    if cat.memory:
        return
    now_dir = _catalog.stat_of(root)
    before, touched = done.key_before, done.touched
    if scan is not None:
        before = _catalog.key_of(scan.dir_stat, scan.index_stat)
        # Someone else's create, delete or rename since the listing would hide behind
        # the names of this pass: then readers catch up in full.
        if (draft.scan_dir if draft.rewrote else scan.dir_stat) != now_dir:
            touched = None
    if touched is None or touched or draft.rewrote:
        after = _catalog.key_of(now_dir, index_stat)
        cat.log(before if before is not None else "", after, touched)
    if fingerprint is not None:
        import time

        epoch, seq = cat.position()
        key = _catalog.key_of(fingerprint.dir, fingerprint.index)
        # The time of the listing, not of now: what changed during it is after it
        # (a reader asks the watcher what changed since then, store/watcher.py).
        at = scan.started if scan is not None else time.time()
        cat.set_meta("settled", f"{epoch} {seq} {at!r} {key}")


def redo(done: Pass, cat: _catalog.Catalog) -> bool:
    # The unlocked pass rolled back; put its rows back, uncommitted, for the caller.
    cat.begin(0.5)
    for name, entry in done.computed.items():
        cat.put(name, entry)
    gone = [n for n, line in done.changes.items() if line is None and n not in done.computed]
    cat.remove(gone)
    return True


def _index_is_ours(
    root: str,
    written: tuple[_catalog.Stat, bytes] | None,
    current: bytes,
    recorded: _index_file.IndexRecord | None,
) -> str:
    """How MEMORY.md is known to be exactly what mdmem last wrote: "stat", "hash" or "".

    Its stat proves it when older than the time recorded (the racy-clean rule
    again); otherwise its bytes are hashed, and once they match, the time of
    this pass is recorded so that the next write can go by the stat.
    """
    if recorded is None:
        return ""
    st = index_stat(root)
    if recorded.stat_proves(st):
        return "stat"
    if recorded.same_stat(st) and written is not None and written == (st, current):
        return "bytes"  # what this process wrote, byte for byte
    return "hash" if recorded.digest == _catalog.content_hash(current) else ""


def index_stat(root: str) -> _catalog.Stat | None:
    try:
        st = os.lstat(os.path.join(root, INDEX_NAME))
    except FileNotFoundError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def hash_file(path: str) -> str | None:
    """The content hash of MEMORY.md at ``path``, read a chunk at a time; None when it
    cannot be read or is larger than any MEMORY.md mdmem reads."""
    found = _digest_of(path)
    return found[0] if found is not None else None


def _file_digest(path: str) -> tuple[str, int]:
    """(content hash, size) of a file read in chunks; of no bytes when it cannot be read."""
    found = _digest_of(path)
    return found if found is not None else _index_file.digest(())[:2]


def _digest_of(path: str) -> tuple[str, int] | None:
    # A repository's MEMORY.md: a regular file, never through a link (open_regular), and
    # never read past MAX_INDEX_BYTES, however large it is or grows while being read.
    try:
        with _catalog.open_regular(path) as f:
            if os.fstat(f.fileno()).st_size > MAX_INDEX_BYTES:
                return None
            found = _index_file.digest(iter(lambda: f.read(1 << 16), b""), MAX_INDEX_BYTES + 1)
    except OSError:
        return None
    return found[:2] if found[1] <= MAX_INDEX_BYTES else None
