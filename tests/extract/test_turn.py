"""Turns reduced to roles and text, bounded; and the prompt built from them."""

from __future__ import annotations

from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem.extract import prompt
from mdmem.extract import turn as turn_
from mdmem.extract.providers.base import Message
from mdmem.extract.turn import TurnLimits, estimate_tokens, from_messages


def test_string_and_block_content() -> None:
    messages = [
        {"role": "user", "content": "hello"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "secret reasoning", "signature": "s"},
                {"type": "text", "text": "part one"},
                {"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "make"}},
                {"type": "text", "text": "part two"},
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "ok"}],
        },
    ]
    assert from_messages(messages) == [
        Message("user", "hello"),
        Message("assistant", "part one\npart two"),
    ]


def test_tool_excerpts_are_short() -> None:
    messages = [
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "t",
                    "is_error": True,
                    "content": [{"type": "text", "text": "E" * 5000}],
                }
            ],
        }
    ]
    [message] = from_messages(messages, TurnLimits(include_tools=True, tool_excerpt_bytes=100))
    assert message.text.startswith("[tool result (error): EEE")
    assert len(message.text) < 200


def test_missing_role_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        from_messages([{"content": "no role"}])


def test_long_turn_keeps_first_and_latest() -> None:
    messages = [{"role": "user", "content": f"m{i} " + "x" * 3000} for i in range(20)]
    out = from_messages(messages, TurnLimits(turn_bytes=10_000))
    assert out[0].text.startswith("m0 ")
    assert out[1].role == "note" and "left out" in out[1].text
    assert out[-1].text.startswith("m19 ")
    assert sum(len(m.text) for m in out) <= 10_000 + 100


def test_one_megabyte_message_is_cut_keeping_both_ends() -> None:
    text = "HEAD " + "y" * 1_000_000 + " TAIL"
    [message] = from_messages([{"role": "user", "content": text}])
    assert message.text.startswith("HEAD ") and message.text.endswith(" TAIL")
    assert len(message.text.encode()) <= TurnLimits().message_bytes + 60


@given(
    st.lists(st.tuples(st.sampled_from(["user", "assistant"]), st.text(max_size=3000)), max_size=30)
)
def test_turn_is_always_bounded(pairs: list[tuple[str, str]]) -> None:
    limits = TurnLimits()
    out = from_messages([{"role": r, "content": t} for r, t in pairs], limits)
    assert sum(len(m.text.encode()) for m in out) <= limits.turn_bytes + limits.message_bytes + 100
    assert all(m.text.strip() for m in out)


def test_prompt_holds_date_indexes_and_turn() -> None:
    request = prompt.build(
        [Message("user", "Remember X"), Message("assistant", "OK")],
        "- [project_knowledge] A — a. (a.md)\n",
        "",
        date(2026, 11, 30),
    )
    assert "Today is 2026-11-30." in request.prompt
    # The memory is the stable part, after the instructions: not in the per-turn message.
    assert "(a.md)" in request.memory and "(a.md)" not in request.prompt
    assert "<existing_user_memory>\n(empty)\n</existing_user_memory>" in request.memory
    assert request.full_system == f"{request.system}\n\n{request.memory}"
    assert "<turn>\nrole=user\nRemember X\nrole=assistant\nOK\n</turn>" in request.prompt
    for word in (
        "user_preference",
        "correction_feedback",
        "project_knowledge",
        "reference_material",
        "[]",
        "secrets",
    ):
        assert word in request.system


def test_prompt_indexes_are_bounded() -> None:
    big = "".join(f"- [project_knowledge] Note {i} {'z' * 200} (n{i}.md)\n" for i in range(500))
    request = prompt.build([Message("user", "hi")], big, big, date(2026, 1, 1))
    total = estimate_tokens(request.full_system) + estimate_tokens(request.prompt)
    assert total <= prompt.PROMPT_TOKENS
    assert len(request.memory.encode()) <= prompt.INDEX_BYTES
    assert "more notes not shown" in request.memory


def test_a_small_index_leaves_room_to_the_other() -> None:
    small = "- [user_preference] Short — s. (s.md)\n"
    big = "".join(f"- [project_knowledge] Note {i} {'z' * 200} (n{i}.md)\n" for i in range(500))
    request = prompt.build([Message("user", "hi")], big, small, date(2026, 1, 1))
    assert "(s.md)" in request.memory
    assert request.memory.count("(n") > 50


wide = st.text(
    st.sampled_from("记住这个测试数据库端口设置发布流程abc 。，"), min_size=1, max_size=4000
)


@given(
    st.lists(wide, min_size=1, max_size=15),
    st.integers(0, 400),
    st.integers(0, 400),
    st.integers(0, 60),
)
def test_whole_prompt_stays_under_budget_in_any_script(
    texts: list[str], project_notes: int, user_notes: int, related_notes: int
) -> None:
    messages = from_messages([{"role": "user", "content": t} for t in texts])
    line = "- [project_knowledge] 发布流程很重要的说明 — 推送 tag 即发布，必须先跑检查。 (n{}.md)\n"
    request = prompt.build(
        messages,
        "".join(line.format(i) for i in range(project_notes)),
        "".join(line.format(i) for i in range(user_notes)),
        date(2026, 1, 1),
        related="".join("- project: " + line[2:].format(f"r{i}") for i in range(related_notes)),
    )
    total = estimate_tokens(request.full_system) + estimate_tokens(request.prompt)
    assert total <= prompt.PROMPT_TOKENS
    assert len(request.memory.encode()) <= prompt.INDEX_BYTES


def test_the_memory_part_does_not_move_with_the_turn() -> None:
    """What a provider caches (instructions + memory) is byte for byte the same across turns."""
    big = "".join(f"- [project_knowledge] Note {i} {'z' * 80} (n{i}.md)\n" for i in range(300))
    related = "- project: [project_knowledge] Deploy — push a tag. (d.md)"
    short = prompt.build([Message("user", "hi")], big, "", date(2026, 1, 1), related=related)
    longer = prompt.build(
        [Message("user", "word " * 1500)], big, "", date(2026, 1, 2), related=related
    )
    assert short.memory == longer.memory
    assert short.system == longer.system
    assert "(d.md)" in short.prompt and "<related_notes>" in short.prompt
    assert "not every note" in short.memory


def test_render_and_estimate() -> None:
    assert turn_.render([Message("user", "a")]) == "role=user\na\n"
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("记住这个") == 4
