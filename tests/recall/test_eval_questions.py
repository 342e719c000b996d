"""``mdmem eval recall --questions model``: the model writes the probes' questions.

Driven by the real Anthropic and OpenAI SDKs against the fake APIs on 127.0.0.1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from fake_anthropic import FakeAnthropic
from fake_openai import FakeOpenAI
from mdmem import Level, Store
from mdmem.__main__ import main
from mdmem.recall.probe import BATCH, _questions_of, evaluate, model_questions, probes
from mdmem.store import ledger

NOTES = {
    "project_knowledge_release.md": (
        "Release process",
        "Tag the commit, then cargo dist builds the archives for every platform.",
    ),
    "project_knowledge_timezone.md": (
        "Time zones in quarry",
        "Set the QUARRY_TZ variable to override the zone; the default is the local clock.",
    ),
    "project_knowledge_logger.md": (
        "Logging in tern",
        "All logging goes through lib/core/logger.dart; never call print() in the app.",
    ),
}
QUESTIONS = {  # what a model would ask, in other words than the notes'
    "Release process": "how do we cut a release and build the archives?",
    "Time zones in quarry": "which variable overrides the zone quarry uses?",
    "Logging in tern": "where must logging go in tern instead of print?",
}
_NOTE = re.compile(r'<note id="(n\d+)">\n([^\n]*)\n')


def answer(body: dict[str, Any]) -> FakeAnthropic.Message:  # type: ignore[name-defined]
    """The fake model: a question per note it was shown, by the note's title."""
    prompt = body["messages"][-1]["content"]
    written = {nid: QUESTIONS[title] for nid, title in _NOTE.findall(prompt)}
    return FakeAnthropic.text("Here you are:\n" + json.dumps(written))


@pytest.fixture
def model(fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> FakeAnthropic:
    """The fake Anthropic API, configured as the extraction model."""
    for name, value in fake_anthropic.env.items():
        monkeypatch.setenv(name, value)
    return fake_anthropic


@pytest.fixture
def project(workspace: Path) -> Store:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    for name, (title, body) in NOTES.items():
        store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": title,
                    "content": body,
                    "filename": name,
                }
            ]
        )
    return store


def test_the_model_writes_the_questions_and_its_tokens_are_counted(
    workspace: Path, project: Store, model: FakeAnthropic, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_anthropic = model
    fake_anthropic.enqueue(answer)
    code = main(
        [
            "--workspace",
            str(workspace),
            "eval",
            "recall",
            "--level",
            "project",
            "--questions",
            "model",
            "--lexical",
            "--json",
        ]
    )
    assert code == 0
    report = json.loads(capsys.readouterr().out)
    assert report["source"] == "model" and report["run"] == 3
    assert report["hit@5"] == 1.0
    [request] = fake_anthropic.requests
    assert "tools" not in request.body  # a plain question, not the extraction tool
    assert "use your own words" in request.body["system"].lower()
    for title, _ in NOTES.values():
        assert title in request.body["messages"][0]["content"]
    # The call is in the usage ledger (the daily budget counts it).
    days = ledger.load(str(Path.home() / ".PseudoClaude" / "memory"))["days"]
    assert isinstance(days, dict) and sum(d["calls"] for d in days.values()) == 1


def test_a_note_without_a_question_keeps_its_sentence(project: Store) -> None:
    todo, _ = probes([project])
    asked: list[str] = []

    def ask(system: str, prompt: str) -> str:
        asked.append(prompt)
        return 'Sure. {"n1": "  how are releases built?  ", "n9": "not a note"} and more {'

    out = model_questions([project], todo, ask)
    assert [p.filename for p in out] == [p.filename for p in todo]
    assert out[0].query == "how are releases built?"
    assert [p.query for p in out[1:]] == [p.query for p in todo[1:]]  # nothing came back
    assert len(asked) == 1 and len(todo) <= BATCH


def test_notes_go_to_the_model_in_batches(workspace: Path) -> None:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Service {i} deploys",
                "content": f"Service number {i} deploys from branch release-{i} every week.",
                "filename": f"project_knowledge_service-{i}.md",
            }
            for i in range(BATCH * 2 + 3)
        ]
    )
    calls: list[int] = []

    def ask(system: str, prompt: str) -> str:
        calls.append(len(_NOTE.findall(prompt)))
        return "{}"

    report = evaluate([store], semantic=False, ask=ask)
    assert calls == [BATCH, BATCH, 3]
    assert report.source == "model" and report.run == BATCH * 2 + 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"n1": "q?"}', {"n1": "q?"}),
        ('prose {not json} then {"n2": " a "}', {"n2": "a"}),
        ('{"n1": 5, "n2": ""}', {}),
        ("[1, 2]", {}),
        ("", {}),
    ],
)
def test_questions_are_read_tolerantly(text: str, expected: dict[str, str]) -> None:
    assert _questions_of(text) == expected


def test_an_openai_compatible_server_writes_them_too(
    workspace: Path,
    project: Store,
    fake_openai: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("MDMEM_OPENAI_BASE_URL", fake_openai.url)
    monkeypatch.setenv("MDMEM_PROVIDER", "openai")
    fake_openai.enqueue(FakeOpenAI.text(json.dumps({"n1": "how is a release built?"})))
    code = main(["--workspace", str(workspace), "eval", "recall", "--questions", "model"])
    assert code == 0
    assert "probes over 3 notes" in capsys.readouterr().out
    [request] = fake_openai.requests
    assert "tools" not in request.body and request.body["max_tokens"] == 2048


def test_without_a_model_it_says_what_to_set(
    workspace: Path, project: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["--workspace", str(workspace), "eval", "recall", "--questions", "model"])
    assert code == 2
    err = capsys.readouterr().err
    assert "offline provider" in err and "ANTHROPIC_API_KEY" in err


def test_a_spent_daily_budget_stops_it_before_any_call(
    workspace: Path,
    project: Store,
    model: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    fake_anthropic = model
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "100")
    user = str(Path.home() / ".PseudoClaude" / "memory")
    Path(user).mkdir(parents=True)
    ledger.record(user, "call", None, turn="t", provider="anthropic", model="m", **{"in": 150})
    code = main(["--workspace", str(workspace), "eval", "recall", "--questions", "model"])
    assert code == 1
    assert "MDMEM_DAILY_TOKENS=100" in capsys.readouterr().err
    assert fake_anthropic.requests == []
