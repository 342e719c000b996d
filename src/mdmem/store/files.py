"""The only code that writes bytes: atomic writes, exclusive creates and bounded reads.

A write goes to a unique temporary file in the same directory, is fsynced,
then renamed over the target with ``os.replace``; a reader sees the old file
or the new one, never half of one. Temporary names are hidden (``.<name>.<pid>.<random>.tmp``)
so scans never take them for notes, and unique so concurrent writers never
share one. A *create* ends with ``os.link`` instead of ``os.replace``, which
fails if the name was taken meanwhile: a file a person or git wrote a moment
ago is never overwritten.

Files a repository supplies (notes, MEMORY.md) are hostile input, and
:func:`read_bytes` is the one way to read them: the file is opened without
following a symlink and without blocking (a FIFO cannot hang it), checked to
be a regular file *after* opening (so a swap between a check and the open
changes nothing), and read up to a size cap.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "TMP_SUFFIX",
    "NotRegularFile",
    "TooLarge",
    "atomic_write",
    "atomic_write_parts",
    "content_hash",
    "create_new",
    "ensure_dir",
    "fsync_dir",
    "read_bytes",
    "read_text",
    "sync_all",
]

TMP_SUFFIX = ".tmp"

try:  # hashlib costs milliseconds to import (OpenSSL); blake2 alone is enough here
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b as _blake2b


def content_hash(data: bytes) -> str:
    """The hash mdmem records for a note's bytes (the catalog's, the search index's)."""
    return _blake2b(data, digest_size=16).hexdigest()


_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)
READ_FLAGS = _READ_FLAGS  # for the readers that stream (MEMORY.md's head)
# Where a file system has no hard links, a create falls back to O_EXCL on the final name.
_NO_LINKS = frozenset(
    {errno.EPERM, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EMLINK, errno.EXDEV, errno.ENOSYS}
)


class NotRegularFile(OSError):
    """A path a note was expected at holds a symlink, a FIFO, a device or a directory."""


class TooLarge(ValueError):
    """A file is larger than the cap its reader allows."""


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
        # Never writable by others, whatever the umask: a store (or a folder above it)
        # that others can write to is refused (paths.control_problem).
        os.mkdir(path, 0o700 if private else 0o755)
    except FileExistsError:
        if not os.path.isdir(path):
            raise
    if private:
        os.chmod(path, 0o700)  # exact, whatever the umask


def owner_only(path: str) -> None:
    """Create ``path`` empty and ``0600`` if missing, or narrow it to ``0600``: before a
    database opens it (SQLite gives its -wal and -shm the same mode). Best effort."""
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        try:
            if os.fstat(fd).st_mode & 0o777 != 0o600:  # a chmod changes the ctime: only if needed
                os.fchmod(fd, 0o600)
        finally:
            os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _temp_file(
    path: str,
    data: bytes | Iterable[bytes],
    mode: int,
    *,
    private: bool,
    durable: bool,
    stamp: bool = False,
) -> str:
    """Write ``data`` (bytes, or chunks of them) to a new unique temporary file beside
    ``path``; return its name. ``stamp``: see :func:`stamped`."""

    def fill(fd: int) -> None:
        if isinstance(data, bytes):
            _write_all(fd, data)
        else:
            for chunk in data:
                _write_all(fd, chunk)

    return _filled_temp(path, fill, mode, private=private, durable=durable, stamp=stamp)


def _filled_temp(
    path: str,
    fill: Callable[[int], None],
    mode: int,
    *,
    private: bool,
    durable: bool,
    stamp: bool,
) -> str:
    """A new unique temporary file beside ``path``, written by ``fill(fd)``; its name."""
    directory, name = os.path.split(path)
    tmp = os.path.join(directory, f".{name}.{os.getpid()}.{os.urandom(4).hex()}{TMP_SUFFIX}")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags | getattr(os, "O_CLOEXEC", 0), mode)
    try:
        try:
            fill(fd)
            if durable:
                os.fsync(fd)
            if stamp:
                _stamp(fd)
        finally:
            os.close(fd)
        if private:
            os.chmod(tmp, 0o600)  # the umask may have narrowed, never widened, but be exact
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


