"""The resident prompt server: the per-prompt hook answered by a warm process of this user.

``mdmem hook user-prompt-submit`` runs at every prompt, as a fresh Python
process. Its answer costs a few milliseconds; importing what computes it costs
three to five times as much (the recall engine, SQLite, the store's modules).
So the hook's process hands its whole input to a long-lived mdmem process of
the same user and prints what that one printed: the hook then costs about one
``python -c pass``, whatever the store's size.

**Byte for byte the same answer.** The server runs the same function on the
same input (:func:`mdmem.cli._fastpath.try_fast`, through
:func:`mdmem.cli._fastpath.prompt_server_child`, with the hook's arguments, its
stdin, its environment and its working directory, each request on its own,
one at a time), and every store is brought in step at every request as in a
fresh process (:func:`mdmem.recall.engine.recheck`): an edit made just before
the prompt is seen by it. Whatever the server cannot answer as the hook would
(another import path, its own code changed on disk since it loaded it, an error
the full command line would report) it declines, and the hook runs in its own
process as it does without a server: a server never changes what a prompt gets.

**Never twice.** The server takes a request only when the hook, told it was
accepted, confirms it still waits (a hook that gave up waiting runs it itself,
so exactly one of them does). A hook whose accepted request gets no answer in
:data:`REPLY_SECONDS` prints nothing (one line on stderr) rather than run it as
well; one whose server ended mid-request (killed) answers it itself.

**Private**, as the watcher and the resident embedder (:mod:`mdmem._unixsock`):
a socket ``0600`` in ``<state>/prompt`` (``0700``), its owner and mode checked,
``SO_PEERCRED`` both ways. The prompt and the environment travel over that
socket only, never in a command line. The server imports only the installed
mdmem (started by :func:`mdmem._spawn.start`: ``-I``, absolute import path); the
working directory it takes for a request is never on its import path.

**Started on demand**: by SessionStart, and by a prompt that found none (which
then answers in its own process; at most one start per :data:`RESTART_SECONDS`).
It **stops** after :data:`IDLE_SECONDS` without a request
(``MDMEM_PROMPT_SERVER_IDLE``), when its socket goes, or when one of its
modules changed on disk (an upgrade). ``MDMEM_PROMPT_SERVER=off``, or another
OS than Linux: every prompt runs in its own process.

Wire format (little-endian): a request is :data:`MAGIC`, ``u32`` count, then
per field ``u32`` length and its bytes: the hook's import path (NUL-separated),
its working directory, its stdin, its arguments and its environment (``K=V``),
each NUL-separated. The server answers ``A`` (accepted) or ``N`` (declined); to
``A`` the hook says ``G`` (go); the reply is :data:`MAGIC`, ``u8`` 0 (served)
or 1 (declined), ``i32`` exit status, ``u32`` length and stdout, ``u32`` length
and stderr. Only ``os``, ``sys``, ``_socket`` and :mod:`mdmem._unixsock` are
imported on the hook's side.
"""

from __future__ import annotations

import os
import sys

from mdmem import _unixsock

TYPE_CHECKING = False  # not typing's: on the per-prompt hook's path
if TYPE_CHECKING:
    import _socket
    from collections.abc import Callable

    #: What answers a request: ``try_fast(args)``, its exit status, or None.
    Handler = Callable[[list[str]], "int | None"]

__all__ = [
    "ENTRY",
    "ENV",
    "FOLDER",
    "IDLE_SECONDS",
    "MAGIC",
    "enabled",
    "ensure",
    "folder",
    "relay",
    "serve",
    "socket_path",
]

