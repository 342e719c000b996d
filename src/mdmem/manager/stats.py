"""What ``mdmem stats`` reports: notes, the prompt block, model tokens, and how notes are used.

Everything comes from the two stores and their usage ledgers
(:mod:`mdmem.store.ledger`); nothing here writes. Model tokens are in the user
store's ledger, shared by every workspace of the person, since that is what a
budget counts.

A large store costs no more memory than a few notes when asked to stream
(``collect(..., stream=True)``, what the CLI does), and no pass over its notes
beyond what is asked: counts by type are one query of the catalog, the most
used notes come from the ledger, the prompt block from its cache (what ``mdmem
index`` prints), the notes unused for ``unused_days`` from one query of the
catalog (and counted there: ``len()`` of their rows makes none); the per-note
rows are :class:`Rows`, computed again from the catalog each time they are
iterated; :func:`json_chunks` writes them out as they come. The catalog is
brought up to date first unless it may be read as the notes are
(``Store.catalog_current``), so that 100,000 notes cost a few queries, not a
stat pass.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from functools import partial
from typing import TYPE_CHECKING, Any

from mdmem.extract.turn import estimate_tokens
from mdmem.store import ledger
from mdmem.store.block import cached_block

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = ["Rows", "collect", "json_chunks"]

_TOKEN_KEYS = (("in", "input"), ("out", "output"), ("cr", "cache_read"), ("cw", "cache_write"))
_CHUNK = 1 << 16


def _iso(t: object) -> str | None:
    if not isinstance(t, (int, float)) or t <= 0:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


class Rows:
    """A sequence of rows made by a pass over the stores, again each time it is iterated.

    ``len()`` is ``count()`` where one is given, else one more pass. Nothing is held
    between passes: a store of 100,000 notes costs a page of the catalog, not a row per note.
    """

    def __init__(
        self,
        make: Callable[[], Iterator[dict[str, object]]],
        count: Callable[[], int] | None = None,
    ) -> None:
        self._make = make
        self._count = count

    def __iter__(self) -> Iterator[dict[str, object]]:
        return self._make()

    def __len__(self) -> int:
        if self._count is not None:  # counted where the rows are (one query), not made
            return self._count()
        return sum(1 for _ in self._make())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, (Rows, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def _row(level: str, name: str, entry: Mapping[str, Any]) -> dict[str, object]:
    row: dict[str, object] = {"filename": name, "level": level}
    for kind, label in (("inject", "injected"), ("read", "read"), ("write", "written")):
        row[label] = int(entry.get(kind, 0))
        row[f"last_{label}"] = _iso(entry.get(f"last_{kind}"))
    return row


def _uses(entry: Mapping[str, Any]) -> int:
    return int(entry.get("inject", 0)) + int(entry.get("read", 0))


def _last_use(entry: Mapping[str, Any]) -> float:
    return max(float(entry.get("last_inject", 0)), float(entry.get("last_read", 0)))


def _current(store: Store, progress: Callable[[int, int], None] | None = None) -> bool:
    """Whether the store has notes to read; its catalog is first brought up to date (a stat
    pass) unless it may be read as the notes are (:meth:`Store.catalog_current`: settled
    less than ten minutes ago, every change since in its log; a note edited in place
    meanwhile shows once a read checks it, as in the prompt block)."""
    if store.unavailable is not None or not os.path.isdir(store.path):
        return False
    if store.catalog_current() is None:
        for _ in store.iter_entries(limit=1, progress=progress):
            pass
    return True


def _names(store: Store) -> Iterator[tuple[str, str | None]]:
    """(name, ``updated``) of every valid note, from the catalog a row at a time."""
    from mdmem.store import catalog

    if store.unavailable is not None or not os.path.isdir(store.path):
        return
    for name, updated, _ in catalog.iter_listing(store.state):
        yield name, updated


def _usage_rows(
    stores: list[tuple[Store, Mapping[str, Mapping[str, Any]]]], per_note: bool
) -> Iterator[dict[str, object]]:
    for store, recorded in stores:
        if not per_note:  # the notes with recorded use: the ledger's, still in the store
            from mdmem.store import catalog

            live = catalog.present(store.state, list(recorded)) if _has(store) else set()
            for name in sorted(live):
                yield _row(store.level.value, name, recorded[name])
            continue
        for name, _ in _names(store):
            yield _row(store.level.value, name, recorded.get(name) or {})


def _has(store: Store) -> bool:
    return store.unavailable is None and os.path.isdir(store.path)


def _written(store: Store, name: str, updated: str | None) -> float:
    """When the note was last written: its ``updated``, else its file's mtime, else 0."""
    if updated:
        with contextlib.suppress(ValueError):
            moment = datetime.fromisoformat(updated.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            return moment.timestamp()
    try:
        return os.lstat(os.path.join(store.path, name)).st_mtime
    except OSError:
        return 0.0


# Unused *for that long*: not used since ``since`` (by the ledger), and written before it
# (a note written within the window has not had the time). The notes written before it
# come from the catalog, compared in SQLite (``survey.iter_written_before``): at 100,000
# notes a pass in Python over the listing cost 0.3-0.6 s; the few used since are left out.


def _used_since(recorded: Mapping[str, Mapping[str, Any]], since: float) -> set[str]:
    return {name for name, entry in recorded.items() if _last_use(entry) >= since}


def _unused_rows(
    stores: list[tuple[Store, Mapping[str, Mapping[str, Any]]]], since: float
) -> Iterator[dict[str, object]]:
    from mdmem.store.survey import iter_written_before

    for store, recorded in stores:
        if not _has(store):
            continue
        used = _used_since(recorded, since)
        written = partial(_written, store)
        for name in iter_written_before(store.state, since, written):
            if name not in used:
                yield {"level": store.level.value, "filename": name}


def _unused_count(stores: list[tuple[Store, Mapping[str, Mapping[str, Any]]]], since: float) -> int:
    """``len(list(_unused_rows(stores, since)))``, in a query or two per store."""
    from mdmem.store.survey import count_written_before

    total = 0
    for store, recorded in stores:
        if not _has(store):
            continue
        written = partial(_written, store)
        total += count_written_before(store.state, since, written)
        used = _used_since(recorded, since)
        if used:
            total -= count_written_before(store.state, since, written, used)
    return total


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
    stream: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, object]:
    """The figures of ``mdmem stats`` as one JSON-ready dict (see docs/reference/api.md).

    With ``per_note=False``, ``usage`` lists only the notes with recorded use
    (what the text form needs): a large store's never-used notes cost no row.
    With ``stream=True``, ``usage`` and ``unused.notes`` are :class:`Rows`
    (iterated, not held; dump with :func:`json_chunks`). ``progress(done,
    total)`` is called while a store's catalog is brought up to date (a stat
    pass over its notes), when it must be.
    """
    now = time.time() if now is None else now
    since = now - unused_days * 86_400
    notes: dict[str, object] = {}
    stores = [(s, _recorded(s)) for s in (project, user)]

    def used() -> Iterator[tuple[tuple[int, str], dict[str, object]]]:
        # Counts by type from the catalog; the used notes from the ledger (those still
        # in the store): no pass over every note.
        from mdmem.store import catalog

        for store, recorded in stores:
            types: dict[str, int] = {}
            live: set[str] = set()
            if _current(store, progress):
                types = catalog.type_counts(store.state)
                live = catalog.present(store.state, [n for n, e in recorded.items() if _uses(e)])
            for name in sorted(live):
                entry = recorded[name]
                yield (-_uses(entry), name), _row(store.level.value, name, entry)
            total = sum(types.values())
            notes[store.level.value] = {"total": total, "by_type": dict(sorted(types.items()))}

    # As sorted(...)[:top] (stable), holding only ``top`` rows.
    most = [row for _, row in heapq.nsmallest(max(top, 0), used(), key=lambda p: p[0])]
    if top <= 0:
        deque(used(), maxlen=0)
    usage: Iterable[dict[str, object]] = Rows(lambda: _usage_rows(stores, per_note))
    unused: Iterable[dict[str, object]] = Rows(
        lambda: _unused_rows(stores, since), lambda: _unused_count(stores, since)
    )
    if not stream:
        usage, unused = list(usage), list(unused)
    block = cached_block(project, user)  # the block `mdmem index` prints, through its cache

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
        "extraction": _extraction(),
        "turns_skipped": sum(int(e.get("skip", 0)) for e in per_day.values()),
        "usage": usage,
        "most_used": most,
        "unused": {"days": unused_days, "notes": unused},
        **_control(project, user),
        "semantic": _semantic(project, user),
    }


