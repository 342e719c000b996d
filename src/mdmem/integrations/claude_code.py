"""Claude Code hooks: the prompt block at session start, and each finished turn into memory.

``SessionStart`` prints the memory block as ``additionalContext``. ``Stop``
reads the session transcript (JSONL), takes the messages after the last one
already handed over for that session, journals them as a turn and starts a
detached worker process, so the agent never waits for the model. Both always
exit 0: a memory problem must never block or break a coding session.

The transcript format is Claude Code's and undocumented; the reader is
deliberately forgiving (see :func:`read_transcript`). Only this module knows it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sys
from typing import TYPE_CHECKING, TextIO

from mdmem.store import _fs

if TYPE_CHECKING:
    import logging
    from collections.abc import Iterator

__all__ = [
    "EVENTS",
    "TranscriptMessage",
    "hand_over",
    "install",
    "log_to_file",
    "new_messages",
    "read_cursor",
    "read_hook_input",
    "read_transcript",
    "session_start",
    "session_start_output",
    "settings_path",
    "start_worker",
    "uninstall",
    "workspace_of",
    "write_cursor",
]

_MAX_STDIN = 1_000_000
_MAX_TRANSCRIPT = 256 * 1024 * 1024
_SESSION_NAME = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
CURSOR_DIR = os.path.join("claude-code", "sessions")
#: The hooks mdmem installs, by Claude Code event.
EVENTS = {"SessionStart": "session-start", "Stop": "stop"}
SESSION_START_MATCHER = "startup|resume|clear|compact"


def _log() -> logging.Logger:
    import logging

    return logging.getLogger("mdmem")


class TranscriptMessage:
    """One message of a transcript: a user line, or all lines of one streamed assistant message.

    ``uuid`` is the uuid of its last line: the handover cursor.
    """

    __slots__ = ("content", "role", "uuid")

    def __init__(self, uuid: str, role: str, content: list[object]) -> None:
        self.uuid = uuid
        self.role = role
        self.content = content

    def __repr__(self) -> str:
        return f"TranscriptMessage({self.uuid!r}, {self.role!r}, {len(self.content)} blocks)"

    def as_dict(self) -> dict[str, object]:
        """The message as the Manager takes it (Anthropic style)."""
        return {"role": self.role, "content": self.content}


def _lines(path: str) -> Iterator[tuple[int, object]]:
    with open(path, "rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield number, json.loads(raw)
            except ValueError:
                _log().warning("%s:%d: not JSON; line skipped", path, number)


def read_transcript(path: str) -> list[TranscriptMessage]:
    """The main conversation of a Claude Code transcript, in order.

    Only ``user`` and ``assistant`` lines are read; sidechain (sub-agent) and
    meta lines, exact duplicates (same ``uuid``) and lines that are not JSON
    objects are skipped; assistant lines sharing ``message.id`` are one
    streamed message.

    Raises:
        OSError: the transcript cannot be read.
    """
    if os.path.getsize(path) > _MAX_TRANSCRIPT:
        raise OSError(f"{path}: transcript larger than {_MAX_TRANSCRIPT} bytes")
    messages: list[TranscriptMessage] = []
    by_id: dict[str, TranscriptMessage] = {}
    seen: set[str] = set()
    for number, line in _lines(path):
        if not isinstance(line, dict):
            _log().warning("%s:%d: not a JSON object; line skipped", path, number)
            continue
        kind = line.get("type")
        if kind not in ("user", "assistant") or line.get("isSidechain") or line.get("isMeta"):
            continue
        uuid = str(line.get("uuid") or f"line-{number}")
        if uuid in seen:
            continue
        seen.add(uuid)
        message = line.get("message")
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        blocks: list[object] = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else [b for b in content if isinstance(b, dict)]
            if isinstance(content, list)
            else []
        )
        message_id = message.get("id")
        if kind == "assistant" and isinstance(message_id, str) and message_id in by_id:
            merged = by_id[message_id]
            merged.content.extend(blocks)
            merged.uuid = uuid
            continue
        entry = TranscriptMessage(uuid=uuid, role=str(kind), content=blocks)
        if kind == "assistant" and isinstance(message_id, str):
            by_id[message_id] = entry
        messages.append(entry)
    return messages


def new_messages(messages: list[TranscriptMessage], cursor: str | None) -> list[TranscriptMessage]:
    """The messages after the one whose uuid is ``cursor`` (all of them if it is unknown)."""
    if cursor is None:
        return messages
    for position, message in enumerate(messages):
        if message.uuid == cursor:
            return messages[position + 1 :]
    # The cursor's line is gone (the transcript was rewritten): hand over all of
    # it rather than lose a turn; the model sees the index and skips known facts.
    return messages


def _cursor_path(state_dir: str, session_id: str) -> str:
    name = (
        session_id
        if _SESSION_NAME.match(session_id)
        else hashlib.sha256(session_id.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    )
    return os.path.join(state_dir, CURSOR_DIR, f"{name}.json")


def read_cursor(state_dir: str, session_id: str) -> str | None:
    """The uuid of the last message handed over for a session."""
    try:
        with open(_cursor_path(state_dir, session_id), encoding="utf-8") as f:
            value = json.load(f).get("last_uuid")
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, str) else None


def write_cursor(state_dir: str, session_id: str, uuid: str) -> None:
    """Remember the last message handed over for a session."""
    path = _cursor_path(state_dir, session_id)
    _fs.ensure_dir(os.path.dirname(path), private=True)
    _fs.atomic_write(path, json.dumps({"last_uuid": uuid}).encode(), private=True)


def read_hook_input(stream: TextIO | None = None) -> dict[str, object]:
    """The hook's JSON from stdin; an empty object when there is none or it is not JSON."""
    source = stream if stream is not None else sys.stdin
    try:
        text = source.read(_MAX_STDIN)
        data = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def workspace_of(payload: dict[str, object]) -> str:
    """Where the session runs: the hook's ``cwd``, else ``$CLAUDE_PROJECT_DIR``, else here."""
    cwd = payload.get("cwd")
    if isinstance(cwd, str) and os.path.isdir(cwd):
        return cwd
    return os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd()