def _mode(path: str, private: bool) -> int:
    """The mode a replacement of ``path`` gets: ``0600`` when private, else the existing
    file's (``0666`` less the umask for a new one)."""
    if private:
        return 0o600
    try:
        st = os.lstat(path)
        return st.st_mode & 0o777 if stat.S_ISREG(st.st_mode) else 0o666
    except FileNotFoundError:
        return 0o666  # os.open applies the umask


def atomic_write(
    path: str,
    data: bytes | Iterable[bytes],
    *,
    private: bool = False,
    durable: bool = True,
    derived: bool = False,
) -> None:
    """Write ``data`` (bytes, or chunks of them, written as they come) to ``path`` atomically.

    ``private`` creates the file ``0600``; otherwise an existing file keeps
    its mode and a new one gets ``0666`` less the umask. ``durable`` fsyncs
    the data before the rename (derived state may skip it: it can be rebuilt).
    ``derived`` (MEMORY.md) is not fsynced, is stamped (:func:`stamped`) and is
    swapped in (:func:`_swap_in`); a file written without ``durable`` is swapped in
    too, when this process has ``renameat2`` at hand.
    """
    tmp = _temp_file(
        path,
        data,
        _mode(path, private),
        private=private,
        durable=durable and not derived,
        stamp=derived,
    )
    try:
        if derived or not durable:
            # A file that need not survive a power cut: not written back on the rename
            # either. Only MEMORY.md loads renameat2 (ctypes) for it: a one-shot process
            # writing a small state file would pay more for the import than it saves.
            _swap_in(tmp, path, load=derived)
        else:
            os.replace(tmp, path)
    except BaseException:
        # Never leave a temp file behind, whatever stopped us.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _copy_range(src: int, dst: int, offset: int, count: int) -> None:
    """Append ``count`` bytes of ``src`` from ``offset`` to ``dst``: inside the kernel if it can."""
    end = offset + count
    fast = hasattr(os, "copy_file_range")
    while offset < end:
        if fast:
            try:
                done = os.copy_file_range(src, dst, end - offset, offset)
            except OSError as exc:
                if exc.errno not in _NO_COPY:
                    raise
                fast = False
                continue
            if done == 0:
                raise OSError(errno.EIO, "the file shrank while it was copied")
        else:
            chunk = os.pread(src, min(end - offset, 1 << 20), offset)
            if not chunk:
                raise OSError(errno.EIO, "the file shrank while it was copied")
            _write_all(dst, chunk)
            done = len(chunk)
        offset += done


# Where copy_file_range is missing or refuses these files, bytes go through user space.
_NO_COPY = frozenset({errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP, errno.EBADF})


def atomic_write_parts(
    path: str, source: int, parts: list[tuple[int, int] | bytes], *, private: bool = False
) -> None:
    """Write ``path`` atomically from ``parts``: bytes, or (offset, end) ranges of ``source``.

    The ranges are copied file to file (``copy_file_range``), so a large file
    changed in a few places is never read into memory. Only derived files
    (MEMORY.md) are written this way: not fsynced, stamped (:func:`stamped`) and
    swapped in (:func:`_swap_in`).
    """

    size = sum(
        len(part) if isinstance(part, bytes) else max(part[1] - part[0], 0) for part in parts
    )

    def fill(fd: int) -> None:
        if size >= PREALLOCATE_BYTES:
            _preallocate(fd, size)
        for part in parts:
            if isinstance(part, bytes):
                _write_all(fd, part)
            elif part[1] > part[0]:
                _copy_range(source, fd, part[0], part[1] - part[0])

    tmp = _filled_temp(path, fill, _mode(path, private), private=private, durable=False, stamp=True)
    try:
        _swap_in(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


#: How far before its change time a derived file's mtime is set (see :func:`stamped`): a
#: whole second, so that no file system's granularity rounds the two together.
STAMP_NS = 1_000_000_000


def _stamp(fd: int) -> None:
    st = os.fstat(fd)
    os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns - STAMP_NS))


