"""The watcher's process: inotify through ``ctypes``, one instance for every store asked about.

See ``store/watcher.py`` for what it answers. Why inotify read here, not
``watchfiles`` (the ``watch`` extra): this process owns the inotify descriptor
and reads it itself, after each request has arrived, so an answer holds every
event the kernel queued before it (watchfiles hands events over from a thread
of its own, a moment later, which is why the in-process watch needs a marker
file as a barrier); the kernel's overflow event (``IN_Q_OVERFLOW``), which
watchfiles does not pass on, is seen; it needs no dependency (the extra stays
optional, and a store is watched without it); and ``ctypes`` loads in ~2 ms
where watchfiles takes ~35 ms (``python -X importtime``).

Per store (*root*): the watch is added first, then the folder is listed a chunk
at a time between requests (the *baseline*: each note's ctime, kept for notes
changed in the last :data:`HORIZON_NS`), so that an edit is either before its
note's stat (its ctime says so) or after the watch began (an event says so).
A note that is a symbolic link, or has other hard links, can change without an
event in this folder: it is named in every answer while it is one (each answer
looks again). On an overflow every root's
baseline is made again; a root whose folder was removed or replaced is dropped
(the next request watches it again); a network file system (NFS, SMB, FUSE, 9p,
Ceph...) is not watched at all: an edit on another machine makes no event here.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import stat
import time
from typing import TYPE_CHECKING

from mdmem import _unixsock
from mdmem.store import watcher

if TYPE_CHECKING:
    import socket
    from collections.abc import Iterator

__all__ = ["HORIZON_NS", "MARGIN_NS", "run", "serve"]

MARGIN_NS = watcher.MARGIN_NS  # names changed this much before a reader's T are in its answer
#: Notes whose ctime is older than this when a watch begins are not kept (a reader whose
#: last check is older gets UNKNOWN).
HORIZON_NS = 7 * 86400 * 1_000_000_000
#: Names changed since a watch began, kept at most; more and the baseline is made again.
EVENTS_MAX = 50_000
#: Notes of one store whose ctimes are kept, at most (about 100 bytes each); a store
#: with more changed within HORIZON_NS is not vouched for.
BASELINE_MAX = 500_000
#: Stores watched at once, at most.
ROOTS_MAX = 256
#: Entries listed per step of a baseline (between two requests).
STEP = 2_000
#: A connection that sends nothing for this long is dropped (the server is serial).
READ_SECONDS = 2.0

IN_MODIFY = 0x2
IN_ATTRIB = 0x4
IN_CLOSE_WRITE = 0x8
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_DELETE_SELF = 0x400
IN_MOVE_SELF = 0x800
IN_UNMOUNT = 0x2000
IN_Q_OVERFLOW = 0x4000
IN_IGNORED = 0x8000
IN_ONLYDIR = 0x1000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_MASK = (
    IN_MODIFY
    | IN_ATTRIB
    | IN_CLOSE_WRITE
    | IN_MOVED_FROM
    | IN_MOVED_TO
    | IN_CREATE
    | IN_DELETE
    | IN_DELETE_SELF
    | IN_MOVE_SELF
    | IN_ONLYDIR
)
_GONE = IN_DELETE_SELF | IN_MOVE_SELF | IN_UNMOUNT | IN_IGNORED
#: statfs f_type of file systems whose changes elsewhere make no inotify event here.
_REMOTE = {
    0x6969,  # NFS
    0x517B,  # SMB
    0xFF534D42,  # CIFS
    0xFE534D42,  # SMB2
    0x65735546,  # FUSE (sshfs, rclone, ...)
    0x01021997,  # 9p (WSL's Windows drives, VMs' shared folders)
    0x00C36400,  # Ceph
    0x5346414F,  # AFS
    0x73757245,  # Coda
    0x564C,  # NCP
    0x47504653,  # GPFS
    0x0BD00BD0,  # Lustre
}


class _Libc:
    """inotify and statfs from the C library."""

    def __init__(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        self.init1 = libc.inotify_init1
        self.init1.argtypes = [ctypes.c_int]
        self.add = libc.inotify_add_watch
        self.add.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        self.rm = libc.inotify_rm_watch
        self.rm.argtypes = [ctypes.c_int, ctypes.c_int]
        self.statfs = libc.statfs
        self.statfs.argtypes = [ctypes.c_char_p, ctypes.c_void_p]

    def fs_type(self, path: str) -> int | None:
        buf = ctypes.create_string_buffer(512)  # struct statfs is 120 bytes on 64-bit Linux
        if self.statfs(os.fsencode(path), buf) != 0:
            return None
        width = ctypes.sizeof(ctypes.c_long)  # f_type (__fsword_t) comes first
        return int.from_bytes(buf.raw[:width], "little", signed=True) & 0xFFFFFFFF


class _Root:
    """One watched store: its watch, its baseline and the names changed since."""

    __slots__ = ("always", "baseline", "events", "ident", "listing", "path", "start", "wd")

    def __init__(self, path: str, wd: int, ident: tuple[int, int]) -> None:
        self.path, self.wd, self.ident = path, wd, ident
        self.start = 0
        self.events: dict[str, int] = {}
        self.baseline: dict[str, int] = {}
        self.always: set[str] = set()
        self.listing: Iterator[os.DirEntry[str]] | None = None
        self.begin()

    def begin(self) -> None:
        """Make the baseline again, from now (the watch is already in place)."""
        if self.listing is not None:
            with contextlib.suppress(Exception):
                self.listing.close()  # type: ignore[attr-defined]
        self.start = time.time_ns()
        self.events.clear()
        self.baseline.clear()
        self.always.clear()
        try:
            self.listing = os.scandir(self.path)
        except OSError:
            self.listing = iter(())

    @property
    def ready(self) -> bool:
        return self.listing is None

    def step(self, count: int) -> None:
        """List up to ``count`` more entries of the baseline.

        Raises:
            OSError: more than :data:`BASELINE_MAX` notes to keep.
        """
        assert self.listing is not None
        oldest = self.start - HORIZON_NS
        for _ in range(count):
            entry = next(self.listing, None)
            if entry is None:
                with contextlib.suppress(Exception):
                    self.listing.close()  # type: ignore[attr-defined]
                self.listing = None
                return
            name = entry.name
            if not _is_note(name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile: its event is in the queue
            if stat.S_ISLNK(st.st_mode) or st.st_nlink > 1:
                self.always.add(name)
            if st.st_ctime_ns >= oldest:
                self.baseline[name] = st.st_ctime_ns
                if len(self.baseline) > BASELINE_MAX:
                    raise OSError("too many notes changed lately to keep")

    def seen(self, name: str, mask: int, at: int) -> None:
        if not _is_note(name):
            return
        self.events[name] = at
        if mask & (IN_DELETE | IN_MOVED_FROM):
            self.always.discard(name)  # its event names it from now on, as any other's
        elif mask & (IN_CREATE | IN_MOVED_TO):
            try:
                st = os.lstat(os.path.join(self.path, name))
            except OSError:
                return
            if stat.S_ISLNK(st.st_mode) or st.st_nlink > 1:
                self.always.add(name)

    def settle(self) -> None:
        """Let go of the names in :attr:`always` that are no longer a link nor linked
        elsewhere (gone, or back to one link), each as a change made now.

        A create by ``os.link(temp, note)`` (``files.create_new``, mdmem's own) has two
        links until the temp is removed a moment later; the event read in that moment
        put the note here, and a name kept here is in every answer: so is one created
        and then deleted, forever (every later prompt re-read it). Recorded as a change
        now, an edit made through the other link before it went is still in the answer
        of every reader whose T is older; from now on this name is the note's only one,
        and what changes it makes an event here.
        """
        at = time.time_ns()
        for name in list(self.always):
            try:
                st = os.lstat(os.path.join(self.path, name))
            except FileNotFoundError:
                pass
            except OSError:
                continue  # cannot tell: still named
            else:
                if stat.S_ISLNK(st.st_mode) or st.st_nlink > 1:
                    continue
            self.always.discard(name)
            self.events[name] = at

    def answer(self, since: int) -> tuple[int, list[str]]:
        """(kind, names) for a reader whose last complete check was at ``since``."""
        if since < 0 or not self.ready:
            return watcher.UNKNOWN, []
        since -= MARGIN_NS
        if since < self.start - HORIZON_NS:
            return watcher.UNKNOWN, []
        self.settle()
        names = {name for name, at in self.events.items() if at >= since}
        names |= self.always
        kind = watcher.COMPLETE
        if since < self.start:
            kind = watcher.IN_PLACE
            names.update(name for name, ctime in self.baseline.items() if ctime >= since)
        if len(names) > watcher.MAX_NAMES:
            return watcher.UNKNOWN, []
        return kind, sorted(names)


def _is_note(name: str) -> bool:
    return name.endswith(".md") and not name.startswith(".")


class _Server:
    """The loop: requests on the socket, events on the inotify descriptor, baselines."""

    def __init__(self, libc: _Libc, fd: int) -> None:
        self.libc, self.fd = libc, fd
        self.roots: dict[str, _Root] = {}
        self.by_wd: dict[int, list[_Root]] = {}
        self.refused: dict[str, float] = {}  # root -> when a watch was refused

    # -- the kernel's queue ---------------------------------------------------------

    def drain(self) -> None:
        """Read every event the kernel has queued (non-blocking) into the roots."""
        while True:
            try:
                data = os.read(self.fd, 64 * 1024)
            except BlockingIOError:
                return
            at = time.time_ns()  # after the read: every event read is older
            offset = 0
            while offset + 16 <= len(data):
                wd = int.from_bytes(data[offset : offset + 4], "little", signed=True)
                mask = int.from_bytes(data[offset + 4 : offset + 8], "little")
                size = int.from_bytes(data[offset + 12 : offset + 16], "little")
                raw = data[offset + 16 : offset + 16 + size].split(b"\0", 1)[0]
                offset += 16 + size
                if mask & IN_Q_OVERFLOW:
                    for root in self.roots.values():
                        root.begin()  # events were lost: every baseline again
                    continue
                for root in self.by_wd.get(wd, ()):
                    if mask & _GONE and not raw:
                        self.drop(root)
                    elif raw:
                        root.seen(os.fsdecode(raw), mask, at)

    # -- the stores -------------------------------------------------------------------

    def drop(self, root: _Root) -> None:
        self.roots.pop(root.path, None)
        left = [r for r in self.by_wd.get(root.wd, []) if r is not root]
        if left:
            self.by_wd[root.wd] = left
        else:
            self.by_wd.pop(root.wd, None)
            with contextlib.suppress(Exception):
                self.libc.rm(self.fd, root.wd)

    def root(self, path: str) -> _Root | None:
        """The watched root at ``path``; a watch begins when there is none (None then)."""
        try:
            st = os.stat(path)
        except OSError:
            st = None
        known = self.roots.get(path)
        if known is not None:
            if st is not None and (st.st_dev, st.st_ino) == known.ident:
                return known
            self.drop(known)  # removed or replaced: watched again, from now
        if st is None or not stat.S_ISDIR(st.st_mode) or len(self.roots) >= ROOTS_MAX:
            return None
        refused = self.refused.get(path)
        if refused is not None and time.monotonic() - refused < 60:
            return None
        if self.libc.fs_type(path) in _REMOTE:
            self.refused[path] = time.monotonic()
            return None
        wd = self.libc.add(self.fd, os.fsencode(path), _MASK)
        if wd < 0:  # max_user_watches, or no permission
            self.refused[path] = time.monotonic()
            return None
        self.roots[path] = fresh = _Root(path, wd, (st.st_dev, st.st_ino))
        self.by_wd.setdefault(wd, []).append(fresh)
        try:
            fresh.step(STEP)  # a small store's baseline at once; a large one's between requests
        except OSError:
            self.drop(fresh)
            self.refused[path] = time.monotonic()
            return None
        return fresh

    def step(self) -> bool:
        """One step of each unfinished baseline; whether any is left."""
        left = False
        for root in list(self.roots.values()):
            if not root.ready:
                try:
                    root.step(STEP)
                except OSError:
                    self.drop(root)  # not vouched for; asked again in a minute
                    self.refused[root.path] = time.monotonic()
                    continue
                left = left or not root.ready
            if len(root.events) > EVENTS_MAX:
                root.begin()
                left = True
        return left

    # -- requests ---------------------------------------------------------------------

    def handle(self, conn: socket.socket) -> None:
        uid = _unixsock.peer_uid(conn)
        if uid is not None and uid != os.geteuid():
            return  # only its own user is served
        conn.settimeout(READ_SECONDS)
        recv = _unixsock.recv_exact
        head = recv(conn, len(watcher.MAGIC) + 4)
        if head[: len(watcher.MAGIC)] != watcher.MAGIC:
            return
        count = int.from_bytes(head[len(watcher.MAGIC) :], "little")
        if count > watcher.MAX_STORES:
            return
        queries = []
        for _ in range(count):
            size = int.from_bytes(recv(conn, 4), "little")
            if size > watcher.MAX_PATH:
                return
            path = os.fsdecode(recv(conn, size))
            since = int.from_bytes(recv(conn, 8), "little", signed=True)
            queries.append((os.path.abspath(path), since))
        # The whole request is in: every write that returned before it was sent is in the
        # kernel's queue now. Read the queue, then answer.
        now = time.time_ns()
        self.drain()
        parts = [watcher.MAGIC, count.to_bytes(4, "little")]
        for path, since in queries:
            root = self.root(path)
            kind, names = root.answer(since) if root is not None else (watcher.UNKNOWN, [])
            parts += [
                bytes([kind]),
                now.to_bytes(8, "little", signed=True),
                len(names).to_bytes(4, "little"),
            ]
            for name in names:
                data = os.fsencode(name)
                parts += [len(data).to_bytes(4, "little"), data]
        conn.sendall(b"".join(parts))


def idle_seconds() -> float:
    """How long the watcher waits for a request before it stops (``MDMEM_WATCHER_IDLE``)."""
    return _unixsock.seconds("MDMEM_WATCHER_IDLE", watcher.IDLE_SECONDS)


def _unavailable(directory: str, why: str) -> int:
    with contextlib.suppress(OSError):
        path = os.path.join(directory, watcher.UNAVAILABLE)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(why + "\n")
    return 3


def run(directory: str, name: str, roots: list[str]) -> int:
    """Serve on ``<directory>/<name>.sock`` until idle; exit status 0, 1 when the socket's
    path is someone else's (left alone), 3 when there is no inotify here."""
    try:
        libc = _Libc()
        fd = libc.init1(IN_NONBLOCK | IN_CLOEXEC)
    except (OSError, AttributeError):
        return _unavailable(directory, "no inotify in the C library")
    if fd < 0:
        return _unavailable(directory, f"inotify_init1: {os.strerror(ctypes.get_errno())}")
    try:
        bound = _unixsock.bind(directory, name)
    except PermissionError:
        return 1
    if bound is None:
        return 0  # another one runs
    server, _lock, path, mine = bound
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(directory, watcher.UNAVAILABLE))
    me = _Server(libc, fd)
    for root in roots:
        me.root(os.path.abspath(root))
    idle = idle_seconds()
    last = checked = time.monotonic()
    try:
        while True:
            busy = me.step()
            now = time.monotonic()
            left = idle - (now - last)
            if left <= 0:
                return 0
            if now - checked > 5.0:
                checked = now
                if not _unixsock.still_ours(path, mine):
                    return 0  # our socket file was removed or replaced: nobody can reach us
            ready, _, _ = select.select([server, fd], [], [], 0 if busy else min(left, 5.0))
            if fd in ready:
                me.drain()
            if server in ready:
                try:
                    conn, _ = server.accept()
                except OSError:
                    continue
                with conn, contextlib.suppress(OSError, ValueError, UnicodeError):
                    me.handle(conn)
                last = time.monotonic()
    finally:
        os.close(fd)
        _unixsock.release(server, path, mine)


def serve(args: list[str]) -> int:
    """The watcher's process (what ``watcher.start`` runs): ``[FOLDER]``, the stores to
    watch from the start in ``MDMEM_WATCHER_ROOTS`` (one a line; never in argv)."""
    directory = args[0] if args else watcher.folder()
    named = os.environ.pop(watcher.ROOTS_ENV, "")
    roots = [r for r in named.split("\n") if r]
    return run(directory, f"watch-v{watcher.PROTOCOL}", [*args[1:], *roots])
