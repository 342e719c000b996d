"""Every store of the user: the workspaces mdmem has state for, each looked at read-only
until the user picks it.

The list comes from :func:`mdmem.store.activity.workspaces` (the workspaces a
Claude Code session or the web page used), the workspace served now, and the
user store (the same for every workspace). A workspace is previewed without
any button that writes; choosing it (a POST with the CSRF token) makes the
page serve it, with the same user store.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem.store import activity
from mdmem.store.paths import project_root
from mdmem.store.store import Store
from mdmem.ui.html import Markup, fill, join
from mdmem.ui.layout import button_form, query_string

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mdmem.ui.model import Stores

__all__ = [
    "Known",
    "known",
    "open_workspace",
    "preview_page",
    "shown_path",
    "summaries",
    "switcher_page",
]


@dataclass(frozen=True)
class Known:
    """One workspace as the switcher lists it."""

    workspace: str
    used: float
    notes: int | None
    """How many notes its project store has; None when it cannot be read (gone, refused)."""
    current: bool


def known(stores: Stores) -> list[tuple[str, float]]:
    """The workspaces that may be picked: those remembered that still have a project store,
    and the one served now (first)."""
    out = [(stores.workspace, 0.0)]
    for workspace, used in activity.workspaces():
        if workspace != stores.workspace and os.path.isdir(project_root(workspace)):
            out.append((workspace, used))
    return out


def _store(workspace: str, stores: Stores) -> Store:
    return Store(project_root(workspace), "project", user_store=stores.user.path)


def shown_path(path: str) -> str:
    """A folder as a person reads it: ``~/projects/x`` under the home folder."""
    home = os.path.expanduser("~")
    if home not in ("", "/") and (path == home or path.startswith(home.rstrip("/") + "/")):
        return "~" + path[len(home.rstrip("/")) :]
    return path


def summaries(stores: Stores) -> list[Known]:
    """Each workspace that may be picked, with its number of notes (read, never written)."""
    out = []
    for workspace, used in known(stores):
        store = stores.project if workspace == stores.workspace else _store(workspace, stores)
        notes: int | None
        if store.unavailable is not None:
            notes = None
        else:
            try:
                notes = store.query(limit=0, max_age=30.0)[0]
            except Exception:  # a foreign, damaged or vanished store: listed, not counted
                notes = None
        out.append(Known(workspace, used, notes, workspace == stores.workspace))
    return out


def open_workspace(workspace: str, stores: Stores) -> Stores:
    """The stores of ``workspace`` with the same user store: what the page serves next."""
    from mdmem.ui.model import Stores as StoresType

    return StoresType(workspace, _store(workspace, stores), stores.user)


def switcher_page(rows: Sequence[Known], stores: Stores, csrf: str) -> Markup:
    """The workspaces and the user store; a preview link and a button to pick each."""
    items = []
    for row in rows:
        if row.notes is None:
            count = "cannot be read"
        else:
            count = f"{row.notes:,} note{'' if row.notes == 1 else 's'}"
        if row.current:
            action = Markup('<span class="hint">shown now</span>')
        else:
            action = join(
                [
                    fill(
                        '<a href="{h}">Look (read-only)</a>',
                        h="/switch/preview" + query_string(workspace=row.workspace),
                    ),
                    button_form("/switch", "Work on this one", csrf, workspace=row.workspace),
                ],
                " ",
            )
        items.append(
            fill(
                '<li class="card{cur}"><p><strong>{name}</strong> <span class="hint">{count}'
                '</span></p><p class="file">{path}</p><div class="actions">{action}</div></li>\n',
                cur=" current" if row.current else "",
                name=os.path.basename(row.workspace.rstrip("/")) or row.workspace,
                count=count,
                path=shown_path(row.workspace),
                action=action,
            )
        )
    user = fill(
        '<li class="card"><p><strong>Your user store</strong> <span class="hint">shared by '
        'every workspace</span></p><p class="file">{path}</p><div class="actions">'
        '<a href="/?level=user">Its notes</a></div></li>\n',
        path=shown_path(stores.user.path),
    )
    return fill(
        """<h1>Stores</h1>
<p>The workspaces mdmem has state for (each Claude Code session and each run of this page
records its own). Look at one read-only, or pick it to browse and edit it here.</p>
<ul class="stores">{items}{user}</ul>
""",
        items=join(items),
        user=user,
    )


def preview_page(workspace: str, stores: Stores, csrf: str) -> Markup:
    """The first notes of a workspace not served now: read-only (no link that edits)."""
    store = _store(workspace, stores)
    if store.unavailable is not None:
        rows = fill('<p class="empty">This store cannot be read: {why}</p>', why=store.unavailable)
        total = 0
    else:
        total, entries = store.query(limit=50, max_age=30.0)
        rows = join(
            fill(
                '<li><strong>{title}</strong> <span class="hint">{type}</span>'
                '<p class="summary">{summary}</p><p class="file">{name}</p></li>\n',
                title=e.title or e.filename,
                type=e.type,
                summary=e.summary,
                name=e.filename,
            )
            for e in entries
        )
        rows = fill('<ul class="preview">{rows}</ul>', rows=rows)
    return fill(
        """<h1>{name} <span class="hint">read-only</span></h1>
<p class="file">{path}</p>
<div class="actions">{pick} <a href="/switch">Back to the stores</a></div>
<p>{total} notes; the newest 50:</p>
{rows}""",
        name=os.path.basename(workspace.rstrip("/")) or workspace,
        path=shown_path(workspace),
        pick=button_form("/switch", "Work on this one", csrf, workspace=workspace),
        total=f"{total:,}",
        rows=rows,
    )
