"""The guard in front of the web page: what every request passes before any page is built.

- the ``Host`` header must name this server on a loopback address
  (``127.0.0.1:PORT``, ``localhost:PORT``, ``[::1]:PORT``), so a web site
  that rebinds its DNS name to 127.0.0.1 cannot reach the page;
- the token from the URL ``mdmem ui`` printed is exchanged for an
  ``HttpOnly``, ``SameSite=Strict`` cookie (a secret of its own), and the
  browser is sent to the same address without the token; anything without
  the cookie is refused, but the style sheet and the icon;
- a POST that says it comes from elsewhere (``Origin``, ``Sec-Fetch-Site``)
  is refused (the CSRF token of every form is checked by the pages);
- only GET, HEAD and POST are served, with no CORS headers at all, and
  every response carries a Content-Security-Policy that allows no script, no
  frame and no foreign resource.
"""

from __future__ import annotations

import hmac
import secrets
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, urlencode

from starlette.requests import cookie_parser
from starlette.responses import HTMLResponse, RedirectResponse, Response

from mdmem.ui import layout

if TYPE_CHECKING:
    from collections.abc import Mapping

    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["CSP", "SECURITY_HEADERS", "Guard", "Settings", "same"]

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
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


@dataclass(frozen=True)
class Settings:
    """One run's secrets and where it may be reached; nothing else lives in the app."""

    token: str
    allowed_hosts: frozenset[str]
    cookie_name: str = "mdmem-ui"
    session: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))


def same(given: str | None, expected: str) -> bool:
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
        if "token" in query:
            await self._exchange(scope, query)(scope, receive, secured)
            return
        if not same(self._cookie(headers), self.settings.session):
            if scope["path"] in ("/static/style.css", "/static/icon.svg"):
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
            origin = headers.get("origin")
            if origin is not None and origin.lower() != f"http://{host}":
                return plain_error(403, "A form from another site was refused.")
            site = headers.get("sec-fetch-site")
            if site is not None and site not in ("same-origin", "none"):
                return plain_error(403, "A request from another site was refused.")
        return None

    def _cookie(self, headers: Mapping[str, str]) -> str | None:
        # Lenient, like browsers: other pages on localhost may have set odd cookies.
        return cookie_parser(headers.get("cookie", "")).get(self.settings.cookie_name)

    def _exchange(self, scope: Scope, query: dict[str, list[str]]) -> Response:
        if not same(query["token"][0], self.settings.token):
            return plain_error(403, "This token is not the one of this run of `mdmem ui`.")
        rest = {k: v for k, v in query.items() if k != "token"}
        target = scope["path"] + ("?" + urlencode(rest, doseq=True) if rest else "")
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
