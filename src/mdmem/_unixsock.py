"""A private Unix socket per user, for mdmem's long-lived helpers (the embedder, the watcher).

What the resident embedder (``recall/resident.py``) and the watcher
(``store/watcher.py``) share, so that both are private the same way:

- the socket lives in a folder of mdmem's state that is the user's own and
  ``0700`` (:func:`private_folder`), and is ``0600`` from its first moment
  (bound under ``umask 0177``);
- a client connects only to a socket that is a socket, its own user's and
  writable by nobody else (:func:`problem`), and, on Linux, answered by a
  process of its own user (:func:`check_peer`, ``SO_PEERCRED``); the server
  serves only its own user (:func:`peer_uid`);
- one server at a time holds an ``flock`` beside the socket (:func:`bind`),
  released by the kernel however it dies, so a socket file left by a dead
  server is replaced and never one of a live server; a socket someone else
  owns is left alone.

Only ``os``, ``stat``, ``sys`` and ``_socket`` (not ``socket``, whose import costs
about 7 ms: this is on the per-prompt hook's path) are imported at the top.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # not typing's: on the per-prompt hook's path
if TYPE_CHECKING:
    import _socket
    import socket

__all__ = [
    "Reader",
    "bind",
    "check_peer",
    "connect",
    "enabled",
    "peer_uid",
    "private_folder",
    "problem",
    "recv_exact",
    "release",
    "seconds",
    "socket_address",
    "still_ours",
]


_OFF = ("off", "0", "no", "false", "never")


def enabled(variable: str) -> bool:
    """Whether a helper that only Linux has here may be used: Linux, and ``$variable`` not
    ``off`` (``0``, ``no``, ``false``, ``never``). The watcher and the prompt server."""
    if os.environ.get(variable, "").strip().lower() in _OFF:
        return False
    return sys.platform.startswith("linux") and hasattr(os, "geteuid")


def seconds(variable: str, default: float, most: float | None = None) -> float:
    """``$variable`` as a positive number of seconds (at most ``most``), else ``default``:
    a helper's idle time or a client's wait (``MDMEM_WATCHER_IDLE`` and the like)."""
    try:
        value = float(os.environ.get(variable, default))
    except ValueError:
        return default
    return value if value > 0 and (most is None or value <= most) else default


def private_folder(path: str, *, create: bool) -> int:
    """An open descriptor of ``path``, a directory of ours that nobody else may write.

    Raises:
        OSError: it is missing (and not ``create``), not a directory, a symlink,
            someone else's, or open to others in a way that cannot be narrowed.
    """
    if create:
        base = os.path.dirname(path)
        if not os.path.isdir(base):
            os.makedirs(base, mode=0o700, exist_ok=True)
        try:  # noqa: SIM105 (contextlib: ~5 ms of the prompt server's client)
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid():
            raise PermissionError(f"{path} belongs to uid {info.st_uid}, not to this user")
        if stat.S_IMODE(info.st_mode) & 0o077:
            os.fchmod(fd, 0o700)  # ours: narrowed, as the state folders are
    except BaseException:
        os.close(fd)
        raise
    return fd


def problem(path: str) -> str | None:
    """Why the socket at ``path`` must not be used, or None.

    None also when there is no socket yet. A socket that is not a socket, is
    someone else's, or may be written by others is refused (and never removed).
    """
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if not stat.S_ISSOCK(info.st_mode):
        return f"{path} is not a socket"
    if info.st_uid != os.geteuid():
        return f"{path} belongs to uid {info.st_uid}, not to this user"
    if stat.S_IMODE(info.st_mode) & 0o077:
        return f"{path} may be used by other users (mode {stat.S_IMODE(info.st_mode):o})"
    return None


def socket_address(dir_fd: int, directory: str, name: str) -> str:
    """A path to bind or connect to: the real one, or through ``/proc`` when it is too long."""
    path = os.path.join(directory, name)
    if len(os.fsencode(path)) < 100:
        return path
    if sys.platform.startswith("linux"):
        return f"/proc/self/fd/{dir_fd}/{name}"  # the folder already opened and checked
    raise OSError(f"{path} is too long for a Unix socket")


def recv_exact(sock: _socket.socket, size: int) -> bytes:
    """Exactly ``size`` bytes from ``sock``.

    Raises:
        ConnectionError: the other side closed the connection first.
    """
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


class Reader:
    """Exact reads from a socket through one buffer, for a reply of many small fields
    (the watcher's names): one ``recv`` per 64 KiB, not one per field. It may read past
    what it is asked for, so it is for the last thing the other side sends."""

    __slots__ = ("_buf", "_pos", "_sock")

    def __init__(self, sock: _socket.socket) -> None:
        self._sock, self._buf, self._pos = sock, b"", 0

    def exact(self, size: int) -> bytes:
        """Exactly ``size`` bytes.

        Raises:
            ConnectionError: the other side closed the connection first.
        """
        end = self._pos + size
        if end <= len(self._buf):
            out, self._pos = self._buf[self._pos : end], end
            return out
        parts, have = [self._buf[self._pos :]], len(self._buf) - self._pos
        while have < size:
            chunk = self._sock.recv(max(size - have, 1 << 16))
            if not chunk:
                raise ConnectionError("the other side closed the connection")
            parts.append(chunk)
            have += len(chunk)
        self._buf, self._pos = b"".join(parts), size
        return self._buf[:size]


def peer_uid(sock: _socket.socket) -> int | None:
    """The user id of the process at the other end (``SO_PEERCRED``); None where the OS
    has no such option (macOS: the socket's owner and mode are what is checked)."""
    import _socket

    option = getattr(_socket, "SO_PEERCRED", None)
    if option is None:
        return None
    cred = sock.getsockopt(_socket.SOL_SOCKET, option, 12)  # struct ucred: pid, uid, gid
    return int.from_bytes(cred[4:8], sys.byteorder)


def check_peer(sock: _socket.socket, what: str = "the socket") -> None:
    """Refuse a server that runs as another user.

    Raises:
        PermissionError: it does.
    """
    uid = peer_uid(sock)
    if uid is not None and uid != os.geteuid():
        raise PermissionError(f"{what} is served by uid {uid}")


def connect(directory: str, name: str, timeout: float) -> _socket.socket | str:
    """A socket connected to ``<directory>/<name>``, checked as :func:`problem` and
    :func:`check_peer` say; or why there is none: ``"absent"`` (no folder, no socket, or a
    dead server's) or ``"refused"`` (the folder or socket is not this user's own, or
    another user serves it). The caller closes the socket.

    Raises:
        OSError: the server did not accept within ``timeout`` (``TimeoutError``), or
            another failure of the connection.
    """
    import _socket

    try:
        dir_fd = private_folder(directory, create=False)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "refused"
    try:
        if problem(os.path.join(directory, name)) is not None:
            return "refused"
        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(socket_address(dir_fd, directory, name))
            check_peer(sock, os.path.join(directory, name))
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            return "absent"
        except PermissionError:
            sock.close()
            return "refused"
        except BaseException:
            sock.close()
            raise
        return sock
    finally:
        os.close(dir_fd)


def bind(directory: str, name: str) -> tuple[socket.socket, int, str, int] | None:
    """Bind this process's server to ``<directory>/<name>.sock``: (the listening socket,
    the held lock's descriptor, the socket's path, its inode); None when another server
    holds ``<name>.lock`` (the clients reach that one).

    A socket file left by a dead server is replaced (the lock proves no live one has
    it); the socket is ``0600`` from its first moment.

    Raises:
        PermissionError: the socket's path is someone else's (left alone).
        OSError: the folder is not private or the socket cannot be bound.
    """
    import fcntl
    import socket

    dir_fd = private_folder(directory, create=True)
    try:
        lock = os.open(
            os.path.join(directory, name + ".lock"),
            os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(lock)
            return None
        os.ftruncate(lock, 0)  # the server's pid, for a person (or a test) to find it
        os.write(lock, f"{os.getpid()}\n".encode())
        path = os.path.join(directory, name + ".sock")
        try:
            owner = os.lstat(path).st_uid
        except FileNotFoundError:
            owner = None
        if owner is not None:
            if owner != os.geteuid():
                os.close(lock)
                raise PermissionError(f"{path} belongs to uid {owner}")
            os.unlink(path)  # ours, a dead server's: we hold the lock
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)  # the socket is 0600 from its first moment
        try:
            server.bind(socket_address(dir_fd, directory, name + ".sock"))
        finally:
            os.umask(mask)
        os.chmod(path, 0o600)
        server.listen(64)
        return server, lock, path, os.lstat(path).st_ino
    finally:
        os.close(dir_fd)


def release(server: socket.socket, path: str, inode: int) -> None:
    """Close a server's listening socket and remove its socket file, if it is still the one
    it bound (:func:`bind`'s path and inode; a newer server's is left alone)."""
    server.close()
    try:
        if os.lstat(path).st_ino == inode:
            os.unlink(path)
    except OSError:
        pass


def still_ours(path: str, inode: int) -> bool:
    """Whether the socket file at ``path`` is still the one this server bound (a server
    whose socket was removed or replaced can be reached by nobody: it should stop)."""
    try:
        return os.lstat(path).st_ino == inode
    except OSError:
        return False
