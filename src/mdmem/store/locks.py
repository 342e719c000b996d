"""A store's locks: the write lock (taken in turn, with an flock on the store directory)
and the turn lock.

The write lock guards every read-modify-write of a store; taking it first
finishes a batch a killed writer left half done (``_txn.recover``). It is a
``filelock`` in the state folder, queued fairly (``_queue``), plus an flock on
the store directory itself: deleting the state folder (and the lock file with
it) cannot delete that, so it never lets a second writer in. The turn lock
serialises whole memory updates across processes and is held across a model
call, so it is a different file: a person's edits never wait for it.

Only this module imports ``filelock``, and only when it is needed: the write
lock nobody else holds or waits for is taken with one ``flock`` on the very
file, opened as ``filelock``'s ``UnixFileLock`` opens it (see :func:`_flock`),
so the two exclude each other; a busy lock, a queue, a file system without
``flock`` or the turn lock go through ``filelock`` (importing it is ~20 ms,
a third of a plain ``mdmem add``).
"""

from __future__ import annotations

import os
from _thread import _local, allocate_lock

from mdmem.errors import LockTimeout
from mdmem.store import files

# Not typing.TYPE_CHECKING: importing typing costs ~6 ms on the `mdmem index` path.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import logging
    from types import TracebackType

    from filelock import BaseFileLock

    from mdmem.store.state import StateDir

__all__ = ["Held", "Locks", "prepare"]

_LOCK = "lock"
_TURN_LOCK = "turn.lock"


def _log() -> logging.Logger:
    # logging costs ~15 ms to import; only paths that report something pay it.
    import logging

    return logging.getLogger("mdmem")


class Locks:
    """The locks of the store at ``root``, made on first use (one object per store object).

    ``usable`` is False for a refused project store: its directory is then never
    created, nor flocked through a committed symlink.
    """

    __slots__ = (
        "_direct",
        "_files",
        "_guard",
        "_held_root",
        "_private",
        "_root",
        "_state",
        "_usable",
    )

    def __init__(self, root: str, state: StateDir, *, private: bool, usable: bool) -> None:
        self._root = root
        self._state = state
        self._private = private
        self._usable = usable
        self._files: dict[str, BaseFileLock] = {}
        self._guard = allocate_lock()
        self._held_root = _local()  # this thread's flock on the store directory, and its depth
        self._direct = _local()  # this thread's write lock taken without filelock: fd, depth, pid

    def write(self, timeout: float) -> Held:
        """The write lock (re-entrant in one thread), finishing any interrupted batch."""
        return Held(self, _LOCK, timeout, recover=True)

    def turn(self, timeout: float) -> Held:
        """The lock that serialises memory updates of whole turns across processes."""
        return Held(self, _TURN_LOCK, timeout)

    def _filelock(self, name: str) -> BaseFileLock:
        with self._guard:
            lock = self._files.get(name)
            if lock is None:
                from filelock import FileLock

                # The lock is taken to write: the store itself must exist by then
                # (but never through a refused store's symlink).
                if self._usable:
                    files.ensure_dir(self._root, private=self._private)
                state = self._state.ensure()
                lock = FileLock(os.path.join(state, name), mode=0o600)
                self._files[name] = lock
            return lock

    def _enter_direct(self) -> bool:
        """Take the write lock without ``filelock`` where nobody else wants it (or one more
        level of this thread's direct hold); False: go through ``filelock`` and the queue."""
        held = self._direct
        depth = getattr(held, "depth", 0)
        if depth and held.pid == os.getpid():
            held.depth = depth + 1
            return True
        if depth:  # inherited through fork: the parent's hold, not ours (never unlocked here)
            os.close(held.fd)
            held.depth = 0
        mine = self._files.get(_LOCK)
        if mine is not None and mine.is_locked:
            return False  # this thread holds it through filelock: that one re-enters
        from mdmem.store import _queue

        if self._usable:
            files.ensure_dir(self._root, private=self._private)
        path = os.path.join(self._state.ensure(), _LOCK)
        if _queue.waiting(path):
            return False  # others asked first: queue behind them
        fd = _flock(path)
        if fd is None:
            return False
        held.fd, held.depth, held.pid = fd, 1, os.getpid()
        return True

    def _exit_direct(self) -> None:
        held = self._direct
        held.depth -= 1
        if held.depth == 0:
            if held.pid == os.getpid():
                import fcntl

                fcntl.flock(held.fd, fcntl.LOCK_UN)  # as filelock lets go: unlock, then close
            os.close(held.fd)

    def _hold_root(self, deadline: float | None, timeout: float) -> None:
        """Take this thread's flock on the store directory (re-entrant), by ``deadline``."""
        held = self._held_root
        depth = getattr(held, "depth", 0)
        if depth:
            held.depth = depth + 1
            return
        fd = None
        if self._usable and os.path.isdir(self._root):
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
        held = self._held_root
        held.depth -= 1
        if held.depth == 0 and held.fd is not None:
            os.close(held.fd)  # closing drops the flock
            held.fd = None


