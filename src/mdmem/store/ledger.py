"""The usage ledger: what was injected, read and written, and what the model cost.

One ledger per store, in the store's state folder (``usage/``), never in the
repository. Recording is one ``O_APPEND`` write of one JSON line, cheap enough
for the session-start hook; reading folds those lines into a summary. The
ledger stays bounded whatever happens:

* ``events.jsonl`` is folded into ``summary.json`` once it passes
  :data:`COMPACT_BYTES` (by whoever appends past it);
* the summary keeps :data:`KEEP_DAYS` days of totals, the last
  :data:`KEEP_TURNS` turns and the :data:`KEEP_NOTES` most recently used notes.

Folding is crash-safe without a journal: the events file is renamed to
``events.<n>.jsonl`` under an exclusive ``flock`` (appenders hold a shared one
and reopen when the file they hold was renamed), the summary records that it
holds every file up to ``n``, and only then are those files removed. A crash
leaves files the next fold either folds (``n`` above the summary's) or removes.

Event kinds (field ``k``): ``inject`` and ``read`` and ``write`` of notes
(``n``: a list of file names, ``via``: where), ``call`` (one model call:
``in``, ``out``, ``cr`` cache reads, ``cw`` cache writes, ``provider``,
``model``, ``turn``), ``skip`` (a turn not worth a call), ``held`` (a turn kept
waiting by the budget). Recording never raises: a ledger is information,
never a reason to fail the work it describes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import time

from mdmem import _json
from mdmem.store import files
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # typing costs ~6 ms on the session-start path
if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = [
    "COMPACT_BYTES",
    "KEEP_DAYS",
    "KEEP_NOTES",
    "KEEP_TURNS",
    "compact",
    "day_of",
    "folder",
    "load",
    "names_in_block",
    "read_counts",
    "record",
    "record_block",
    "record_many",
    "tokens_on",
]

COMPACT_BYTES = 256 * 1024
KEEP_DAYS = 400
KEEP_TURNS = 200
KEEP_NOTES = 2_000
NOTE_KINDS = ("inject", "read", "write")
_EVENTS = "events.jsonl"
_SUMMARY = "summary.json"
_LOCK = "ledger.lock"
_ROTATED = re.compile(r"^events\.(\d+)\.jsonl$")
_NOTE_LINE = re.compile(r"\(([^()/\\\s]+\.md)\)\s*$")


def folder(root: str | StateDir) -> str:
    """The ledger folder of a store (inside its state folder).

    ``root`` is the store's state (``store.state``, which knows where its folder
    is) or its root, as for every function here.
    """
    return StateDir.of(root).usage


def day_of(t: float) -> str:
    """The (UTC) day an event time falls on: budgets and totals are per UTC day."""
    from datetime import datetime, timezone  # not needed on the session-start path

    return datetime.fromtimestamp(t, timezone.utc).date().isoformat()


# -- recording ------------------------------------------------------------------------


def record(root: str | StateDir, kind: str, now: float | None = None, **fields: object) -> None:
    """Append one event to the ledger of the store at ``root``; never raises."""
    record_many(root, [(kind, now, fields)])


def record_many(
    root: str | StateDir, events: Iterable[tuple[str, float | None, dict[str, object]]]
) -> None:
    """Append several ``(kind, time, fields)`` events in one write; never raises."""
    lines = []
    last: float | None = None
    for kind, now, fields in events:
        event: dict[str, object] = {"t": round(time.time() if now is None else now, 3), "k": kind}
        event.update(fields)
        last = now
        with contextlib.suppress(ValueError, TypeError):
            lines.append(_json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
    if lines:
        with contextlib.suppress(OSError):
            _append(root, "".join(lines).encode("utf-8"), last)


def record_block(
    project_root: str | StateDir,
    user_root: str | StateDir,
    block: str,
    via: str,
    now: float | None = None,
) -> None:
    """Record the notes a merged prompt block (or a recall block) put in front of a model."""
    names = names_in_block(block)
    for root, level in ((project_root, "project"), (user_root, "user")):
        if names[level]:
            record(root, "inject", now, n=names[level], via=via)


def names_in_block(block: str) -> dict[str, list[str]]:
    """The note file names a block lists, by level (after its ``## Project``/``## User`` heads)."""
    out: dict[str, list[str]] = {"project": [], "user": []}
    level = "project"
    for line in block.splitlines():
        if line.startswith("## "):
            level = "user" if "user" in line.lower() else "project"
            continue
        m = _NOTE_LINE.search(line)
        if m:
            out[level].append(m.group(1))
    return out


def _append(root: str | StateDir, line: bytes, now: float | None) -> None:
    state = StateDir.of(root)
    base = state.usage
    path = os.path.join(base, _EVENTS)
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0)
    size = 0
    for _ in range(5):
        try:
            fd = os.open(path, flags, 0o600)
        except FileNotFoundError:
            state.ensure()
            files.ensure_dir(base, private=True)
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
            held = os.fstat(fd)
            try:
                current = os.stat(path)
            except FileNotFoundError:
                continue
            if (held.st_ino, held.st_dev) != (current.st_ino, current.st_dev):
                continue  # folded away while we waited: append to the new file
            os.write(fd, line)
            size = held.st_size + len(line)
        finally:
            os.close(fd)
        break
    if size > COMPACT_BYTES:
        compact(state, now=now)


