"""Builders shared by the tests: one way to spell an operation and a store.

Import them as ``from builders import create_op, new_store`` (``tests/`` is on the path);
the matching fixtures (``store``) live in ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path

from mdmem import Level, Store

__all__ = ["create_op", "delete_op", "new_store", "update_op"]


def create_op(
    title: str,
    content: str | None = None,
    *,
    level: str = "project",
    type: str | None = None,
    summary: str | None = None,
    **extra: object,
) -> dict[str, object]:
    """A ``create`` operation as a model would answer it.

    The type follows the level (``project_knowledge`` / ``user_preference``) unless
    given; the content defaults to a sentence naming the title, so two titles never
    make two identical notes; ``extra`` adds keys (``supersedes``, ``expires``, ``slug``).
    """
    op: dict[str, object] = {
        "action": "create",
        "level": level,
        "type": type or ("project_knowledge" if level == "project" else "user_preference"),
        "title": title,
    }
    if summary is not None:
        op["summary"] = summary
    op["content"] = f"What {title} says." if content is None else content
    op.update(extra)
    return op


def update_op(
    filename: str, content: str, *, level: str = "project", **extra: object
) -> dict[str, object]:
    """An ``update`` operation of ``filename``."""
    return {"action": "update", "level": level, "filename": filename, "content": content, **extra}


def delete_op(filename: str, *, level: str = "project") -> dict[str, object]:
    """A ``delete`` operation of ``filename``."""
    return {"action": "delete", "level": level, "filename": filename}


def new_store(root: Path, level: Level = Level.PROJECT) -> Store:
    """A store at ``root`` (created on first write)."""
    return Store(root, level)
