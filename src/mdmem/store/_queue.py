"""A fair queue in front of a store's write lock: the first to ask is the first to hold it.

The lock itself is a ``filelock`` flock, which waiters poll. A process that
releases it and takes it again at once (a worker or an API loop writing batch
after batch) wins nearly every time against one that polls every few
milliseconds: with 9 processes for 60 s, an API loop made 398 creates while
``mdmem add`` and the memory tool made 4 each, with 4 ``LockTimeout``\\ s, and a
Stop hook waited its whole timeout.

So whoever finds the lock busy, or finds others already waiting, takes a
*ticket*: a file in ``lock.queue/`` (next to the lock file) named by the time
it asked, which its process holds an flock on while it waits. Only the oldest
live ticket tries the lock; anyone coming back for the lock finds the queue not
empty and queues behind. A ticket whose process died is no longer flocked: the
next waiter sees that and removes it, so a killed waiter never blocks the
queue. The lock is still the flock: the queue only orders who tries it, so a
process that never looks at the queue (an older mdmem) is merely unfair, never
unsafe. A person's command and a hook wait at most for those who asked before
them, each for one batch.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from mdmem.store import files

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    class _Lock(Protocol):
        """What is used of a ``filelock`` lock (only locks.py imports filelock)."""

        @property
        def lock_file(self) -> str: ...

        @property
        def is_locked(self) -> bool: ...

        def acquire(self, timeout: float) -> object: ...


__all__ = ["QUEUE_DIR", "acquire", "waiting"]

QUEUE_DIR = "lock.queue"
#: How often the first in the queue tries the lock; the others look at the queue less
#: often (they cannot be next), so nine waiters do not eat a small machine's CPU.
POLL_SECONDS = 0.002
QUEUED_POLL_SECONDS = 0.01
_SUFFIX = ".ticket"


def waiting(lock_file: str) -> int:
    """How many tickets wait for the lock at ``lock_file`` (dead ones included until seen)."""
    try:
        names = os.listdir(os.path.join(os.path.dirname(lock_file), QUEUE_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return 0
    return sum(1 for name in names if name.endswith(_SUFFIX))


def acquire(lock: _Lock, timeout: float, busy: type[Exception]) -> None:
    """Take ``lock`` in turn: after every process that asked for it earlier.

    ``timeout`` < 0 waits for ever. Re-entrant like the lock itself. ``busy`` is
    what ``lock.acquire(timeout=0)`` raises when the lock is held (``filelock.Timeout``).

    Raises:
        busy: the lock was not ours within ``timeout`` seconds.
        FileNotFoundError: the folder of the lock file was removed meanwhile.
    """
    if lock.is_locked:  # this thread holds it already: one more level
        lock.acquire(timeout=0)
        return
    if not waiting(lock.lock_file):
        try:
            lock.acquire(timeout=0)
            return
        except busy:
            if timeout == 0:
                raise
    deadline = None if timeout < 0 else time.monotonic() + timeout
    ticket = _Ticket(os.path.join(os.path.dirname(lock.lock_file), QUEUE_DIR))
    try:
        while True:
            first = ticket.first()
            if first:
                try:
                    lock.acquire(timeout=0)
                    return
                except busy:
                    pass
            if deadline is not None and time.monotonic() >= deadline:
                raise busy(lock.lock_file)
            time.sleep(POLL_SECONDS if first else QUEUED_POLL_SECONDS)
    finally:
        ticket.close()


class _Ticket:
    """This process's place in the queue: a file it holds an flock on while it waits."""

    def __init__(self, folder: str) -> None:
        files.ensure_dir(folder, private=True)
        self.folder = folder
        self.name = f"{time.time_ns():020d}.{os.getpid()}.{os.urandom(3).hex()}{_SUFFIX}"
        self.path = os.path.join(folder, self.name)
        # Locked under a temporary name, then renamed: nobody ever sees the ticket
        # unlocked and takes its owner for dead.
        tmp = os.path.join(folder, f".{self.name}.tmp")
        flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)
        self.fd = os.open(tmp, flags, 0o600)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
            os.rename(tmp, self.path)
        except BaseException:
            os.close(self.fd)
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
            raise

    def first(self) -> bool:
        """Whether no live ticket is older than this one (dead ones ahead are removed)."""
        try:
            names = sorted(n for n in os.listdir(self.folder) if n.endswith(_SUFFIX))
        except FileNotFoundError:
            return True  # the state folder was removed: the lock decides alone
        for name in names:
            if name >= self.name:
                return True
            path = os.path.join(self.folder, name)
            if _alive(path):
                return False
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        return True

    def close(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        os.close(self.fd)


def _alive(path: str) -> bool:
    """Whether the process that took the ticket at ``path`` still holds it."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell: wait for it rather than jump the queue
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we may have taken
    return False