def stamped(st: os.stat_result | tuple[int, int, int, int]) -> bool:
    """Whether a stat (or mdmem's (mtime, size, ino, ctime) of it) is of a file as mdmem
    writes a derived file: its mtime set :data:`STAMP_NS` before its ctime.

    Writing a file sets its mtime to the clock's now, which is never before a
    change time already recorded; so while a stamped file's stat is unchanged,
    nothing has written it since, even within the clock tick of mdmem's own
    write. Only a program that sets the mtime back to mdmem's own value can
    hide an edit, and only within that tick (its ctime moves on after it; and on
    Linux 6.13+ ext4, xfs, btrfs and tmpfs, a change after a stat always gets a
    new ctime).
    """
    if isinstance(st, os.stat_result):  # a tuple too, of other fields
        mtime, ctime = st.st_mtime_ns, st.st_ctime_ns
    else:
        mtime, ctime = st[0], st[3]
    return ctime - mtime >= STAMP_NS


#: From this size on, :func:`atomic_write_parts` reserves the new file's blocks first.
PREALLOCATE_BYTES = 256 * 1024
_FALLOC_FL_KEEP_SIZE = 1
_FALLOCATE: list[object] = []  # [fallocate] once looked up; [None] where there is none


def _preallocate(fd: int, size: int) -> None:
    """Reserve ``size`` bytes of blocks for the empty file ``fd`` before it is written.

    On Linux, ``fallocate(FALLOC_FL_KEEP_SIZE)``: ext4 then maps the copy into
    one extent instead of reserving each page as it is written, 15-25 % of a
    large MEMORY.md's copy (docs/benchmarks.md, round 17). The size stays what
    is written, so a file cut short (a crash before it is written back) is never
    padded with zeros. Only a hint: where the call is missing or refused, nothing.
    """
    if not _FALLOCATE:
        found: object = None
        if sys.platform == "linux":
            try:
                import ctypes

                call = ctypes.CDLL(None, use_errno=True).fallocate
                call.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
                call.restype = ctypes.c_int
                found = call
            except (OSError, AttributeError, ImportError):
                found = None
        _FALLOCATE.append(found)
    fn = _FALLOCATE[0]
    if fn is not None:
        fn(fd, _FALLOC_FL_KEEP_SIZE, 0, size)  # type: ignore[operator]  # -1 is ignored


_EXCHANGE: list[object] = []  # [renameat2] once looked up; [None] where there is none
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
# The kernel or file system cannot exchange names: rename over instead.
_NO_EXCHANGE = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP, errno.EXDEV})


def _renameat2() -> object:
    if not _EXCHANGE:
        found: object = None
        if sys.platform == "linux":  # glibc 2.28+ and musl have renameat2
            try:
                import ctypes

                libc = ctypes.CDLL(None, use_errno=True)
                fn = libc.renameat2
                fn.argtypes = [
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_int,
                    ctypes.c_char_p,
                    ctypes.c_uint,
                ]
                fn.restype = ctypes.c_int
                found = fn
            except (OSError, AttributeError, ImportError):
                found = None
        _EXCHANGE.append(found)
    return _EXCHANGE[0]


