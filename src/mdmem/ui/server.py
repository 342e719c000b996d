"""Serving the web page with uvicorn: on a loopback address, with a fresh token per run.

``Server(stores)`` binds its socket at once (port 0: the system picks a free
one), so its :attr:`~Server.url` is known before it serves.

Cookies ignore ports: a cookie set by ``http://127.0.0.1:8765`` is sent to
every other server on ``127.0.0.1``, whoever runs it. So by default
(``host=None``) the page listens on an address of its own, a random one in
``127.0.0.0/8`` (Linux answers on all of them); its cookie goes to that
address only, and ``SameSite=Strict`` keeps it from requests another site
starts. Where the system has only ``127.0.0.1`` (macOS), that is used. :meth:`Server.run`
serves until Ctrl-C; :meth:`Server.start` serves from a background thread
until :meth:`Server.stop` (tests, or a program embedding the page).
"""

from __future__ import annotations

import errno
import ipaddress
import secrets
import socket
import threading
from typing import TYPE_CHECKING

from mdmem.errors import InvalidOperation
from mdmem.ui.app import create_app
from mdmem.ui.guard import OPENER_SECONDS, Settings

if TYPE_CHECKING:
    from collections.abc import Callable
    from types import TracebackType

    import uvicorn

    from mdmem.ui.model import Stores

__all__ = [
    "DEFAULT_HOST",
    "REAP_SECONDS",
    "Server",
    "check_host",
    "is_loopback",
    "private_loopback",
    "reap_children",
]

DEFAULT_HOST = "127.0.0.1"
#: How often a serving page collects its ended child processes.
REAP_SECONDS = 1.0


def reap_children() -> None:
    """Collect the exit status of this process's helpers that have ended, and only theirs.

    ``mdmem ui`` starts two kinds, and waits for neither: the browser launcher
    (``webbrowser`` drops its ``Popen`` at once) and background embedders (one
    per store, :mod:`mdmem.recall.embedder`). Unreaped, each stays a zombie for
    as long as the page is served. ``os.waitpid(-1)`` would also take the status
    of a child another thread waits for (git, say), so only these are reaped.
    """
    import subprocess

    from mdmem.recall import embedder

    embedder.reap()
    # Popen objects dropped while their process still ran (webbrowser's) wait here
    # to be polled; Popen() itself polls them only when the next child starts.
    cleanup = getattr(subprocess, "_cleanup", None)
    if callable(cleanup):
        cleanup()


def _reaper(stop: threading.Event) -> None:
    while not stop.wait(REAP_SECONDS):
        reap_children()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is ``localhost`` or a loopback address (127.0.0.0/8, ::1)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, *, allow_remote: bool = False) -> str | None:
    """Refuse a non-loopback address unless ``allow_remote``; then return a warning to show.

    Raises:
        InvalidOperation: ``host`` is not a loopback address and ``allow_remote`` is False.
    """
    if is_loopback(host):
        return None
    if not allow_remote:
        raise InvalidOperation(
            f"refusing to listen on {host!r}: the page can change your notes, so it listens "
            "on 127.0.0.1 only (--allow-remote to override)",
            "host",
        )
    return (
        f"listening on {host}: anyone who can reach this address and learns the token can "
        "read and change your notes, over plain HTTP"
    )


def private_loopback() -> str:
    """A random loopback address other than ``127.0.0.1`` (``127.x.y.z``, z not 0 or 255)."""
    b = secrets.token_bytes(3)
    return f"127.{b[0]}.{b[1]}.{1 + b[2] % 254}" if b[:2] != b"\0\0" else "127.0.113.7"


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(64)
        sock.setblocking(False)
    except BaseException:
        sock.close()
        raise
    return sock


def _url_host(host: str) -> str:
    return f"[{host.strip('[]')}]" if ":" in host else host


def _host_names(bound: str) -> set[str]:
    """The names a Host header may give for a server bound to ``bound`` (without the port)."""
    names = {"127.0.0.1", "localhost", "[::1]", _url_host(bound).lower()}
    if bound in ("0.0.0.0", "::"):
        # Every address: the names this machine goes by, as best they can be known.
        hostname = socket.gethostname()
        names |= {hostname.lower(), socket.getfqdn().lower()}
        try:
            infos = socket.getaddrinfo(hostname, None)
        except OSError:
            infos = []
        names |= {_url_host(str(info[4][0])).lower() for info in infos}
    return names


