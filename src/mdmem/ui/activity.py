"""What memory did, session by session: the activity view's data and its pages.

Fed by the sessions' activity logs (:mod:`mdmem.store.activity`: what the
SessionStart hook injected, what each prompt recalled, what each turn wrote
and its tokens) and by the usage ledger (:mod:`mdmem.store.ledger`: the day's
model calls and tokens, over every workspace).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mdmem.store import activity, ledger
from mdmem.ui.html import Markup, fill, join
from mdmem.ui.layout import note_url, query_string

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mdmem.store.store import Store

__all__ = ["Session", "activity_page", "day_totals", "session_page", "sessions_of", "today"]


@dataclass(frozen=True)
class Session:
    """One session as the activity list shows it."""

    id: str
    started: float
    changed: float
    injected: int
    prompts: int
    recalled: int
    written: int
    tokens: int
    """What memory put in the context (blocks), plus the model's tokens for the turns."""


def today() -> str:
    """Today's date (UTC, as the ledger counts days)."""
    return datetime.now(timezone.utc).date().isoformat()


def _count(names: object) -> int:
    if isinstance(names, dict):
        return sum(len(v) for v in names.values() if isinstance(v, list))
    return len(names) if isinstance(names, list) else 0


def _int(value: object) -> int:
    return int(value) if isinstance(value, (int, float)) and value > 0 else 0


def _summary(root: str, ident: str, started: float, changed: float) -> Session:
    injected = prompts = recalled = written = tokens = 0
    for event in activity.read(root, ident):
        kind = event.get("k")
        if kind == "start":
            injected += _count(event.get("n"))
            tokens += _int(event.get("tokens"))
        elif kind == "recall":
            prompts += 1
            recalled += _count(event.get("n"))
            tokens += _int(event.get("tokens"))
        elif kind == "write":
            written += _count(event.get("n"))
            tokens += _int(event.get("in")) + _int(event.get("out"))
    return Session(ident, started, changed, injected, prompts, recalled, written, tokens)


def sessions_of(project: Store, day: str | None = None, limit: int = 100) -> list[Session]:
    """The sessions of the workspace, newest first (those active on ``day`` if given)."""
    found = []
    for ident, started, changed in activity.sessions(project.path):
        if day is not None and day not in (ledger.day_of(started), ledger.day_of(changed)):
            continue
        found.append(_summary(project.path, ident, started, changed))
        if len(found) >= limit:
            break
    return found


def day_totals(user: Store, day: str) -> Mapping[str, int]:
    """The ledger's totals of ``day``: model calls and tokens (all workspaces), turns
    skipped or held by the budget."""
    days = ledger.load(user.path).get("days")
    found = days.get(day) if isinstance(days, dict) else None
    return {str(k): _int(v) for k, v in found.items()} if isinstance(found, dict) else {}


def _when(t: float) -> Markup:
    moment = datetime.fromtimestamp(t, timezone.utc).replace(microsecond=0)
    iso = moment.isoformat()
    return fill('<time datetime="{iso}">{short}</time>', iso=iso, short=iso[:16].replace("T", " "))


def activity_page(
    sessions: Sequence[Session], totals: Mapping[str, int], *, day: str | None, live: Markup
) -> Markup:
    """The list of sessions (all recent ones, or one day's), with the day's ledger totals."""
    links = fill(
        '<p class="tabs"><a href="/activity"{a}>Recent sessions</a> '
        '<a href="/activity?day=today"{t}>Today</a></p>',
        a=Markup(' aria-current="page"') if day is None else Markup(""),
        t=Markup(' aria-current="page"') if day is not None else Markup(""),
    )
    summary = Markup("")
    if day is not None:
        calls = totals.get("calls", 0)
        spent = totals.get("in", 0) + totals.get("out", 0)
        summary = fill(
            '<p class="totals">{day}: <strong>{calls}</strong> model call{cs}, '
            "<strong>{spent}</strong> tokens (in {i}, out {o}, cache read {cr}); "
            "{skip} turn{ss} not worth a call, {held} held by the daily budget.</p>\n",
            day=day,
            calls=f"{calls:,}",
            cs="" if calls == 1 else "s",
            spent=f"{spent:,}",
            i=f"{totals.get('in', 0):,}",
            o=f"{totals.get('out', 0):,}",
            cr=f"{totals.get('cr', 0):,}",
            skip=totals.get("skip", 0),
            ss="" if totals.get("skip", 0) == 1 else "s",
            held=totals.get("held", 0),
        )
    if not sessions:
        table = Markup(
            '<p class="empty">No session recorded yet: the Claude Code hooks record what '
            "they inject and recall (<code>mdmem install claude-code</code>).</p>\n"
        )
    else:
        rows = join(
            fill(
                '<tr><td data-label="Session"><a href="{href}">{short}</a></td>'
                '<td data-label="Started">{started}</td><td data-label="Last">{changed}</td>'
                '<td data-label="Injected">{injected}</td>'
                '<td data-label="Prompts">{prompts} ({recalled} recalled)</td>'
                '<td data-label="Written">{written}</td><td data-label="Tokens">{tokens}</td>'
                "</tr>\n",
                href=f"/activity/{s.id}",
                short=s.id[:8],
                started=_when(s.started),
                changed=_when(s.changed),
                injected=s.injected,
                prompts=s.prompts,
                recalled=s.recalled,
                written=s.written,
                tokens=f"{s.tokens:,}",
            )
            for s in sessions
        )
        table = fill(
            """<table class="sessions"><caption>Sessions, newest first (times in UTC)</caption>
<thead><tr><th scope="col">Session</th><th scope="col">Started</th><th scope="col">Last</th>
<th scope="col">Injected</th><th scope="col">Prompts</th><th scope="col">Written</th>
<th scope="col">Tokens</th></tr></thead>
<tbody>{rows}</tbody></table>
""",
            rows=rows,
        )
    return fill(
        "<h1>Activity</h1>\n{live}{links}{summary}{table}",
        live=live,
        links=links,
        summary=summary,
        table=table,
    )