def _swap_in(tmp: str, path: str, *, load: bool = True) -> None:
    """Put the file ``tmp`` at ``path`` atomically: a reader sees the old file or the new one.

    Where the kernel can, the two names are exchanged (``renameat2`` with
    ``RENAME_EXCHANGE``) and the old file, now at ``tmp``, unlinked. ext4 writes
    back the data of a file renamed *over* another at once (its
    ``auto_da_alloc`` guard for programs that forget to fsync), which for a
    15 MB MEMORY.md is most of a write; a derived file needs no such guard (it
    is rebuilt when wrong), and an exchange is not a rename over. Elsewhere, or
    when ``path`` is not a regular file, ``os.replace``; and without ``load``,
    unless this process has looked ``renameat2`` up already.
    """
    fn = _renameat2() if load or _EXCHANGE else None
    if fn is not None:
        try:
            regular = stat.S_ISREG(os.lstat(path).st_mode)
        except FileNotFoundError:
            regular = False
        if regular:
            import ctypes

            swapped = fn(  # type: ignore[operator]
                _AT_FDCWD, os.fsencode(tmp), _AT_FDCWD, os.fsencode(path), _RENAME_EXCHANGE
            )
            if swapped == 0:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
                return
            err = ctypes.get_errno()
            if err not in _NO_EXCHANGE and err != errno.ENOENT:
                raise OSError(err, os.strerror(err), path)
            if err in _NO_EXCHANGE:
                _EXCHANGE[0] = None
    os.replace(tmp, path)


def sync_all(paths: list[str]) -> None:
    """Make the data of every file of ``paths`` durable: one ``sync()`` where the system has
    it (it returns once everything written is on disk), else an ``fsync`` each."""
    if hasattr(os, "sync"):
        os.sync()
        return
    for path in paths:  # pragma: no cover - systems without sync(2)
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def create_new(path: str, data: bytes, *, private: bool = False, durable: bool = True) -> None:
    """Create ``path`` holding ``data``, atomically, and only if no file of that name exists.

    The last step is ``os.link(temp, path)``, which the kernel refuses when
    ``path`` exists (a file, a symlink, anything): unlike a check followed by
    a rename, nothing that appeared a moment ago can be overwritten.

    Raises:
        FileExistsError: ``path`` exists; nothing was written.
    """
    tmp = _temp_file(path, data, 0o600 if private else 0o666, private=private, durable=durable)
    try:
        try:
            os.link(tmp, path, follow_symlinks=False)
        except FileExistsError:
            raise
        except OSError as exc:
            if exc.errno not in _NO_LINKS:
                raise
            _create_excl(path, data, private=private, durable=durable)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _create_excl(path: str, data: bytes, *, private: bool, durable: bool) -> None:
    """The fallback of :func:`create_new` where hard links are not supported."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags | getattr(os, "O_CLOEXEC", 0), 0o600 if private else 0o666)
    try:
        _write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)


def identity(path: str) -> tuple[int, int] | None:
    """(device, inode) of the file at ``path``; None when it cannot be seen. A database a
    connection has open is still the one on disk while this is unchanged."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


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
    """The bytes of the regular file ``path``, at most ``limit`` of them, read safely.

    Opened with ``O_NOFOLLOW | O_NONBLOCK`` and checked with ``fstat`` on the
    open descriptor, so what is read is what was checked: a symlink, a FIFO,
    a device or a directory is refused without being read or waited on.

    Raises:
        NotRegularFile: not a regular file (a symlink, FIFO, device, directory).
        TooLarge: larger than ``limit`` bytes (also a ``ValueError``).
        FileNotFoundError: there is no such file.
        OSError: it cannot be read.
    """
    try:
        fd = os.open(path, _READ_FLAGS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise NotRegularFile(
                errno.ELOOP, "a symlink, which mdmem does not follow", path
            ) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):
            raise NotRegularFile(exc.errno, "not a regular file", path) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", path)
        if st.st_size > limit:
            raise TooLarge(f"larger than {limit} bytes")
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            # What the file holds, then a little more to see it grow: never a buffer of
            # ``limit`` bytes for a small file.
            chunk = os.read(fd, min(limit + 1 - size, max(st.st_size - size, 0) + 65_536))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    if size > limit:  # it grew after the fstat
        raise TooLarge(f"larger than {limit} bytes")
    return b"".join(chunks)


def read_text(path: str, limit: int) -> str | None:
    """The UTF-8 text of the regular file ``path`` (see :func:`read_bytes`); None when absent,
    not a regular file, too large or not UTF-8."""
    try:
        return read_bytes(path, limit).decode("utf-8")
    except (OSError, ValueError):  # UnicodeDecodeError and TooLarge are ValueErrors
        return None
