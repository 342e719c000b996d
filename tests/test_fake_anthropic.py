"""The fake Messages API server, driven by the real `anthropic` SDK."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pydantic
import pytest
from anthropic import beta_tool
from anthropic.lib.tools import BetaFunctionToolResultType, ToolError
from anthropic.tools import BetaLocalFilesystemMemoryTool
from anthropic.types import MessageParam, ToolParam
from anthropic.types.beta import BetaMessageParam

from fake_anthropic import FakeAnthropic

F = FakeAnthropic
MODEL = "claude-haiku-5-5"
USER: list[MessageParam] = [{"role": "user", "content": "hello"}]
BETA_USER: list[BetaMessageParam] = [{"role": "user", "content": "hello"}]
SAVE_TOOL: ToolParam = {
    "name": "save_notes",
    "description": "Save notes.",
    "input_schema": {
        "type": "object",
        "properties": {"notes": {"type": "array", "items": {"type": "string"}}},
        "required": ["notes"],
    },
}
THREADS_BETA = "message-threads-2026-08-12"


@pytest.fixture
def fake(fake_anthropic: FakeAnthropic) -> FakeAnthropic:
    """The `fake_anthropic` fixture (registered by tests/conftest.py), under a short name."""
    return fake_anthropic


@pytest.fixture
def client(fake: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        api_key="test-key", base_url=fake.url, max_retries=0, timeout=5.0
    ) as sdk:
        yield sdk


def test_plain_text(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(F.text("Hello there"))

    message = client.messages.create(model=MODEL, max_tokens=64, messages=USER, system="Be brief.")

    assert message.content[0].type == "text"
    assert message.content[0].text == "Hello there"
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.usage.input_tokens > 0
    request = fake.last_request
    assert (request.method, request.path, request.query) == ("POST", "/v1/messages", {})
    assert request.headers["authorization"] == "Bearer test-key"
    assert request.headers["anthropic-version"]
    assert request.body == {
        "model": MODEL,
        "max_tokens": 64,
        "messages": USER,
        "system": "Be brief.",
    }
    assert request.resolved is request.body
    assert fake.pending == 0


def test_forced_tool_use(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(F.tool_use("save_notes", {"notes": ["a", "b"]}, id="toolu_1"))

    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=USER,
        tools=[SAVE_TOOL],
        tool_choice={"type": "tool", "name": "save_notes"},
    )

    assert message.stop_reason == "tool_use"
    block = message.content[0]
    assert block.type == "tool_use"
    assert (block.id, block.name, block.input) == ("toolu_1", "save_notes", {"notes": ["a", "b"]})
    body = fake.last_request.body
    assert body["tool_choice"] == {"type": "tool", "name": "save_notes"}
    assert body["tools"] == [SAVE_TOOL]


def test_stream_text(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    text = "A reply long enough to arrive in several deltas."
    fake.enqueue(F.text(text))

    with client.messages.stream(model=MODEL, max_tokens=64, messages=USER) as stream:
        pieces = list(stream.text_stream)
        final = stream.get_final_message()

    assert len(pieces) > 3
    assert "".join(pieces) == text
    assert final.content[0].type == "text"
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.output_tokens > 1
    request = fake.last_request
    assert request.stream
    assert request.body["stream"] is True


def test_stream_tool_use_and_thinking(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    notes = {"notes": ["x" * 30, 'quote " and unicode é']}
    fake.enqueue(
        F.message(
            F.thinking_block("Let me think about this."),
            F.text_block("Saving."),
            F.tool_use_block("save_notes", notes, id="toolu_s"),
        )
    )

    with client.messages.stream(
        model=MODEL,
        max_tokens=64,
        messages=USER,
        tools=[SAVE_TOOL],
        tool_choice={"type": "tool", "name": "save_notes"},
    ) as stream:
        kinds = {event.type for event in stream}
        final = stream.get_final_message()

    assert {"thinking", "text", "input_json", "content_block_stop", "message_stop"} <= kinds
    thinking, text, tool = final.content
    assert thinking.type == "thinking"
    assert thinking.thinking == "Let me think about this."
    assert thinking.signature == "fake-signature"
    assert text.type == "text"
    assert text.text == "Saving."
    assert tool.type == "tool_use"
    assert (tool.id, tool.input) == ("toolu_s", notes)
    assert final.stop_reason == "tool_use"


@pytest.mark.parametrize(
    ("status", "error_class"),
    [
        (429, anthropic.RateLimitError),
        (500, anthropic.InternalServerError),
        (529, anthropic.OverloadedError),
    ],
)
def test_retries_then_success(
    fake: FakeAnthropic, status: int, error_class: type[anthropic.APIStatusError]
) -> None:
    fake.enqueue(F.error(status), F.text("ok"), F.error(status))

    with anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=1) as sdk:
        message = sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
        assert message.content[0].type == "text"
        assert message.content[0].text == "ok"
        assert [r.headers["x-stainless-retry-count"] for r in fake.requests] == ["0", "1"]

        with pytest.raises(error_class) as caught:
            sdk.with_options(max_retries=0).messages.create(
                model=MODEL, max_tokens=8, messages=USER
            )
    assert caught.value.status_code == status
    assert caught.value.type == F.error(status).body["error"]["type"]
    assert len(fake.requests) == 3


def test_x_should_retry_false_is_obeyed(fake: FakeAnthropic) -> None:
    fake.enqueue(F.error(529, should_retry=False), F.text("never sent"))

    with (
        anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=3) as sdk,
        pytest.raises(anthropic.OverloadedError),
    ):
        sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
    assert len(fake.requests) == 1


def test_timeout(fake: FakeAnthropic) -> None:
    fake.enqueue(F.delay(5.0, F.text("too late")))

    started = time.monotonic()
    with (
        anthropic.Anthropic(
            api_key="test-key", base_url=fake.url, max_retries=0, timeout=0.2
        ) as sdk,
        pytest.raises(anthropic.APITimeoutError),
    ):
        sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
    assert time.monotonic() - started < 2.0
    assert len(fake.requests) == 1


def test_timeout_is_retried(fake: FakeAnthropic) -> None:
    fake.enqueue(F.delay(5.0), F.text("second try"))

    with anthropic.Anthropic(
        api_key="test-key", base_url=fake.url, max_retries=1, timeout=0.2
    ) as sdk:
        message = sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
    assert message.content[0].type == "text"
    assert message.content[0].text == "second try"
    assert len(fake.requests) == 2


def test_read_timeout_mid_stream_is_a_raw_httpx2_error(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    # Once the 200 arrived the SDK no longer translates transport errors.
    fake.enqueue(F.message(F.text_block("slow stream"), event_delay=2.0))

    with (
        pytest.raises(httpx2.ReadTimeout),
        client.messages.stream(model=MODEL, max_tokens=8, messages=USER, timeout=0.2) as stream,
    ):
        list(stream)


def test_disconnect_is_a_connection_error(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(F.disconnect())

    with pytest.raises(anthropic.APIConnectionError) as caught:
        client.messages.create(model=MODEL, max_tokens=8, messages=USER)
    assert not isinstance(caught.value, anthropic.APITimeoutError)


def test_error_event_mid_stream(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(F.stream_error("overloaded_error", "Overloaded"))

    with (
        pytest.raises(anthropic.APIStatusError) as caught,
        client.messages.stream(model=MODEL, max_tokens=8, messages=USER) as stream,
    ):
        list(stream)
    assert caught.value.type == "overloaded_error"


def test_exhausted_script_fails_fast_without_retries() -> None:
    with FakeAnthropic() as fake:
        with (
            anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=2) as sdk,
            pytest.raises(anthropic.InternalServerError, match="script exhausted"),
        ):
            sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
        assert len(fake.requests) == 1
        assert fake.failures == [
            "script exhausted: no reply left for request #1 (POST /v1/messages)"
        ]
        fake.failures.clear()


def test_strict_exit_reports_failures() -> None:
    with pytest.raises(AssertionError, match="scripted callable raised"), FakeAnthropic() as fake:
        fake.enqueue(lambda request: 1 / 0)  # type: ignore[arg-type,return-value]
        with (
            anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=2) as sdk,
            pytest.raises(anthropic.InternalServerError),
        ):
            sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)


def test_invalid_request_is_refused_without_consuming_the_script(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    fake.enqueue(F.text("unused"))

    with pytest.raises(anthropic.BadRequestError, match="not in tools"):
        client.messages.create(
            model=MODEL,
            max_tokens=8,
            messages=USER,
            tools=[SAVE_TOOL],
            tool_choice={"type": "tool", "name": "missing"},
        )
    assert fake.pending == 1
    assert len(fake.failures) == 1
    fake.failures.clear()


def test_beta_path_and_headers(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    fake.enqueue(F.text("beta"))

    message = client.beta.messages.create(
        model=MODEL, max_tokens=8, messages=BETA_USER, betas=["context-management-2025-06-27"]
    )

    assert message.content[0].type == "text"
    request = fake.last_request
    # `client.beta` sends no `?beta=true`: only the header tells the two apart.
    assert (request.path, request.query) == ("/v1/messages", {})
    assert request.betas == ["context-management-2025-06-27"]


def test_count_tokens(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    count = client.messages.count_tokens(model=MODEL, messages=USER)
    assert count.input_tokens > 0
    assert fake.last_request.path == "/v1/messages/count_tokens"


def test_structured_output_with_parse(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    class Notes(pydantic.BaseModel):
        title: str
        tags: list[str]

    fake.enqueue(F.text('{"title": "Build", "tags": ["go"]}'))

    message = client.messages.parse(model=MODEL, max_tokens=64, messages=USER, output_format=Notes)

    assert message.parsed_output == Notes(title="Build", tags=["go"])
    output_format = fake.last_request.body["output_config"]["format"]
    assert output_format["type"] == "json_schema"
    assert output_format["schema"]["required"] == ["title", "tags"]
    assert output_format["schema"]["additionalProperties"] is False


def test_structured_output_with_a_schema_dict(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    schema: dict[str, object] = {
        "type": "object",
        "properties": {"ops": {"type": "array", "items": {"type": "object"}}},
        "required": ["ops"],
        "additionalProperties": False,
    }
    fake.enqueue(F.text('{"ops": []}'))

    message = client.messages.create(
        model=MODEL,
        max_tokens=64,
        messages=USER,
        output_config={"format": {"type": "json_schema", "schema": schema}},
    )

    assert message.content[0].type == "text"
    assert json.loads(message.content[0].text) == {"ops": []}
    assert fake.last_request.body["output_config"] == {
        "format": {"type": "json_schema", "schema": schema}
    }


def _adder_model(request: dict[str, Any]) -> Any:
    """A model that calls `add` once, then reports the tool's answer."""
    results = FakeAnthropic.tool_results(request)
    if not results:
        return FakeAnthropic.tool_use("add", {"a": 2, "b": 3}, id="toolu_add")
    (result,) = results
    assert result["tool_use_id"] == "toolu_add"
    return FakeAnthropic.text(f"The sum is {result['content']}.")


