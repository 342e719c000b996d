"""The two dimensions of a note: its level (who shares it) and its type (what it means).

Kept apart from ``note.py`` so that code on the fast ``mdmem index`` path can
name them without importing YAML or dataclasses.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["Level", "NoteType"]


class Level(str, Enum):
    """Who shares a note: everyone in the repository, or every workspace of one OS user."""

    PROJECT = "project"
    USER = "user"

    def __str__(self) -> str:
        return self.value


class NoteType(str, Enum):
    """What a note means."""

    USER_PREFERENCE = "user_preference"
    CORRECTION_FEEDBACK = "correction_feedback"
    PROJECT_KNOWLEDGE = "project_knowledge"
    REFERENCE_MATERIAL = "reference_material"

    def __str__(self) -> str:
        return self.value
