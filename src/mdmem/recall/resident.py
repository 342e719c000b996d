"""The resident embedder: the semantic model kept loaded, one per user, over a private socket.

Loading the model costs a second or more (and 160 MB) in every process that
embeds, and importing numpy costs more than the rest of a cold query; a query
needs one vector and a few products. So a query (``mdmem recall``, ``search``,
the prompt hook) and the few fresh notes it embeds first
(:func:`mdmem.recall.embedder.embed_inline`) ask one long-lived process: it
embeds texts (:func:`encode`), or embeds a query and scores it against the
vectors it is sent (:func:`score`), so that a cold process imports neither
the model nor numpy. It is:

- **Private**: a Unix domain socket in mdmem's own state folder,
  ``<state>/embedder/<model>-v<PROTOCOL>.sock``; the folder is ``0700`` and the
  socket ``0600``, both owned by the user. A client connects only to a socket
  that is its own and writable by nobody else (and, on Linux, answered by a
  process of its own user: ``SO_PEERCRED``); the server serves only its own user.
- **Started on demand**: the first query that finds no server starts it through
  :func:`mdmem._spawn.start` (this installed mdmem, isolated, in the state
  folder; nothing a repository supplies) and waits for its answer, about what
  loading the model in-process would have cost; later queries get theirs in
  milliseconds.
- **One at a time**: the server holds ``<model>-v<PROTOCOL>.lock`` (an
  ``flock``, released by the kernel however it dies) while it runs. Two clients
  may start one at once: the second server finds the lock taken and exits, and
  both clients reach the first. A socket file left by a dead server is replaced.
- **Stopping by itself**: after :data:`IDLE_SECONDS` without a request
  (``MDMEM_EMBEDDER_IDLE``, seconds), or when its socket file is removed.
- **Holding nothing**: it embeds and scores what it is sent and returns the
  numbers. It never reads a store, keeps nothing of a request, writes nothing
  but its socket and lock, and its output goes nowhere. Texts travel over the
  socket, never in argv.

``MDMEM_EMBEDDER=in-process`` (or ``off``), a platform without Unix sockets or
``flock`` (Windows), or a socket that fails the checks above: the model is
loaded in the process that needs it, as before (:func:`encode` returns None).

The wire format (both directions start with :data:`MAGIC`): a request is its
kind (:data:`EMBED` or :data:`SCORE`), ``u32 count`` then, per item, ``u32
length`` and its bytes (texts in UTF-8; to score, the query, then matrices of
little-endian float32 rows); a reply is ``u8 status``, the model's id (``u16``
length, bytes), then ``u32 count`` and ``count`` vectors or scores, float32
(status 0), or ``u32 length`` and a message (status 1). Embedding nothing is
a ping.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import time
from typing import TYPE_CHECKING

from mdmem import _spawn, _unixsock
from mdmem.store.paths import state_base

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Sequence

__all__ = [
    "EMBED",
    "FOLDER",
    "IDLE_SECONDS",
    "MAGIC",
    "MAX_MATRIX_BYTES",
    "PROTOCOL",
    "SCORE",
    "enabled",
    "encode",
    "folder",
    "problem",
    "ready",
    "reap",
    "score",
    "serve",
    "socket_path",
    "start",
    "status",
]

#: The folder of the socket and lock, under mdmem's state base (``0700``).
FOLDER = "embedder"
#: The server stops after this many seconds without a request (``MDMEM_EMBEDDER_IDLE``).
IDLE_SECONDS = 600.0
MAGIC = b"MDE2"
#: The wire format's version, part of the socket's name.
PROTOCOL = 2
#: A client waits this long for a server it started to answer (the model loads meanwhile).
START_SECONDS = 60.0
#: Bounds on one request: the server never holds more than this of anyone's text.
MAX_TEXTS = 4096
MAX_BYTES = 32 * 1024 * 1024
#: The vectors one request may bring to be scored (about 32,000 notes); more are scored
#: by the process itself, which has read them anyway.
MAX_MATRIX_BYTES = 64 * 1024 * 1024
#: The two kinds of request: embed texts; embed a query and score it against vectors.
EMBED = b"E"
SCORE = b"S"
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
    return os.path.join(folder(), _name(model) + ".sock")


def _name(model: str) -> str:
    # The wire format's version is in the name: after an upgrade, a server still running
    # the old one is left to stop by itself, beside the new one.
    return f"{model}-v{PROTOCOL}"


def idle_seconds() -> float:
    """How long the server waits for a request before it stops (``MDMEM_EMBEDDER_IDLE``)."""
    return _unixsock.seconds("MDMEM_EMBEDDER_IDLE", IDLE_SECONDS)


_private_folder = _unixsock.private_folder
#: Why a socket must not be used (:func:`mdmem._unixsock.problem`, shared with the watcher).
problem = _unixsock.problem
_address = _unixsock.socket_address


# -- the client --------------------------------------------------------------------------


_recv_exact = _unixsock.recv_exact


def _request(op: bytes, items: Sequence[bytes]) -> bytes:
    parts = [MAGIC, op, struct.pack("<I", len(items))]
    for data in items:
        parts += [struct.pack("<I", len(data)), data]
    return b"".join(parts)


class _Ask:
    """One request: its kind, its items, and the size of the answer expected."""

    __slots__ = ("count", "items", "model", "op", "width")

    def __init__(self, op: bytes, items: Sequence[bytes], model: str, count: int, width: int):
        self.op, self.items, self.model, self.count, self.width = op, items, model, count, width


def _ask(ask: _Ask, timeout: float) -> bytes | None:
    """The answer of a running server; None when there is none to ask.

    Raises:
        OSError: a server was reached and failed (or was refused after connecting).
    """
    directory = folder()
    try:
        dir_fd = _private_folder(directory, create=False)
    except FileNotFoundError:
        return None
    try:
        name = _name(ask.model) + ".sock"
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
            sock.sendall(_request(ask.op, ask.items))
            return _reply(sock, ask)
        finally:
            sock.close()
    finally:
        os.close(dir_fd)


def _check_peer(sock: socket.socket) -> None:
    _unixsock.check_peer(sock, "the embedder's socket")


def _reply(sock: socket.socket, ask: _Ask) -> bytes:
    head = _recv_exact(sock, len(MAGIC) + 3)
    if head[: len(MAGIC)] != MAGIC:
        raise ConnectionError("not an mdmem embedder")
    status, size = head[len(MAGIC)], struct.unpack("<H", head[len(MAGIC) + 1 :])[0]
    theirs = _recv_exact(sock, size).decode("utf-8", "replace")
    (n,) = struct.unpack("<I", _recv_exact(sock, 4))
    if status != 0:
        raise ConnectionError(_recv_exact(sock, min(n, 4096)).decode("utf-8", "replace"))
    if theirs != ask.model or n != ask.count:
        raise ConnectionError(f"the embedder runs {theirs}, not {ask.model}")
    return _recv_exact(sock, n * ask.width)


def start() -> bool:
    """Start a server (it exits at once if one runs); False when it could not be started."""
    reap()
    try:
        directory = folder()
        os.close(_private_folder(directory, create=True))
        # This installed mdmem, isolated, in the private folder (see mdmem._spawn).
        _CHILDREN.append(_spawn.start([directory], cwd=directory, entry=_ENTRY))
    except OSError:
        return False
    return True


def reap() -> int:
    """Collect the servers this process started that have ended; how many still run."""
    for child in list(_CHILDREN):
        if child.poll() is not None:
            _CHILDREN.remove(child)
    return len(_CHILDREN)


def ready(model: str, timeout: float = 0.5) -> bool:
    """Whether a server of ``model`` answers within ``timeout`` seconds (a ping, starts nothing)."""
    return status(model, timeout) == "ready"


def status(model: str, timeout: float = 0.5) -> str:
    """``ready`` (it answers a ping within ``timeout``), ``busy`` (it runs, loading its
    model or answering another: it did not answer in time), ``refused`` (its socket or
    folder fails the checks of :func:`problem`) or ``absent`` (none runs, or the resident
    embedder is off). Starts nothing."""
    if not enabled():
        return "absent"
    try:
        return "absent" if _ask(_Ask(EMBED, [], model, 0, 0), timeout) is None else "ready"
    except TimeoutError:
        return "busy"
    except PermissionError:
        return "refused"
    except OSError:
        return "absent"


def encode(texts: Sequence[str], model: str, dim: int, *, wait: bool = True) -> bytes | None:
    """The vectors of ``texts`` by ``model`` (``len(texts) * dim`` float32), from its server.

    Starts it when none runs, and with ``wait`` waits for its answer (the model
    loads meanwhile); without ``wait`` returns None at once in that case. None
    also when it is off or unavailable, or failed in this process in the last
    :data:`RETRY_SECONDS`: the caller then loads the model itself.
    """
    items = [t.encode("utf-8", "replace") for t in texts]
    return _asked(_Ask(EMBED, items, model, len(texts), dim * 4), wait)


def score(
    query: str, matrices: Sequence[bytes], model: str, dim: int, *, wait: bool = True
) -> bytes | None:
    """The cosine of ``query`` to each row of each matrix (float32 each), from the server.

    Each matrix is unit vectors of ``model``, ``dim`` float32 (little-endian) a
    row, end to end; the answer is one float32 a row, the matrices' rows one
    after the other. The server keeps nothing of them. Like :func:`encode`:
    None when the caller must do it itself.
    """
    rows = sum(len(m) for m in matrices) // (dim * 4)
    items = [query.encode("utf-8", "replace"), *matrices]
    return _asked(_Ask(SCORE, items, model, rows, 4), wait)


def _asked(ask: _Ask, wait: bool) -> bytes | None:
    global _failed_at
    if not enabled():
        return None
    if _failed_at is not None and time.monotonic() - _failed_at < RETRY_SECONDS:
        return None
    try:
        found = _ask(ask, START_SECONDS)
        if found is not None:
            return found
        if not start() or not wait:
            return None
        deadline = time.monotonic() + START_SECONDS
        pause, ended = 0.005, None  # type: float, float | None
        while time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.1)
            found = _ask(ask, max(1.0, deadline - time.monotonic()))
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


def serve(
    directory: str,
    model: str,
    vectors: Callable[[list[str]], bytes],
    similarities: Callable[[str, list[bytes]], bytes],
) -> int:
    """Serve ``model`` on its socket in ``directory`` until idle.

    ``vectors(texts)`` embeds (float32 bytes); ``similarities(query, matrices)``
    embeds the query and scores it against each row (float32 bytes).

    What the server process runs (:func:`mdmem.recall.semantic.resident_server`,
    which :func:`start` starts). Exit status 0, or 1 when the socket's path is
    someone else's (left alone).
    """
    try:
        bound = _unixsock.bind(directory, _name(model))
    except PermissionError:
        return 1  # someone else's: left alone (clients refuse it and load the model themselves)
    if bound is None:
        return 0  # another one runs: the clients reach it
    server, _lock, path, mine = bound
    # Bound before the model loads: the clients that start it wait in the backlog.
    try:
        vectors(["warm up"])
        _loop(server, path, mine, idle_seconds(), model, (vectors, similarities))
    finally:
        _unixsock.release(server, path, mine)
    return 0


def _loop(
    server: socket.socket,
    path: str,
    mine: int,
    idle: float,
    model: str,
    work: tuple[Callable[[list[str]], bytes], Callable[[str, list[bytes]], bytes]],
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
            if not _unixsock.still_ours(path, mine):
                return  # our socket file was removed or replaced: nobody can reach us
            continue
        with conn, contextlib.suppress(OSError, ValueError, struct.error, UnicodeError):
            _answer(conn, model, *work)
        last = time.monotonic()


def _answer(
    conn: socket.socket,
    model: str,
    vectors: Callable[[list[str]], bytes],
    similarities: Callable[[str, list[bytes]], bytes],
) -> None:
    uid = _unixsock.peer_uid(conn)
    if uid is not None and uid != os.geteuid():
        return  # only its own user is served
    conn.settimeout(READ_SECONDS)
    head = _recv_exact(conn, len(MAGIC) + 5)
    op = head[len(MAGIC) : len(MAGIC) + 1]
    if head[: len(MAGIC)] != MAGIC or op not in (EMBED, SCORE):
        return
    (count,) = struct.unpack("<I", head[len(MAGIC) + 1 :])
    most = MAX_BYTES if op == EMBED else MAX_MATRIX_BYTES + MAX_BYTES
    if count > MAX_TEXTS:
        _send(conn, model, 1, b"too many items in one request")
        return
    items, total = [], 0
    for _ in range(count):
        (size,) = struct.unpack("<I", _recv_exact(conn, 4))
        total += size
        if total > most:
            _send(conn, model, 1, b"the request is too long")
            return
        items.append(_recv_exact(conn, size))
    if op == EMBED:
        texts = [item.decode("utf-8", "replace") for item in items]
        payload = vectors(texts) if texts else b""
        n = len(texts)
    elif not items:
        _send(conn, model, 1, b"no query to score")
        return
    else:
        payload = similarities(items[0].decode("utf-8", "replace"), items[1:])
        n = len(payload) // 4
    del items  # nothing of what was sent is kept
    _send(conn, model, 0, payload, n)


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
