"""The life of a fake HTTP server on 127.0.0.1, shared by the fake APIs of the tests.

A subclass says how to build its server (:meth:`LocalServer._new_server`); this
class starts it on a free port, stops it by itself after ``lifetime`` seconds
(a forgotten server is a failure, not a hang), and stops it cleanly: idle
keep-alive connections are shut down so that no handler thread is left
blocked in a read, and every failure seen inside is raised on exit when
``strict``. Handlers call :meth:`opened` and :meth:`closed` around a connection.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from http.server import ThreadingHTTPServer
from types import TracebackType
from typing import ClassVar

from typing_extensions import Self


class LocalServer:
    """Start, watchdog and stop of one threaded HTTP server; a context manager."""

    label: ClassVar[str] = "LocalServer"

    def __init__(self, *, lifetime: float, strict: bool) -> None:
        self._lifetime = lifetime
        self._strict = strict
        self._lock = threading.Condition()
        self._failures: list[str] = []
        self._stopping = threading.Event()
        self._server: ThreadingHTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._watchdog: threading.Timer | None = None
        self._connections: set[socket.socket] = set()
        self._handlers: set[threading.Thread] = set()

    def _new_server(self) -> ThreadingHTTPServer:
        """A server bound to ``("127.0.0.1", 0)`` whose handlers know this object."""
        raise NotImplementedError

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{self.label} is not started")
        return self._server.server_port

    @property
    def failures(self) -> list[str]:
        """What went wrong inside; clear it (``fake.failures.clear()``) when expected."""
        return self._failures

    def start(self) -> Self:
        if self._server is not None:
            raise RuntimeError(f"{self.label} is already started")
        self._stopping.clear()
        self._server = server = self._new_server()
        self._serve_thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._serve_thread.start()
        self._watchdog = threading.Timer(self._lifetime, self._expire)
        self._watchdog.daemon = True
        self._watchdog.start()
        return self

    def stop(self) -> None:
        """Stop serving, drop open connections and wake any delayed reply. Idempotent."""
        server, self._server = self._server, None
        if server is None:
            return
        self._stopping.set()
        if self._watchdog is not None:
            self._watchdog.cancel()
        server.shutdown()
        with self._lock:
            connections = list(self._connections)
            handlers = list(self._handlers)
        # An idle keep-alive connection blocks its handler thread in a read: shut it down.
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        server.server_close()
        for handler in handlers:
            handler.join(timeout=2.0)
        if self._serve_thread is not None:
            self._serve_thread.join(timeout=2.0)

    def opened(self, connection: socket.socket) -> None:
        """A handler's connection began (called from its thread)."""
        with self._lock:
            self._connections.add(connection)
            self._handlers.add(threading.current_thread())

    def closed(self, connection: socket.socket) -> None:
        """A handler's connection ended (called from its thread)."""
        with self._lock:
            self._connections.discard(connection)
            self._handlers.discard(threading.current_thread())

    def _fail(self, reason: str) -> None:
        with self._lock:
            self._failures.append(reason)

    def _expire(self) -> None:
        self._fail(f"{self.label} outlived its lifetime of {self._lifetime}s and stopped itself")
        self.stop()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        if self._strict and exc_type is None and self._failures:
            raise AssertionError(f"{self.label}: " + "; ".join(self._failures))
