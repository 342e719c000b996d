"""Consolidation through the real SDK against the fake API: bounded, validated, reversible."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fake_anthropic import FakeAnthropic
from mdmem import Level, Store
from mdmem.cli import app
from mdmem.extract.providers import default_provider
from mdmem.manager.consolidate import consolidate

TOOL = "record_memory_operations"


@pytest.fixture
def store(workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch) -> Store:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    s = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    s.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "slug": f"note-{i}",
                "content": f"Fact number {i} about the build, written last week.",
            }
            for i in range(8)
        ]
    )
    return s


def consolidate_closing(store: Store, max_changes: int) -> object:
    """Consolidate with the configured provider, and close it (its HTTP pool) afterwards."""
    provider = default_provider()
    try:
        return consolidate(store, provider, max_changes=max_changes)
    finally:
        provider.close()  # type: ignore[attr-defined]


def files(store: Store) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in store.root.glob("*.md") if p.name != "MEMORY.md"}


def test_a_plan_is_applied_through_validation_history_and_trash(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.enqueue(
        FakeAnthropic.tool_use(
            TOOL,
            {
                "operations": [
                    {
                        "action": "update",
                        "level": "project",
                        "filename": "project_knowledge_note-1.md",
                        "content": "Fact number 1 about the build, written on 2026-11-22.",
                        "supersedes": ["project_knowledge_note-2.md"],
                    },
                    {
                        "action": "delete",
                        "level": "project",
                        "filename": "project_knowledge_note-3.md",
                    },
                ]
            },
        )
    )
    report = consolidate_closing(store, 5)
    assert [a.action for a in report.result.applied] == ["update", "delete"]
    assert "2026-11-22" in store.read("project_knowledge_note-1.md").body
    assert [t.filename for t in store.trash()] == ["project_knowledge_note-3.md"]
    entries = {e.filename: e for e in store.entries()}
    assert entries["project_knowledge_note-2.md"].superseded_by == "project_knowledge_note-1.md"
    assert store.history("project_knowledge_note-1.md")[-1].source == "consolidate"
    [request] = fake_anthropic.requests
    prompt = request.body["messages"][0]["content"]
    assert 'file="project_knowledge_note-0.md"' in prompt and "updated=" in prompt


def test_a_hostile_runaway_answer_changes_at_most_the_bound_and_loses_nothing(
    store: Store, fake_anthropic: FakeAnthropic
) -> None:
    before = files(store)
    hostile = [
        {"action": "delete", "level": "project", "filename": f"project_knowledge_note-{i}.md"}
        for i in range(8)
    ] * 5 + [
        {"action": "delete", "level": "project", "filename": "../../etc/passwd"},
        {"action": "delete", "level": "user", "filename": "project_knowledge_note-0.md"},
        {"action": "update", "level": "project", "filename": "not_shown.md", "content": "x"},
        {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": "Spam",
            "content": "spam",
        },
    ] * 10
    fake_anthropic.enqueue(FakeAnthropic.tool_use(TOOL, {"operations": hostile}))
    report = consolidate_closing(store, 3)
    changed = [a for a in report.result.applied if a.action != "unchanged"]
    assert len(changed) <= 3
    after = files(store)
    assert len(after) == len(before) - len(changed)
    # Whatever was removed is in the trash and in history, byte for byte.
    for name in set(before) - set(after):
        [item] = [t for t in store.trash() if t.filename == name]
        assert Path(item.path).read_bytes() == before[name]
        assert store.restore_version(name, store.history(name)[-1].version) == "create"
    assert files(store) == before
    assert report.rejected  # the traversal, the other level, the unseen note


def test_dry_run_prints_the_plan_and_writes_nothing(
    store: Store, fake_anthropic: FakeAnthropic, workspace: Path
) -> None:
    before = files(store)
    fake_anthropic.enqueue(
        FakeAnthropic.tool_use(
            TOOL,
            {
                "operations": [
                    {"action": "delete", "filename": "project_knowledge_note-4.md"},
                ]
            },
        )
    )
    out = CliRunner().invoke(
        app,
        ["--workspace", str(workspace), "consolidate", "--dry-run", "--level", "project", "--json"],
    )
    assert out.exit_code == 0, out.output
    [report] = json.loads(out.output)
    assert report["planned"] == [
        {"action": "delete", "level": "project", "filename": "project_knowledge_note-4.md"}
    ]
    assert files(store) == before


def test_consolidate_counts_in_the_ledger_and_keeps_to_the_daily_budget(
    store: Store, fake_anthropic: FakeAnthropic, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    from mdmem.store import ledger

    user = os.environ["MDMEM_USER_DIR"]
    fake_anthropic.enqueue(FakeAnthropic.tool_use(TOOL, {"operations": []}))
    args = ["--workspace", str(workspace), "consolidate", "--level", "project"]
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    spent = ledger.tokens_on(user, ledger.day_of(time.time()))
    assert spent > 0  # the call is in the user's usage ledger, as a turn's would be
    assert [t[1] for t in ledger.load(user)["turns"]] == ["consolidate"]

    monkeypatch.setenv("MDMEM_DAILY_TOKENS", str(spent + 10))  # less than one more batch
    before = files(store)
    out = CliRunner().invoke(app, args)
    assert out.exit_code != 0
    assert "daily token budget" in out.output and "MDMEM_DAILY_TOKENS" in out.output
    assert len(fake_anthropic.requests) == 1  # no second call was made
    assert files(store) == before