def _names(names: object) -> Markup:
    """Links to the notes an event names (``{level: [names]}`` or ``[[level, action, name]]``)."""
    items: list[Markup] = []
    if isinstance(names, dict):
        for level, found in sorted(names.items()):
            for name in found if isinstance(found, list) else []:
                items.append(_note(str(level), str(name), ""))
    elif isinstance(names, list):
        for entry in names:
            if isinstance(entry, list) and len(entry) == 3:
                items.append(_note(str(entry[0]), str(entry[2]), str(entry[1])))
    if not items:
        return Markup("")
    listed = fill('<ul class="names">{items}</ul>', items=join(items))
    if len(items) <= 5:
        return listed
    # A long list (a SessionStart block) folds away; <details> needs no script.
    return fill(
        "<details><summary>the {n} notes</summary>{listed}</details>", n=len(items), listed=listed
    )


def _note(level: str, name: str, action: str) -> Markup:
    if level not in ("project", "user"):
        return Markup("")
    return fill(
        '<li>{action}<a href="{href}">{name}</a> <span class="hint">{level}</span></li>',
        action=fill('<span class="action">{a}</span> ', a=action) if action else "",
        href=note_url(level, name),
        name=name,
        level=level,
    )


def _short(turn: str) -> str:
    return turn if len(turn) <= 12 else "…" + turn[-8:]


def session_page(ident: str, events: Sequence[Mapping[str, object]], *, live: Markup) -> Markup:
    """One session: what was injected at its start, recalled per prompt, written per turn."""
    items = []
    for event in events:
        kind = event.get("k")
        t = event.get("t")
        when = _when(float(t)) if isinstance(t, (int, float)) else Markup("")
        names = event.get("n")
        if kind == "start":
            head = fill(
                "Session start: <strong>{n}</strong> notes injected, about {tok} tokens",
                n=_count(names),
                tok=f"{_int(event.get('tokens')):,}",
            )
        elif kind == "recall":
            count = _count(names)
            head = fill(
                "Prompt “{p}”: {what}",
                p=str(event.get("prompt") or ""),
                what=fill(
                    "<strong>{n}</strong> recalled, about {tok} tokens",
                    n=count,
                    tok=f"{_int(event.get('tokens')):,}",
                )
                if count
                else Markup("nothing recalled"),
            )
        elif kind == "write":
            head = fill(
                "Turn {turn} wrote <strong>{n}</strong>; the model spent {i} tokens in, {o} out",
                turn=_short(str(event.get("turn") or "")),
                n=_count(names),
                i=f"{_int(event.get('in')):,}",
                o=f"{_int(event.get('out')):,}",
            )
        else:
            continue
        items.append(
            fill(
                '<li class="event event-{kind}"><p>{when} {head}</p>{names}</li>\n',
                kind=str(kind),
                when=when,
                head=head,
                names=_names(names),
            )
        )
    body = (
        fill('<ol class="timeline">{items}</ol>', items=join(items))
        if items
        else Markup('<p class="empty">Nothing recorded for this session.</p>')
    )
    return fill(
        '<h1>Session {short}</h1>\n{live}<p class="hint">{ident} · '
        '<a href="/activity">All sessions</a> · <a href="{today}">Today</a> · '
        '<a href="{record}">What the agent did (timeline)</a></p>\n{body}',
        short=ident[:8],
        ident=ident,
        record=f"/session/{ident}",
        live=live,
        today="/activity" + query_string(day="today"),
        body=body,
    )
