"""The guard in front of the web page: what every request passes before any page is built.

- the ``Host`` header must name this server on a loopback address
  (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``), so a web site
  that rebinds its DNS name to 127.0.0.1 cannot reach the page;
- a token from an address ``mdmem ui`` made works **once**: it is exchanged
  for an ``HttpOnly``, ``SameSite=Strict`` cookie (a secret of its own, under
  a name made of the port and a secret of this run), then is void, and the
  browser is sent to the same address without it. A token in a browser's
  command line or history is useless once the browser used it, and the
  address handed to a browser opener is void after two minutes anyway.
  Anything without the cookie is refused, but the style sheet and the icon;
- cookies ignore ports: a cookie of ``127.0.0.1`` reaches every server on
  ``127.0.0.1``. So the server listens on an address of its own in
  ``127.0.0.0/8`` where the system allows (see :mod:`mdmem.ui.server`): its
  cookie is never sent to another local server;
- a POST must say it comes from the page itself (``Origin``, else
  ``Sec-Fetch-Site: same-origin``), or it is refused (the CSRF token of every
  form is checked by the pages too);
- only GET, HEAD and POST are served, with no CORS headers at all, and
  every response carries a Content-Security-Policy that allows no inline
  script, no frame and no foreign resource (the one script is the page's own
  file, which reloads the live pages).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode

from starlette.requests import cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mdmem.ui import layout

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "OPENER_SECONDS", "SECURITY_HEADERS", "Guard", "Settings", "Tokens", "same"]

# Scripts: only the page's own file (/static/live.js, on the live pages), never inline,
# never eval; it may fetch from this origin only.
CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    # Not no-referrer: with it, a browser sends "Origin: null" on the page's own forms.
    "referrer-policy": "same-origin",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
    "cross-origin-opener-policy": "same-origin",
    "cross-origin-resource-policy": "same-origin",
}


#: How long the address handed to a browser opener stays usable, unused (seconds).
OPENER_SECONDS = 120.0


class Tokens:
    """The one-time tokens of a run: each is exchanged once for the cookie, then void.

    ``issue()`` makes one (with ``ttl``: void after that many seconds even
    unused); ``take(token)`` says whether it was live, and voids it. Thread-safe:
    two requests racing with one token get one cookie between them.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._live: dict[str, float | None] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def issue(self, ttl: float | None = None) -> str:
        """A fresh one-time token."""
        token = secrets.token_urlsafe(32)
        with self._lock:
            self._live[token] = None if ttl is None else self._clock() + ttl
        return token

    def add(self, token: str, ttl: float | None = None) -> str:
        """Make ``token`` a live one-time token (a test's, or one made elsewhere)."""
        with self._lock:
            self._live[token] = None if ttl is None else self._clock() + ttl
        return token

    def take(self, given: str) -> bool:
        """Whether ``given`` is a live token; it is void from now on either way."""
        with self._lock:
            found = None
            for token in self._live:
                if same(given, token):
                    found = token
            if found is None:
                return False
            deadline = self._live.pop(found)
        return deadline is None or self._clock() < deadline


@dataclass(frozen=True)
class Settings:
    """One run's secrets and where it may be reached; nothing else lives in the app.

    ``token`` is the first one-time token (the printed address's); more come
    from :attr:`tokens`. ``on_used`` is told when a printed token was used, with
    a fresh one for another browser (the command prints it).
    """

    token: str
    allowed_hosts: frozenset[str]
    cookie_name: str = "mdmem-ui"
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    tokens: Tokens = field(default_factory=Tokens)
    on_used: Callable[[str], None] | None = None

    def __post_init__(self) -> None:
        self.tokens.add(self.token)


def same(given: str | None, expected: str) -> bool:
    """Whether two secrets are equal, in constant time."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


class Guard:
    """The checks every request passes before it reaches a page (see the module docstring)."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return  # no websockets, and the lifespan has nothing to start
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [
                    (k, v) for k, v in message.get("headers", []) if not k.startswith(b"access-")
                ]
                raw += [(k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]
                message = {**message, "headers": raw}
            await send(message)

        refusal = self._refuse(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, secured)
            return
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
        logged_in = same(self._cookie(headers), self.settings.session)
        if "token" in query:
            await self._exchange(scope, query, logged_in)(scope, receive, secured)
            return
        if not logged_in:
            if scope["path"] in ("/static/style.css", "/static/icon.svg", "/static/live.js"):
                await self.app(scope, receive, secured)  # the error page may be styled
                return
            await plain_error(
                403,
                "Open this page with the address `mdmem ui` printed: it carries this run's token.",
            )(scope, receive, secured)
            return
        await self.app(scope, receive, secured)

    def _refuse(self, scope: Scope, headers: Mapping[str, str]) -> Response | None:
        host = headers.get("host", "").lower()
        if host not in self.settings.allowed_hosts:
            # DNS rebinding: a foreign name that resolves to this machine.
            return plain_error(421, "This server answers only to its own loopback address.")
        if scope["method"] not in ("GET", "HEAD", "POST"):
            return plain_error(405, "Only GET and POST are served here.")
        if scope["method"] == "POST":
            # Every change must say where it comes from: a browser sends Origin on
            # every POST; a request that says nothing is not from the page.
            origin = headers.get("origin")
            site = headers.get("sec-fetch-site")
            if origin is not None and origin.lower() != f"http://{host}":
                return plain_error(403, "A form from another site was refused.")
            if site is not None and site != "same-origin":
                return plain_error(403, "A request from another site was refused.")
            if origin is None and site is None:
                return plain_error(403, "A change that does not say it comes from this page.")
        return None

    def _cookie(self, headers: Mapping[str, str]) -> str | None:
        # Lenient, like browsers: other pages on localhost may have set odd cookies.
        return cookie_parser(headers.get("cookie", "")).get(self.settings.cookie_name)

    def _exchange(self, scope: Scope, query: dict[str, list[str]], logged_in: bool) -> Response:
        rest = {k: v for k, v in query.items() if k != "token"}
        target = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
        live = self.settings.tokens.take(query["token"][0])
        if not live:
            if logged_in:  # an old address again, in the browser that used it: fine
                return RedirectResponse(target, status_code=303)
            return plain_error(
                403,
                "This address was already used, or is not one of this run of `mdmem ui`: "
                "each works once. Use the newest address `mdmem ui` printed.",
            )
        if self.settings.on_used is not None:
            self.settings.on_used(self.settings.tokens.issue())
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            self.settings.cookie_name,
            self.settings.session,
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response


def plain_error(status: int, text: str) -> Response:
    body = layout.layout("Error", layout.error_page(status, text), workspace="")
    return HTMLResponse(body, status_code=status)
