"""Per-session control of the Claude Code hooks: off for good, paused for one session, a budget.

- ``MDMEM_DISABLE=1`` (also ``true``, ``yes``, ``on``): every ``mdmem hook ...``
  injects nothing, hands nothing over and exits 0, whatever its input.
- A paused session (``mdmem pause SESSION_ID``, the plugin's ``/mdmem:pause``):
  the same, for the hooks whose input names that ``session_id``, until
  ``mdmem resume SESSION_ID`` (``/mdmem:resume``). The marker is an empty file
  in mdmem's private state (``<state>/sessions/paused/<session id>``), never in
  a repository: a clone cannot switch someone's memory off or on. Claude Code's
  session ids are unique across projects, so the marker is not per store.
- ``MDMEM_SESSION_BUDGET=N``: the SessionStart block (the index lines, the
  header aside) holds at most N characters; ``0`` injects nothing at session
  start. Above what Claude Code's cap on hook output leaves, the cap wins.

Imports only the standard library and the store's path helpers: the hooks'
fast path uses it.
"""

from __future__ import annotations

import os

from mdmem.store import files
from mdmem.store.paths import is_session_id, state_base

__all__ = [
    "BUDGET_ENV",
    "DISABLE_ENV",
    "disabled_by_env",
    "pause",
    "paused",
    "resume",
    "session_budget",
    "skip",
]

DISABLE_ENV = "MDMEM_DISABLE"
BUDGET_ENV = "MDMEM_SESSION_BUDGET"
_ON = ("1", "true", "yes", "on")


def disabled_by_env() -> bool:
    """Whether ``MDMEM_DISABLE`` switches every hook off."""
    return os.environ.get(DISABLE_ENV, "").strip().lower() in _ON


def _marker(session: object) -> str | None:
    if not is_session_id(session):
        return None
    return os.path.join(state_base(), "sessions", "paused", session)


def _checked(session: str) -> str:
    path = _marker(session)
    if path is None:
        raise ValueError(
            f"{session!r} is not a session id (letters, digits, '-' and '_', at most 100)"
        )
    return path


def paused(session: object) -> bool:
    """Whether the session ``session`` (a hook input's ``session_id``) is paused."""
    path = _marker(session)
    return path is not None and os.path.lexists(path)


def pause(session: str) -> bool:
    """Pause mdmem's hooks for one session; False when it was paused already.

    Raises:
        ValueError: ``session`` is not a session id.
        OSError: the marker could not be written.
    """
    path = _checked(session)
    if os.path.lexists(path):
        return False
    files.ensure_dir(os.path.dirname(path), private=True)
    files.atomic_write(path, b"", private=True)
    return True


def resume(session: str) -> bool:
    """Let mdmem's hooks work again for one session; False when it was not paused.

    Raises:
        ValueError: ``session`` is not a session id.
    """
    path = _checked(session)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return False
    return True


def skip(payload: dict[str, object]) -> bool:
    """Whether a hook with this input must do nothing: ``MDMEM_DISABLE``, or its session paused."""
    return disabled_by_env() or paused(payload.get("session_id"))


def session_budget(default: int) -> int:
    """The SessionStart block's size in characters: ``MDMEM_SESSION_BUDGET``, at most ``default``.

    Unset, empty or not a whole number of zero or more: ``default``.
    """
    raw = os.environ.get(BUDGET_ENV, "").strip().replace("_", "")
    if not raw.isdigit():
        return default
    return min(int(raw), default)