def session_start_output(block: str, project_store: str, user_store: str) -> str:
    """The JSON a SessionStart hook prints: the memory block as additional context."""
    context = ""
    if block:
        context = (
            "# Long-term memory (mdmem)\n"
            "Notes kept from earlier sessions. Each line names a note file; read the "
            f"whole note when it is relevant: project notes are in {project_store}, "
            f"user notes in {user_store}.\n\n{block}"
        )
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": context}},
        ensure_ascii=False,
    )


def session_start(payload: dict[str, object], workspace: str | None, user_dir: str | None) -> str:
    """What ``mdmem hook session-start`` prints, for the session's workspace."""
    from mdmem.store.index import merge
    from mdmem.store.workspace import resolve

    _, project, user = resolve(workspace, user_dir, start=workspace_of(payload))
    block = merge(project.load_index(), user.load_index())
    return session_start_output(block, project.path, user.path)


def hand_over(
    payload: dict[str, object],
    workspace: str | None = None,
    user_dir: str | None = None,
    *,
    spawn: bool = True,
) -> str | None:
    """The Stop hook's work: journal the session's new messages and start a worker.

    Returns the journaled turn's id, or None when there was nothing new.

    Raises:
        OSError, ValueError: the transcript or the journal cannot be used.
    """
    from mdmem.manager.manager import Manager
    from mdmem.store._catalog import ensure_state_dir

    transcript = payload.get("transcript_path")
    session = payload.get("session_id")
    if not isinstance(transcript, str) or not isinstance(session, str) or not session:
        raise ValueError("the hook input has no transcript_path or session_id")
    from mdmem.store.workspace import resolve

    ws, _, user = resolve(workspace, user_dir, start=workspace_of(payload))
    manager = Manager(ws, user_dir=user.path, resume=False, discover=False)
    state = ensure_state_dir(manager.project.path)
    messages = read_transcript(transcript)
    # Under the store lock: two Stop hooks of one session at once must not both
    # hand over the same messages.
    with manager.project.lock():
        fresh = new_messages(messages, read_cursor(state, session))
        if not fresh:
            return None
        turn_id = manager.defer([m.as_dict() for m in fresh])
        write_cursor(state, session, fresh[-1].uuid)
    if turn_id is not None and spawn:
        start_worker(manager.workspace, manager.user.path)
    return turn_id


