"""Provider choice, and the Anthropic provider's handling of models, credentials and errors."""

from __future__ import annotations

import subprocess

import pytest

from builders import extraction_request
from conftest import PYTHON, python_env
from fake_anthropic import FakeAnthropic
from mdmem import ProviderError
from mdmem.extract.providers import default_provider
from mdmem.extract.providers.anthropic import DEFAULT_MODEL, AnthropicProvider, operations_schema
from mdmem.extract.providers.base import ExtractionRequest


def request() -> ExtractionRequest:
    return extraction_request(("user", "hi"))


@pytest.mark.parametrize(
    ("env", "name"),
    [
        ({}, "offline"),
        ({"ANTHROPIC_API_KEY": "k"}, "anthropic"),
        ({"ANTHROPIC_AUTH_TOKEN": "t"}, "anthropic"),
        ({"ANTHROPIC_API_KEY": "k", "MDMEM_PROVIDER": "offline"}, "offline"),
        ({"MDMEM_PROVIDER": "anthropic"}, "anthropic"),
    ],
)
def test_default_provider(monkeypatch: pytest.MonkeyPatch, env: dict[str, str], name: str) -> None:
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert default_provider().name == name


def test_model_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    assert AnthropicProvider().model == DEFAULT_MODEL
    monkeypatch.setenv("MDMEM_MODEL", "claude-test-1")
    assert AnthropicProvider().model == "claude-test-1"


def test_choosing_anthropic_does_not_import_the_sdk() -> None:
    code = (
        "import sys, os; os.environ['ANTHROPIC_API_KEY'] = 'k'\n"
        "from mdmem.extract.providers import default_provider\n"
        "assert default_provider().name == 'anthropic'\n"
        "assert 'anthropic' not in sys.modules, 'imported too early'\n"
    )
    subprocess.run([PYTHON, "-c", code], env=python_env(), check=True)


def test_missing_credentials_is_a_clear_permanent_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(ProviderError) as info:
        AnthropicProvider(max_retries=0, timeout=2).extract(request())
    assert "ANTHROPIC_API_KEY" in str(info.value)
    assert info.value.retryable is False


def test_unreachable_api_is_retryable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")  # discard port: refused
    with pytest.raises(ProviderError) as info:
        AnthropicProvider(max_retries=0, timeout=2).extract(request())
    assert info.value.retryable is True


def test_timeout_is_retryable(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    fake_anthropic.enqueue(FakeAnthropic.delay(5))
    provider = AnthropicProvider(max_retries=0, timeout=0.3)
    with pytest.raises(ProviderError) as info:
        provider.extract(request())
    provider.close()
    assert info.value.retryable


def test_cut_off_answer_is_reported(
    fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    fake_anthropic.enqueue(FakeAnthropic.text('[{"action": "cre', stop_reason="max_tokens"))
    provider = AnthropicProvider(max_retries=0)
    with pytest.raises(ProviderError, match="max_tokens"):
        provider.extract(request())
    provider.close()


def test_schema_names_every_type_and_level() -> None:
    schema = operations_schema()
    item = schema["properties"]["operations"]["items"]  # type: ignore[index]
    assert set(item["properties"]["type"]["enum"]) == {
        "user_preference",
        "correction_feedback",
        "project_knowledge",
        "reference_material",
    }
    assert item["properties"]["level"]["enum"] == ["project", "user"]


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, ("offline", "no API key is set and the claude command is not on PATH")),
        ({"MDMEM_PROVIDER": "OpenAI"}, ("openai", "MDMEM_PROVIDER=openai")),
        ({"MDMEM_PROVIDER": "claude_code"}, ("claude-code", "MDMEM_PROVIDER=claude_code")),
        ({"MDMEM_PROVIDER": "gpt"}, ("offline", "MDMEM_PROVIDER='gpt' is not one of")),
        ({"OPENAI_API_KEY": "k"}, ("openai", "OPENAI_API_KEY is set")),
        ({"OPENAI_API_KEY": "k", "ANTHROPIC_API_KEY": "k"}, ("anthropic", "ANTHROPIC_API_KEY")),
    ],
)
def test_choose_says_which_and_why(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], expected: tuple[str, str]
) -> None:
    from mdmem.extract.providers import choose, make

    for key, value in env.items():
        monkeypatch.setenv(key, value)
    name, reason = choose()
    assert name == expected[0] and reason.startswith(expected[1])
    assert make(name).name == name
    with pytest.raises(ValueError, match="unknown provider"):
        make("gpt")


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"XDG_STATE_HOME": "/x/state"},
        {"XDG_STATE_HOME": "relative"},
        {"MDMEM_STATE_DIR": "~/s"},
    ],
)
def test_login_choice_lives_in_mdmem_state(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str]
) -> None:
    from mdmem.extract.providers import _state_base
    from mdmem.store.paths import state_base

    for key in ("XDG_STATE_HOME", "MDMEM_STATE_DIR"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert _state_base() == state_base()


def test_doctor_says_which_provider_will_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object
) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app

    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "50000")
    result = CliRunner().invoke(app, ["--workspace", str(tmp_path), "doctor"])
    assert result.exit_code == 0, result.output
    assert "the worker will use openai: OPENAI_BASE_URL is set" in result.output
    assert "0 of 50000 tokens used today (UTC)" in result.output


def test_the_anthropic_request_marks_the_system_prompt_for_caching(
    fake_anthropic: FakeAnthropic,
) -> None:
    fake_anthropic.enqueue(
        FakeAnthropic.message(
            FakeAnthropic.tool_use_block("record_memory_operations", {"operations": []}),
            usage={"input_tokens": 7, "output_tokens": 3, "cache_read_input_tokens": 900},
        )
    )
    provider = AnthropicProvider(
        client=__import__("anthropic").Anthropic(
            api_key="k", base_url=fake_anthropic.url, max_retries=0
        )
    )
    try:
        assert provider.extract(request()) == {"operations": []}
    finally:
        provider.close()
    body = fake_anthropic.requests[0].body
    assert body["system"] == [
        {"type": "text", "text": "system", "cache_control": {"type": "ephemeral"}}
    ]
    usage = provider.last_usage
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens) == (7, 3, 900)
    assert usage.total == 910