@pytest.mark.parametrize("stream", [False, True])
def test_tool_runner_over_a_thread(
    fake: FakeAnthropic, client: anthropic.Anthropic, stream: bool
) -> None:
    calls: list[tuple[int, int]] = []

    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: The first number.
            b: The second number.
        """
        calls.append((a, b))
        return str(a + b)

    fake.enqueue(_adder_model, _adder_model)
    question: list[BetaMessageParam] = [{"role": "user", "content": "2+3?"}]

    runner = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=64,
        messages=question,
        tools=[add],
        stream=stream,
    )
    final = runner.until_done()

    assert calls == [(2, 3)]
    assert final.content[0].type == "text"
    assert final.content[0].text == "The sum is 5."
    first, second = fake.requests
    assert first.body["thread"] == {"type": "create"}
    assert THREADS_BETA in first.betas
    assert first.body["tools"][0]["name"] == "add"
    # A continue carries only the tool result; the fake fills in the history it holds.
    assert second.body["thread"]["type"] == "continue"
    assert "tools" not in second.body
    assert len(second.body["messages"]) == 1
    assert [m["role"] for m in second.messages] == ["user", "assistant", "user"]
    assert second.resolved["tools"] == first.body["tools"]


def test_tool_runner_without_threads(fake: FakeAnthropic, client: anthropic.Anthropic) -> None:
    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    fake.enqueue(_adder_model, _adder_model)

    final = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=64, messages=BETA_USER, tools=[add], thread=False
    ).until_done()

    assert final.content[0].type == "text"
    assert final.content[0].text == "The sum is 5."
    first, second = fake.requests
    assert "thread" not in first.body
    assert THREADS_BETA not in first.betas
    assert len(second.body["messages"]) == 3


def test_tool_runner_falls_back_when_the_server_refuses_threads() -> None:
    @beta_tool
    def add(a: int, b: int) -> str:
        """Add two integers."""
        return str(a + b)

    with (
        FakeAnthropic(_adder_model, _adder_model, threads=False) as fake,
        anthropic.Anthropic(api_key="test-key", base_url=fake.url, max_retries=0) as sdk,
    ):
        final = sdk.beta.messages.tool_runner(
            model=MODEL, max_tokens=64, messages=BETA_USER, tools=[add]
        ).until_done()

    assert final.content[0].type == "text"
    assert final.content[0].text == "The sum is 5."
    refused, first, second = fake.requests
    assert refused.body["thread"] == {"type": "create"}
    assert "thread" not in first.body
    assert "thread" not in second.body


def test_memory_tool_under_tool_runner(
    fake: FakeAnthropic, client: anthropic.Anthropic, tmp_path: Path
) -> None:
    memory = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path))
    seen: list[dict[str, Any]] = []
    commands: list[dict[str, Any]] = [
        {"command": "create", "path": "/memories/notes.md", "file_text": "line one\nline two\n"},
        {"command": "view", "path": "/memories"},
        {"command": "view", "path": "/memories/notes.md"},
        {"command": "view", "path": "/etc/passwd"},
    ]

    def model(request: dict[str, Any]) -> Any:
        seen.extend(FakeAnthropic.tool_results(request))
        if commands:
            return FakeAnthropic.tool_use("memory", commands.pop(0))
        return FakeAnthropic.text("Remembered.")

    fake.enqueue(*[model] * 5)

    final = client.beta.messages.tool_runner(
        model=MODEL, max_tokens=64, messages=BETA_USER, tools=[memory]
    ).until_done()

    assert final.content[0].type == "text"
    assert final.content[0].text == "Remembered."
    assert fake.requests[0].body["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert (tmp_path / "memories" / "notes.md").read_text() == "line one\nline two\n"
    created, listing, file_view, refused = seen
    assert created["content"] == "File created successfully at: /memories/notes.md"
    assert listing["content"].splitlines()[0] == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:"
    )
    assert listing["content"].splitlines()[-1] == "18B\t/memories/notes.md"
    assert file_view["content"] == (
        "Here's the content of /memories/notes.md with line numbers:\n"
        "     1\tline one\n     2\tline two\n     3\t"
    )
    assert refused["is_error"] is True
    assert refused["content"] == "Path must start with /memories, got: /etc/passwd"


def test_tool_error_becomes_an_error_result(
    fake: FakeAnthropic, client: anthropic.Anthropic
) -> None:
    @beta_tool
    def lookup(key: str) -> BetaFunctionToolResultType:
        """Look a key up."""
        raise ToolError(f"No note named {key!r}; call view on /memories first.")

    results: list[dict[str, Any]] = []

    def model(request: dict[str, Any]) -> Any:
        results.extend(FakeAnthropic.tool_results(request))
        return (
            FakeAnthropic.text("ok") if results else FakeAnthropic.tool_use("lookup", {"key": "k"})
        )

    fake.enqueue(model, model)
    client.beta.messages.tool_runner(
        model=MODEL, max_tokens=64, messages=BETA_USER, tools=[lookup]
    ).until_done()

    assert results[0]["is_error"] is True
    assert results[0]["content"] == "No note named 'k'; call view on /memories first."


def test_async_client(fake: FakeAnthropic) -> None:
    fake.enqueue(F.text("async hello"), F.text("async stream"))

    async def run() -> tuple[str, str]:
        async with anthropic.AsyncAnthropic(
            api_key="test-key", base_url=fake.url, max_retries=0, timeout=5.0
        ) as sdk:
            message = await sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
            async with sdk.messages.stream(model=MODEL, max_tokens=8, messages=USER) as stream:
                streamed = await stream.get_final_text()
        block = message.content[0]
        assert block.type == "text"
        return block.text, streamed

    assert asyncio.run(run()) == ("async hello", "async stream")


def test_wait_for_requests_and_env(fake: FakeAnthropic) -> None:
    with pytest.raises(TimeoutError):
        fake.wait_for_requests(1, timeout=0.05)
    assert fake.env == {"ANTHROPIC_BASE_URL": fake.url, "ANTHROPIC_API_KEY": "test-key"}


def test_stop_closes_the_port_and_wakes_delays() -> None:
    fake = FakeAnthropic(FakeAnthropic.delay(30.0))
    with (
        fake,
        anthropic.Anthropic(
            api_key="test-key", base_url=fake.url, max_retries=0, timeout=0.2
        ) as sdk,
    ):
        url = fake.url
        with pytest.raises(anthropic.APITimeoutError):
            sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
    started = time.monotonic()
    fake.stop()  # idempotent
    assert time.monotonic() - started < 1.0
    with (
        anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0, timeout=1.0) as sdk,
        pytest.raises(anthropic.APIConnectionError),
    ):
        sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)


def test_a_forgotten_server_stops_itself() -> None:
    fake = FakeAnthropic(lifetime=0.1).start()
    url = fake.url
    time.sleep(0.4)
    with pytest.raises(AssertionError, match="outlived its lifetime"), fake:
        pass
    with (
        anthropic.Anthropic(api_key="test-key", base_url=url, max_retries=0, timeout=1.0) as sdk,
        pytest.raises(anthropic.APIConnectionError),
    ):
        sdk.messages.create(model=MODEL, max_tokens=8, messages=USER)