# -- folding ----------------------------------------------------------------------------


def _empty() -> dict[str, object]:
    return {"version": 1, "folded": 0, "days": {}, "turns": [], "notes": {}}


#: Above any real count of tokens or events, or time (year ~5100): a damaged ledger.
_MAX_COUNT = 10**15
_MAX_TIME = 1e11
_DAY = re.compile(r"^\d{4}-\d{2}-\d{2}$")


def _count(value: object) -> bool:
    return type(value) is int and 0 <= value < _MAX_COUNT


def _time(value: object) -> bool:
    return type(value) in (int, float) and 0 <= value < _MAX_TIME  # type: ignore[operator]


def _valid(data: object) -> bool:
    """Whether ``data`` is a summary this module wrote (every field of the shape it writes)."""
    if not isinstance(data, dict) or data.get("version") != 1:
        return False
    days, turns, notes = data.get("days", {}), data.get("turns", []), data.get("notes", {})
    if not _count(data.get("folded", 0)) or not isinstance(days, dict):
        return False
    if not isinstance(turns, list) or not isinstance(notes, dict):
        return False
    for day, entry in days.items():
        if not _DAY.match(day) or not isinstance(entry, dict):
            return False
        if not all(_count(v) for v in entry.values()):
            return False
    for row in turns:
        if not isinstance(row, list) or len(row) != 8 or not _time(row[0]):
            return False
        if not all(_count(v) for v in row[4:]):
            return False
    for entry in notes.values():
        if not isinstance(entry, dict) or not all(_time(v) for v in entry.values()):
            return False
    return True


def _read_summary(base: str) -> dict[str, object]:
    """The summary; a damaged one is moved aside (one warning) and the ledger starts again."""
    path = os.path.join(base, _SUMMARY)
    try:
        data: object = _json.loads(files.read_bytes(path, 64 * COMPACT_BYTES))
    except FileNotFoundError:
        return _empty()
    except (OSError, ValueError, RecursionError):
        data = None
    if not _valid(data):
        _set_aside(path)
        return _empty()
    assert isinstance(data, dict)
    for key, kind in (("days", dict), ("turns", list), ("notes", dict)):
        data.setdefault(key, kind())
    return data


