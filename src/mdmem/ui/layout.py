"""The frame of every page (head, skip link, navigation, messages), and the pieces the
pages share: links to notes, buttons that POST, messages, error pages.

Everything is built with :func:`mdmem.ui.html.fill`, which escapes what it fills.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING
from urllib.parse import quote, urlencode

from mdmem.store.note import format_time
from mdmem.ui.html import Markup, attrs, fill, join

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from datetime import datetime

    from mdmem._kinds import Level

__all__ = [
    "button_form",
    "csrf_field",
    "done_message",
    "error_page",
    "layout",
    "live_marker",
    "markers_html",
    "note_url",
    "notice",
    "options",
    "query_string",
    "time_html",
]


def note_url(level: Level | str, filename: str, tail: str = "") -> str:
    """The page of a note; ``tail`` is ``/edit``, ``/source``, ``/raw``, ``/delete``, ..."""
    return f"/note/{quote(str(level), safe='')}/{quote(filename, safe='')}{tail}"


def time_html(moment: datetime | None) -> Markup:
    if moment is None:
        return Markup("—")
    text = format_time(moment)
    return fill(
        '<time datetime="{iso}">{short}</time>', iso=text, short=text[:16].replace("T", " ")
    )


_LAYOUT = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="same-origin">
<title>{title} · mdmem</title>
<link rel="stylesheet" href="/static/style.css">
<link rel="icon" href="/static/icon.svg" type="image/svg+xml">
{scripts}</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<a class="brand" href="/">mdmem</a>
<nav aria-label="Main">{nav}</nav>
<p class="where" title="{workspace}">{folder}</p>
</header>
<main id="main" tabindex="-1">
{message}{body}
</main>
</body>
</html>
"""

_NAV = (
    ("notes", "/", "Notes"),
    ("activity", "/activity", "Activity"),
    ("overview", "/overview", "Overview"),
    ("trash", "/trash", "Trash"),
    ("stores", "/switch", "Stores"),
)


def layout(
    title: str,
    body: Markup,
    *,
    workspace: str,
    current: str = "",
    message: Markup | None = None,
    review: bool = False,
    live: bool = False,
) -> Markup:
    """A whole page: head, skip link, navigation, the message of the last action, the body.

    ``live``: the page reloads itself when the stores change (``/static/live.js``, a
    small poll of ``/live``); without scripts it is the same page, reloaded by hand.
    """
    items = list(_NAV)
    if review:
        items.insert(2, ("review", "/review", "Review"))
    nav = join(
        fill(
            '<a href="{href}"{current}>{label}</a>',
            href=href,
            label=label,
            current=Markup(' aria-current="page"') if key == current else Markup(""),
        )
        for key, href, label in items
    )
    return fill(
        _LAYOUT,
        title=title,
        nav=nav,
        workspace=workspace,
        folder=os.path.basename(workspace.rstrip("/")) or workspace,
        message=message or Markup(""),
        body=body,
        scripts=Markup('<script src="/static/live.js" defer></script>\n') if live else "",
    )


def live_marker(version: str) -> Markup:
    """What a live page carries: the stores' version it shows, and a reload link."""
    return fill(
        '<p class="live" id="live" data-version="{v}"><span class="live-dot" aria-hidden="true">'
        "</span> Refreshes by itself when memory changes (with scripts on) · "
        '<a href="">Reload</a></p>\n',
        v=version,
    )


def notice(text: str, *, error: bool = False, extra: Markup | None = None) -> Markup:
    """A message box; an error is announced to screen readers at once."""
    role = "alert" if error else "status"
    css = "notice error" if error else "notice"
    return fill(
        '<div class="{css}" role="{role}"><p>{text}</p>{extra}</div>\n',
        css=css,
        role=role,
        text=text,
        extra=extra or Markup(""),
    )


def csrf_field(token: str) -> Markup:
    """The hidden field every form that changes something carries."""
    return fill('<input type="hidden" name="csrf" value="{token}">', token=token)


def button_form(action: str, label: str, csrf: str, *, css: str = "", **hidden: str) -> Markup:
    """A form with one button that POSTs to ``action``: a real button, keyboard-reachable."""
    fields = join(
        fill('<input type="hidden" name="{k}" value="{v}">', k=k, v=v) for k, v in hidden.items()
    )
    return fill(
        '<form class="inline" method="post" action="{action}">{csrf}{fields}'
        '<button type="submit"{css}>{label}</button></form>',
        action=action,
        csrf=csrf_field(csrf),
        fields=fields,
        css=attrs(class_=css or None),
        label=label,
    )


def options(choices: Iterable[tuple[str, str]], selected: str) -> Markup:
    return join(
        fill(
            '<option value="{v}"{sel}>{label}</option>',
            v=value,
            label=label,
            sel=attrs(selected=value == selected),
        )
        for value, label in choices
    )


def markers_html(markers: Mapping[str, str]) -> Markup:
    return join(
        fill('<span class="marker marker-{key}">{words}</span> ', key=key, words=words)
        for key, words in sorted(markers.items())
    )


def error_page(status: int, text: str) -> Markup:
    """The body of an error page."""
    titles = {400: "Bad request", 403: "Forbidden", 404: "Not found", 409: "Conflict"}
    return fill(
        '<h1>{title}</h1>\n{notice}<p><a href="/">Back to the notes</a></p>\n',
        title=titles.get(status, "Error"),
        notice=notice(text, error=True),
    )


def done_message(done: str, level: str, filename: str, csrf: str) -> Markup | None:
    """The message shown after an action (named in the redirect's query, never stored)."""
    if done == "deleted":
        undo = button_form("/trash/restore", "Undo", csrf, level=level, filename=filename)
        return notice(f"Moved {filename} to the trash.", extra=undo)
    words = {
        "saved": f"Saved {filename}.",
        "unchanged": f"No changes to {filename}.",
        "restored": f"Restored {filename}.",
        "expired": f"Marked {filename} expired: it is left out of the prompt block from now on.",
        "accepted": "Accepted the proposal.",
        "switched": "Switched: the page now shows this workspace's notes.",
        "dismissed": f"Dismissed the dispute of {filename}: it ranks as before.",
        "disputed": f"The dispute of {filename} counts again.",
        "rejected": "Rejected the proposal.",
    }
    return notice(words[done]) if done in words else None


def query_string(**values: str) -> str:
    """``?a=b&c=d`` for the values that are set."""
    kept = {k: v for k, v in values.items() if v}
    return "?" + urlencode(kept) if kept else ""
