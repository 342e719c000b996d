"""What ``mdmem stats`` reports: notes, the prompt block, model tokens, and how notes are used.

Everything comes from the two stores and their usage ledgers
(:mod:`mdmem.store.ledger`); nothing here writes. Model tokens are in the user
store's ledger, shared by every workspace of the person, since that is what a
budget counts.

A large store costs no more memory than a few notes when asked to stream
(``collect(..., stream=True)``, what the CLI does): the catalog is read a page
at a time, MEMORY.md in chunks (only the lines a block can show are kept), and
the per-note rows are :class:`Rows`, computed again from the catalog each time
they are iterated; :func:`json_chunks` writes them out as they come.
"""

from __future__ import annotations

import codecs
import contextlib
import heapq
import json
import os
import stat
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from mdmem._lines import MAX_LINES
from mdmem.extract.turn import estimate_tokens
from mdmem.store import ledger
from mdmem.store.index import _iter_lines, _Section, merge

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = ["Rows", "collect", "json_chunks"]

_TOKEN_KEYS = (("in", "input"), ("out", "output"), ("cr", "cache_read"), ("cw", "cache_write"))
_CHUNK = 1 << 16
_ROOM = MAX_LINES + 1  # the candidates a block can show, as merge() keeps them


def _iso(t: object) -> str | None:
    if not isinstance(t, (int, float)) or t <= 0:
        return None
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds")


class Rows:
    """A sequence of rows made by a pass over the stores, again each time it is iterated.

    ``len()`` is one more pass. Nothing is held between passes: a store of
    100,000 notes costs a page of the catalog, not a row per note.
    """

    def __init__(self, make: Callable[[], Iterator[dict[str, object]]]) -> None:
        self._make = make

    def __iter__(self) -> Iterator[dict[str, object]]:
        return self._make()

    def __len__(self) -> int:
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


def _last_use(entry: Mapping[str, Any]) -> float:
    return max(float(entry.get("last_inject", 0)), float(entry.get("last_read", 0)))


def _walk(
    store: Store, recorded: Mapping[str, Mapping[str, Any]], *, settle: bool
) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(name, type, its ledger entry) of every note, from the catalog a page at a time."""
    for entry in store.iter_entries(settle=settle):  # counting types parses no note
        yield entry.filename, entry.type, recorded.get(entry.filename) or {}


def _usage_rows(
    stores: list[tuple[Store, Mapping[str, Mapping[str, Any]]]], per_note: bool, settle: bool
) -> Iterator[dict[str, object]]:
    for store, recorded in stores:
        for name, _, entry in _walk(store, recorded, settle=settle):
            if per_note or entry:  # never used: only its name counts, among the unused
                yield _row(store.level.value, name, entry)


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


def _unused_rows(
    stores: list[tuple[Store, Mapping[str, Mapping[str, Any]]]], since: float, settle: bool
) -> Iterator[dict[str, object]]:
    for store, recorded in stores:
        for note in store.iter_entries(settle=settle):
            entry = recorded.get(note.filename) or {}
            # Unused *for that long*: a note written within the window has not had the time.
            if _last_use(entry) < since and _written(store, note.filename, note.updated) < since:
                yield {"level": store.level.value, "filename": note.filename}


def _index_lines(store: Store) -> tuple[str, int | None]:
    """MEMORY.md as :func:`merge` needs it, read in chunks: the whole text when it is short,
    else its best ranked lines (in MEMORY.md's order) and how many lines it has.

    The store must be settled (the catalog pass before does it); otherwise, or
    when the file is not a plain UTF-8 file, :meth:`Store.load_index` decides.
    """
    from mdmem.store import catalog
    from mdmem.store.paths import INDEX_NAME, MAX_INDEX_BYTES

    if store.unavailable is not None or not os.path.isdir(store.path):
        return "", None
    fp = catalog.read_fingerprint(store.path)
    if fp is None or catalog.Scan(store.path).fingerprint() != fp.full:
        return store.load_index(), None
    section = _Section("", {}, _ROOM)
    try:
        fd = os.open(
            os.path.join(store.path, INDEX_NAME), os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)
        )
    except OSError:
        return store.load_index(), None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_INDEX_BYTES:
            return store.load_index(), None
        for piece in split_lines(_read_chunks(fd)):
            for line in _iter_lines(piece):
                section.add(line)
    except (OSError, UnicodeDecodeError):
        return store.load_index(), None
    finally:
        os.close(fd)
    if section.count <= len(section.first):
        return "\n".join(section.first), None
    return "\n".join(line for _, line in sorted(section.best())), section.count


def _read_chunks(fd: int) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    while chunk := os.read(fd, _CHUNK):
        yield decoder.decode(chunk)
    yield decoder.decode(b"", final=True)


def split_lines(chunks: Iterable[str]) -> Iterator[str]:
    """The ``\\n``-separated pieces of the text made of ``chunks``, one at a time.

    Equal to ``"".join(chunks).split("\\n")`` (a final empty piece included).
    """
    rest = ""
    for chunk in chunks:
        if "\n" not in chunk:
            rest += chunk
            continue
        pieces = (rest + chunk).split("\n")
        rest = pieces.pop()
        yield from pieces
    yield rest


def _block(project: Store, user: Store) -> str:
    """:func:`merge` of both stores' MEMORY.md (no dates), never holding either whole."""
    (p_text, p_total), (u_text, u_total) = _index_lines(project), _index_lines(user)
    return merge(p_text, u_text, totals=(p_total, u_total))


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
) -> dict[str, object]:
    """The figures of ``mdmem stats`` as one JSON-ready dict (see docs/reference/api.md).

    With ``per_note=False``, ``usage`` lists only the notes with recorded use
    (what the text form needs): a large store's never-used notes cost no row.
    With ``stream=True``, ``usage`` and ``unused.notes`` are :class:`Rows`
    (iterated, not held; dump with :func:`json_chunks`).
    """
    now = time.time() if now is None else now
    since = now - unused_days * 86_400
    notes: dict[str, object] = {}
    stores = [(s, _recorded(s)) for s in (project, user)]

    def used() -> Iterator[tuple[tuple[int, str], dict[str, object]]]:
        # One pass per store: counts by type, and the used notes for the most used.
        for store, recorded in stores:
            types: Counter[str] = Counter()
            total = 0
            for name, kind, entry in _walk(store, recorded, settle=True):
                total += 1
                types[kind] += 1
                uses = int(entry.get("inject", 0)) + int(entry.get("read", 0))
                if uses > 0:
                    yield (-uses, name), _row(store.level.value, name, entry)
            notes[store.level.value] = {"total": total, "by_type": dict(sorted(types.items()))}

    # As sorted(...)[:top] (stable), holding only ``top`` rows.
    most = [row for _, row in heapq.nsmallest(max(top, 0), used(), key=lambda p: p[0])]
    if top <= 0:
        deque(used(), maxlen=0)
    usage: Iterable[dict[str, object]] = Rows(lambda: _usage_rows(stores, per_note, False))
    unused: Iterable[dict[str, object]] = Rows(lambda: _unused_rows(stores, since, False))
    if not stream:
        usage, unused = list(usage), list(unused)
    block = _block(project, user)

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
