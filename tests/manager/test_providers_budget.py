"""Cost control: the cached system prompt, usage in the ledger, the budgets, the skip rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import create_op, journaled
from conftest import state
from fake_anthropic import FakeAnthropic
from mdmem import Manager
from mdmem.extract.providers.base import Message
from mdmem.extract.turn import worth_a_call
from mdmem.manager._journal import listing
from mdmem.manager.doctor import worker_findings
from mdmem.store import ledger

T0 = 1_796_083_200.0 + 3_600  # 2026-12-01T01:00:00Z
DAY = 86_400.0


def op(title: str) -> dict[str, object]:
    return create_op(title, f"{title}: details.", summary=f"{title}.")


def answer(title: str, **usage: int) -> object:
    return FakeAnthropic.message(
        FakeAnthropic.tool_use_block("record_memory_operations", {"operations": [op(title)]}),
        usage=usage or None,
    )


def turn(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Understood."}]


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture
def api(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> FakeAnthropic:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    return fake_anthropic


def test_the_system_prompt_is_cached_and_usage_adds_up(workspace: Path, api: FakeAnthropic) -> None:
    api.enqueue(
        answer("First", input_tokens=300, output_tokens=50, cache_creation_input_tokens=2500),
        answer("Second", input_tokens=320, output_tokens=40, cache_read_input_tokens=2500),
    )
    clock = Clock(T0)
    with Manager(workspace, clock=clock) as manager:
        manager.update_async(turn("Note that the build uses make.")).result(30)
        manager.update_async(turn("Note that the tests use pytest.")).result(30)
    first, second = (request.body["system"] for request in api.requests)
    for instructions, memory in (first, second):
        # Two cached blocks: the instructions, then the memory the session sees.
        assert instructions["cache_control"] == memory["cache_control"] == {"type": "ephemeral"}
        assert "long-term memory of a coding agent" in instructions["text"]
        assert "<existing_project_memory>" in memory["text"]
    assert first[0] == second[0]  # the instructions' prefix is the same from turn to turn
    assert "(project_knowledge_first.md)" in second[1]["text"]  # the first turn's note
    days = ledger.load(manager.user.path)["days"]
    assert days == {  # type: ignore[comparison-overlap]
        "2026-12-01": {"in": 620, "out": 90, "cr": 2500, "cw": 2500, "calls": 2}
    }
    assert ledger.tokens_on(manager.user.path, "2026-12-01") == 5710


def test_the_daily_budget_holds_turns_and_releases_them_the_next_day(
    workspace: Path, api: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.enqueue(answer("First", input_tokens=9_000, output_tokens=100))
    clock = Clock(T0)
    manager = Manager(workspace, clock=clock, daily_tokens=10_000, retry_delay=3600)
    first = manager.update_async(turn("Note that the build uses make.")).result(30)
    assert first.project.applied and not first.held
    held = manager.update_async(turn("Note that the tests use pytest.")).result(30)
    assert held.held and not held.project.applied
    assert manager.flush(timeout=10)
    manager.close()
    assert len(api.requests) == 1  # no call past the budget
    assert journaled(workspace) == 1  # the turn waits, on disk
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "10000")  # what doctor reads
    [finding] = [f for f in worker_findings(manager.user, now=clock.t) if f.check == "budget"]
    assert (
        "9100 of 10000 tokens used today" in finding.message and "1 turn(s) held" in finding.message
    )

    from mdmem.manager.doctor import examine

    report = examine(manager.project)
    assert not report.problems  # a held turn is information, not a problem
    assert any("held by the daily token budget" in f.message for f in report.findings)

    # The same day, a new process still waits; the next day, it goes through.
    with Manager(workspace, clock=clock, daily_tokens=10_000) as again:
        assert again.flush(timeout=10)
    assert len(api.requests) == 1 and journaled(workspace) == 1
    api.enqueue(answer("Second", input_tokens=3_000, output_tokens=100))
    clock.t += DAY
    with Manager(workspace, clock=clock, daily_tokens=10_000) as tomorrow:
        assert tomorrow.flush(timeout=30)
    assert len(api.requests) == 2 and journaled(workspace) == 0
    names = [n.filename for n in tomorrow.project.notes()]
    assert names == ["project_knowledge_first.md", "project_knowledge_second.md"]


def test_the_budget_comes_from_the_environment(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "200_000")
    monkeypatch.setenv("MDMEM_TURN_TOKENS", "not a number")
    manager = Manager(workspace, resume=False)
    assert (manager.daily_tokens, manager.turn_tokens) == (200_000, None)
    manager.close()


def test_a_turn_over_the_per_turn_cap_is_set_aside_whole(
    workspace: Path, api: FakeAnthropic
) -> None:
    manager = Manager(workspace, turn_tokens=500)
    future = manager.update_async(turn("Note that the build uses make. " * 50))
    assert manager.flush(timeout=10)
    manager.close()
    error = future.exception()
    assert error is not None and "MDMEM_TURN_TOKENS=500" in str(error)
    assert api.requests == []
    failed = listing(str(state(workspace / ".PseudoClaude" / "memory") / "turns"))["failed"]
    assert len(failed) == 1  # nothing lost: `mdmem doctor --fix` queues it again


@pytest.mark.parametrize(
    "messages",
    [
        turn("ok"),
        turn("Thanks!"),
        turn("继续"),
        turn("好的，谢谢"),
        [
            {"role": "user", "content": "go on"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t", "name": "Bash", "input": {}}],
            },
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "t", "content": "x" * 5000}],
            },
            {"role": "assistant", "content": "Done."},
        ],
    ],
)
def test_turns_with_nothing_worth_a_call_are_skipped_and_counted(
    workspace: Path, api: FakeAnthropic, messages: list[object]
) -> None:
    with Manager(workspace, include_tools=True) as manager:
        result = manager.update_async(messages).result(30)
    assert result.skipped
    assert api.requests == []
    assert journaled(workspace) == 0
    [day] = ledger.load(manager.user.path)["days"].values()  # type: ignore[union-attr]
    assert day["skip"] == 1


@pytest.mark.parametrize(
    ("user", "assistant", "worth"),
    [
        ("ok", "Running the tests.", False),
        ("ok", "x" * 400, True),  # the assistant explained something at length
        ("use pnpm, not npm", "Done.", True),
        ("以后用中文回答", "好的", True),
        ("okay, and remember the port is 8080", "Noted.", True),
    ],
)
def test_worth_a_call(user: str, assistant: str, worth: bool) -> None:
    assert worth_a_call([Message("user", user), Message("assistant", assistant)]) is worth
