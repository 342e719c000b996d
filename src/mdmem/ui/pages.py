"""The pages of the web page, as HTML built from escaped templates (no JavaScript at all).

Each function returns a whole page or a piece of one as :class:`Markup`; what
a note says is escaped everywhere, and its body goes through the safe
Markdown renderer. Links and buttons are real ``<a>`` and ``<button>``
elements, so the page works from the keyboard and without scripts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidPath
from mdmem.store.note import KNOWN_KEYS
from mdmem.store.paths import check_name
from mdmem.ui import diff, markdown
from mdmem.ui.html import Markup, fill, join
from mdmem.ui.layout import (
    button_form,
    csrf_field,
    markers_html,
    note_url,
    notice,
    options,
    query_string,
    time_html,
)
from mdmem.ui.model import SORTS

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from mdmem.store.note import Note
    from mdmem.store.results import Problem, TrashItem
    from mdmem.ui.model import Overview, Row

__all__ = [
    "broken_page",
    "edit_page",
    "history_page",
    "list_page",
    "note_page",
    "overview_page",
    "proposal_page",
    "review_page",
    "source_page",
    "trash_page",
]


# -- the list ----------------------------------------------------------------------


def _filters(query: str, level: str, note_type: str, sort: str) -> Markup:
    levels = [("", "both stores"), ("project", "project"), ("user", "user")]
    types = [("", "any type"), *((t.value, t.value) for t in NoteType)]
    sorts = [("", "relevance" if query else "newest first")]
    sorts += [(k, v) for k, v in SORTS.items() if k != "updated" or query]
    return fill(
        """<form class="filters" method="get" action="/" role="search">
<p><label for="q">Search</label>
<input id="q" name="q" type="search" value="{query}" placeholder="words from a note"></p>
<p><label for="level">Level</label> <select id="level" name="level">{levels}</select></p>
<p><label for="type">Type</label> <select id="type" name="type">{types}</select></p>
<p><label for="sort">Sort</label> <select id="sort" name="sort">{sorts}</select></p>
<p><button type="submit">Show</button> <a href="/">Clear</a></p>
</form>
""",
        query=query,
        levels=options(levels, level),
        types=options(types, note_type),
        sorts=options(sorts, sort),
    )


def _row(row: Row) -> Markup:
    snippet = fill('<p class="snippet">{s}</p>', s=row.snippet) if row.snippet else Markup("")
    summary = fill('<p class="summary">{s}</p>', s=row.summary) if row.summary else Markup("")
    return fill(
        """<tr>
<td data-label="Note"><a class="title" href="{href}">{title}</a>{summary}{snippet}
<p class="file">{filename}</p></td>
<td data-label="Type">{type}</td>
<td data-label="Level">{level}</td>
<td data-label="Updated">{updated}</td>
<td data-label="Markers">{markers}</td>
</tr>
""",
        href=note_url(row.level, row.filename),
        title=row.title or row.filename,
        summary=summary,
        snippet=snippet,
        filename=row.filename,
        type=row.type,
        level=row.level.value,
        updated=time_html(row.updated),
        markers=markers_html(row.markers),
    )


def _problems(problems: Sequence[tuple[Level, Problem]]) -> Markup:
    if not problems:
        return Markup("")
    items = join(
        fill(
            '<li><a href="{href}">{name}</a> ({level}): {reason}</li>',
            href=note_url(level, p.filename, "/source"),
            name=p.filename,
            level=level.value,
            reason=p.reason,
        )
        if _linkable(p)
        else fill(
            "<li>{name} ({level}): {reason}</li>",
            name=p.filename,
            level=level.value,
            reason=p.reason,
        )
        for level, p in problems
    )
    return fill(
        '<section class="problems" aria-labelledby="problems"><h2 id="problems">'
        "Files that cannot be read as notes</h2><ul>{items}</ul></section>\n",
        items=items,
    )


def _linkable(problem: Problem) -> bool:
    try:
        check_name(problem.filename)
    except InvalidPath:
        return False
    return True


def list_page(
    rows: Sequence[Row],
    *,
    query: str,
    level: str,
    note_type: str,
    sort: str,
    problems: Sequence[tuple[Level, Problem]],
    page: int = 1,
    size: int = 50,
    total: int | None = None,
    more: bool = False,
) -> Markup:
    """One page of the list of notes (or of search results), with the search and filter
    form and links to the pages before and after."""
    first = (page - 1) * size + 1
    if rows:
        last = first + len(rows) - 1
        if total is None and page == 1 and not more:
            total = len(rows)  # every result is on this page
        if total is not None and total == len(rows):
            caption = f"{total:,} note{'s' if total != 1 else ''}"
        elif total is not None:
            caption = f"{first:,}–{last:,} of {total:,} note{'s' if total != 1 else ''}"
        else:
            caption = f"results {first:,}–{last:,}"
        if query:
            caption += f" matching “{query}”"
        table = fill(
            """<table class="notes">
