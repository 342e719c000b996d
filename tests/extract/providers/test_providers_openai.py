"""The OpenAI-compatible provider through the real `openai` SDK against a local fake server."""

from __future__ import annotations

import json
import subprocess
from datetime import date
from pathlib import Path

import pytest

from builders import extraction_request, journaled
from conftest import PYTHON, python_env
from fake_openai import Delay, Disconnect, FakeOpenAI, Garbage
from mdmem import Manager, ProviderError
from mdmem.extract.providers import choose, default_provider
from mdmem.extract.providers.base import ExtractionRequest
from mdmem.extract.providers.openai import OpenAIProvider
from mdmem.store import ledger

pytest.importorskip("openai")

TURN = [
    {"role": "user", "content": "Remember that releases are built with `make release`."},
    {"role": "assistant", "content": "Noted: releases use make release."},
]
OP = {
    "action": "create",
    "level": "project",
    "type": "project_knowledge",
    "title": "Release build",
    "summary": "Releases are built with make release.",
    "content": "Run `make release` to build a release.",
}
NOTE = "project_knowledge_release-build.md"


def provider(fake: FakeOpenAI, **kwargs: object) -> OpenAIProvider:
    kwargs.setdefault("max_retries", 0)
    kwargs.setdefault("timeout", 5.0)
    return OpenAIProvider("local-model", base_url=fake.url, **kwargs)  # type: ignore[arg-type]


def run_turn(workspace: Path, p: OpenAIProvider) -> tuple[Manager, object]:
    manager = Manager(workspace, provider=p, retry_delay=3600)
    future = manager.update_async(TURN)
    assert manager.flush(timeout=30)
    return manager, future


def note_path(workspace: Path) -> Path:
    return workspace / ".PseudoClaude" / "memory" / NOTE


@pytest.mark.parametrize("stream", [False, True])
def test_tool_call_writes_the_note(workspace: Path, fake_openai: FakeOpenAI, stream: bool) -> None:
    usage = {
        "prompt_tokens": 900,
        "completion_tokens": 40,
        "prompt_tokens_details": {"cached_tokens": 600},
    }
    fake_openai.enqueue(
        FakeOpenAI.tool_call("record_memory_operations", {"operations": [OP]}, usage=usage)
    )
    manager, future = run_turn(workspace, provider(fake_openai, stream=stream))
    with manager:
        result = future.result()  # type: ignore[attr-defined]
    assert [a.filename for a in result.project.applied] == [NOTE]
    assert "make release" in note_path(workspace).read_text()
    [request] = fake_openai.requests
    body = request.body
    assert body["model"] == "local-model"
    assert body["tool_choice"] == {
        "type": "function",
        "function": {"name": "record_memory_operations"},
    }
    assert body["messages"][0]["role"] == "system"
    assert "role=user\nRemember that releases" in body["messages"][1]["content"]
    assert bool(body.get("stream")) is stream
    # Usage reached the ledger: cached tokens counted once, as cache reads.
    day = ledger.load(manager.user.path)["days"]
    [(_, totals)] = day.items()  # type: ignore[union-attr]
    assert (totals["in"], totals["cr"], totals["out"], totals["calls"]) == (300, 600, 40, 1)


def test_json_schema_mode(workspace: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.text(json.dumps({"operations": [OP]})))
    manager, _ = run_turn(workspace, provider(fake_openai, mode="json_schema"))
    manager.close()
    body = fake_openai.requests[0].body
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"]["required"] == ["operations"]
    assert "tools" not in body
    assert note_path(workspace).exists()


