"""History: every version of every note, kept in the store's state so no change loses text.

Each write of a note (by the worker, the CLI, the memory tool, MCP) records the
bytes it wrote; a hand edit that the catalog notices records the bytes it
found; before any write, the bytes about to be replaced are recorded first if
history does not hold them yet. So the text a note had before any change is
always here, whoever made the change.

Layout, under ``<state_dir>/history/<note name>/``: one JSON file per version,
``000001.json``, ``000002.json`` ... holding ``version``, ``at``, ``source``,
``action`` (``write``, ``delete``, ``restore``, ``rename``), ``sha`` and
``text``. A version file is created exclusively (written to a temporary file,
then hard-linked under its number), so two processes never write the same
number, with or without the store's lock.

History is bounded: per note at most :data:`MAX_VERSIONS` versions and none
older than :data:`MAX_AGE_DAYS`, but the newest :data:`KEEP_NEWEST` are always
kept, whatever their age.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import datetime, timedelta, timezone

from mdmem import _record
from mdmem.errors import InvalidOperation, NoteNotFound
from mdmem.store import _catalog, files
from mdmem.store import state as layout
from mdmem.store.state import StateDir

__all__ = [
    "HISTORY_DIR",
    "KEEP_NEWEST",
    "MAX_AGE_DAYS",
    "MAX_VERSIONS",
    "SOURCES",
    "Version",
    "enabled",
    "list_versions",
    "read_version",
    "record",
    "record_if_unknown",
]

HISTORY_DIR = layout.HISTORY
MAX_VERSIONS = 20
MAX_AGE_DAYS = 90
KEEP_NEWEST = 3
#: Who made a change, as recorded (any other text is kept as given).
SOURCES = ("api", "worker", "cli", "memory-tool", "mcp", "hand-edit", "prune", "consolidate")
#: Switched off only by the benchmark, to measure what history costs a write.
enabled = True


@_record.record
class Version:
    """One recorded version of a note; ``version`` is what :func:`read_version` takes."""

    version: int
    at: str
    source: str
    action: str
    sha: str
    size: int

    def to_dict(self) -> dict[str, object]:
        """The version as JSON-ready data (without the text)."""
        return {
            "version": self.version,
            "at": self.at,
            "source": self.source,
            "action": self.action,
            "sha": self.sha,
            "size": self.size,
        }


def _folder(root: str | StateDir, name: str) -> str:
    return os.path.join(StateDir.of(root).history, name)


def _numbers(folder: str) -> list[int]:
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    out = []
    for entry in names:
        stem, dot, ext = entry.partition(".")
        if dot and ext == "json" and stem.isdigit():
            out.append(int(stem))
    return sorted(out)


def _load(folder: str, number: int) -> dict[str, object] | None:
    try:
        with open(os.path.join(folder, f"{number:06d}.json"), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _version(data: dict[str, object]) -> Version:
    text = data.get("text")
    return Version(
        version=int(str(data.get("version", 0))),
        at=str(data.get("at", "")),
        source=str(data.get("source", "")),
        action=str(data.get("action", "write")),
        sha=str(data.get("sha", "")),
        size=len(text.encode("utf-8")) if isinstance(text, str) else 0,
    )


def latest_sha(root: str | StateDir, name: str) -> str | None:
    """The hash of the newest recorded version of ``name`` (None: no history)."""
    folder = _folder(root, name)
    for number in reversed(_numbers(folder)):
        data = _load(folder, number)
        if data is not None:
            return str(data.get("sha"))
    return None


def record(
    root: str | StateDir,
    name: str,
    data: bytes,
    *,
    source: str,
    action: str = "write",
    now: datetime | None = None,
    durable: bool = False,
) -> int | None:
    """Record ``data`` as the newest version of note ``name``; return its number.

    ``durable`` fsyncs the version: needed for text about to be overwritten
    (:func:`record_if_unknown`), not for text just written, which the note's
    own file holds durably until the next change records it again if need be.

    Nothing is recorded (None) when history is off or the newest version
    already has these bytes and this action. History is a safety net: a
    failure to record is not a failure to write the note, so it is swallowed.
    ``root`` is the store's state (``store.state``) or its root, as for every
    function here.
    """
    if not enabled:
        return None
    sha = _catalog.content_hash(data)
    state = StateDir.of(root)
    folder = _folder(state, name)
    try:
        numbers = _numbers(folder)
        if numbers:
            last = _load(folder, numbers[-1])
            if last is not None and last.get("sha") == sha and last.get("action") == action:
                return None
        state.ensure()
        files.ensure_dir(folder, private=True)
        moment = (now or datetime.now(timezone.utc)).astimezone(timezone.utc)
        payload: dict[str, object] = {
            "action": action,
            "at": moment.replace(microsecond=0).isoformat(),
            "sha": sha,
            "source": source,
            "text": data.decode("utf-8", "surrogateescape"),
        }
        tmp = os.path.join(folder, f".new.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        number = first = (numbers[-1] if numbers else 0) + 1
        try:
            for _ in range(1000):
                payload["version"] = number
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                with open(fd, "w", encoding="utf-8", errors="surrogateescape") as f:
                    f.write(json.dumps(payload, ensure_ascii=False))
                    if durable:
                        f.flush()
                        os.fsync(f.fileno())
                try:
                    os.link(tmp, os.path.join(folder, f"{number:06d}.json"))
                    break
                except FileExistsError:
                    number += 1  # another writer took that number first
            else:
                return None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)
        # Taken at the first try: the versions are those listed and this one (one that
        # another writer added meanwhile is newer, and bounded by that writer).
        _bound(folder, moment, [*numbers, number] if number == first else None)
        return number
    except OSError:
        return None


def record_if_unknown(
    root: str | StateDir,
    name: str,
    data: bytes,
    *,
    source: str = "hand-edit",
    now: datetime | None = None,
) -> int | None:
    """Record ``data`` unless it is already the newest version (a change made behind mdmem)."""
    state = StateDir.of(root)
    if not enabled or latest_sha(state, name) == _catalog.content_hash(data):
        return None
    return record(state, name, data, source=source, now=now, durable=True)


def _bound(folder: str, now: datetime, numbers: list[int] | None = None) -> None:
    if numbers is None:
        numbers = _numbers(folder)
    if len(numbers) <= KEEP_NEWEST:
        return
    cutoff = now - timedelta(days=MAX_AGE_DAYS)
    older = numbers[:-KEEP_NEWEST]
    excess = max(0, len(numbers) - MAX_VERSIONS)
    for position, number in enumerate(older):
        drop = position < excess
        if not drop:
            # Oldest first: once one is young enough, so are all after it.
            data = _load(folder, number)
            try:
                at = datetime.fromisoformat(str(data.get("at"))) if data else None
            except ValueError:
                at = None
            if at is not None and at >= cutoff:
                return
            drop = at is not None
        if drop:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, f"{number:06d}.json"))


def list_versions(root: str | StateDir, name: str) -> list[Version]:
    """Every recorded version of note ``name``, oldest first (empty: no history)."""
    folder = _folder(root, name)
    out = []
    for number in _numbers(folder):
        data = _load(folder, number)
        if data is not None:
            out.append(_version(data))
    return out


def read_version(root: str | StateDir, name: str, version: int | str) -> bytes:
    """The bytes of one recorded version.

    Raises:
        InvalidOperation: ``version`` is not a version number.
        NoteNotFound: no such version of that note.
    """
    try:
        number = int(str(version).strip())
    except ValueError:
        raise InvalidOperation(f"{version!r} is not a version number", "version") from None
    folder = _folder(root, name)
    data = _load(folder, number)
    if data is None or not isinstance(data.get("text"), str):
        raise NoteNotFound(f"{name} version {number}", folder)
    return str(data["text"]).encode("utf-8", "surrogateescape")
