"""What ``mdmem stats`` reports: notes, the prompt block, model tokens, and how notes are used.

Everything comes from the two stores and their usage ledgers
(:mod:`mdmem.store.ledger`); nothing here writes. Model tokens are in the user
store's ledger, shared by every workspace of the person, since that is what a
budget counts.
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mdmem.extract.turn import estimate_tokens
from mdmem.store import ledger
from mdmem.store.index import merge

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = ["collect"]

_TOKEN_KEYS = (("in", "input"), ("out", "output"), ("cr", "cache_read"), ("cw", "cache_write"))


def _iso(t: object) -> str | None:
    if not isinstance(t, (int, float)) or t <= 0:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


def _notes(store: Store) -> tuple[dict[str, object], list[str]]:
    names: list[str] = []
    types: Counter[str] = Counter()
    # The catalog's entries, a page at a time: counting types parses no note.
    for entry in store.iter_entries():
        names.append(entry.filename)
        types[entry.type] += 1
    return {"total": len(names), "by_type": dict(sorted(types.items()))}, names


def _usage(
    store: Store, names: list[str], now: float, unused_days: int, per_note: bool = True
) -> tuple[list[dict[str, object]], list[str]]:
    summary = ledger.load(store.path)
    recorded = summary["notes"]
    assert isinstance(recorded, dict)
    rows: list[dict[str, object]] = []
    unused: list[str] = []
    since = now - unused_days * 86_400
    for name in names:
        entry = recorded.get(name) or {}
        last_use = max(float(entry.get("last_inject", 0)), float(entry.get("last_read", 0)))
        if last_use < since:
            unused.append(name)
        if not per_note and not entry:
            continue  # never used: only its name counts, among the unused
        row: dict[str, object] = {"filename": name, "level": store.level.value}
        for kind, label in (("inject", "injected"), ("read", "read"), ("write", "written")):
            row[label] = int(entry.get(kind, 0))
            row[f"last_{label}"] = _iso(entry.get(f"last_{kind}"))
        rows.append(row)
    return rows, unused


def collect(
    project: Store,
    user: Store,
    *,
    days: int = 14,
    unused_days: int = 30,
    top: int = 10,
    daily_tokens: int | None = None,
    turn_tokens: int | None = None,
    now: float | None = None,
    per_note: bool = True,
) -> dict[str, object]:
    """The figures of ``mdmem stats`` as one JSON-ready dict (see docs/reference/api.md).

    With ``per_note=False``, ``usage`` lists only the notes with recorded use
    (what the text form needs): a large store's never-used notes cost no row.
    """
    now = time.time() if now is None else now
    notes: dict[str, object] = {}
    usage: list[dict[str, object]] = []
    unused: list[dict[str, str]] = []
    for store in (project, user):
        counts, names = _notes(store)
        notes[store.level.value] = counts
        rows, never = _usage(store, names, now, unused_days, per_note)
        usage.extend(rows)
        unused.extend({"level": store.level.value, "filename": n} for n in never)
    block = merge(project.load_index(), user.load_index())

    spent = ledger.load(user.path)
    per_day = spent["days"]
    assert isinstance(per_day, dict)
    day_rows = []
    for day in sorted(per_day)[-days:]:
        entry = per_day[day]
        row: dict[str, object] = {"day": day}
        row.update({label: int(entry.get(key, 0)) for key, label in _TOKEN_KEYS})
        row["total"] = sum(int(entry.get(key, 0)) for key, _ in _TOKEN_KEYS)
        row["calls"] = int(entry.get("calls", 0))
        row["skipped"] = int(entry.get("skip", 0))
        row["held"] = int(entry.get("held", 0))
        day_rows.append(row)
    by_turn: dict[str, dict[str, object]] = {}
    calls = spent["turns"]
    assert isinstance(calls, list)
    for t, turn, provider, model, *tokens in calls:
        entry = by_turn.setdefault(
            str(turn),
            {"turn": turn, "time": _iso(t), "provider": provider, "model": model, "calls": 0}
            | {label: 0 for _, label in _TOKEN_KEYS},
        )
        entry["calls"] = int(str(entry["calls"])) + 1
        for (_, label), value in zip(_TOKEN_KEYS, tokens, strict=False):
            entry[label] = int(str(entry[label])) + int(value)
    turns = list(by_turn.values())
    totals = [sum(int(str(t[label])) for _, label in _TOKEN_KEYS) for t in turns]
    most = sorted(
        (r for r in usage if int(str(r["injected"])) + int(str(r["read"])) > 0),
        key=lambda r: (-(int(str(r["injected"])) + int(str(r["read"]))), str(r["filename"])),
    )[:top]
    return {
        "notes": notes,
        "prompt_block": {
            "tokens": estimate_tokens(block),
            "bytes": len(block.encode("utf-8")),
            "lines": len(block.splitlines()),
        },
        "tokens": {
            "days": day_rows,
            "today": next(
                (int(str(r["total"])) for r in day_rows if r["day"] == ledger.day_of(now)), 0
            ),
            "daily_budget": daily_tokens,
            "turn_budget": turn_tokens,
            "per_turn": {
                "turns": len(turns),
                "average": round(sum(totals) / len(totals)) if totals else 0,
                "max": max(totals, default=0),
                "recent": turns[-10:],
            },
        },
        "turns_skipped": sum(int(e.get("skip", 0)) for e in per_day.values()),
        "usage": usage,
        "most_used": most,
        "unused": {"days": unused_days, "notes": unused},
        **_control(project, user),
        "semantic": _semantic(project, user),
    }


def _semantic(project: Store, user: Store) -> dict[str, object] | None:
    """Per level, how many notes have a vector for semantic recall (None without the extra)."""
    from mdmem.recall.embedder import status

    found = {store.level.value: status(store) for store in (project, user)}
    return None if all(v is None for v in found.values()) else dict(found)


def _control(project: Store, user: Store) -> dict[str, object]:
    """Disputed notes and proposals waiting for review (see docs/concepts/review.md)."""
    from mdmem.manager.review import pending_count
    from mdmem.recall.disputes import disputed

    stores = [s for s in (project, user) if getattr(s, "unavailable", None) is None]
    return {
        "disputed": [
            {"level": s.level.value, "filename": name, **info}
            for s in stores
            for name, info in sorted(disputed(s).items())
        ],
        "proposals_waiting": {s.level.value: pending_count(s) for s in stores},
    }