def test_text_with_prose_is_parsed_tolerantly(workspace: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(FakeOpenAI.text(f"Sure! Here:\n```json\n{json.dumps([OP])}\n```\nBye."))
    manager, _ = run_turn(workspace, provider(fake_openai, mode="text"))
    manager.close()
    assert "tools" not in fake_openai.requests[0].body
    assert note_path(workspace).exists()


def test_a_server_without_tools_is_asked_again_in_text(
    workspace: Path, fake_openai: FakeOpenAI
) -> None:
    fake_openai.enqueue(
        FakeOpenAI.error(400, "tools are not supported by this model", should_retry=False),
        FakeOpenAI.text(json.dumps([OP])),
    )
    p = provider(fake_openai)
    manager, _ = run_turn(workspace, p)
    manager.close()
    first, second = (r.body for r in fake_openai.requests)
    assert "tools" in first and "tools" not in second
    assert p.mode == "text"
    assert note_path(workspace).exists()


def test_openai_itself_gets_max_completion_tokens(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MDMEM_OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert OpenAIProvider("gpt-5-mini", api_key="k").limit_param == "max_completion_tokens"
    assert OpenAIProvider("m", base_url="http://127.0.0.1:1/v1").limit_param == "max_tokens"


@pytest.mark.parametrize("refused", ["max_tokens", "max_completion_tokens"])
def test_a_refused_token_limit_is_sent_under_its_other_name(
    workspace: Path, fake_openai: FakeOpenAI, refused: str
) -> None:
    other = "max_completion_tokens" if refused == "max_tokens" else "max_tokens"
    message = f"Unsupported parameter: '{refused}' is not supported with this model."
    again = FakeOpenAI.error(400, f"Unsupported parameter: '{other}' is not supported")
    fake_openai.enqueue(
        FakeOpenAI.error(400, message, should_retry=False),
        FakeOpenAI.tool_call("record_memory_operations", {"operations": [OP]}),
        again,
        again,
    )
    p = provider(fake_openai)
    p.limit_param = refused
    manager, _ = run_turn(workspace, p)
    first, second = (r.body for r in fake_openai.requests)
    assert refused in first and other not in first
    assert other in second and refused not in second
    assert p.limit_param == other and p.mode == "tools"  # not mistaken for "no tools"
    assert note_path(workspace).exists()
    # Refused under both names: a clear error, not a loop between them (the one
    # further try is in plain text, as for any server that refuses an option).
    request = ExtractionRequest("s", "p", (), "", "", date(2026, 1, 1))
    with pytest.raises(ProviderError, match="not supported"):
        p.extract(request)
    assert len(fake_openai.requests) == 4
    manager.close()


def test_a_rate_limit_is_retried_by_the_sdk(workspace: Path, fake_openai: FakeOpenAI) -> None:
    fake_openai.enqueue(
        FakeOpenAI.error(429, "slow down"),
        FakeOpenAI.tool_call("record_memory_operations", {"operations": [OP]}),
    )
    manager, _ = run_turn(workspace, provider(fake_openai, max_retries=1))
    manager.close()
    assert len(fake_openai.requests) == 2
    assert note_path(workspace).exists()


@pytest.mark.parametrize(
    ("reply", "retryable", "words"),
    [
        (FakeOpenAI.error(500, "boom", should_retry=False), True, "500"),
        (FakeOpenAI.error(429, "quota", should_retry=False), True, "429"),
        (FakeOpenAI.error(401, "bad key", should_retry=False), False, "401"),
        (Garbage(), True, ""),
        (Garbage(b'{"id": 1}', "application/json"), True, ""),
        (Disconnect(), True, "reach"),
        (Delay(3.0), True, "reach"),
    ],
)
def test_errors_are_translated_and_the_turn_stays_journaled(
    workspace: Path, fake_openai: FakeOpenAI, reply: object, retryable: bool, words: str
) -> None:
    fake_openai.enqueue(reply)  # type: ignore[arg-type]
    p = provider(fake_openai, timeout=0.5)
    manager, future = run_turn(workspace, p)
    error = future.exception()  # type: ignore[attr-defined]
    manager.close()
    assert isinstance(error, ProviderError)
    assert error.retryable is retryable
    assert words in str(error)
    assert not note_path(workspace).exists()
    assert journaled(workspace) == 1  # kept: for a retry, or set aside


def test_no_key_and_no_url_is_a_clear_error() -> None:
    p = OpenAIProvider(max_retries=0)
    with pytest.raises(ProviderError, match="OPENAI_API_KEY") as info:
        p.extract(extraction_request(("user", "hi")))
    assert info.value.retryable is False


def test_the_environment_configures_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_OPENAI_BASE_URL", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://ignored")
    monkeypatch.setenv("MDMEM_MODEL", "qwen3")
    assert choose() == ("openai", "MDMEM_OPENAI_BASE_URL is set")
    p = default_provider()
    assert isinstance(p, OpenAIProvider)
    assert (p.base_url, p.model, p.api_key, p.mode) == (
        "http://127.0.0.1:1/v1",
        "qwen3",
        None,
        "tools",
    )
    monkeypatch.setenv("MDMEM_OPENAI_MODE", "yaml")
    with pytest.raises(ValueError, match="MDMEM_OPENAI_MODE"):
        OpenAIProvider()


def test_choosing_openai_does_not_import_the_sdk() -> None:
    code = (
        "import sys, os; os.environ['OPENAI_BASE_URL'] = 'http://127.0.0.1:1'\n"
        "from mdmem.extract.providers import default_provider\n"
        "assert default_provider().name == 'openai'\n"
        "assert 'openai' not in sys.modules, 'imported too early'\n"
    )
    subprocess.run([PYTHON, "-c", code], env=python_env(), check=True)