def start_worker(workspace: str, user_dir: str) -> None:
    """Start ``mdmem worker`` detached: it outlives the hook and never holds up the agent."""
    import subprocess

    from mdmem.store._catalog import ensure_state_dir
    from mdmem.store.paths import project_root

    log_dir = ensure_state_dir(project_root(workspace))
    with open(os.path.join(log_dir, "worker.log"), "ab") as log:
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mdmem",
                "--workspace",
                workspace,
                "--user-dir",
                user_dir,
                "worker",
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
            close_fds=True,
        )


# -- settings.json ---------------------------------------------------------------------


def settings_path(scope: str, workspace: str) -> str:
    """``.claude/settings.json`` of the workspace (``project``) or of the home (``user``)."""
    base = workspace if scope == "project" else os.path.expanduser("~")
    return os.path.join(base, ".claude", "settings.json")


def _load_settings(path: str) -> dict[str, object]:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); fix it by hand first") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path} does not hold a JSON object; fix it by hand first")
    return data


def _is_ours(hook: object, command: str) -> bool:
    return isinstance(hook, dict) and str(hook.get("command", "")).startswith(f"{command} hook ")


def install(path: str, command: str = "mdmem", timeout: int = 30) -> bool:
    """Merge mdmem's hooks into a settings file, keeping everything else; False if already there.

    Raises:
        ValueError: the file is not a JSON object.
    """
    settings = _load_settings(path)
    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise ValueError(f"{path}: 'hooks' is not an object; fix it by hand first")
    changed = False
    for event, sub in EVENTS.items():
        groups = hooks.setdefault(event, [])
        if not isinstance(groups, list):
            raise ValueError(f"{path}: hooks.{event} is not a list; fix it by hand first")
        present = any(
            _is_ours(h, command)
            for g in groups
            if isinstance(g, dict)
            for h in g.get("hooks", [])
            if isinstance(g.get("hooks"), list)
        )
        if present:
            continue
        group: dict[str, object] = {
            "hooks": [{"type": "command", "command": f"{command} hook {sub}", "timeout": timeout}]
        }
        if event == "SessionStart":
            group = {"matcher": SESSION_START_MATCHER, **group}
        groups.append(group)
        changed = True
    if changed:
        _fs.ensure_dir(os.path.dirname(path))
        _fs.atomic_write(path, (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode())
    return changed


def uninstall(path: str, command: str = "mdmem") -> bool:
    """Remove only mdmem's hooks from a settings file; False if there were none.

    Raises:
        ValueError: the file is not a JSON object.
    """
    settings = _load_settings(path)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept_groups = []
        for group in groups:
            inner = group.get("hooks") if isinstance(group, dict) else None
            if isinstance(inner, list):
                kept = [h for h in inner if not _is_ours(h, command)]
                if len(kept) != len(inner):
                    changed = True
                    if not kept:
                        continue
                    group = {**group, "hooks": kept}
            kept_groups.append(group)
        if kept_groups:
            hooks[event] = kept_groups
        else:
            del hooks[event]
    if not hooks:
        del settings["hooks"]
    if changed:
        _fs.atomic_write(path, (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode())
    return changed


def log_to_file(state_dir: str) -> None:
    """Send the mdmem logger to ``<state>/hooks.log`` as well, since hook output is hidden."""
    import logging

    with contextlib.suppress(OSError):
        _fs.ensure_dir(state_dir)
        handler = logging.FileHandler(os.path.join(state_dir, "hooks.log"), encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
        logging.getLogger("mdmem").addHandler(handler)