def _set_aside(path: str) -> None:
    """Move a damaged ledger file aside (kept for a person), with one line saying so."""
    import logging

    aside = f"{path}.damaged-{int(time.time())}"
    try:
        os.rename(path, aside)
        where = f"moved aside to {os.path.basename(aside)}"
    except FileNotFoundError:
        return  # another process moved it first
    except OSError as exc:
        where = f"left in place ({exc.strerror})"
    logging.getLogger("mdmem").warning(
        "the usage ledger %s was damaged: %s; counting starts again", path, where
    )


def _events(path: str) -> Iterable[dict[str, object]]:
    """The events of one file; a damaged line (not an event, an impossible time) is skipped."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if not line.strip():
                    continue  # not JSON: skipped without the error's cost (the json package)
                with contextlib.suppress(ValueError, RecursionError):
                    event = _json.loads(line)
                    if isinstance(event, dict) and _time(event.get("t")):
                        yield event
    except FileNotFoundError:
        return


def _num(event: dict[str, object], key: str) -> int:
    value = event.get(key)
    ok = type(value) in (int, float) and 0 < value < _MAX_COUNT  # type: ignore[operator]
    return int(value) if ok else 0  # type: ignore[call-overload]


def _label(value: object) -> str | None:
    return value if isinstance(value, str) or value is None else str(value)[:200]


def _fold(summary: dict[str, object], events: Iterable[dict[str, object]]) -> None:
    days = summary["days"]
    turns = summary["turns"]
    notes = summary["notes"]
    assert isinstance(days, dict) and isinstance(turns, list) and isinstance(notes, dict)
    for event in events:
        t = float(event["t"])  # type: ignore[arg-type]
        kind = event.get("k")
        if kind in NOTE_KINDS:
            names = event.get("n")
            for name in names if isinstance(names, list) else [names]:
                if not isinstance(name, str) or len(name) > 255:
                    continue
                entry = notes.setdefault(name, {})
                entry[kind] = int(entry.get(kind, 0)) + 1
                entry[f"last_{kind}"] = max(float(entry.get(f"last_{kind}", 0)), t)
                entry.setdefault("first", t)
            continue
        day = days.setdefault(day_of(t), {})
        if kind == "call":
            tokens = [_num(event, key) for key in ("in", "out", "cr", "cw")]
            for key, value in zip(("in", "out", "cr", "cw"), tokens, strict=True):
                day[key] = int(day.get(key, 0)) + value
            day["calls"] = int(day.get("calls", 0)) + 1
            turns.append(
                [t, *(_label(event.get(k)) for k in ("turn", "provider", "model")), *tokens]
            )
        elif kind in ("skip", "held", "turn"):
            day[kind] = int(day.get(kind, 0)) + 1


def _bound(summary: dict[str, object]) -> None:
    days = summary["days"]
    assert isinstance(days, dict)
    for day in sorted(days)[:-KEEP_DAYS]:
        del days[day]
    turns = summary["turns"]
    assert isinstance(turns, list)
    del turns[:-KEEP_TURNS]
    notes = summary["notes"]
    assert isinstance(notes, dict)
    if len(notes) > KEEP_NOTES:

        def last(item: tuple[str, dict[str, float]]) -> float:
            return max(float(item[1].get(f"last_{k}", 0)) for k in NOTE_KINDS)

        keep = sorted(notes.items(), key=last)[-KEEP_NOTES:]
        summary["notes"] = dict(keep)


def load(root: str | StateDir) -> dict[str, object]:
    """The ledger of the store at ``root``: the summary with the unfolded events folded in.

    Keys: ``days`` (day → ``in``/``out``/``cr``/``cw``/``calls``/``skip``/``held``/``turn``),
    ``turns`` (``[time, turn, provider, model, in, out, cr, cw]``, oldest first),
    ``notes`` (file name → counts and ``last_*`` times of ``inject``/``read``/``write``).
    """
    base = folder(root)
    summary = _read_summary(base)
    folded = int(str(summary.get("folded", 0)))
    for n, name in _rotated(base):
        if n > folded:
            _fold(summary, _events(os.path.join(base, name)))
    _fold(summary, _events(os.path.join(base, _EVENTS)))
    _bound(summary)
    return summary


#: The version of what :func:`read_counts` hands back to be kept.
_COUNTS_VERSION = 1


def read_counts(
    root: str | StateDir, kept: str | None = None
) -> tuple[dict[str, tuple[int, float]], str]:
    """Each note's read count and last read time, as :func:`load` folds them, and a record
    (one line of JSON) to hand back as ``kept`` next time.

    With the record of an earlier call, when only ``events.jsonl`` grew since (the
    same file, the summary and the rotated files as they were), only the events
    appended since are folded, not the whole ledger (up to :data:`COMPACT_BYTES`
    of JSON at every prompt of the per-prompt hook). That is exact: a complete
    line is folded once, and a line still being appended waits for the next call;
    :func:`load`'s bound on notes cannot change the answer as long as the notes
    are known to be fewer than :data:`KEEP_NOTES`, or the new events name only
    notes already read (those the bound kept). Otherwise the whole ledger is folded.
    """
    base = folder(root)
    try:
        with os.scandir(base) as entries:
            listing: dict[str, object] = {
                e.name: [st.st_size, st.st_mtime_ns, st.st_ino]
                for e in entries
                if e.name != _LOCK
                for st in (e.stat(follow_symlinks=False),)
            }
    except OSError:
        listing = {}
    events: list[int] | None = listing.pop(_EVENTS, None)  # type: ignore[assignment]
    record = _kept(kept)
    if record is not None and events is not None:
        files_, ino, offset, _, _ = record
        if files_ == listing and ino == events[2] and offset <= events[0]:
            counts = _read_on(base, record)
            if counts is not None:
                return counts
    summary = _read_summary(base)
    folded = int(str(summary.get("folded", 0)))
    for n, name in _rotated(base):
        if n > folded:
            _fold(summary, _events(os.path.join(base, name)))
    data, events_ino = _complete(base, 0)
    _fold(summary, _events_in(data))
    notes = summary["notes"]
    assert isinstance(notes, dict)
    # After the bound: at KEEP_NOTES some may have been left out, and a new name could
    # change which; below it none were.
    known = len(notes) if len(notes) < KEEP_NOTES else KEEP_NOTES + 1
    _bound(summary)
    notes = summary["notes"]
    assert isinstance(notes, dict)
    reads: dict[str, tuple[int, float]] = {}
    for name, entry in notes.items():
        if isinstance(entry, dict) and int(entry.get("read", 0) or 0) > 0:
            reads[str(name)] = (int(entry["read"]), float(entry.get("last_read", 0) or 0))
    return reads, _record(listing, events_ino, len(data), known, reads)


#: A kept record, read: (the ledger's other files, events.jsonl's inode, the offset folded
#: up to, at most how many notes the ledger names, the read counts).
_Kept = tuple[dict[str, object], int, int, int, dict[str, tuple[int, float]]]


def _kept(kept: str | None) -> _Kept | None:
    if not kept:
        return None
    try:
        record = _json.loads(kept)
        assert record["v"] == _COUNTS_VERSION and isinstance(record["files"], dict)
        ino, offset = record["events"]
        known = record["known"]
        assert type(ino) is int and type(offset) is int and type(known) is int
        reads = {str(n): (int(r), float(t)) for n, (r, t) in dict(record["reads"]).items()}
    except (ValueError, TypeError, KeyError, AssertionError, RecursionError):
        return None
    return record["files"], ino, offset, known, reads


def _record(
    files_: dict[str, object],
    ino: int | None,
    offset: int,
    known: int,
    reads: dict[str, tuple[int, float]],
) -> str:
    return _json.dumps(
        {
            "v": _COUNTS_VERSION,
            "files": files_,
            "events": [ino if ino is not None else -1, offset],
            "known": known,
            "reads": {n: list(v) for n, v in reads.items()},
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )


def _complete(base: str, offset: int) -> tuple[bytes, int | None]:
    """The complete lines of ``events.jsonl`` from ``offset`` (up to its last newline: a
    line being appended is left for later) and the file's inode; ``b""`` without one."""
    try:
        fd = os.open(os.path.join(base, _EVENTS), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        return b"", None
    try:
        ino = os.fstat(fd).st_ino
        chunks = []
        os.lseek(fd, offset, os.SEEK_SET)
        while chunk := os.read(fd, 1 << 20):
            chunks.append(chunk)
    except OSError:
        return b"", None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[: data.rfind(b"\n") + 1], ino


def _events_in(data: bytes) -> Iterable[dict[str, object]]:
    """:func:`_events` over bytes of whole lines (read as a text file reads them)."""
    text = data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")
    for line in text.split("\n"):
        if not line.strip():
            continue  # the end of the last line, a blank one: skipped as invalid, more cheaply
        with contextlib.suppress(ValueError, RecursionError):
            event = _json.loads(line)
            if isinstance(event, dict) and _time(event.get("t")):
                yield event


def _read_on(base: str, record: _Kept) -> tuple[dict[str, tuple[int, float]], str] | None:
    """:func:`read_counts` from a kept record: the events appended since folded in; None
    when that could differ from folding the whole ledger."""
    files_, ino, offset, known, earlier = record
    data, now_ino = _complete(base, offset)
    if now_ino != ino:
        return None  # folded away between the listing and the read
    reads = dict(earlier)
    fresh: set[str] = set()
    for event in _events_in(data):
        kind = event.get("k")
        if kind not in NOTE_KINDS:
            continue
        names = event.get("n")
        t = float(event["t"])  # type: ignore[arg-type]
        for name in names if isinstance(names, list) else [names]:
            if not isinstance(name, str) or len(name) > 255:
                continue
            if kind == "read":
                count, last = reads.get(name, (0, 0.0))
                reads[name] = (count + 1, max(last, t))
            if name not in earlier:
                fresh.add(name)
    known += len(fresh)
    if fresh and known > KEEP_NOTES:
        return None  # the bound might now leave out a note: fold it all
    return reads, _record(files_, ino, offset + len(data), known, reads)


def _rotated(base: str) -> list[tuple[int, str]]:
    try:
        names = os.listdir(base)
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), name) for name in names if (m := _ROTATED.match(name))]
    return sorted(found)


