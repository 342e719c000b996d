"""The timeline pages of ``mdmem ui``: past sessions, and one session's record.

Its own module, so the rest of the page needs only two routes for it
(``/timeline`` and ``/session/{id}``, registered in :mod:`mdmem.ui.app`). Every
value shown comes from a record file (which a cloned repository may supply, in
project mode), so every value is escaped; the notes a session wrote link to
their pages.
"""

from __future__ import annotations

from mdmem.store import sessions as records
from mdmem.ui import layout
from mdmem.ui.html import Markup, escape, fill, join

__all__ = ["session_page", "timeline_page"]

#: At most this many sessions on the timeline page.
PAGE_SIZE = 100


def _entry(session: records.Session) -> Markup:
    state = "" if session.ended else " (open)"
    return fill(
        '<li><a href="/session/{sid}">{when}{state}</a> {summary}'
        '<div class="meta">{branch}{files}</div></li>',
        sid=records.safe_id(session.session_id),
        when=session.started[:16].replace("T", " ") or "undated",
        state=state,
        summary=session.summary or records.built_summary(session),
        branch=f"branch {session.branch} · " if session.branch else "",
        files=", ".join(session.files[:5]) or "no file changed",
    )


def timeline_page(store_path: str) -> Markup:
    """The list of sessions, newest first."""
    found = records.timeline(store_path, limit=PAGE_SIZE)
    if not found:
        return Markup(
            "<h1>Timeline</h1><p>No session recorded yet. Sessions are recorded by the "
            "Claude Code hooks and by <code>update_async(session_id=...)</code>.</p>"
        )
    return Markup(
        '<h1>Timeline</h1><ul class="timeline">' + join(_entry(s) for s in found) + "</ul>"
    )


def _section(title: str, items: list[Markup]) -> Markup:
    if not items:
        return Markup()
    rows = join(fill("<li>{x}</li>", x=x) for x in items)
    return Markup(fill("<h2>{title}</h2>", title=title) + "<ul>" + rows + "</ul>")


def session_page(store_path: str, session_id: str) -> Markup | None:
    """One session's record, its notes linked; None when there is no such session."""
    session = records.load(store_path, session_id)
    if session is None:
        return None
    code = [fill("<code>{x}</code>", x=x) for x in session.files]
    commands = [fill("<code>{x}</code>", x=x) for x in session.commands]
    tests = [
        fill("<code>{c}</code> — {o}", c=c, o=o or "outcome not said") for c, o in session.tests
    ]
    notes = [
        fill('<a href="{url}">{name}</a> ({level})', url=layout.note_url(lv, n), name=n, level=lv)
        for lv, n in session.notes
    ]
    head = fill(
        '<h1>{title}</h1><p class="meta">Session <code>{sid}</code> · {started} → {ended}'
        "{branch}</p><p>{summary}</p>",
        title=session.title,
        sid=session.session_id,
        started=session.started or "undated",
        ended=session.ended or "open",
        branch=f" · branch {session.branch}" if session.branch else "",
        summary=session.summary or records.built_summary(session),
    )
    ended = fill("<p>How it ended: {x}</p>", x=session.ended_with) if session.ended_with else ""
    return Markup(
        head
        + escape(ended)
        + _section("Goals", [escape(g) for g in session.goals])
        + _section("Files changed", code)
        + _section("Commands", commands)
        + _section("Tests", tests)
        + _section("Notes written", notes)
        + Markup('<p><a href="/timeline">All sessions</a></p>')
    )
