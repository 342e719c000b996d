"""The merged prompt block: order, sections, limits, and what it says when it leaves notes out."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import Note, NoteType
from mdmem.store.index import MAX_BYTES, MAX_LINES, PREAMBLE, merge
from mdmem.store.note import index_line


def lines(n: int, prefix: str = "p", width: int = 10) -> str:
    return "".join(
        f"- [project_knowledge] {prefix}{i} {'x' * width} ({prefix}{i}.md)\n" for i in range(n)
    )


def test_project_first_then_user() -> None:
    block = merge(lines(2, "p"), lines(1, "u"))
    assert block.splitlines() == [
        PREAMBLE,
        "",
        "## Project Memory",
        *lines(2, "p").splitlines(),
        "",
        "## User Memory",
        *lines(1, "u").splitlines(),
    ]


@pytest.mark.parametrize(
    ("project", "user", "headings"),
    [
        ("", "", []),
        ("\n\n", "  \n", []),
        (lines(1), "", ["## Project Memory"]),
        ("", lines(1, "u"), ["## User Memory"]),
    ],
)
def test_empty_sections_are_left_out(project: str, user: str, headings: list[str]) -> None:
    block = merge(project, user)
    assert [line for line in block.splitlines() if line.startswith("## ")] == headings
    assert block.startswith(PREAMBLE) == bool(headings)  # no notes: no block, no preamble


def test_line_cap_shares_the_room_and_counts_the_rest() -> None:
    block = merge(lines(150, "p"), lines(150, "u"))
    out = block.splitlines()
    assert len(out) <= MAX_LINES
    # 200 lines: the preamble and its blank, 2 headings, 1 blank, 1 "more" line,
    # so 194 notes shown of 300, half of the room for each store: neither starves.
    assert out[-1] == "(106 more notes not shown; run `mdmem search QUERY` to find them)"
    shown = [line for line in out if line.startswith("- ")]
    assert len(shown) == 194
    assert sum(" (p" in line for line in shown) == 97
    assert sum(" (u" in line for line in shown) == 97


def test_byte_cap_cuts_on_whole_lines_never_inside_a_character() -> None:
    # Lines of three-byte characters, so a naive byte cut would split one.
    wide = "".join(f"- [user_preference] {'长' * 300} (n{i}.md)\n" for i in range(40))
    block = merge("", wide)
    raw = block.encode("utf-8")
    assert len(raw) <= MAX_BYTES
    raw.decode("utf-8")  # valid UTF-8
    assert block.splitlines()[:3] == [PREAMBLE, "", "## User Memory"]
    for line in block.splitlines()[3:-1]:
        assert line in wide.splitlines()
    assert block.splitlines()[-1].startswith("(")


def test_exactly_at_the_limit_needs_no_omission_line() -> None:
    block = merge(lines(MAX_LINES - 3), "")  # the preamble, a blank and a heading
    assert len(block.splitlines()) == MAX_LINES
    assert "not shown" not in block


def test_one_over_the_limit_says_so() -> None:
    block = merge(lines(MAX_LINES - 2), "")
    assert len(block.splitlines()) == MAX_LINES
    assert block.splitlines()[-1].startswith("(2 more notes")


unicode_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200)


@st.composite
def note_lines(draw: st.DrawFn) -> str:
    count = draw(st.integers(0, 260))
    title = draw(unicode_text)
    summary = draw(unicode_text)
    return "".join(
        index_line(Note(f"n{i}.md", NoteType.PROJECT_KNOWLEDGE, title + str(i), summary)) + "\n"
        for i in range(count)
    )


@given(note_lines(), note_lines())
def test_block_keeps_its_limits_for_any_titles(project: str, user: str) -> None:
    block = merge(project, user)
    raw = block.encode("utf-8")
    assert len(raw) <= MAX_BYTES
    assert len(block.splitlines()) <= MAX_LINES
    raw.decode("utf-8")
    headings = [line for line in block.splitlines() if line.startswith("#")]
    assert headings in (
        [],
        ["## Project Memory"],
        ["## User Memory"],
        ["## Project Memory", "## User Memory"],
    )
    source = set(project.splitlines()) | set(user.splitlines())
    if block:
        assert block.splitlines()[0] == PREAMBLE
    body = [line for line in block.splitlines()[2:] if line and not line.startswith(("## ", "("))]
    assert all(line in source for line in body)
    total = len(project.splitlines()) + len(user.splitlines())
    if len(body) < total:
        assert block.splitlines()[-1].startswith(f"({total - len(body)} more note")
