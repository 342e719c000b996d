"""The resident embedder: the semantic model kept loaded, one per user, over a private socket.

Loading the model costs a second or more (and 160 MB) in every process that
embeds; a query needs one vector. So a query (``mdmem recall``, ``search``, the
prompt hook, the few fresh notes :func:`mdmem.recall.embedder.embed_inline`
embeds) sends its texts to one long-lived process, which answers with their
vectors (:func:`encode`). It is:

- **Private**: a Unix domain socket in mdmem's own state folder,
  ``<state>/embedder/<model>.sock``; the folder is ``0700`` and the socket
  ``0600``, both owned by the user. A client connects only to a socket that is
  its own and writable by nobody else (and, on Linux, answered by a process of
  its own user: ``SO_PEERCRED``); the server serves only its own user.
- **Started on demand**: the first query that finds no server starts it through
  :func:`mdmem._spawn.start` (this installed mdmem, isolated, in the state
  folder; nothing a repository supplies) and waits for its answer, about what
  loading the model in-process would have cost; later queries get theirs in
  milliseconds.
- **One at a time**: the server holds ``<model>.lock`` (an ``flock``, released
  by the kernel however it dies) while it runs. Two clients may start one at
  once: the second server finds the lock taken and exits, and both clients
  reach the first. A socket file left by a dead server is replaced.
- **Stopping by itself**: after :data:`IDLE_SECONDS` without a request
  (``MDMEM_EMBEDDER_IDLE``, seconds), or when its socket file is removed.
- **Holding nothing**: it embeds what it is sent and returns the vectors. It
  never reads a store, keeps no text, writes nothing but its socket and lock,
  and its output goes nowhere. Texts travel over the socket, never in argv.

``MDMEM_EMBEDDER=in-process`` (or ``off``), a platform without Unix sockets or
``flock`` (Windows), or a socket that fails the checks above: the model is
loaded in the process that needs it, as before (:func:`encode` returns None).

The wire format (both directions start with :data:`MAGIC`): a request is
``u32 count`` then, per text, ``u32 length`` and its UTF-8; a reply is
``u8 status``, the model's id (``u16`` length, bytes), then ``u32 count`` and
``count * DIM`` little-endian float32 (status 0), or ``u32 length`` and a
message (status 1). A request of no text is a ping.
"""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import sys
import time
from typing import TYPE_CHECKING

from mdmem import _spawn
from mdmem.store.paths import state_base

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

__all__ = [
    "FOLDER",
    "IDLE_SECONDS",
    "MAGIC",
    "enabled",
    "encode",
    "folder",
    "problem",
    "ready",
    "serve",
    "socket_path",
    "start",
]

#: The folder of the socket and lock, under mdmem's state base (``0700``).
FOLDER = "embedder"
#: The server stops after this many seconds without a request (``MDMEM_EMBEDDER_IDLE``).
IDLE_SECONDS = 600.0
MAGIC = b"MDE1"
#: A client waits this long for a server it started to answer (the model loads meanwhile).
START_SECONDS = 60.0
#: Bounds on one request: the server never holds more than this of anyone's text.
MAX_TEXTS = 4096
MAX_BYTES = 32 * 1024 * 1024
#: A connection that sends nothing for this long is dropped (the server is serial).
READ_SECONDS = 10.0
#: After a failure, a process loads the model itself for this long before trying again.
RETRY_SECONDS = 60.0

#: What the server process runs: semantic's, which hands :func:`serve` the model.
_ENTRY = "mdmem.recall.semantic:resident_server"
_OFF = ("off", "0", "no", "false", "in-process", "inprocess", "process", "never")
_CHILDREN: list[subprocess.Popen[bytes]] = []
_failed_at: float | None = None


def enabled() -> bool:
    """Whether queries use the resident embedder: ``MDMEM_EMBEDDER`` (default on), if possible."""
    if os.environ.get("MDMEM_EMBEDDER", "resident").strip().lower() in _OFF:
        return False
    return os.name == "posix" and hasattr(socket, "AF_UNIX") and hasattr(os, "geteuid")


def folder() -> str:
    """Where the socket and the lock live: ``<state base>/embedder``."""
    return os.path.join(state_base(), FOLDER)


def socket_path(model: str) -> str:
    """The socket of the server of ``model`` (vectors of two models never mix)."""
    return os.path.join(folder(), model + ".sock")


def idle_seconds() -> float:
    """How long the server waits for a request before it stops (``MDMEM_EMBEDDER_IDLE``)."""
    try:
        value = float(os.environ.get("MDMEM_EMBEDDER_IDLE", IDLE_SECONDS))
    except ValueError:
        return IDLE_SECONDS
    return value if value > 0 else IDLE_SECONDS