<caption>{caption}</caption>
<thead><tr><th scope="col">Note</th><th scope="col">Type</th><th scope="col">Level</th>
<th scope="col">Updated</th><th scope="col">Markers</th></tr></thead>
<tbody>
{rows}</tbody>
</table>
""",
            caption=caption,
            rows=join(_row(r) for r in rows),
        )
    elif page > 1:
        table = Markup('<p class="empty">No notes on this page.</p>')
    else:
        table = fill(
            '<p class="empty">{t}</p>', t="No note matches." if query else "No notes here yet."
        )
    kept = {"q": query, "level": level, "type": note_type, "sort": sort}
    links = []
    if page > 1:
        href = "/" + query_string(**kept, page=str(page - 1) if page > 2 else "")
        links.append(fill('<a rel="prev" href="{h}">← Previous page</a>', h=href))
    if more:
        href = "/" + query_string(**kept, page=str(page + 1))
        links.append(fill('<a rel="next" href="{h}">Next page →</a>', h=href))
    pager = (
        fill('<nav class="pager" aria-label="Pages">{l}</nav>\n', l=join(links, " "))
        if links
        else Markup("")
    )
    return fill(
        "<h1>Notes</h1>\n{filters}{problems}{table}{pager}",
        filters=_filters(query, level, note_type, sort),
        problems=_problems(problems),
        table=table,
        pager=pager,
    )


# -- one note ----------------------------------------------------------------------


def _extra(note: Note) -> Markup:
    pairs = [(k, v) for k, v in note.extra.items() if k not in KNOWN_KEYS]
    return join(
        fill(
            "<dt>{k}</dt><dd>{v}</dd>", k=k, v=", ".join(map(str, v)) if isinstance(v, list) else v
        )
        for k, v in pairs
    )


def note_page(
    level: Level,
    note: Note,
    markers: Mapping[str, str],
    csrf: str,
    *,
    base: str,
    history: bool,
    dispute: tuple[str, Mapping[str, str]] | None = None,
) -> Markup:
    """A note rendered as Markdown, its front matter, and what can be done with it.

    ``base`` is the digest of the file as shown, so that marking it expired
    never overwrites a change made meanwhile.
    """
    links = [
        fill('<a class="button" href="{h}">Edit</a>', h=note_url(level, note.filename, "/edit")),
        fill(
            '<a class="button" href="{h}">Edit the file</a>',
            h=note_url(level, note.filename, "/source"),
        ),
        fill('<a href="{h}">Raw file</a>', h=note_url(level, note.filename, "/raw")),
    ]
    if history:
        links.append(
            fill('<a href="{h}">History</a>', h=note_url(level, note.filename, "/history"))
        )
    if "expired" not in markers:
        links.append(
            button_form(note_url(level, note.filename, "/expire"), "Mark expired", csrf, base=base)
        )
    links.append(
        button_form(note_url(level, note.filename, "/delete"), "Delete", csrf, css="danger")
    )
    summary = fill('<p class="lead">{s}</p>', s=note.summary) if note.summary else Markup("")
    return fill(
        """<article class="note">
