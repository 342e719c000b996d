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
from typing import TYPE_CHECKING, Protocol

from mdmem.errors import MdmemError
from mdmem.extract.activity import observe
from mdmem.store import sessions as records

if TYPE_CHECKING:
    from collections.abc import Callable

    from mdmem.extract.providers.base import ExtractionRequest, Provider
    from mdmem.privacy import Redactor
    from mdmem.store.store import Store

__all__ = ["Host", "end", "git_branch", "note_written", "record", "summarise"]

log = logging.getLogger("mdmem")

#: Seconds a record waits for the store's lock before it is given up (and logged).
LOCK_TIMEOUT = 5.0


def git_branch(workspace: str) -> str:
    """The branch checked out in ``workspace`` (from ``.git/HEAD``), or ``""``."""
    from mdmem.store import files

    git = os.path.join(workspace, ".git")
    head = files.read_text(os.path.join(git, "HEAD"), 4096)
    if head is None and os.path.isfile(git):  # a worktree: ".git" names the real folder
        pointer = files.read_text(git, 4096) or ""
        if pointer.startswith("gitdir: "):
            real = os.path.join(workspace, pointer[8:].strip())
            head = files.read_text(os.path.join(real, "HEAD"), 4096)
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
        # Briefly: a runner's update_async waits on this, and a record is not worth a stall.
        with project.lock(timeout=LOCK_TIMEOUT):
            return records.record_activity(
                project.state,
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


def end(project: Store, session_id: str, when: str = "") -> bool:
    """Mark the session's record ended; False when there is none (never raises)."""
    if project.unavailable is not None or not records.safe_id(session_id):
        return False
    with contextlib.suppress(MdmemError, OSError), project.lock():
        return records.record_end(project.state, session_id, when) is not None
    return False


def note_written(project: Store, session_id: str, notes: list[tuple[str, str]]) -> None:
    """Name the notes a turn of the session wrote in its record (``timeline`` lists them).

    ``notes`` are ``(level, filename)``; records live with the project store,
    whichever store the notes are in. Never raises.
    """
    if not notes or project.unavailable is not None or not records.safe_id(session_id):
        return
    try:
        with project.lock():
            records.record_notes(project.state, session_id, notes)
    except (MdmemError, OSError) as exc:
        log.warning("cannot add notes to session %s: %s", records.safe_id(session_id), exc)


SUMMARY_SYSTEM = (
    "You summarise one coding-agent session for the developer who comes back to this "
    "repository a week later. You are given the session's record: what the person asked, "
    "the files changed, the commands and tests run, how it ended. Write two sentences at "
    "most: what was done, where, and how it ended (tests passing or not). Plain text, no "
    "secrets, nothing that is not in the record. Answer with the tool: exactly one "
    "operation, action 'update', level 'project', filename 'session.md', whose 'summary' "
    "field is your summary; it is read, never applied."
)
#: A record is summarised by the model only within this many days of its end.
SUMMARY_WITHIN_DAYS = 7


def _summary_in(answer: object) -> str:
    """The summary a model answered (through the operations tool's ``summary`` field)."""
    from mdmem.store.operations import parse_answer

    try:
        items = parse_answer(answer)
    except (MdmemError, ValueError):
        return ""
    for item in items:
        if isinstance(item, dict):
            for key in ("summary", "content", "title"):
                value = item.get(key)
                if isinstance(value, str) and value.strip():
                    return value
    return ""


class Host(Protocol):
    """What :func:`summarise` needs of a :class:`mdmem.Manager` (named, not imported:
    the Manager imports this module)."""

    project: Store
    user: Store
    daily_tokens: int | None
    turn_tokens: int | None
    clock: Callable[[], float]

    @property
    def provider(self) -> Provider: ...

    def redact(self, text: str) -> str: ...


def summarise(
    manager: Host,
    call: Callable[[Provider, ExtractionRequest, str], object],
    limit: int = 3,
    *,
    output_allowance: int = 1_000,
) -> list[str]:
    """Have the model summarise up to ``limit`` ended sessions that have no summary yet.

    Only with a model (not the offline provider), within the daily and per-turn
    token budgets (each call's tokens go to the usage ledger, as a turn's do);
    the prompt is the record itself, already redacted and holding no tool
    output. A session the model gives nothing usable for keeps the summary built
    from its record. Returns the ids summarised. Never raises.
    """
    from datetime import date

    from mdmem.errors import ProviderError
    from mdmem.extract import turn as turn_
    from mdmem.extract.providers.base import ExtractionRequest
    from mdmem.store import ledger

    project = manager.project
    if project.unavailable is not None:
        return []
    try:
        provider = manager.provider
    except (MdmemError, OSError) as exc:
        log.warning("no provider for session summaries: %s", exc)
        return []
    if provider.name == "offline":
        return []
    done: list[str] = []
    now = manager.clock()
    for session in records.list_sessions(project.state):
        if len(done) >= limit:
            break
        if not session.ended or session.summary:
            continue
        if records.stamp_of(session) < now - SUMMARY_WITHIN_DAYS * 86_400:
            continue
        shown = records.render(session)
        request = ExtractionRequest(
            system=SUMMARY_SYSTEM,
            prompt=f"The session record:\n\n{shown}",
            messages=(),
            project_index="",
            user_index="",
            today=date.fromtimestamp(now),
        )
        need = turn_.estimate_tokens(SUMMARY_SYSTEM + request.prompt) + output_allowance
        if manager.turn_tokens is not None and need > manager.turn_tokens:
            continue
        if manager.daily_tokens is not None:
            used = ledger.tokens_on(manager.user.state, ledger.day_of(now))
            if used + need > manager.daily_tokens:
                log.info("session summaries wait for the daily budget")
                break
        try:
            answer = call(provider, request, f"session-{session.session_id}")
        except ProviderError as exc:
            log.warning("the model could not summarise session %s: %s", session.session_id, exc)
            break
        text = _summary_in(answer) or records.built_summary(session)
        try:
            with project.lock():
                records.set_summary(project.state, session.session_id, manager.redact(text))
        except (MdmemError, OSError) as exc:
            log.warning("cannot save the summary of session %s: %s", session.session_id, exc)
            continue
        done.append(session.session_id)
    return done