def _private_folder(path: str, *, create: bool) -> int:
    """An open descriptor of ``path``, a directory of ours that nobody else may write.

    Raises:
        OSError: it is missing (and not ``create``), not a directory, a symlink,
            someone else's, or open to others in a way that cannot be narrowed.
    """
    if create:
        base = os.path.dirname(path)
        if not os.path.isdir(base):
            os.makedirs(base, mode=0o700, exist_ok=True)
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
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


def _address(dir_fd: int, directory: str, name: str) -> str:
    """A path to bind or connect to: the real one, or through ``/proc`` when it is too long."""
    path = os.path.join(directory, name)
    if len(os.fsencode(path)) < 100:
        return path
    if sys.platform.startswith("linux"):
        return f"/proc/self/fd/{dir_fd}/{name}"  # the folder already opened and checked
    raise OSError(f"{path} is too long for a Unix socket")


# -- the client --------------------------------------------------------------------------


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = sock.recv(min(left, 1 << 20))
        if not chunk:
            raise ConnectionError("the embedder closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _request(texts: Sequence[str]) -> bytes:
    encoded = [t.encode("utf-8", "replace") for t in texts]
    parts = [MAGIC, struct.pack("<I", len(encoded))]
    for data in encoded:
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


def _ask(texts: Sequence[str], model: str, dim: int, timeout: float) -> bytes | None:
    """The vectors of ``texts`` from a running server; None when there is none to ask.

    Raises:
        OSError: a server was reached and failed (or was refused after connecting).
    """
    directory = folder()
    try:
        dir_fd = _private_folder(directory, create=False)
    except FileNotFoundError:
        return None
    try:
        name = model + ".sock"
        refused = problem(os.path.join(directory, name))
        if refused is not None:
            raise PermissionError(refused)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            try:
                sock.connect(_address(dir_fd, directory, name))
            except (FileNotFoundError, ConnectionRefusedError):
                return None  # no server, or a dead one's socket file: start one
            _check_peer(sock)
            sock.sendall(_request(texts))
            return _reply(sock, len(texts), model, dim)
        finally:
            sock.close()
    finally:
        os.close(dir_fd)


def _check_peer(sock: socket.socket) -> None:
    peer = getattr(socket, "SO_PEERCRED", None)
    if peer is None:
        return  # macOS: the socket's owner and mode were checked
    _, uid, _ = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, peer, 12))
    if uid != os.geteuid():
        raise PermissionError(f"the embedder's socket is served by uid {uid}")


def _reply(sock: socket.socket, count: int, model: str, dim: int) -> bytes:
    head = _recv_exact(sock, len(MAGIC) + 3)
    if head[: len(MAGIC)] != MAGIC:
        raise ConnectionError("not an mdmem embedder")
    status, size = head[len(MAGIC)], struct.unpack("<H", head[len(MAGIC) + 1 :])[0]
    theirs = _recv_exact(sock, size).decode("utf-8", "replace")
    (n,) = struct.unpack("<I", _recv_exact(sock, 4))
    if status != 0:
        raise ConnectionError(_recv_exact(sock, min(n, 4096)).decode("utf-8", "replace"))
    if theirs != model or n != count:
        raise ConnectionError(f"the embedder runs {theirs}, not {model}")
    return _recv_exact(sock, n * dim * 4)


def start() -> bool:
    """Start a server (it exits at once if one runs); False when it could not be started."""
    for child in list(_CHILDREN):
        if child.poll() is not None:
            _CHILDREN.remove(child)
    try:
        directory = folder()
        os.close(_private_folder(directory, create=True))
        # This installed mdmem, isolated, in the private folder (see mdmem._spawn).
        _CHILDREN.append(_spawn.start([directory], cwd=directory, entry=_ENTRY))
    except OSError:
        return False
    return True


def ready(model: str, timeout: float = 0.5) -> bool:
    """Whether a server of ``model`` answers within ``timeout`` seconds (a ping, starts nothing)."""
    if not enabled():
        return False
    try:
        return _ask([], model, 0, timeout) is not None
    except OSError:
        return False


