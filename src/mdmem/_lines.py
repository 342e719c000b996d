"""Whole lines within a line and byte limit: how every block mdmem shows a model is cut.

Part of the kernel, beside ``errors`` and ``_kinds``: the prompt block
(``store.block``) and the extraction prompt (``extract.prompt``) both cut with it.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    import re

__all__ = ["MAX_BYTES", "MAX_LINES", "clean_inline", "trim"]

MAX_LINES = 200
MAX_BYTES = 25_600


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


# -- inline text (titles and summaries) -------------------------------------------

# Compiled on first use: `mdmem index` imports this module and needs neither.
_PATTERNS: list[re.Pattern[str]] = []


def clean_inline(text: str, limit: int | None = None) -> str:
    """One line of plain text: control characters removed, white space collapsed, cut to ``limit``.

    This is what keeps a title or summary from ever injecting a newline, a
    control character or a fake heading into MEMORY.md or the prompt.
    """
    if not _PATTERNS:
        import re

        _PATTERNS[:] = [
            re.compile(r"[\s\u2028\u2029\x85]+"),
            re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]"),
        ]
    breaks, control = _PATTERNS
    text = breaks.sub(" ", control.sub("", text)).strip()
    if limit is not None and len(text) > limit:
        text = text[: limit - 1].rstrip() + "…"
    return text