class Server:
    """The web page on one socket; see the module docstring.

    Raises:
        InvalidOperation: a non-loopback ``host`` without ``allow_remote``.
        OSError: the address cannot be bound (the port is taken, ...).
    """

    def __init__(
        self,
        stores: Stores,
        *,
        host: str | None = None,
        port: int = 0,
        allow_remote: bool = False,
        on_token: Callable[[str], None] | None = None,
    ) -> None:
        self.warning = check_host(host or DEFAULT_HOST, allow_remote=allow_remote)
        if host is None:
            try:
                sock = _bind(private_loopback(), port)
            except OSError as exc:
                if exc.errno not in (errno.EADDRNOTAVAIL, errno.EADDRINUSE, errno.EINVAL):
                    raise
                sock = _bind(DEFAULT_HOST, port)  # a system with 127.0.0.1 only
            bare = str(sock.getsockname()[0])
        else:
            bare = host.strip("[]")
            if bare.lower() == "localhost":
                bare = DEFAULT_HOST  # one address, so the printed URL is the one that works
            sock = _bind(bare, port)
        self._socket = sock
        self.host = bare
        self.port: int = sock.getsockname()[1]
        names = {f"{name}:{self.port}" for name in _host_names(bare)}
        self.token = secrets.token_urlsafe(32)
        self._on_token = on_token
        self.settings = Settings(
            token=self.token,
            allowed_hosts=frozenset(names),
            # The port, and a secret of this run: two runs on one port never mix cookies.
            cookie_name=f"mdmem-ui-{self.port}-{secrets.token_hex(4)}",
            on_used=self._used,
        )
        self.app = create_app(stores, self.settings)
        self._stores = stores
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._stop_reaping = threading.Event()
        self._reaper = threading.Thread(
            target=_reaper, args=(self._stop_reaping,), name="mdmem-ui-reaper", daemon=True
        )

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT``, without the token."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://{_url_host(host)}:{self.port}"

    @property
    def url(self) -> str:
        """The address to print: it carries a one-time token, which the page swaps for a cookie."""
        return f"{self.base_url}/?token={self.token}"

    def opener_url(self) -> str:
        """An address for a browser opener's command line: its own one-time token, void
        after :data:`~mdmem.ui.guard.OPENER_SECONDS` even unused."""
        return f"{self.base_url}/?token={self.settings.tokens.issue(OPENER_SECONDS)}"

    def _used(self, fresh: str) -> None:
        if self._on_token is not None:
            self._on_token(f"{self.base_url}/?token={fresh}")

    def _uvicorn(self) -> uvicorn.Server:
        import uvicorn

        config = uvicorn.Config(
            self.app,
            log_config=None,
            log_level="warning",
            access_log=False,  # an access log would write the token down
            lifespan="off",
            ws="none",
            http="h11",
            server_header=False,
            date_header=False,
        )
        self._server = uvicorn.Server(config)
        return self._server

    def run(self) -> None:
        """Serve until Ctrl-C (or :meth:`stop` from another thread); then return."""
        from mdmem.ui.features import warm_up

        warm_up()  # the embedding model, if any, loads while the person opens the page
        from mdmem.store import watch

        # Hand edits seen by the next page without a stat of every note (the watch extra).
        watch.start(store.path for store in self._stores.both())
        server = self._uvicorn()
        self._reaper.start()
        try:
            server.run(sockets=[self._socket])
        except KeyboardInterrupt:
            pass  # uvicorn re-raises the Ctrl-C it caught, once it has shut down
        finally:
            self._stop_reaping.set()
            reap_children()
            self._socket.close()

    def start(self) -> Server:
        """Serve from a background thread; return once the server accepts requests."""
        server = self._uvicorn()
        self._thread = threading.Thread(
            target=server.run, kwargs={"sockets": [self._socket]}, name="mdmem-ui", daemon=True
        )
        self._thread.start()
        self._reaper.start()
        while not server.started:
            if not self._thread.is_alive():
                raise OSError(f"the web page's server stopped at start ({self.base_url})")
            self._thread.join(0.01)
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving, and wait for the background thread to end."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None
        self._stop_reaping.set()
        reap_children()
        self._socket.close()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
