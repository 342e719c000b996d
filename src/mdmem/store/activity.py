"""What memory did in each session: injected at its start, recalled per prompt, written.

One small JSON-lines file per session in the project store's state folder
(``activity/<session id>.jsonl``, never in the repository), appended by the
hooks and the worker, read by the web page's activity view. Each line is one
event (field ``k``):

- ``start``: the SessionStart block (``n``: note names by level, ``tokens``);
- ``recall``: one prompt's recall (``prompt``: its first words, redacted;
  ``n``: the recalled notes by level, ``tokens``);
- ``write``: a turn's writes (``turn``, ``n``: ``[level, action, name]`` each,
  ``in``/``out``: the model's tokens for the turn).

It stays bounded and private: a prompt is cut to its first :data:`PROMPT_WORDS`
words and redacted (:mod:`mdmem.privacy`) before it is written; a
file stops growing at :data:`MAX_FILE_BYTES`; only the :data:`KEEP_SESSIONS`
newest session files are kept. Recording never raises: it is information,
never a reason to fail the hook it describes.
"""

from __future__ import annotations

import contextlib
import os
import time

from mdmem import _json
from mdmem.store.paths import is_session_id, state_base
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = [
    "KEEP_SESSIONS",
    "MAX_FILE_BYTES",
    "PROMPT_WORDS",
    "by_level",
    "first_words",
    "folder",
    "read",
    "record",
    "remember",
    "sessions",
    "tokens",
    "workspaces",
]

KEEP_SESSIONS = 200
MAX_FILE_BYTES = 256 * 1024
PROMPT_WORDS = 8
_DIR = "activity"
_MAX_EVENT = 16 * 1024


def folder(root: str | StateDir) -> str:
    """The activity folder of the project store at ``root`` (in its state folder).

    ``root`` is the store's state (``store.state``) or its root, as for every
    function here.
    """
    return StateDir.of(root) / _DIR


def _path(root: str | StateDir, session: object) -> str | None:
    if not is_session_id(session):
        return None
    return os.path.join(folder(root), f"{session}.jsonl")


def tokens(text: str) -> int:
    """A cautious token count (as recall's): a token per 4 ASCII characters, one per other."""
    ascii_count = len(text.encode("ascii", "ignore"))
    return -(-ascii_count // 4) + (len(text) - ascii_count)


def first_words(prompt: str, count: int = PROMPT_WORDS) -> str:
    """The first ``count`` words of a prompt (at most 120 characters), secrets redacted."""
    from mdmem.privacy import redact

    words = redact(prompt[:2_000]).split()
    text = " ".join(words[:count])
    if len(words) > count or len(text) > 120:
        text = text[:120].rstrip() + " …"
    return text


def record(
    root: str | StateDir, session: object, kind: str, now: float | None = None, **fields: object
) -> None:
    """Append one event to the session's activity file; never raises."""
    state = StateDir.of(root)
    path = _path(state, session)
    if path is None:
        return
    event: dict[str, object] = {"t": round(time.time() if now is None else now, 3), "k": kind}
    event.update(fields)
    try:
        line = _json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n"
    except (TypeError, ValueError):
        return
    data = line.encode("utf-8", "replace")
    if len(data) > _MAX_EVENT:
        return
    with contextlib.suppress(OSError):
        new = not os.path.exists(path)
        if not new and os.path.getsize(path) + len(data) > MAX_FILE_BYTES:
            return  # bounded: a very long session keeps its first events
        state.ensure()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        if new:
            _prune(os.path.dirname(path))


def _prune(base: str) -> None:
    """Keep the :data:`KEEP_SESSIONS` newest session files."""
    with contextlib.suppress(OSError):
        entries = [e for e in os.scandir(base) if e.name.endswith(".jsonl") and e.is_file()]
        if len(entries) <= KEEP_SESSIONS:
            return
        entries.sort(key=lambda e: e.stat().st_mtime)
        for entry in entries[: len(entries) - KEEP_SESSIONS]:
            with contextlib.suppress(OSError):
                os.unlink(entry.path)


def sessions(root: str | StateDir) -> list[tuple[str, float, float]]:
    """(session id, first event time, last change time) of every recorded session, newest
    first."""
    base = folder(root)
    out = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(base):
            name = entry.name
            if not name.endswith(".jsonl") or not is_session_id(name[:-6]):
                continue
            with contextlib.suppress(OSError):
                st = entry.stat(follow_symlinks=False)
                first = _first_time(entry.path)
                out.append((name[:-6], first if first is not None else st.st_mtime, st.st_mtime))
    return sorted(out, key=lambda s: s[2], reverse=True)


def _first_time(path: str) -> float | None:
    with contextlib.suppress(OSError, ValueError), open(path, "rb") as f:
        event = _json.loads(f.readline(_MAX_EVENT))
        if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
            return float(event["t"])
    return None


def read(root: str | StateDir, session: str) -> list[dict[str, object]]:
    """The events of one session, oldest first (lines that are not events are skipped).

    Raises:
        ValueError: ``session`` is not a session id.
    """
    path = _path(root, session)
    if path is None:
        raise ValueError(f"{session[:40]!r} is not a session id")
    out: list[dict[str, object]] = []
    try:
        # Never a symlink planted in the state folder.
        fd = os.open(
            path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
        )
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE_BYTES + _MAX_EVENT)
    except OSError:
        return []
    for line in data.splitlines():
        with contextlib.suppress(ValueError):
            event = _json.loads(line)
            if isinstance(event, dict) and isinstance(event.get("t"), (int, float)):
                out.append(event)
    return out


def by_level(names: Mapping[str, Iterable[str]]) -> dict[str, list[str]]:
    """A ``{level: names}`` map made JSON-ready (levels without names left out)."""
    return {level: list(found) for level, found in names.items() if found}


# -- the workspaces mdmem has state for ------------------------------------------------

#: At most this many workspaces are remembered (the most recently used).
KEEP_WORKSPACES = 100
_KNOWN = "workspaces.json"


def _known_path() -> str:
    return os.path.join(state_base(), _KNOWN)


def workspaces() -> list[tuple[str, float]]:
    """(workspace folder, when last used) of every workspace a session or the web page
    used, most recent first: the web page's store switcher lists them."""
    try:
        with open(_known_path(), "rb") as f:
            data = _json.loads(f.read(1_000_000))
    except (OSError, ValueError):
        return []
    if not isinstance(data, dict):
        return []
    found = [
        (str(k), float(v))
        for k, v in data.items()
        if isinstance(k, str) and os.path.isabs(k) and isinstance(v, (int, float))
    ]
    return sorted(found, key=lambda kv: kv[1], reverse=True)


def remember(workspace: str, now: float | None = None) -> None:
    """Note that ``workspace`` was used (at most once a minute is written); never raises."""
    from mdmem.store import files

    moment = time.time() if now is None else now
    known = dict(workspaces())
    if moment - known.get(workspace, 0.0) < 60:
        return
    known[workspace] = round(moment, 1)
    kept = dict(sorted(known.items(), key=lambda kv: kv[1])[-KEEP_WORKSPACES:])
    with contextlib.suppress(OSError, ValueError):
        os.makedirs(state_base(), mode=0o700, exist_ok=True)
        import json  # indented: the package (once a minute at most)

        data = json.dumps(kept, ensure_ascii=False, indent=0).encode("utf-8", "surrogateescape")
        files.atomic_write(_known_path(), data, private=True, durable=False)
