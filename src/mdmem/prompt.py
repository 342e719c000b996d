"""The extraction prompt: fixed instructions (package data) plus this turn's context.

The instructions live in ``prompt.md`` next to this module, so they can be read
and reviewed as prose. The per-turn message carries today's date, the current
project and user indexes (read inside the store locks, just before the call)
and the turn as ``role=...`` lines.
"""

from __future__ import annotations

from datetime import date
from importlib import resources

from mdmem import turn as turn_
from mdmem.index import trim
from mdmem.providers.base import ExtractionRequest, Message

__all__ = ["INDEX_BYTES", "build", "instructions"]

#: The indexes shown to the extraction model are trimmed harder than the
#: system-prompt block: the model only needs to see what exists to avoid duplicates.
INDEX_BYTES = 10_000

_instructions: str | None = None


def instructions() -> str:
    """The fixed part of the prompt (``prompt.md``)."""
    global _instructions
    if _instructions is None:
        _instructions = resources.files("mdmem").joinpath("prompt.md").read_text(encoding="utf-8")
    return _instructions


def _index_section(index: str) -> str:
    lines = [line for line in index.splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    return trim([["Notes (file name in parentheses):", *lines]], max_bytes=INDEX_BYTES)


def build(
    messages: list[Message], project_index: str, user_index: str, today: date
) -> ExtractionRequest:
    """The request for one turn."""
    prompt = (
        f"Today is {today.isoformat()}.\n\n"
        f"<existing_project_memory>\n{_index_section(project_index)}\n</existing_project_memory>\n\n"
        f"<existing_user_memory>\n{_index_section(user_index)}\n</existing_user_memory>\n\n"
        f"<turn>\n{turn_.render(messages)}</turn>\n\n"
        "Answer with the JSON array of memory operations for this turn "
        "([] if nothing is worth keeping)."
    )
    return ExtractionRequest(
        system=instructions(),
        prompt=prompt,
        messages=tuple(messages),
        project_index=project_index,
        user_index=user_index,
        today=today,
    )