#: ``MDMEM_PROMPT_SERVER=off`` (or ``0``, ``no``): every prompt in its own process.
ENV = "MDMEM_PROMPT_SERVER"
#: The folder of the socket and lock, under mdmem's state base (``0700``).
FOLDER = "prompt"
MAGIC = b"MDP1"
#: The wire format's version, part of the socket's name.
PROTOCOL = 1
#: The server stops after this many seconds without a request (``MDMEM_PROMPT_SERVER_IDLE``).
IDLE_SECONDS = 1800.0
#: How long the hook waits for the server to accept its request before it answers itself
#: (``MDMEM_PROMPT_SERVER_WAIT``, seconds).
TIMEOUT = 0.5
#: How long the hook waits for the answer of an accepted request (Claude Code's own
#: timeout for a hook is 60 s).
REPLY_SECONDS = 50.0
#: A prompt starts no server when one was started less than this long ago.
RESTART_SECONDS = 10.0
#: The most bytes of one request (the hook reads at most 1,000,000 characters of stdin).
MAX_REQUEST = 8 << 20
STARTED = "started"

#: The server's process: the command line's fast path, which answers the hook
#: (``integrations`` does not import the command line).
ENTRY = "mdmem.cli._fastpath:prompt_server_child"
_ACCEPT, _DECLINE, _GO = b"A", b"N", b"G"


def enabled() -> bool:
    """Whether the hook asks a prompt server: Linux, and ``MDMEM_PROMPT_SERVER`` not off."""
    return _unixsock.enabled(ENV)


def folder() -> str:
    """Where the socket and the lock live: ``<state base>/prompt``."""
    from mdmem.store.paths import state_base

    return os.path.join(state_base(), FOLDER)


def _import_path() -> list[str]:
    from mdmem._spawn import import_path

    return import_path()


def _name(path: list[str]) -> str:
    """The socket's name: the protocol, and a hash of the interpreter and its import path
    (another virtual environment, another checkout: another server)."""
    value = 0xCBF29CE484222325  # FNV-1a, 64 bits: no hashlib on the hook's path
    for byte in os.fsencode("\0".join([sys.executable, *path])):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"prompt-v{PROTOCOL}-{value:016x}"


