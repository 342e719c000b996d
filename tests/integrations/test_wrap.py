"""``wrap(client)``: the real Anthropic SDK (sync and async) against the fake API."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from fake_anthropic import FakeAnthropic
from mdmem import Manager, Operation
from mdmem.integrations.wrap import wrap
from mdmem.store import ledger

USER_TEXT = "Remember that the staging server is staging.example.com."


class RecallingManager(Manager):
    """A Manager with recall (the recall engine is built elsewhere): records its queries."""

    queries: list[tuple[str, int]]

    def recall_block(self, query: str, budget_tokens: int = 1200) -> str:
        self.queries.append((query, budget_tokens))
        return (
            "## Recalled\n"
            "- [project_knowledge] Deploys — Deploy on Fridays. (project_knowledge_deploys.md)"
        )


@pytest.fixture
def sdk(fake_anthropic: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    """The real SDK's client on the fake API, closed after the test (its sockets too)."""
    with anthropic.Anthropic(api_key="k", base_url=fake_anthropic.url, max_retries=0) as client:
        yield client


def seeded(workspace: Path, cls: type[Manager] = Manager) -> Manager:
    manager = cls(workspace)
    manager.project.apply(
        [
            Operation(
                "create",
                "project",
                "project_knowledge",
                title="Build",
                summary="Build with make.",
                content="make",
            )
        ]
    )
    manager.refresh_index()
    return manager


def test_sync_client_gets_memory_and_hands_the_exchange_over(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text("Noted."))
    with seeded(workspace) as manager:
        client = wrap(sdk, manager)
        reply = client.messages.create(
            model="claude-test",
            max_tokens=100,
            system="You are helpful.",
            messages=[{"role": "user", "content": USER_TEXT}],
        )
        assert reply.content[0].text == "Noted."
        assert manager.flush(timeout=30)
    system = fake_anthropic.requests[0].body["system"]
    assert system.startswith("You are helpful.\n\n# Long-term memory (mdmem)\n")
    assert "## Project Memory\n" in system
    assert "(project_knowledge_build.md)" in system
    # The offline provider (no key in the environment) kept the explicit request.
    names = [n.filename for n in manager.project.notes()]
    assert any("staging" in n for n in names), names
    assert ledger.load(manager.project.path)["notes"]["project_knowledge_build.md"]["inject"] == 1  # type: ignore[index]
    assert client.api_key == "k"  # everything else is the client's own


def test_recall_is_used_when_the_manager_has_it(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text("Sure."))
    manager = seeded(workspace, RecallingManager)
    manager.queries = []  # type: ignore[attr-defined]
    with manager:
        client = wrap(
            sdk,
            manager,
            budget_tokens=300,
        )
        client.messages.create(
            model="claude-test",
            max_tokens=100,
            system=[{"type": "text", "text": "Base."}],
            messages=[
                {"role": "user", "content": "When do we deploy?"},
                {"role": "assistant", "content": "Let me check."},
                {"role": "user", "content": [{"type": "text", "text": "And on which day?"}]},
            ],
        )
    assert manager.queries == [("And on which day?", 300)]  # type: ignore[attr-defined]
    base, memory = fake_anthropic.requests[0].body["system"]
    assert base == {"type": "text", "text": "Base."}
    assert "# Notes recalled for this message\n## Recalled" in memory["text"]


def test_a_tool_use_reply_is_not_handed_over(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.tool_use("search", {"q": "x"}))
    with Manager(workspace) as manager:
        client = wrap(sdk, manager)
        client.messages.create(
            model="claude-test",
            max_tokens=100,
            tools=[{"name": "search", "input_schema": {"type": "object"}}],
            messages=[{"role": "user", "content": USER_TEXT}],
        )
        assert manager.flush(timeout=10)
    assert manager.project.notes() == []
    assert "system" not in fake_anthropic.requests[0].body  # an empty store adds nothing


def test_async_client(workspace: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text("Noted, async."))

    async def main(manager: Manager) -> str:
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=fake_anthropic.url, max_retries=0
        ) as raw:
            client = wrap(raw, manager)
            reply = await client.messages.create(
                model="claude-test",
                max_tokens=100,
                messages=[{"role": "user", "content": USER_TEXT}],
            )
            return str(reply.content[0].text)

    with seeded(workspace) as manager:
        assert asyncio.run(main(manager)) == "Noted, async."
        assert manager.flush(timeout=30)
    assert fake_anthropic.requests[0].body["system"].startswith("# Long-term memory (mdmem)")
    assert any("staging" in n.filename for n in manager.project.notes()), (
        manager.project.notes(),
        manager.user.notes(),
    )


