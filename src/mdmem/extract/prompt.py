"""The extraction prompt: fixed instructions (package data) plus this turn's context.

The instructions live in ``prompt.md`` next to this module, so they can be read
and reviewed as prose. The per-turn message carries today's date, the current
project and user indexes (read inside the store locks, just before the call;
each line with the note's last update, ``[updated 2026-11-29]``, so the model
can tell an old fact from a new one, and without superseded or expired notes)
and the turn as ``role=...`` lines.
"""

from __future__ import annotations

from datetime import date
from importlib import resources

from mdmem._lines import trim
from mdmem.extract import turn as turn_
from mdmem.extract.providers.base import ExtractionRequest, Message

__all__ = ["MIN_INDEX_BYTES", "PROMPT_TOKENS", "build", "instructions"]

#: The whole extraction prompt stays under this many estimated tokens: the
#: instructions and the (already bounded) turn come first, and the two indexes
#: share what is left; the model only needs them to see what already exists.
PROMPT_TOKENS = 7_500
#: The indexes never get less than this, however long the turn.
MIN_INDEX_BYTES = 2_000

_instructions: str | None = None
_instruction_tokens: int | None = None


def instructions() -> str:
    """The fixed part of the prompt (``prompt.md``)."""
    global _instructions
    if _instructions is None:
        _instructions = (
            resources.files("mdmem.extract").joinpath("prompt.md").read_text(encoding="utf-8")
        )
    return _instructions


def _index_section(index: str, max_bytes: int) -> str:
    lines = [line for line in index.splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    return trim([["Notes (file name in parentheses):", *lines]], max_bytes=max_bytes)


def _budgets(project: str, user: str, left_bytes: int) -> tuple[int, int]:
    """Split the bytes left between the two indexes: half each, and what one leaves the other."""
    left = max(left_bytes, MIN_INDEX_BYTES)
    # 64: room for the heading line trim() adds.
    need_project = len(project.encode("utf-8", "surrogatepass")) + 64
    need_user = len(user.encode("utf-8", "surrogatepass")) + 64
    if need_project + need_user <= left:
        return need_project, need_user
    half = left // 2
    if need_project <= half:
        return need_project, left - need_project
    if need_user <= half:
        return left - need_user, need_user
    return half, left - half


def build(
    messages: list[Message], project_index: str, user_index: str, today: date
) -> ExtractionRequest:
    """The request for one turn, within :data:`PROMPT_TOKENS` estimated tokens."""
    turn_text = turn_.render(messages)
    global _instruction_tokens
    if _instruction_tokens is None:  # the instructions never change: count them once
        _instruction_tokens = turn_.estimate_tokens(instructions())
    used = _instruction_tokens + turn_.estimate_tokens(turn_text) + 150
    # Three bytes a token is the worst case (CJK), so the budget holds in any script.
    project_bytes, user_bytes = _budgets(project_index, user_index, (PROMPT_TOKENS - used) * 3)
    prompt = (
        f"Today is {today.isoformat()}.\n\n"
        f"<existing_project_memory>\n{_index_section(project_index, project_bytes)}\n"
        "</existing_project_memory>\n\n"
        f"<existing_user_memory>\n{_index_section(user_index, user_bytes)}\n"
        "</existing_user_memory>\n\n"
        f"<turn>\n{turn_text}</turn>\n\n"
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