def socket_path() -> str:
    """This interpreter's prompt server's socket."""
    return os.path.join(folder(), _name(_import_path()) + ".sock")


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def _fields(parts: list[bytes]) -> bytes:
    return b"".join([MAGIC, _u32(len(parts)), *(_u32(len(p)) + p for p in parts)])


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _decode(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


# -- the hook's side ------------------------------------------------------------------------


def relay(args: list[str]) -> int | None:
    """Answer the hook ``args`` through the prompt server: its exit status, its output
    written; None when this process must answer it itself (no server, or it declined).

    Reads the hook's stdin as :func:`mdmem.integrations.prompt_recall.read_input` does,
    and leaves it readable again for this process. Starts a server when none runs.
    """
    if not enabled():
        return None
    import io

    try:
        text = sys.stdin.read(1_000_000)
    except (OSError, ValueError):  # as read_input: no input
        text = ""
    sys.stdin = io.StringIO(text)  # what this process reads, if it answers itself
    try:
        path = _import_path()
        answer = _ask(path, args, text)
    except OSError:
        return None
    if answer is None:
        return None
    status, out, err = answer
    if out:
        sys.stdout.write(out)
    if err:
        sys.stderr.write(err)
    return status


def _wait_seconds() -> float:
    """How long the hook waits to be accepted: ``MDMEM_PROMPT_SERVER_WAIT`` or :data:`TIMEOUT`."""
    return _unixsock.seconds("MDMEM_PROMPT_SERVER_WAIT", TIMEOUT, REPLY_SECONDS)


def _ask(path: list[str], args: list[str], text: str) -> tuple[int, str, str] | None:
    directory = folder()
    try:
        sock = _unixsock.connect(directory, _name(path) + ".sock", _wait_seconds())
        if isinstance(sock, str):
            if sock == "absent":
                _start(directory)
            return None  # "refused": not ours, never used nor started
        try:
            env = [f"{k}={v}" for k, v in os.environ.items()]
            request = [os.getcwd(), text, "\0".join(args), "\0".join(env)]
            sock.sendall(_fields([_encode(part) for part in ["\0".join(path), *request]]))
            if sock.recv(1) != _ACCEPT:
                return None  # declined (another import path, its code changed)
            sock.sendall(_GO)  # from here on the server answers it, and only the server
            sock.settimeout(REPLY_SECONDS)
            try:
                return _reply(sock)
            except TimeoutError:  # it has the prompt and may still answer it: not twice
                return 0, "", f"mdmem: the prompt server gave no answer in {REPLY_SECONDS:.0f} s\n"
        finally:
            sock.close()
    except (OSError, ValueError, UnicodeError):  # TimeoutError among them
        return None


def _reply(sock: _socket.socket) -> tuple[int, str, str] | None:
    recv = _unixsock.recv_exact
    head = recv(sock, len(MAGIC) + 9)
    if head[: len(MAGIC)] != MAGIC:
        raise ValueError("not an mdmem prompt server's answer")
    served = head[len(MAGIC)]
    status = int.from_bytes(head[len(MAGIC) + 1 : len(MAGIC) + 5], "little", signed=True)
    out = recv(sock, int.from_bytes(head[len(MAGIC) + 5 :], "little"))
    err = recv(sock, int.from_bytes(recv(sock, 4), "little"))
    if served != 0:
        return None
    return status, _decode(out), _decode(err)


def _start(directory: str) -> bool:
    """Start a server (it exits at once if one runs); not when one was started less than
    :data:`RESTART_SECONDS` ago (a server that cannot start costs a prompt nothing)."""
    import time

    stamp = os.path.join(directory, STARTED)
    try:
        if 0 <= time.time() - os.stat(stamp).st_mtime < RESTART_SECONDS:
            return False
    except OSError:
        pass
    from mdmem import _spawn

    try:
        os.close(_unixsock.private_folder(directory, create=True))
        fd = os.open(stamp, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            os.utime(fd)
        finally:
            os.close(fd)
        _spawn.start([directory], cwd=directory, entry=ENTRY)
    except OSError:
        return False
    return True


def ensure() -> None:
    """Start this user's prompt server if none answers (SessionStart: warm by the first
    prompt). Never raises, never waits."""
    if not enabled():
        return
    try:
        directory = folder()
        sock = _unixsock.connect(directory, _name(_import_path()) + ".sock", TIMEOUT)
        if isinstance(sock, str):
            if sock == "absent":
                _start(directory)
            return
        sock.close()
    except OSError:
        return


# -- the server -----------------------------------------------------------------------------


class _Code:
    """The files of the modules this process loaded, as they were when it loaded them."""

    def __init__(self) -> None:
        self.seen: dict[str, tuple[int, int, int] | None] = {}
        self.note_new()

    @staticmethod
    def _stat(path: str) -> tuple[int, int, int] | None:
        try:
            info = os.stat(path)
        except OSError:
            return None
        return info.st_mtime_ns, info.st_size, info.st_ino

    def note_new(self) -> None:
        """Record the modules loaded since the last call (imported for a request)."""
        for module in list(sys.modules.values()):
            path = getattr(module, "__file__", None)
            if isinstance(path, str) and path not in self.seen:
                self.seen[path] = self._stat(path)

    def changed(self) -> bool:
        """Whether a module's file changed on disk since this process loaded it."""
        return any(self._stat(path) != was for path, was in self.seen.items())


def _read_request(conn: _socket.socket) -> list[bytes] | None:
    recv = _unixsock.recv_exact
    head = recv(conn, len(MAGIC) + 4)
    if head[: len(MAGIC)] != MAGIC or int.from_bytes(head[len(MAGIC) :], "little") != 5:
        return None
    parts, total = [], 0
    for _ in range(5):
        size = int.from_bytes(recv(conn, 4), "little")
        total += size
        if total > MAX_REQUEST:
            return None
        parts.append(recv(conn, size))
    return parts


def _run(
    handler: Handler, args: list[str], cwd: str, text: str, env: dict[str, str]
) -> tuple[int | None, str, str]:
    """``handler(args)`` as the hook's own process would run it: its environment, its
    working directory, its stdin; (exit status or None, stdout, stderr)."""
    import io
    import time

    from mdmem.recall.engine import recheck

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    streams = sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    status: int | None = None
    try:
        os.environ.clear()
        os.environ.update(env)
        if env.get("TZ") != saved_env.get("TZ"):
            time.tzset()  # local time as the hook's own process would have it
        os.chdir(cwd)
        sys.stdin, sys.stdout, sys.stderr = io.StringIO(text), out, err
        recheck()  # every store brought in step, as in a fresh process
        status = handler(list(args))
    except Exception:
        status = None  # declined: the hook's own process answers, as it would without a server
    finally:
        sys.stdin, sys.stdout, sys.stderr = streams
        os.environ.clear()
        os.environ.update(saved_env)
        if env.get("TZ") != saved_env.get("TZ"):
            time.tzset()
        os.chdir(saved_cwd)
    return status, out.getvalue(), err.getvalue()


def _answer(conn: _socket.socket, own_path: str, code: _Code, handler: Handler) -> bool:
    """Serve one connection; False when this server must stop (its code changed)."""
    uid = _unixsock.peer_uid(conn)
    if uid is not None and uid != os.geteuid():
        return True  # only its own user is served
    conn.settimeout(5.0)
    parts = _read_request(conn)
    if parts is None:
        return True
    path, cwd, text, args, env = (_decode(p) for p in parts)
    stale = code.changed()
    if path != own_path or stale:
        conn.sendall(_DECLINE)
        return not stale
    conn.sendall(_ACCEPT)
    if conn.recv(1) != _GO:
        return True  # the hook stopped waiting and answers itself
    environ = dict(item.split("=", 1) for item in env.split("\0") if "=" in item)
    status, out, err = _run(handler, args.split("\0") if args else [], cwd, text, environ)
    code.note_new()
    data_out, data_err = _encode(out), _encode(err)
    served = 0 if status is not None else 1
    conn.sendall(
        MAGIC
        + bytes([served])
        + (status or 0).to_bytes(4, "little", signed=True)
        + _u32(len(data_out))
        + data_out
        + _u32(len(data_err))
        + data_err
    )
    return True


def _reap() -> None:
    """Collect the children requests started that have ended since (a watcher or an embedder
    a hook starts when it finds none): a hook's own process exits before them, the server
    outlives them. Between requests, when no wait of the server's own is under way."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no child left
        if pid == 0:
            return  # children, all still running


def idle_seconds() -> float:
    """How long the server waits for a request before it stops (``MDMEM_PROMPT_SERVER_IDLE``)."""
    return _unixsock.seconds("MDMEM_PROMPT_SERVER_IDLE", IDLE_SECONDS)


def serve(args: list[str], handler: Handler) -> int:
    """The server's process (what a hook starts): ``[FOLDER]``, answering with ``handler``
    (the modules it needs imported already). Exit status 0, or 1 when the socket's path
    is someone else's (left alone)."""
    import contextlib
    import gc
    import time

    directory = args[0] if args else folder()
    own_path = "\0".join(sys.path)
    try:
        bound = _unixsock.bind(directory, _name(list(sys.path)))
    except PermissionError:
        return 1
    if bound is None:
        return 0  # another one runs: the hooks reach it
    server, _lock, path, mine = bound
    try:
        gc.freeze()  # what the imports made is never garbage: not scanned again
        code = _Code()
        idle = idle_seconds()
        last = time.monotonic()
        while True:
            left = idle - (time.monotonic() - last)
            if left <= 0:
                return 0
            server.settimeout(min(left, 5.0))
            try:
                conn, _ = server.accept()
            except TimeoutError:
                _reap()
                if not _unixsock.still_ours(path, mine):
                    return 0  # our socket file was removed or replaced: nobody can reach us
                continue
            except OSError:
                continue  # a connection that went before it was taken (ECONNABORTED)
            with conn, contextlib.suppress(OSError, ValueError, UnicodeError):
                if not _answer(conn, own_path, code, handler):
                    return 0  # an upgrade: the next hook starts the new code
            _reap()
            last = time.monotonic()
    finally:
        _unixsock.release(server, path, mine)