<h1>{title}</h1>
{summary}<div class="actions">{actions}</div>
{dispute}
<dl class="meta">
<dt>Level</dt><dd>{level}</dd><dt>Type</dt><dd>{type}</dd><dt>File</dt><dd>{filename}</dd>
<dt>Created</dt><dd>{created}</dd><dt>Updated</dt><dd>{updated}</dd>
{markers}{extra}</dl>
<div class="body">{body}</div>
</article>
""",
        title=note.title,
        summary=summary,
        actions=join(links, " "),
        level=level.value,
        type=note.type.value,
        filename=note.filename,
        created=time_html(note.created),
        updated=time_html(note.updated),
        markers=fill("<dt>Markers</dt><dd>{m}</dd>", m=markers_html(markers)) if markers else "",
        extra=_extra(note),
        body=Markup(markdown.render(note.body)),
        dispute=_dispute(level, note.filename, dispute, csrf),
    )


def _dispute(
    level: Level, filename: str, dispute: tuple[str, Mapping[str, str]] | None, csrf: str
) -> Markup:
    """Why a note is disputed (the correction's words, in full), and the button to dismiss
    a false dispute; or a dismissed one, with the button to make it count again."""
    if dispute is None:
        return Markup("")
    kind, details = dispute
    when = details.get("at", "")[:16].replace("T", " ")
    if kind == "disputed":
        count = details.get("count", "1")
        return fill(
            """<section class="dispute" aria-labelledby="dispute">
<h2 id="dispute">Disputed</h2>
<p>A correction seemed to contradict this note ({count}×, last {when}); recall ranks it
lower until a turn confirms it again. The user said:</p>
<blockquote>{reason}</blockquote>
<div class="actions">{button}<span class="hint">if the correction was about something
else</span></div>
</section>
""",
            count=count,
            when=when,
            reason=details.get("reason", ""),
            button=button_form(
                note_url(level, filename, "/dispute/dismiss"), "Dismiss the dispute", csrf
            ),
        )
    return fill(
        """<section class="dispute dismissed" aria-labelledby="dispute">
<h2 id="dispute">A dismissed dispute</h2>
<p>Dismissed {gone}: “{reason}”</p>
<div class="actions">{button}</div>
</section>
""",
        gone=details.get("dismissed_at", "")[:16].replace("T", " "),
        reason=details.get("reason", ""),
        button=button_form(
            note_url(level, filename, "/dispute/restore"), "Make it count again", csrf
        ),
    )


def broken_page(level: Level, filename: str, reason: str, text: str | None, csrf: str) -> Markup:
    """A file that is not a valid note: why, its text, and the ways to fix it."""
    shown = fill('<pre class="raw">{t}</pre>', t=text) if text is not None else Markup("")
    return fill(
        """<h1>{filename}</h1>
{notice}<div class="actions"><a class="button" href="{source}">Fix the file</a> {delete}</div>
{shown}""",
        filename=filename,
        notice=notice(f"This file is not a valid note: {reason}", error=True),
        source=note_url(level, filename, "/source"),
        delete=button_form(note_url(level, filename, "/delete"), "Delete", csrf, css="danger"),
        shown=shown,
    )


def _conflict(current: str | None) -> Markup:
    if current is None:
        return Markup("")
    return fill(
        '<section aria-labelledby="ondisk"><h2 id="ondisk">The version on disk now</h2>'
        '<pre class="raw">{t}</pre></section>\n',
        t=current,
    )


def edit_page(
    level: Level,
    filename: str,
    *,
    title: str,
    summary: str,
    type: str,
    body: str,
    base: str,
    csrf: str,
    error: str | None = None,
    current: str | None = None,
) -> Markup:
    """The form to edit a note's title, summary, type and body; on an error, the typed text."""
    types = [(t.value, t.value) for t in NoteType]
    return fill(
        """<h1>Edit {filename}</h1>
{error}<form class="edit" method="post" action="{action}">
{csrf}<input type="hidden" name="base" value="{base}">
<p><label for="title">Title</label>
<input id="title" name="title" value="{title}" required></p>
<p><label for="summary">Summary <span class="hint">(one line for MEMORY.md)</span></label>
<input id="summary" name="summary" value="{summary}"></p>
<p><label for="type">Type</label> <select id="type" name="type">{types}</select></p>
<p><label for="body">Body <span class="hint">(Markdown)</span></label>
<textarea id="body" name="body" rows="16" required>{body}</textarea></p>
<p><button type="submit">Save</button> <a href="{cancel}">Cancel</a></p>
</form>
{conflict}""",
        filename=filename,
        error=notice(error, error=True) if error else "",
        action=note_url(level, filename, "/edit"),
        csrf=csrf_field(csrf),
        base=base,
        title=title,
        summary=summary,
        types=options(types, type),
        body="\n" + body,  # a newline right after <textarea> is dropped by the parser
        cancel=note_url(level, filename),
        conflict=_conflict(current),
    )


def source_page(
    level: Level,
    filename: str,
    *,
    text: str,
    base: str,
    csrf: str,
    error: str | None = None,
    current: str | None = None,
) -> Markup:
    """The form to edit a note's whole file, front matter included (also to repair one)."""
    return fill(
        """<h1>Edit the file {filename}</h1>
{error}<form class="edit" method="post" action="{action}">
{csrf}<input type="hidden" name="base" value="{base}">
<p><label for="text">The file, front matter included</label>
<textarea id="text" name="text" rows="22" spellcheck="false">{text}</textarea></p>
<p><button type="submit">Save</button> <a href="{cancel}">Cancel</a></p>
</form>
{conflict}""",
        filename=filename,
        error=notice(error, error=True) if error else "",
        action=note_url(level, filename, "/source"),
        csrf=csrf_field(csrf),
        base=base,
        text="\n" + text,
        cancel=note_url(level, filename),
        conflict=_conflict(current),
    )


# -- the trash, the overview, history, review --------------------------------------


def _stamp(stamp: str) -> str:
    """A trash entry's time, ``20261201T094515Z`` (maybe ``-002`` after), readable."""
    digits = stamp[:16]
    if len(digits) == 16 and digits[8] == "T" and digits[15] == "Z":
        d = digits
        return f"{d[0:4]}-{d[4:6]}-{d[6:8]} {d[9:11]}:{d[11:13]}:{d[13:15]}"
    return stamp


def trash_page(items: Sequence[tuple[Level, TrashItem]], csrf: str) -> Markup:
    """Deleted notes, newest first, each with a button to restore it."""
    if not items:
        return Markup('<h1>Trash</h1>\n<p class="empty">The trash is empty.</p>\n')
    body = join(
        fill(
            '<tr><td data-label="File">{name}</td><td data-label="Level">{level}</td>'
            '<td data-label="Deleted">{when}</td><td>{button}</td></tr>\n',
            name=item.filename,
            level=level.value,
            when=_stamp(item.deleted_at),
            button=button_form(
                "/trash/restore", "Restore", csrf, level=level.value, filename=item.filename
            ),
        )
        for level, item in items
    )
    return fill(
        """<h1>Trash</h1>
<table class="trash"><caption>Deleted notes; restoring brings back the newest of a name</caption>
<thead><tr><th scope="col">File</th><th scope="col">Level</th><th scope="col">Deleted (UTC)</th>
<th scope="col"><span class="visually-hidden">Action</span></th></tr></thead>
<tbody>{body}</tbody></table>
""",
        body=body,
    )


def overview_page(view: Overview) -> Markup:
    """Counts by level and type, and the prompt block exactly as the next session sees it."""
    levels = [lvl.value for lvl in Level]
    rows = []
    for kind in NoteType:
        counts = [view.counts.get((lvl, kind.value), 0) for lvl in levels]
        rows.append(
            fill(
                '<tr><th scope="row">{k}</th><td>{p}</td><td>{u}</td><td>{t}</td></tr>',
                k=kind.value,
                p=counts[0],
                u=counts[1],
                t=sum(counts),
            )
        )
    totals = [sum(view.counts.get((lvl, k.value), 0) for k in NoteType) for lvl in levels]
    rows.append(
        fill(
            '<tr class="total"><th scope="row">all</th><td>{p}</td><td>{u}</td><td>{t}</td></tr>',
            p=totals[0],
            u=totals[1],
            t=sum(totals),
        )
    )
    broken = sum(len(v) for v in view.problems.values())
    trash = sum(view.trash.values())
    return fill(
        """<h1>Overview</h1>
<table class="counts"><caption>Notes by type and level</caption>
<thead><tr><th scope="col">Type</th><th scope="col">project</th><th scope="col">user</th>
<th scope="col">total</th></tr></thead>
<tbody>{rows}</tbody></table>
<p>{broken} file{bs} that cannot be read as notes; {trash} note{ts} in the trash.</p>
<section aria-labelledby="block">
<h2 id="block">The prompt block</h2>
<p>Exactly what the next session gets in its system prompt:
<strong>{lines}</strong> lines (of at most {max_lines}), <strong>{bytes}</strong> bytes
(of at most {max_bytes}), about <strong>{tokens}</strong> tokens.</p>
<pre class="raw block">{block}</pre>
</section>
""",
        rows=join(rows),
        broken=broken,
        bs="" if broken == 1 else "s",
        trash=trash,
        ts="" if trash == 1 else "s",
        lines=view.lines,
        max_lines=view.max_lines,
        bytes=f"{view.bytes:,}",
        max_bytes=f"{view.max_bytes:,}",
        tokens=f"{view.tokens:,}",
        block=view.block or "(empty: no notes yet)",
    )


def history_page(
    level: Level,
    filename: str,
    versions: Sequence[Mapping[str, str]],
    texts: Mapping[str, str | None],
    csrf: str,
    *,
    restore: bool,
) -> Markup:
    """A note's versions, newest first, each against the one before it (what changed), with
    a button to bring it back when the store can."""
    if not versions:
        return fill('<h1>History of {f}</h1><p class="empty">No versions kept.</p>', f=filename)
    cards = []
    for n, version in enumerate(versions):
        number = version.get("version", "")
        older = versions[n + 1].get("version", "") if n + 1 < len(versions) else None
        text = texts.get(number)
        before = texts.get(older, "") if older is not None else ""
        if text is None:
            change = Markup('<p class="empty">No text kept (the note was deleted here).</p>')
        else:
            change = diff.render(before or "", text)
        against = f"against version {older}" if older is not None else "the first version kept"
        button = (
            button_form(
                note_url(level, filename, "/history/restore"),
                "Restore this version",
                csrf,
                version=number,
            )
            if restore and number
            else Markup("")
        )
        cards.append(
            fill(
                """<article class="card version" id="v{number}">
<h2>Version {number}</h2>
<p class="hint">{fields}; shown {against}</p>
{change}<div class="actions">{button}</div>
</article>
""",
                number=number,
                fields=", ".join(
                    f"{k} {v[:19].replace('T', ' ') if k == 'at' else v}"
                    for k, v in version.items()
                    if k not in ("version", "sha") and v
                ),
                against=against,
                change=change,
                button=button,
            )
        )
    return fill(
        '<h1>History of {f}</h1>\n<p><a href="{back}">Back to the note</a></p>\n{cards}',
        f=filename,
        back=note_url(level, filename),
        cards=join(cards),
    )


def _card(record: Mapping[str, str], actions: Markup) -> Markup:
    """One record as a list of its fields, with its actions."""
    pairs = join(fill("<dt>{k}</dt><dd>{v}</dd>", k=k, v=v) for k, v in record.items() if v)
    return fill(
        '<article class="card"><dl class="meta">{pairs}</dl>'
        '<div class="actions">{actions}</div></article>\n',
        pairs=pairs,
        actions=actions,
    )


def review_page(
    proposals: Mapping[Level, Sequence[Mapping[str, str]]],
    csrf: str,
    *,
    editable: bool = False,
    live: Markup | None = None,
) -> Markup:
    """Proposals waiting for review, each with accept and reject buttons (and edit, if it can)."""
    sections = []
    for level, items in proposals.items():
        if not items:
            sections.append(fill('<h2>{l}</h2><p class="empty">Nothing waiting.</p>', l=level))
            continue
        cards = []
        for item in items:
            ident = item.get("id", "")
            buttons = join(
                [
                    button_form("/review/accept", "Accept", csrf, level=level.value, id=ident),
                    button_form(
                        "/review/reject", "Reject", csrf, level=level.value, id=ident, css="danger"
                    ),
                ],
                " ",
            )
            if editable:
                href = "/review/edit" + query_string(level=level.value, id=ident)
                buttons = fill('{b} <a href="{h}">Edit, then accept</a>', b=buttons, h=href)
            cards.append(_card(item, buttons))
        sections.append(fill("<h2>{l}</h2>{t}", l=level.value, t=join(cards)))
    return fill("<h1>Review</h1>\n{live}{s}", live=live or "", s=join(sections, "\n"))


def proposal_page(
    level: Level,
    ident: str,
    *,
    title: str,
    summary: str,
    type: str,
    content: str,
    csrf: str,
    error: str | None = None,
) -> Markup:
    """The form to change a proposal before accepting it; on an error, the typed text."""
    types = [(t.value, t.value) for t in NoteType]
    return fill(
        """<h1>Edit the proposal {ident}</h1>
{error}<form class="edit" method="post" action="/review/edit">
{csrf}<input type="hidden" name="level" value="{level}">
<input type="hidden" name="id" value="{ident}">
<p><label for="title">Title</label> <input id="title" name="title" value="{title}"></p>
<p><label for="summary">Summary</label> <input id="summary" name="summary" value="{summary}"></p>
<p><label for="type">Type</label> <select id="type" name="type">{types}</select></p>
<p><label for="content">Content <span class="hint">(Markdown)</span></label>
<textarea id="content" name="content" rows="14">{content}</textarea></p>
<p><button type="submit">Accept as edited</button> <a href="/review">Cancel</a></p>
</form>
""",
        ident=ident,
        error=notice(error, error=True) if error else "",
        csrf=csrf_field(csrf),
        level=level.value,
        title=title,
        summary=summary,
        types=options(types, type),
        content="\n" + content,
    )
