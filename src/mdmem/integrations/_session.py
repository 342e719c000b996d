"""What a Claude Code session has in its context, as mdmem's hooks put it there.

One small JSON file per session in the project store's state folder
(``claude-code/recalled/<session id>.json``): the notes the SessionStart
block listed (``start``) and those UserPromptSubmit recalled since
(``recalled``, at most :data:`MAX_SEEN`, the latest). Reading it costs the same
whatever the store's size and the session's length. Imported by both hooks,
so it imports only the standard library and the store's file helpers.
"""

from __future__ import annotations

import os
import re

from mdmem import _json
from mdmem.store import files
from mdmem.store.paths import is_session_id
from mdmem.store.state import StateDir

__all__ = [
    "MAX_SEEN",
    "names_in",
    "read_seen",
    "remember_session_start",
    "seen_path",
    "workspace_of",
    "write_seen",
]

#: The most recalled note names a session's file keeps (the latest).
MAX_SEEN = 1000
_SEEN_DIR = os.path.join("claude-code", "recalled")
# Compiled where a block is read (re keeps it): the hook mostly needs no block.
_NOTE_NAME = r"\(([^()/\\\s;]+\.md)[;)]"


def workspace_of(payload: dict[str, object]) -> str:
    """Where the session's store is: ``$CLAUDE_PROJECT_DIR``, else the hook's ``cwd``, else here.

    Claude Code's project directory stays put when the session ``cd``s into a
    subdirectory or a worktree; the ``cwd`` follows it.
    """
    project = os.environ.get("CLAUDE_PROJECT_DIR")
    if project and os.path.isdir(project):
        return project
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and os.path.isdir(cwd):
        return cwd
    return os.getcwd()


def seen_path(root: str, session: object) -> str | None:
    if not is_session_id(session):
        return None
    return os.path.join(StateDir.of(root).path, _SEEN_DIR, f"{session}.json")


def read_seen(path: str | None) -> tuple[list[str], list[str]] | None:
    """What the session has seen: (notes SessionStart listed, notes recalled); None if unknown."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = _json.loads(f.read(1_000_000))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    start, recalled = data.get("start"), data.get("recalled")
    if not isinstance(start, list) or not isinstance(recalled, list):
        return None
    return [n for n in start if isinstance(n, str)], [n for n in recalled if isinstance(n, str)]


def write_seen(root: str, path: str | None, start: list[str], recalled: list[str]) -> None:
    if path is None:
        return
    try:
        StateDir.of(root).ensure()
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        payload = _json.dumps(
            {"start": start, "recalled": recalled[-MAX_SEEN:]}, ensure_ascii=False
        )
        files.atomic_write(path, payload.encode("utf-8"), private=True, durable=False)
    except OSError:
        pass  # remembering is a nicety; the next prompt may repeat a note, nothing worse


def names_in(block: str) -> list[str]:
    """The note file names a block's lines name (``(name.md)`` or ``(name.md; level, date)``)."""
    return list(dict.fromkeys(re.findall(_NOTE_NAME, block)))


def remember_session_start(project_root: str, payload: dict[str, object], context: str) -> None:
    """Record what the SessionStart hook put in the session's context (called by that hook).

    After ``/compact`` or ``/clear`` the notes recalled earlier in the session are
    gone from the context, so they are forgotten too; after a start or a resume
    they are kept.
    """
    path = seen_path(project_root, payload.get("session_id"))
    if path is None:
        return
    recalled: list[str] = []
    if payload.get("source") not in ("compact", "clear"):
        known = read_seen(path)
        if known is not None:
            recalled = known[1]
    write_seen(project_root, path, names_in(context), recalled)