def compact(root: str | StateDir, now: float | None = None) -> bool:
    """Fold the events into the summary and trim it; False if another process is at it."""
    base = folder(root)
    try:
        lock = os.open(
            os.path.join(base, _LOCK), os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600
        )
    except OSError:
        return False
    try:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        summary = _read_summary(base)
        folded = int(str(summary.get("folded", 0)))
        rotated = _rotated(base)
        number = max([folded, *(n for n, _ in rotated)]) + 1
        path = os.path.join(base, _EVENTS)
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # waits for appenders in the middle of a write
                name = f"events.{number}.jsonl"
                os.rename(path, os.path.join(base, name))
                rotated.append((number, name))
            finally:
                os.close(fd)
        for n, name in rotated:
            if n > folded:
                _fold(summary, _events(os.path.join(base, name)))
        summary["folded"] = max([folded, *(n for n, _ in rotated)])
        _bound(summary)
        data = _json.dumps(summary, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        files.atomic_write(os.path.join(base, _SUMMARY), data, private=True, durable=False)
        for _, name in rotated:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(base, name))
        return True
    finally:
        os.close(lock)


# -- questions ----------------------------------------------------------------------------


def tokens_on(root: str | StateDir, day: str) -> int:
    """Every token the model processed on ``day`` (input, output, cache reads and writes)."""
    totals = load(root)["days"]
    assert isinstance(totals, dict)
    entry = totals.get(day) or {}
    return sum(int(entry.get(key, 0)) for key in ("in", "out", "cr", "cw"))