def test_a_memory_failure_never_breaks_the_call(
    workspace: Path,
    fake_anthropic: FakeAnthropic,
    sdk: anthropic.Anthropic,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text("Fine."))
    with Manager(workspace) as manager:
        monkeypatch.setattr(type(manager), "index", property(lambda self: 1 / 0))
        client = wrap(sdk, manager)
        reply = client.messages.create(
            model="claude-test", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.content[0].text == "Fine."


class RecordingManager(Manager):
    """A Manager that also keeps what it was handed (the worker still runs)."""

    handed: list[list[object]]

    def update_async(self, messages: Any, **kwargs: Any) -> Any:
        self.handed.append(list(messages))
        return super().update_async(messages, **kwargs)


def recording(workspace: Path) -> RecordingManager:
    manager = RecordingManager(workspace)
    manager.handed = []
    return manager


REPLY = "Noted: the staging server is staging.example.com, as you said."
KWARGS: dict[str, Any] = {
    "model": "claude-test",
    "max_tokens": 100,
    "messages": [{"role": "user", "content": USER_TEXT}],
}


def assert_handed_over_once(manager: RecordingManager) -> None:
    assert manager.flush(timeout=30)
    [exchange] = manager.handed
    assert exchange[0] == {"role": "user", "content": USER_TEXT}
    assert exchange[-1] == {"role": "assistant", "content": [{"type": "text", "text": REPLY}]}
    assert any("staging" in n.filename for n in manager.project.notes())


def test_a_stream_read_to_its_end_is_handed_over(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text(REPLY))
    with recording(workspace) as manager:
        client = wrap(sdk, manager)
        with client.messages.create(stream=True, **KWARGS) as stream:
            text = "".join(
                e.delta.text
                for e in stream
                if e.type == "content_block_delta" and e.delta.type == "text_delta"
            )
        assert text == REPLY  # the reader saw every event, unchanged
        assert_handed_over_once(manager)
    assert fake_anthropic.requests[0].body["stream"] is True


def test_messages_stream_is_handed_over_when_read(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text(REPLY))
    manager = seeded(workspace, RecordingManager)
    manager.handed = []
    with manager:
        client = wrap(sdk, manager)
        with client.messages.stream(**KWARGS) as stream:
            assert stream.get_final_text() == REPLY
        assert_handed_over_once(manager)
    assert "(project_knowledge_build.md)" in fake_anthropic.requests[0].body["system"]


def test_a_stream_closed_early_is_not_handed_over(
    workspace: Path, fake_anthropic: FakeAnthropic, sdk: anthropic.Anthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text(REPLY), FakeAnthropic.text(REPLY))
    with recording(workspace) as manager:
        client = wrap(sdk, manager)
        with client.messages.create(stream=True, **KWARGS) as stream:
            next(iter(stream))
        with client.messages.stream(**KWARGS) as managed:
            next(iter(managed))
        assert manager.flush(timeout=10)
        assert manager.handed == []


def test_async_streams_are_handed_over(workspace: Path, fake_anthropic: FakeAnthropic) -> None:
    fake_anthropic.enqueue(FakeAnthropic.text(REPLY), FakeAnthropic.text(REPLY))

    async def main(manager: Manager) -> list[str]:
        texts = []
        async with anthropic.AsyncAnthropic(
            api_key="k", base_url=fake_anthropic.url, max_retries=0
        ) as raw:
            client = wrap(raw, manager)
            stream = await client.messages.create(stream=True, **KWARGS)
            parts = [
                e.delta.text
                async for e in stream
                if e.type == "content_block_delta" and e.delta.type == "text_delta"
            ]
            texts.append("".join(parts))
            async with client.messages.stream(**KWARGS) as managed:
                texts.append(await managed.get_final_text())
        return texts

    with recording(workspace) as manager:
        assert asyncio.run(main(manager)) == [REPLY, REPLY]
        assert manager.flush(timeout=30)
        assert len(manager.handed) == 2
        for exchange in manager.handed:
            assert exchange[-1] == {
                "role": "assistant",
                "content": [{"type": "text", "text": REPLY}],
            }