def encode(texts: Sequence[str], model: str, dim: int, *, wait: bool = True) -> bytes | None:
    """The vectors of ``texts`` by ``model`` (``len(texts) * dim`` float32), from its server.

    Starts it when none runs, and with ``wait`` waits for its answer (the model
    loads meanwhile); without ``wait`` returns None at once in that case. None
    also when it is off or unavailable, or failed in this process in the last
    :data:`RETRY_SECONDS`: the caller then loads the model itself.
    """
    global _failed_at
    if not enabled():
        return None
    if _failed_at is not None and time.monotonic() - _failed_at < RETRY_SECONDS:
        return None
    try:
        found = _ask(texts, model, dim, START_SECONDS)
        if found is not None:
            return found
        if not start() or not wait:
            return None
        deadline = time.monotonic() + START_SECONDS
        pause, ended = 0.005, None  # type: float, float | None
        while time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            found = _ask(texts, model, dim, max(1.0, deadline - time.monotonic()))
            if found is not None:
                return found
            if ended is None and all(c.poll() is not None for c in _CHILDREN):
                # The server this process started has ended: it lost the race to another
                # (which binds within moments) or failed. A little longer, then give up.
                ended = time.monotonic()
            if ended is not None and time.monotonic() - ended > 2.0:
                break
    except (OSError, ValueError, struct.error):
        pass
    _failed_at = time.monotonic()
    return None


# -- the server ---------------------------------------------------------------------------


def serve(directory: str, model: str, vectors: Callable[[list[str]], bytes]) -> int:
    """Serve ``model`` on its socket in ``directory`` until idle; ``vectors`` embeds.

    What the server process runs (:func:`mdmem.recall.semantic.resident_server`,
    which :func:`start` starts). Exit status 0, or 1 when the socket's path is
    someone else's (left alone).
    """
    import fcntl

    dir_fd = _private_folder(directory, create=True)
    lock = os.open(
        os.path.join(directory, model + ".lock"),
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return 0  # another one runs: the clients reach it
    path = os.path.join(directory, model + ".sock")
    with contextlib.suppress(FileNotFoundError):
        if os.lstat(path).st_uid != os.geteuid():
            return 1  # someone else's: left alone (clients refuse it and load the model themselves)
        os.unlink(path)  # ours, a dead server's: we hold the lock, so no live server has it
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    mask = os.umask(0o177)  # the socket is 0600 from its first moment
    try:
        server.bind(_address(dir_fd, directory, model + ".sock"))
    finally:
        os.umask(mask)
    os.chmod(path, 0o600)
    mine = os.lstat(path).st_ino
    # Bound before the model loads: the clients that start it wait in the backlog.
    server.listen(64)
    try:
        vectors(["warm up"])
        _loop(server, path, mine, idle_seconds(), model, vectors)
    finally:
        server.close()
        with contextlib.suppress(OSError):
            if os.lstat(path).st_ino == mine:
                os.unlink(path)
    return 0


def _loop(
    server: socket.socket,
    path: str,
    mine: int,
    idle: float,
    model: str,
    vectors: Callable[[list[str]], bytes],
) -> None:
    last = time.monotonic()
    while True:
        left = idle - (time.monotonic() - last)
        if left <= 0:
            return
        server.settimeout(min(left, 5.0))
        try:
            conn, _ = server.accept()
        except TimeoutError:
            try:
                if os.lstat(path).st_ino != mine:
                    return  # our socket file was removed or replaced: nobody can reach us
            except OSError:
                return
            continue
        with conn, contextlib.suppress(OSError, ValueError, struct.error, UnicodeError):
            _answer(conn, model, vectors)
        last = time.monotonic()


def _answer(conn: socket.socket, model: str, vectors: Callable[[list[str]], bytes]) -> None:
    peer = getattr(socket, "SO_PEERCRED", None)
    if peer is not None:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, peer, 12))
        if uid != os.geteuid():
            return  # only its own user is served
    conn.settimeout(READ_SECONDS)
    head = _recv_exact(conn, len(MAGIC) + 4)
    if head[: len(MAGIC)] != MAGIC:
        return
    (count,) = struct.unpack("<I", head[len(MAGIC) :])
    if count > MAX_TEXTS:
        _send(conn, model, 1, b"too many texts in one request")
        return
    texts, total = [], 0
    for _ in range(count):
        (size,) = struct.unpack("<I", _recv_exact(conn, 4))
        total += size
        if total > MAX_BYTES:
            _send(conn, model, 1, b"the texts of one request are too long")
            return
        texts.append(_recv_exact(conn, size).decode("utf-8", "replace"))
    payload = vectors(texts) if texts else b""
    del texts  # nothing of what was sent is kept
    _send(conn, model, 0, payload, count)


def _send(
    conn: socket.socket, model: str, status: int, payload: bytes, count: int | None = None
) -> None:
    """A reply: status 0 with ``count`` vectors, or 1 with a message."""
    name = model.encode()
    size = len(payload) if count is None else count
    conn.sendall(
        MAGIC
        + bytes([status])
        + struct.pack("<H", len(name))
        + name
        + struct.pack("<I", size)
        + payload
    )
