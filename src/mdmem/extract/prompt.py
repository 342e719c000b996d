"""The extraction prompt: fixed instructions (package data), the memory the session sees, the turn.

The instructions live in ``prompt.md`` next to this module, so they can be read
and reviewed as prose. A request has three parts, from the most stable to the
least, so that a provider can cache its prefix:

* ``system``: the instructions, the same for every turn;
* ``memory``: the existing memory as the session sees it, i.e. the prompt
  block (at most 200 lines and 25,600 bytes whatever the store holds), each
  line with the note's last update (``[updated 2026-11-29]``), cut here to
  :data:`INDEX_BYTES`. It changes only when a turn changes what the block
  shows, so consecutive turns send it byte for byte;
* ``prompt`` (the user message): today's date, the existing notes most related
  to this turn (found by recall over the turn's text, at most
  :data:`RELATED_BYTES`), and the turn as ``role=...`` lines.

Neither list is the whole store, and the prompt says so: the model may update
or delete any note it is shown; the store checks that the file exists. The
whole request stays within :data:`PROMPT_TOKENS` estimated tokens: the turn is
bounded by :class:`mdmem.extract.turn.TurnLimits`, and when a long turn leaves
less room the related notes give way first, then the memory.
"""

from __future__ import annotations

from datetime import date
from importlib import resources

from mdmem._lines import trim
from mdmem.extract import turn as turn_
from mdmem.extract.providers.base import ExtractionRequest, Message

__all__ = [
    "INDEX_BYTES",
    "MIN_INDEX_BYTES",
    "MIN_RELATED_BYTES",
    "PROMPT_TOKENS",
    "RELATED_BYTES",
    "build",
    "instructions",
]

#: The whole extraction prompt (instructions, memory, related notes, turn) stays
#: under this many estimated tokens, counting three bytes a token (CJK, the worst case).
PROMPT_TOKENS = 10_000
#: The memory the session sees, both stores together, when the turn leaves room.
#: Big enough that, with the instructions and the tool, a full block passes the
#: largest minimum cacheable prefix (4,096 tokens on some models).
INDEX_BYTES = 14_000
#: The memory never gets less than this, however long the turn.
MIN_INDEX_BYTES = 2_000
#: The notes related to the turn, when the turn leaves room; never less than the minimum.
RELATED_BYTES = 6_000
MIN_RELATED_BYTES = 2_000

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


def _size(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _section(index: str, max_bytes: int, heading: str) -> str:
    lines = [line for line in index.splitlines() if line.strip()]
    if not lines:
        return "(empty)"
    return trim([[heading, *lines]], max_bytes=max_bytes)


def _budgets(project: str, user: str, room: int) -> tuple[int, int]:
    """Split ``room`` bytes between the two indexes: half each, and what one leaves the other."""
    # 64: room for the heading line trim() adds.
    need_project = _size(project) + 64
    need_user = _size(user) + 64
    if need_project + need_user <= room:
        return need_project, need_user
    half = room // 2
    if need_project <= half:
        return need_project, room - need_project
    if need_user <= half:
        return room - need_user, need_user
    return half, room - half


def _rooms(left_bytes: int, related: str) -> tuple[int, int]:
    """Bytes for (memory, related notes): related give way first, then the memory."""
    want_related = min(RELATED_BYTES, _size(related) + 160) if related.strip() else 0
    related_room = min(want_related, max(left_bytes - INDEX_BYTES, MIN_RELATED_BYTES))
    index_room = min(INDEX_BYTES, max(left_bytes - related_room, MIN_INDEX_BYTES))
    return index_room, related_room


#: The ``memory`` part around the two indexes (``{}``: where each goes).
_MEMORY_FRAME = (
    "The existing memory, as the agent's sessions see it (not every note; "
    "the notes related to this turn follow in the message):\n\n"
    "<existing_project_memory>\n{}\n</existing_project_memory>\n\n"
    "<existing_user_memory>\n{}\n</existing_user_memory>"
)


def memory_text(project_index: str, user_index: str, max_bytes: int = INDEX_BYTES) -> str:
    """The ``memory`` part of a request: both indexes, tagged by store, within ``max_bytes``."""
    # The frame's own bytes come off first, counted (a guess of 160 let two full indexes
    # pass the cap by the rest of the frame).
    room = max_bytes - _size(_MEMORY_FRAME.format("", ""))
    project_bytes, user_bytes = _budgets(project_index, user_index, room)
    heading = "Notes (file name in parentheses):"
    return _MEMORY_FRAME.format(
        _section(project_index, project_bytes, heading), _section(user_index, user_bytes, heading)
    )


def build(
    messages: list[Message],
    project_index: str,
    user_index: str,
    today: date,
    *,
    related: str = "",
) -> ExtractionRequest:
    """The request for one turn, within :data:`PROMPT_TOKENS` estimated tokens.

    ``project_index`` and ``user_index`` are the lines of the memory the session
    sees (bounded by the caller: the prompt block); ``related`` the lines of
    the existing notes most related to this turn (``- project: [type] Title —
    summary [updated ...] (file.md)``), best first.
    """
    turn_text = turn_.render(messages)
    global _instruction_tokens
    if _instruction_tokens is None:  # the instructions never change: count them once
        _instruction_tokens = turn_.estimate_tokens(instructions())
    used = _instruction_tokens + turn_.estimate_tokens(turn_text) + 250
    # Three bytes a token is the worst case (CJK), so the budget holds in any script.
    index_room, related_room = _rooms((PROMPT_TOKENS - used) * 3, related)
    memory = memory_text(project_index, user_index, index_room)
    related_part = ""
    if related_room:
        heading = "Existing notes related to this turn, best first (store: [type] ... (file name)):"
        related_part = (
            f"<related_notes>\n{_section(related, related_room, heading)}\n</related_notes>\n\n"
        )
    prompt = (
        f"Today is {today.isoformat()}.\n\n"
        f"{related_part}"
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
        memory=memory,
        related=related,
    )
