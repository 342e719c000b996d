"""How many review proposals wait in a store: a directory listing, cheap enough for a hook.

The proposals themselves are the Manager's (``manager/review.py``); this module
only counts them, so the session-start hook can say so without importing it.
"""

from __future__ import annotations

import os

from mdmem.store import state as layout
from mdmem.store.state import StateDir

__all__ = ["PROPOSALS_DIR", "pending_count", "pending_line"]

PROPOSALS_DIR = layout.PROPOSALS


def pending_count(store_path: str | StateDir) -> int:
    """How many proposals wait in the store at ``store_path`` (its root, or ``store.state``)."""
    try:
        folder = StateDir.of(store_path).proposals
        return sum(1 for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return 0


def pending_line(store_paths: list[str]) -> str:
    """One line for the session-start block, or ``""`` when nothing waits."""
    count = sum(pending_count(p) for p in store_paths)
    if not count:
        return ""
    s = "" if count == 1 else "s"
    return f"{count} memory proposal{s} wait for review (`mdmem review`)."
