"""Provider choice, and the Anthropic provider's handling of models, credentials and errors."""

from __future__ import annotations

import subprocess
from datetime import date

import pytest

from conftest import PYTHON, python_env
from fake_anthropic import FakeAnthropic
from mdmem import ProviderError
from mdmem.extract.providers import default_provider
from mdmem.extract.providers.anthropic import DEFAULT_MODEL, AnthropicProvider, operations_schema
from mdmem.extract.providers.base import ExtractionRequest, Message


def request() -> ExtractionRequest:
    return ExtractionRequest("system", "prompt", (Message("user", "hi"),), "", "", date(2026, 1, 1))


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
