"""The Anthropic request is valid for every model a user may set in MDMEM_MODEL (issue 27).

Each model family goes through the real ``anthropic`` SDK to the fake API, which
refuses what Anthropic's pages say the real API refuses for that model
(``fake_anthropic.MODEL_RULES``): forced tool use and disabled thinking on the
models that always think, sampling parameters and thinking budgets on the 5.x
models, thinking together with a forced tool everywhere.
"""

from __future__ import annotations

from datetime import date

import anthropic
import pytest

from builders import extraction_request
from fake_anthropic import FakeAnthropic, model_rules
from mdmem.extract.providers.anthropic import TOOL_NAME, AnthropicProvider, request_rules
from mdmem.extract.providers.base import ExtractionRequest

OPS = {
    "operations": [
        {
            "action": "create",
            "level": "user",
            "type": "user_preference",
            "title": "Answer in Chinese",
            "content": "Answer in Chinese.",
        }
    ]
}

# (model, whether mdmem forces the tool for it)
FAMILIES = [
    ("claude-haiku-5-5", True),
    ("claude-haiku-4-5-20251001", True),
    ("claude-sonnet-4-6", True),
    ("claude-opus-4-8", True),
    ("claude-sonnet-5", False),
    ("claude-opus-5", False),
    ("claude-sonnet-5-5", False),
    ("claude-opus-5-5", False),
    ("claude-fable-5-1", False),
    ("anthropic.claude-opus-5-5", False),
]


def request() -> ExtractionRequest:
    return extraction_request(("user", "answer in Chinese"), today=date(2026, 12, 1))


def provider(fake: FakeAnthropic, model: str, *, stream: bool = False) -> AnthropicProvider:
    client = anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0)
    return AnthropicProvider(model, client=client, stream=stream)


@pytest.mark.parametrize(("model", "forced"), FAMILIES)
@pytest.mark.parametrize("stream", [False, True])
def test_every_family_gets_a_valid_request(
    fake_anthropic: FakeAnthropic, model: str, forced: bool, stream: bool
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.tool_use(TOOL_NAME, OPS))
    p = provider(fake_anthropic, model, stream=stream)
    try:
        assert p.extract(request()) == OPS
    finally:
        p.close()
    body = fake_anthropic.requests[0].body
    expected = {"type": "tool", "name": TOOL_NAME} if forced else {"type": "auto"}
    assert body["tool_choice"] == expected
    assert request_rules(model).force_tool is forced
    # Never a thinking setting or a sampling parameter, whatever the model.
    assert not {"thinking", "temperature", "top_p", "top_k"} & set(body)


@pytest.mark.parametrize("model", ["claude-sonnet-5-5", "claude-opus-5-5", "claude-fable-5-1"])
def test_the_fake_refuses_the_old_forced_request(model: str) -> None:
    """The rules bite: the request mdmem used to send is a 400 for these models."""
    with (
        FakeAnthropic(FakeAnthropic.tool_use(TOOL_NAME, OPS), strict=False) as fake,
        anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0) as client,
        pytest.raises(anthropic.BadRequestError, match="forced tool use"),
    ):
        client.messages.create(
            model=model,
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"name": TOOL_NAME, "input_schema": {"type": "object"}}],
            tool_choice={"type": "tool", "name": TOOL_NAME},
        )


@pytest.mark.parametrize(
    ("model", "extra", "refused"),
    [
        ("claude-haiku-5-5", {"temperature": 0.2}, "temperature"),
        ("claude-opus-4-8", {"top_p": 0.9}, "top_p"),
        ("claude-sonnet-5-5", {"thinking": {"type": "disabled"}}, "cannot be disabled"),
        ("claude-haiku-5-5", {"thinking": {"type": "enabled", "budget_tokens": 1024}}, "enabled"),
        ("claude-sonnet-4-6", {"thinking": {"type": "adaptive"}}, "Thinking may not be enabled"),
    ],
)
def test_the_fake_refuses_what_the_docs_say(
    model: str, extra: dict[str, object], refused: str
) -> None:
    with (
        FakeAnthropic(FakeAnthropic.text("[]"), strict=False) as fake,
        anthropic.Anthropic(api_key="k", base_url=fake.url, max_retries=0) as client,
        pytest.raises(anthropic.BadRequestError, match=refused),
    ):
        client.messages.create(
            model=model,
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"name": TOOL_NAME, "input_schema": {"type": "object"}}],
            tool_choice={"type": "tool", "name": TOOL_NAME},
            # This SDK has no sampling parameters any more: sent as the old code would.
            extra_body=extra,
        )


def test_a_thinking_models_reply_opens_with_a_thinking_block(
    fake_anthropic: FakeAnthropic,
) -> None:
    """The answer is found by block type, not position (the fake puts thinking first)."""
    assert model_rules("claude-opus-5-5").thinks_by_default
    fake_anthropic.enqueue(FakeAnthropic.tool_use(TOOL_NAME, OPS))
    with anthropic.Anthropic(api_key="k", base_url=fake_anthropic.url, max_retries=0) as client:
        message = client.messages.create(
            model="claude-opus-5-5",
            max_tokens=100,
            messages=[{"role": "user", "content": "hi"}],
            tools=[{"name": TOOL_NAME, "input_schema": {"type": "object"}}],
        )
    assert [block.type for block in message.content] == ["thinking", "tool_use"]


def test_an_unknown_model_that_refuses_forcing_is_asked_with_auto(
    fake_anthropic: FakeAnthropic,
) -> None:
    refusal = FakeAnthropic.error(
        400, "tool_choice: forced tool use is not supported for this model", should_retry=False
    )
    fake_anthropic.enqueue(
        refusal, FakeAnthropic.tool_use(TOOL_NAME, OPS), FakeAnthropic.tool_use(TOOL_NAME, OPS)
    )
    p = provider(fake_anthropic, "my-proxy-model")
    assert p.rules.force_tool
    try:
        assert p.extract(request()) == OPS
        assert p.extract(request()) == OPS  # remembered: asked with auto at once
    finally:
        p.close()
    choices = [r.body["tool_choice"]["type"] for r in fake_anthropic.requests]
    assert choices == ["tool", "auto", "auto"]


def test_other_bad_requests_are_not_retried(fake_anthropic: FakeAnthropic) -> None:
    from mdmem import ProviderError

    fake_anthropic.enqueue(FakeAnthropic.error(400, "max_tokens: too large", should_retry=False))
    p = provider(fake_anthropic, "claude-haiku-5-5")
    with pytest.raises(ProviderError, match="max_tokens"):
        p.extract(request())
    p.close()
    assert len(fake_anthropic.requests) == 1
