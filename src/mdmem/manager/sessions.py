"""Recording sessions: an agent's messages into its session record, under the store's lock.

The Claude Code hooks call :func:`record` with each stretch of a transcript they
hand over (Stop, PreCompact; SessionEnd closes the record), and
:meth:`mdmem.Manager.update_async` with each turn a runner passes with a
``session_id``. The record itself, its file and its bounds are
:mod:`mdmem.store.sessions`; what is taken from the messages,
:mod:`mdmem.extract.activity`. A failure here costs the record, never the
handover or the turn: it is logged.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from mdmem.errors import MdmemError
from mdmem.extract.activity import observe
from mdmem.store import sessions as records

if TYPE_CHECKING:
    from mdmem.extract.privacy import Redactor
    from mdmem.store.store import Store

__all__ = ["end", "git_branch", "note_written", "record"]

log = logging.getLogger("mdmem")


def git_branch(workspace: str) -> str:
    """The branch checked out in ``workspace`` (from ``.git/HEAD``), or ``""``."""
    from mdmem.store import _fs

    git = os.path.join(workspace, ".git")
    head = _fs.read_text(os.path.join(git, "HEAD"), 4096)
    if head is None and os.path.isfile(git):  # a worktree: ".git" names the real folder
        pointer = _fs.read_text(git, 4096) or ""
        if pointer.startswith("gitdir: "):
            real = os.path.join(workspace, pointer[8:].strip())
            head = _fs.read_text(os.path.join(real, "HEAD"), 4096)
    head = (head or "").strip()
    if head.startswith("ref: refs/heads/"):
        return head[len("ref: refs/heads/") :][:200]
    return ""


def record(
    project: Store,
    session_id: str,
    messages: Iterable[object],
    *,
    workspace: str,
    agent: str,
    redactor: Redactor | None = None,
    started: str = "",
    last: str = "",
    branch: str | None = None,
    first_message: str = "",
    ended: bool = False,
) -> records.Session | None:
    """Add what ``messages`` did to the session's record; None if nothing was (or could be).

    Never raises: a record that cannot be written is logged.
    """
    if project.unavailable is not None or not records.safe_id(session_id):
        return None
    try:
        activity = observe(messages, workspace, redactor)
        with project.lock():
            return records.record_activity(
                project.path,
                session_id,
                activity,
                agent=agent,
                workspace=workspace,
                branch=git_branch(workspace) if branch is None else branch,
                started=started,
                last=last,
                first_message=first_message,
                ended=ended,
            )
    except (MdmemError, OSError, TypeError, ValueError) as exc:
        log.warning("cannot record session %s: %s", records.safe_id(session_id), exc)
        return None


def end(project: Store, session_id: str, when: str = "") -> None:
    """Mark the session's record ended (never raises)."""
    if project.unavailable is not None or not records.safe_id(session_id):
        return
    with contextlib.suppress(MdmemError, OSError), project.lock():
        records.record_end(project.path, session_id, when)


def note_written(project: Store, session_id: str, notes: list[tuple[str, str]]) -> None:
    """Name the notes a turn of the session wrote in its record (``timeline`` lists them).

    ``notes`` are ``(level, filename)``; records live with the project store,
    whichever store the notes are in. Never raises.
    """
    if not notes or project.unavailable is not None or not records.safe_id(session_id):
        return
    try:
        with project.lock():
            records.record_notes(project.path, session_id, notes)
    except (MdmemError, OSError) as exc:
        log.warning("cannot add notes to session %s: %s", records.safe_id(session_id), exc)
