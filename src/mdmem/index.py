"""The prompt block: both stores' indexes merged, and trimmed to fit a system prompt.

``## Project Memory`` comes first, so the repository's conventions reach the
model before cross-project preferences; a section whose store is empty is left
out. The block is at most :data:`MAX_LINES` lines and :data:`MAX_BYTES` bytes of
UTF-8, cut only between whole lines, and says how many notes it left out.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: `mdmem index` should not import typing
if TYPE_CHECKING:
    from mdmem.store import Store

__all__ = [
    "MAX_BYTES",
    "MAX_LINES",
    "PROJECT_HEADING",
    "USER_HEADING",
    "merge",
    "prompt_block",
    "trim",
]

MAX_LINES = 200
MAX_BYTES = 25_600
PROJECT_HEADING = "## Project Memory"
USER_HEADING = "## User Memory"


def _lines(index: str) -> list[str]:
    # Only the lines MEMORY.md is made of; blank lines and stray text a person
    # typed into it are not worth prompt space.
    return [line.rstrip() for line in index.splitlines() if line.strip()]


def merge(
    project: str, user: str, *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> str:
    """The merged prompt block of a project index and a user index, trimmed."""
    sections: list[list[str]] = []
    for heading, text in ((PROJECT_HEADING, project), (USER_HEADING, user)):
        lines = _lines(text)
        if lines:
            sections.append([heading, *lines])
    return trim(sections, max_lines=max_lines, max_bytes=max_bytes)


def _omitted_line(count: int) -> str:
    noun = "note" if count == 1 else "notes"
    return f"({count} more {noun} not shown; run `mdmem list` to see them all)"


def trim(
    sections: list[list[str]], *, max_lines: int = MAX_LINES, max_bytes: int = MAX_BYTES
) -> str:
    """Join sections (a heading line, then note lines) within the limits.

    Whole lines are dropped from the end of the block, keeping each kept
    section's heading, and a last line tells how many note lines were left
    out. The result never exceeds ``max_lines`` lines or ``max_bytes`` bytes.
    """
    blocks = [(s[0], s[1:]) for s in sections if len(s) > 1]
    total_notes = sum(len(notes) for _, notes in blocks)
    kept: list[str] = []
    used_bytes = 0
    shown = 0

    def fits(extra_lines: int, extra_bytes: int, reserve: bool) -> bool:
        # Reserve room for the "N more" line whenever something may be left out.
        lines = len(kept) + extra_lines + (1 if reserve else 0)
        size = (
            used_bytes
            + extra_bytes
            + (len(_omitted_line(total_notes).encode()) + 1 if reserve else 0)
        )
        return lines <= max_lines and size <= max_bytes

    stop = False
    for heading, notes in blocks:
        if stop:
            break
        separator = 1 if kept else 0  # the blank line between sections
        head_cost = len(heading.encode("utf-8")) + 1
        for i, line in enumerate(notes):
            cost = len(line.encode("utf-8")) + 1
            first = i == 0
            extra_lines = 1 + (1 + separator if first else 0)
            extra_bytes = cost + (head_cost + separator if first else 0)
            last_overall = shown + 1 == total_notes
            if not fits(extra_lines, extra_bytes, reserve=not last_overall):
                stop = True
                break
            if first:
                if separator:
                    kept.append("")
                kept.append(heading)
                used_bytes += head_cost + separator
            kept.append(line)
            used_bytes += cost
            shown += 1
    omitted = total_notes - shown
    if omitted:
        kept.append(_omitted_line(omitted))
    return "\n".join(kept)


def prompt_block(project: Store | None, user: Store | None) -> str:
    """Load both stores' indexes (bringing them up to date) and merge them."""
    return merge(
        project.load_index() if project is not None else "",
        user.load_index() if user is not None else "",
    )
