"""Forgetting, visibly: ``mdmem prune`` moves expired (and long-unused) notes to the trash.

Nothing is forgotten silently: a pruned note goes to the store's trash
(``mdmem restore`` brings it back) and through history like any delete, and
:func:`prune` returns every note it moved, or would move with ``dry_run``.

Usage comes from the store's usage ledger (:func:`ledger_last_use`); this
module only needs :data:`LastUse`: a function that returns, for a store, when
each note was last recalled or read (epoch seconds), or ``None`` when no ledger
exists. A note the
ledger does not know, or any note when there is no ledger, counts as *unknown*
and is kept: ``--unused`` never removes a note on a guess.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mdmem.store.marks import hidden
from mdmem.store.store import Store

__all__ = ["LastUse", "Pruned", "ledger_last_use", "prune", "prune_sessions"]

#: A store -> {note name: last use, epoch seconds}, or None when usage is not recorded.
LastUse = Callable[[Store], Mapping[str, float] | None]


@dataclass(frozen=True)
class Pruned:
    """A note moved to the trash (or that would be, in a dry run), and why."""

    filename: str
    level: str
    reason: str


def ledger_last_use(store: Store) -> Mapping[str, float] | None:
    """Last uses from the store's usage ledger (:mod:`mdmem.store.ledger`); None without one.

    A note's last use is its last read (through recall, the memory tool, MCP, the
    CLI), or its last write when it has not been read since: a note just written
    is not unused. Being listed in the prompt block does not count: every note is,
    at every session start.
    """
    from mdmem.store import ledger

    notes = ledger.load(store.path).get("notes")
    if not isinstance(notes, dict) or not notes:
        return None
    out: dict[str, float] = {}
    for name, entry in notes.items():
        if not isinstance(entry, dict):
            continue
        times = [entry.get("last_read"), entry.get("last_write")]
        values = [float(t) for t in times if isinstance(t, (int, float))]
        if values:
            out[str(name)] = max(values)
    return out


def prune(
    store: Store,
    *,
    dry_run: bool = False,
    unused_days: float | None = None,
    now: float | None = None,
    last_use: LastUse | None = None,
) -> list[Pruned]:
    """Move expired notes (and, with ``unused_days``, long-unused ones) to the trash.

    Returns what was (or, with ``dry_run``, would be) moved.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    moment = time.time() if now is None else now
    from mdmem.store import catalog

    store.entries()  # bring the catalog up to date first
    entries, _ = catalog.load(store.path)
    out: list[Pruned] = []
    for name, why in sorted(hidden(entries, moment).items()):
        if why.startswith("expired"):
            out.append(Pruned(name, store.level.value, why))
    if unused_days is not None:
        uses = (last_use or ledger_last_use)(store)
        if uses is not None:
            cutoff = moment - unused_days * 86_400
            taken = {p.filename for p in out}
            for name in sorted(entries):
                used = uses.get(name)
                if name in taken or not entries[name].line or used is None:
                    continue  # unknown: keep
                if used < cutoff:
                    out.append(
                        Pruned(name, store.level.value, f"not used for {unused_days:g} days")
                    )
    if dry_run or not out:
        return out
    ops = [{"action": "delete", "level": store.level.value, "filename": p.filename} for p in out]
    result = store.apply(ops, source="prune")
    done = {a.filename for a in result.applied}
    return [p for p in out if p.filename in done]


def prune_sessions(
    project: Store, *, dry_run: bool = False, days: float | None = None, now: float | None = None
) -> list[Pruned]:
    """Move session records not active for ``days`` (``MDMEM_SESSIONS_DAYS``, 90) to the trash.

    ``mdmem timeline --restore ID`` brings one back. Returns what was (or would be) moved,
    each as a :class:`Pruned` of level ``session``.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    from mdmem.store import sessions

    if project.unavailable is not None:
        return []
    limit = sessions.keep_days() if days is None else days
    with project.lock():
        gone = sessions.expire(project.path, days=limit, now=now, dry_run=dry_run)
    return [
        Pruned(os.path.basename(s.path), "session", f"no activity for {limit:g} days") for s in gone
    ]
