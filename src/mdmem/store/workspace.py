"""Which workspace a command runs in, and its two stores.

The project store may be *unavailable* (``Store.unavailable`` says why): when
the workspace is the home directory its ``.PseudoClaude/memory`` is the user
store, and a committed symlink in place of ``.PseudoClaude`` or its ``memory``
would lead writes out of the workspace. Such a workspace has no project store:
it reads as empty and refuses writes with a clear error.
"""

from __future__ import annotations

import os

from mdmem._kinds import Level
from mdmem.store.paths import IN_HOME, IS_USER_STORE, discover_workspace, project_root, user_root
from mdmem.store.store import Store

__all__ = ["refusal", "resolve"]


def resolve(
    workspace: str | None, user_dir: str | None, *, start: str | None = None
) -> tuple[str, Store, Store]:
    """The workspace and its two stores: ``workspace`` as given, else discovered from ``start``."""
    user = os.path.abspath(os.path.expanduser(user_dir)) if user_dir else user_root()
    if workspace:
        ws = os.path.abspath(os.path.expanduser(workspace))
    else:
        ws = discover_workspace(start or os.getcwd(), user_store=user)
    project = Store(project_root(ws), Level.PROJECT, user_store=user)
    return ws, project, Store(user, Level.USER)


def refusal(project: Store) -> str | None:
    """One line saying why ``project`` is refused, for the CLI or a hook to show; None when
    it is usable, or when it is the home directory's (which is normal, not a refusal)."""
    why = project.unavailable
    if why is None or why in (IS_USER_STORE, IN_HOME):
        return None
    return f"mdmem: no project store at {project.path}: {why}; only the user store is used"
