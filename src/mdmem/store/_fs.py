"""The only code that writes bytes: atomic writes and bounded reads.

A write goes to a unique temporary file in the same directory, is fsynced,
then renamed over the target with ``os.replace``; a reader sees the old file
or the new one, never half of one. Temporary names are hidden (``.<name>.<pid>.<random>.tmp``)
so scans never take them for notes, and unique so concurrent writers never
share one.
"""

from __future__ import annotations

import contextlib
import os

__all__ = [
    "TMP_SUFFIX",
    "atomic_write",
    "ensure_dir",
    "fsync_dir",
    "read_bytes",
]

TMP_SUFFIX = ".tmp"


def ensure_dir(path: str, *, private: bool = False) -> None:
    """Create ``path`` and its parents; ``private`` makes new ones and ``path`` itself ``0700``."""
    if os.path.isdir(path):
        if private and os.stat(path).st_mode & 0o777 != 0o700:
            os.chmod(path, 0o700)
        return
    parent = os.path.dirname(path)
    if parent and parent != path and not os.path.isdir(parent):
        ensure_dir(parent, private=private)
    try:
        os.mkdir(path, 0o700 if private else 0o777)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    if private:
        os.chmod(path, 0o700)  # exact, whatever the umask


def atomic_write(path: str, data: bytes, *, private: bool = False, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically.

    ``private`` creates the file ``0600``; otherwise an existing file keeps
    its mode and a new one gets ``0666`` less the umask. ``durable`` fsyncs
    the data before the rename (derived state may skip it: it can be rebuilt).
    """
    directory, name = os.path.split(path)
    if private:
        mode = 0o600
    else:
        try:
            mode = os.stat(path).st_mode & 0o777
        except FileNotFoundError:
            mode = 0o666  # os.open applies the umask
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}{TMP_SUFFIX}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if private:
            os.chmod(tmp, 0o600)  # the umask may have narrowed, never widened, but be exact
        os.replace(tmp, path)
    except BaseException:
        # Never leave a temp file behind, whatever stopped us.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def fsync_dir(path: str) -> None:
    """Make the renames in directory ``path`` durable (a no-op where unsupported)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def read_bytes(path: str, limit: int) -> bytes:
    """Read at most ``limit`` bytes of ``path``; raise ``ValueError`` if the file is larger."""
    with open(path, "rb") as f:
        data = f.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"larger than {limit} bytes")
    return data