def _extraction() -> dict[str, object]:
    """Which provider extracts the next turns, and why (see mdmem.extract.providers.choose)."""
    from mdmem.extract.providers import choose

    name, reason = choose()
    return {"provider": name, "reason": reason}


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


def _recorded(store: Store) -> Mapping[str, Mapping[str, Any]]:
    """The store's ledger summary per note (the notes with recorded use only)."""
    recorded = ledger.load(store.path)["notes"]
    assert isinstance(recorded, dict)
    return recorded


def json_chunks(data: object, indent: int = 2) -> Iterator[str]:
    """``json.dumps(data, ensure_ascii=False, indent=indent)``, in chunks, as it is made.

    Any iterable that is not a string, a dict or a list (a :class:`Rows`, a
    generator) is written as a list, an item at a time: nothing is held whole.
    """
    buffer: list[str] = []
    size = 0
    for piece in _encode(data, indent, 0):
        buffer.append(piece)
        size += len(piece)
        if size >= _CHUNK:
            yield "".join(buffer)
            buffer, size = [], 0
    if buffer:
        yield "".join(buffer)


def _encode(value: object, indent: int, depth: int) -> Iterator[str]:
    if isinstance(value, dict):
        if not value:
            yield "{}"
            return
        inner = "\n" + " " * (indent * (depth + 1))
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            text = (
                json.dumps(key, ensure_ascii=False)
                if isinstance(key, str)
                else json.dumps({key: None}, ensure_ascii=False)[1:-7]  # as json spells a key
            )
            yield ("," if i else "") + inner + text + ": "
            yield from _encode(item, indent, depth + 1)
        yield "\n" + " " * (indent * depth) + "}"
    elif isinstance(value, (str, int, float)) or value is None:
        yield json.dumps(value, ensure_ascii=False)
    elif isinstance(value, Iterable) and not isinstance(value, (bytes, bytearray)):
        inner = "\n" + " " * (indent * (depth + 1))
        first = True
        for item in value:
            yield ("[" if first else ",") + inner
            first = False
            yield from _encode(item, indent, depth + 1)
        yield "[]" if first else "\n" + " " * (indent * depth) + "]"
    else:
        yield json.dumps(value, ensure_ascii=False)  # raises TypeError, as json.dumps does