class Held:
    """A held store lock, as a context manager (contextlib is not imported for this)."""

    __slots__ = ("_direct", "_lock", "_locks", "_name", "_recover", "_timeout")

    def __init__(self, locks: Locks, name: str, timeout: float, *, recover: bool = False) -> None:
        self._locks = locks
        self._name = name
        # The write lock is made on first contention (see Locks._enter_direct); the turn lock now.
        self._lock: BaseFileLock | None = None if recover else locks._filelock(name)
        self._timeout = timeout
        self._recover = recover
        self._direct = False

    def __enter__(self) -> None:
        from time import monotonic

        locks = self._locks
        deadline = None if self._timeout < 0 else monotonic() + self._timeout
        self._direct = self._recover and locks._enter_direct()
        if not self._direct:
            self._acquire(deadline)
        if self._recover:
            try:
                # The write lock also holds an flock on the store directory itself:
                # deleting the state folder (and the lock file with it) cannot
                # delete that, so it never lets a second writer in.
                locks._hold_root(deadline, self._timeout)
            except BaseException:
                self._let_go()
                raise
            try:
                from mdmem.store import _txn

                for message in _txn.recover(locks._state, private=locks._private):
                    _log().warning("%s: %s", locks._root, message)
            except BaseException:
                locks._release_root()
                self._let_go()
                raise

    def _let_go(self) -> None:
        if self._direct:
            self._locks._exit_direct()
        else:
            assert self._lock is not None
            self._lock.release()

    def _acquire(self, deadline: float | None) -> None:
        from time import monotonic

        from filelock import Timeout

        locks = self._locks
        if self._lock is None:
            self._lock = locks._filelock(self._name)
        for _ in range(100):
            remaining = -1.0 if deadline is None else max(0.0, deadline - monotonic())
            try:
                if self._recover:  # the write lock: taken in turn (see mdmem.store._queue)
                    from mdmem.store import _queue

                    _queue.acquire(self._lock, remaining, Timeout)
                else:
                    self._lock.acquire(timeout=remaining)
            except Timeout:
                raise LockTimeout(locks._root, self._timeout) from None
            except FileNotFoundError:  # the state folder was removed: make it again
                locks._state.ensure()
                continue
            if _same_file(self._lock):
                return
            # The lock file was removed (with its folder) between its open and our
            # flock: the lock we hold guards nothing. Take the one at the path now.
            self._lock.release()
            locks._state.ensure()
        raise LockTimeout(locks._root, self._timeout)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._recover:
            self._locks._release_root()
        self._let_go()


def _flock(path: str) -> int | None:
    """The lock file at ``path`` opened and flocked as filelock's ``UnixFileLock`` does, if
    nobody holds it: its descriptor; None when it is busy or anything is unusual (another
    owner, a file system without ``flock``, a file swapped meanwhile), for filelock to decide.

    filelock 4.x (4.3's ``_native/_unix.py``) opens the file ``O_RDWR | O_NONBLOCK |
    O_NOFOLLOW``, created ``O_EXCL`` with the lock's mode (``fchmod`` to it once created)
    or else as it is; 3.x opens it ``O_RDWR | O_TRUNC`` (``O_CREAT`` when missing),
    then ``fchmod``. Both take ``flock(LOCK_EX | LOCK_NB)`` on it and let go with
    ``LOCK_UN``, then close; the file stays. An flock is the kernel's, on the file: held
    by either, the other waits (``tests/store/test_lock_direct.py``).
    """
    import fcntl

    flags = os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    created = True
    try:
        try:
            fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            created = False
            fd = os.open(path, flags)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # busy, or no flock here: filelock waits, queues, or falls back
        os.close(fd)
        return None
    try:
        if created:
            os.fchmod(fd, 0o600)
        held, now = os.fstat(fd), os.stat(path, follow_symlinks=False)
        if held.st_nlink and held.st_uid == os.geteuid() and os.path.samestat(held, now):
            return fd
    except OSError:
        pass
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    return None


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


def prepare() -> None:
    """Import now what taking a lock needs (see ``Store``'s ``prepare_writes``)."""
    import filelock  # noqa: F401
