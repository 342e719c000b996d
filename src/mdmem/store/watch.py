"""Watching stores for hand edits, in a long-lived process (the optional ``watch`` extra).

A process that lives for a while (``mdmem mcp``, ``mdmem ui``, ``mdmem worker``)
calls :func:`start` with its stores' roots. On Linux, with the ``watch`` extra
installed (``watchfiles``, which reads inotify through the Rust ``notify``
crate), each root then has a watch of its own, and a reader asks
:func:`since` which note files changed after a point it holds: an in-place
edit, a create, a delete or a rename, by a person, an editor, git or mdmem
itself. That is what the recall index checks instead of a stat of every note
(``Index._sweep``); it costs what changed, whatever the store's size.

Without the extra, on another OS, with ``MDMEM_WATCH=off``, or when the
kernel refuses a watch (inotify's ``max_user_instances``), :func:`start`
watches nothing and :func:`since` answers None: readers do their stat pass,
as every short-lived command (the CLI, the hooks) always does.

Never stale, by construction:

* **A barrier before every answer.** An event is queued by the kernel during
  the write itself, but reaches ``watchfiles``' set a moment later, on its own
  thread. So :func:`since` first creates and removes a marker file in a folder
  of mdmem's state that the same inotify instance watches; inotify keeps one
  queue per instance, in order, so once the marker's events are in hand, so is
  every event of a write that finished before the call. No marker within
  :data:`BARRIER_SECONDS`: the answer is None (the reader does its own check).
* **None whenever the watch may have missed something**: a root that was
  removed or replaced (a new inode: its watch is gone, and it is watched again),
  an answer of more than :data:`MAX_NAMES` names (inotify drops events when its
  queue of ``/proc/sys/fs/inotify/max_queued_events`` overflows, and
  ``watchfiles`` does not report the overflow: a burst that large is treated as
  one), a point taken before the root was watched again, or a signal that
  interrupted the wait.

Only ``os`` and modules the store already has are imported at the top (the store
imports this on the ``mdmem index`` path); ``watchfiles`` only by
:func:`start`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from _thread import allocate_lock

from mdmem.store.state import StateDir

TYPE_CHECKING = False  # not typing's: this module is imported by the recall index
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

    #: A note's (mtime_ns, size, inode, ctime_ns), as the catalog records it.
    Stat = tuple[int, int, int, int]

__all__ = [
    "BARRIER_SECONDS",
    "ENV",
    "MAX_NAMES",
    "Point",
    "active",
    "is_note_name",
    "since",
    "start",
    "stop",
    "unchanged",
]

#: ``MDMEM_WATCH=off`` (or ``0``, ``no``): never watch, even with the extra installed.
ENV = "MDMEM_WATCH"
#: How long :func:`since` waits for its marker before it answers None.
BARRIER_SECONDS = 2.0
#: An answer with more names than this is treated as a possible overflow (None).
MAX_NAMES = 2_000
#: The folder of the markers, in the state folder of each watched store.
FOLDER = "watch"

#: Where a reader stands in a root's stream of changes: (the watch's epoch, a number).
Point = tuple[int, int]

_LOCK = allocate_lock()
_ROOTS: dict[str, _Root] = {}
_EPOCHS = itertools.count(1)


def _wanted() -> bool:
    if os.environ.get(ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return False
    return sys.platform.startswith("linux")


class _Root:
    """One watched store: its inotify instance, and the names changed, numbered."""

    def __init__(self, root: str) -> None:
        from watchfiles._rust_notify import RustNotify

        self.root = root
        self.pid = os.getpid()  # a forked child has the object but not the watch's thread
        self.lock = allocate_lock()
        self.epoch = next(_EPOCHS)
        self.seq = 0
        self.changed: dict[str, int] = {}  # note file name -> the number of its last change
        self.folder = os.path.join(StateDir.of(root).ensure(), FOLDER)
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.folder, 0o700)
        st = os.stat(root)
        self.identity = (st.st_dev, st.st_ino)
        self.markers = itertools.count(1)
        # Both folders in one instance: one queue, so the marker orders the root's events.
        self.notify = RustNotify([root, self.folder], False, False, 0, False, False)
        if "Poll" in repr(self.notify):  # no inotify here: a poller cannot order events
            self.notify.close()
            raise OSError("no inotify")

    def close(self) -> None:
        with contextlib.suppress(Exception):  # closing what may be half made
            self.notify.close()

    def _pump(self, marker: str | None) -> bool:
        """Move what the watch saw into ``changed``; True once ``marker`` was among it."""
        deadline = time.monotonic() + BARRIER_SECONDS
        seen = marker is None
        while True:
            got = self.notify.watch(50, 1, 1, None)
            if got == "signal":
                # Ctrl-C during the wait: watchfiles dropped what it held, so every
                # reader's point is void (a new epoch), and the interrupt goes on.
                self.epoch = next(_EPOCHS)
                raise KeyboardInterrupt
            if isinstance(got, set):
                for _, path in got:
                    folder, name = os.path.split(path)
                    if path == marker:
                        seen = True
                    elif folder == self.root:
                        self.seq += 1
                        self.changed[name] = self.seq
                    elif path == self.root:
                        raise OSError("the store's folder itself changed")
                continue  # more may be waiting
            if seen or time.monotonic() > deadline:
                return seen

    def since(self, point: Point | None) -> tuple[Point, set[str] | None]:
        with self.lock:
            marker = os.path.join(self.folder, f"{os.getpid()}-{next(self.markers)}")
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
            os.close(fd)
            os.unlink(marker)
            if not self._pump(marker):
                raise OSError("the watch did not answer in time")
            now = (self.epoch, self.seq)
            if point is None or point[0] != self.epoch or point[1] > self.seq:
                return now, None
            names = {n for n, at in self.changed.items() if at > point[1]}
            if len(names) > MAX_NAMES:
                raise OSError("too many changes at once: the kernel may have dropped some")
            return now, names


def start(roots: Iterable[str]) -> list[str]:
    """Watch these stores' folders in this process, from now on; the roots now watched.

    Roots that do not exist (yet) are left out; so is everything when the
    ``watch`` extra is missing, the OS is not Linux, or ``MDMEM_WATCH=off``.
    Idempotent. The watches end with the process (or :func:`stop`).
    """
    if not _wanted():
        return []
    try:
        import watchfiles._rust_notify  # noqa: F401 - the extra, or nothing
    except ImportError:
        return []
    out = []
    with _LOCK:
        for root in roots:
            root = os.path.abspath(root)
            if root in _ROOTS or not os.path.isdir(root):
                if root in _ROOTS:
                    out.append(root)
                continue
            try:
                _ROOTS[root] = _Root(root)
            except (OSError, RuntimeError):
                continue  # no watch for it: readers do their stat pass
            out.append(root)
    return out


def stop() -> None:
    """Stop every watch of this process (readers go back to their stat pass)."""
    with _LOCK:
        watched = list(_ROOTS.values())
        _ROOTS.clear()
    for w in watched:
        w.close()


def active(root: str) -> bool:
    """Whether this process watches the store at ``root``."""
    w = _ROOTS.get(os.path.abspath(root))
    return w is not None and w.pid == os.getpid()


def since(root: str, point: Point | None) -> tuple[Point | None, set[str] | None]:
    """The note files of ``root`` changed after ``point``: (the point now, their names).

    Names are file names in the store's folder (MEMORY.md and stray files
    included: the reader filters). ``None`` names: the watch cannot vouch for
    everything since ``point`` (the first call, a watch started again, a
    possible overflow): the reader does its own check, then holds the point
    returned, from which the next answer counts. ``None`` point: the root is
    not watched at all.
    """
    key = os.path.abspath(root)
    w = _ROOTS.get(key)
    if w is None or w.pid != os.getpid():
        return None, None
    try:
        st = os.stat(key)
        if (st.st_dev, st.st_ino) != w.identity:
            raise OSError("the store's folder was replaced")
        return w.since(point)
    except (OSError, RuntimeError):
        # Lost track: watch it again from a new epoch (every reader's point is void).
        with _LOCK:
            if _ROOTS.get(key) is w:
                del _ROOTS[key]
        w.close()
        start([key])
        fresh = _ROOTS.get(key)
        if fresh is None:
            return None, None
        try:
            return fresh.since(None)
        except (OSError, RuntimeError):
            return None, None


def is_note_name(name: str) -> bool:
    """Whether a name the watch reports can be a note (not MEMORY.md, a hidden or temp file)."""
    return name.endswith(".md") and name != "MEMORY.md" and not name.startswith(".")


def unchanged(
    root: str, point: Point | None, recorded: Callable[[str], Stat | None]
) -> Point | None:
    """The point now, when every note file of ``root`` changed since ``point`` still has
    the stat ``recorded`` says (mdmem's own writes record theirs); None when one has not,
    or the watch cannot say (then the reader does its stat pass).

    ``recorded(name)`` is None for a name with no record: the file must be gone too.
    As everywhere a stat stands for content, an edit within the clock tick of mdmem's
    own write, on a kernel before Linux 6.13, can keep that stat (docs/concepts/index.md).
    """
    now, names = since(root, point)
    if now is None or names is None:
        return None
    for name in names:
        if not is_note_name(name):
            continue
        try:
            st = os.stat(os.path.join(root, name))  # followed, as the listing does
            current: Stat | None = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
        except OSError:
            current = None
        known = recorded(name)
        if current is None and known is None:
            continue
        if current is None or known is None:
            return None
        if known != current:
            return None
    return now
