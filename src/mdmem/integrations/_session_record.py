"""The Claude Code hooks' side of session records: a transcript stretch into the record.

Kept apart from :mod:`mdmem.integrations.claude_code` (which knows the
transcript format) so the handover itself stays small: this takes the messages
the handover just read and found new, with their timestamps and branch, and
hands them to :func:`mdmem.manager.sessions.record`. A resumed session (a new
id over the same history) continues the record of the session it resumes:
they share their first message.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from collections.abc import Sequence

    from mdmem.manager.manager import Manager
    from mdmem.store.store import Store


class TranscriptMessage(Protocol):
    """What this needs of :class:`mdmem.integrations.claude_code.TranscriptMessage`
    (named here, not imported: that module imports this one)."""

    stamp: str
    branch: str

    @property
    def uuids(self) -> list[str]: ...

    def as_dict(self) -> dict[str, object]: ...


__all__ = ["close", "record"]


def _session_id(payload: dict[str, object]) -> str:
    value = payload.get("session_id")
    return value if isinstance(value, str) else ""


def record(
    payload: dict[str, object],
    manager: Manager,
    messages: Sequence[TranscriptMessage],
    fresh: Sequence[TranscriptMessage],
) -> None:
    """Add the ``fresh`` messages to the session's record (SessionEnd also closes it)."""
    from mdmem.manager import sessions
    from mdmem.privacy import Redactor, extra_patterns_from_env

    sid = _session_id(payload)
    if not sid or not fresh:
        return
    stamps = sorted(m.stamp for m in fresh if m.stamp)
    branch = next((m.branch for m in reversed(fresh) if m.branch), "")
    sessions.record(
        manager.project,
        sid,
        (m.as_dict() for m in fresh),
        workspace=manager.workspace,
        agent="claude-code",
        redactor=Redactor(extra_patterns_from_env()),
        started=messages[0].stamp if messages and messages[0].stamp else "",
        last=stamps[-1] if stamps else "",
        branch=branch or None,
        first_message=messages[0].uuids[0] if messages else "",
        ended=payload.get("hook_event_name") == "SessionEnd",
    )


def close(
    payload: dict[str, object], project: Store, messages: Sequence[TranscriptMessage]
) -> bool:
    """SessionEnd with nothing new to hand over: mark the record ended; False if none."""
    from mdmem.manager import sessions

    sid = _session_id(payload)
    if not sid:
        return False
    last = max((m.stamp for m in messages if m.stamp), default="")
    return sessions.end(project, sid, last)
