"""Lean blocks: what a session's handover keeps of a message, and what it may drop.

The Stop hook holds a transcript's new messages whole while it records the
session and journals the turn; with :func:`lean_blocks` it holds only what
those two read. Held here: on any messages, :func:`observe` and a turn without
tool excerpts come out the same from the lean blocks as from the whole ones.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from mdmem.extract.activity import lean_blocks, observe
from mdmem.extract.turn import from_messages
from mdmem.privacy import Redactor

_words = st.sampled_from(
    ["pytest tests/", "all 3 passed", "2 failed", "<private>x", "</private>", "src/app.py", " "]
)
_text = st.lists(st.one_of(_words, st.text(max_size=12)), max_size=5).map("".join)
_names = st.sampled_from(["Edit", "Write", "MultiEdit", "NotebookEdit", "Bash", "Read", "mcp__x"])
_inputs = st.dictionaries(
    st.sampled_from(["file_path", "notebook_path", "command", "old_string", "content"]),
    st.one_of(_text, st.integers(), st.none()),
    max_size=4,
)
_block = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, _text),
    st.builds(lambda n, i: {"type": "tool_use", "id": "t", "name": n, "input": i}, _names, _inputs),
    st.builds(lambda n: {"type": "tool_use", "name": n, "input": "not a mapping"}, _names),
    st.builds(lambda t: {"type": "tool_result", "tool_use_id": "t", "content": t}, _text),
    st.builds(lambda t: {"type": "thinking", "thinking": t}, _text),
    st.just({"type": "image", "source": {"type": "base64", "data": "QUJD"}}),
)
_message = st.builds(
    lambda role, content: {"role": role, "content": content},
    st.sampled_from(["user", "assistant"]),
    st.one_of(_text, st.lists(_block, max_size=4)),
)


def _lean(messages: list[dict[str, object]]) -> list[dict[str, object]]:
    return [{"role": m["role"], "content": lean_blocks(m["content"])} for m in messages]


@given(st.lists(_message, max_size=6))
def test_a_session_record_sees_the_same_in_lean_blocks(messages: list[dict[str, object]]) -> None:
    assert observe(_lean(messages), "/ws", Redactor()) == observe(messages, "/ws", Redactor())


@given(st.lists(_message, max_size=6))
def test_a_turn_without_tool_excerpts_is_the_same_from_lean_blocks(
    messages: list[dict[str, object]],
) -> None:
    redactor = Redactor()
    assert from_messages(_lean(messages), redactor=redactor) == from_messages(
        messages, redactor=redactor
    )


def test_lean_blocks_hold_no_tool_output_nor_the_text_an_edit_wrote() -> None:
    content = [
        {"type": "thinking", "thinking": "THINKING"},
        {"type": "text", "text": "I will fix it."},
        {
            "type": "tool_use",
            "name": "Edit",
            "input": {"file_path": "src/a.py", "old_string": "OLD", "new_string": "NEW"},
        },
        {"type": "tool_use", "name": "Bash", "input": {"command": "make", "timeout": 5}},
        {"type": "tool_use", "name": "Read", "input": {"file_path": "src/b.py"}},
        {"type": "tool_result", "tool_use_id": "t", "content": "OUTPUT " * 1000},
    ]
    assert lean_blocks(content) == [
        {"type": "text", "text": "I will fix it."},
        {"type": "tool_use", "name": "Edit", "input": {"file_path": "src/a.py"}},
        {"type": "tool_use", "name": "Bash", "input": {"command": "make"}},
        {"type": "tool_use", "name": "Read", "input": {}},
    ]
    assert lean_blocks("plain words") == [{"type": "text", "text": "plain words"}]
