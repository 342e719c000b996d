"""The per-prompt gate's decisions on a small store that SessionStart lists whole (issue 24).

A small store is listed whole at the session's start (titles and summaries), so
almost every answer of a prompt is a listed note: the gate must still bring
the one a prompt is about (its body is what answers), and stay quiet when the
prompt names nothing in particular. Lexical only (``MDMEM_SEMANTIC=off``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mdmem import Level, Note, NoteType, Store
from mdmem.integrations import claude_code
from mdmem.integrations._session import names_in
from mdmem.integrations.prompt_recall import MIN_COVERAGE, RELATIVE, user_prompt_submit
from mdmem.recall import engine
from mdmem.store.note import render

NOTES = {
    "heatmap-colours": (
        "Heatmap colour scale",
        "The greenhouse heatmap uses the viridis palette, readable with colour blindness.",
    ),
    "deploy-heron": (
        "Deploying heron with Argo CD",
        "heron is deployed by Argo CD from the deploy repository; sync the app after merging.",
    ),
    "heron-locally": (
        "Running heron locally",
        "Run heron locally with docker compose up; the API listens on port 8080.",
    ),
    "lint-heron": (
        "Linting heron",
        "Run golangci-lint run before pushing; its settings are in .golangci.yml.",
    ),
    "integration-tests": (
        "Integration tests",
        "Integration tests run against a Postgres container started by docker compose.",
    ),
    "seed": (
        "Seed every training run",
        "Training runs set the random seed to 42 so that results are reproducible.",
    ),
    "loam-env": (
        "loam environment with uv",
        "The loam environment is managed with uv: run uv sync after pulling.",
    ),
    "release": (
        "Release process",
        "Releases are cut by pushing a tag; CI builds the binaries and the changelog.",
    ),
}


@pytest.fixture
def stores(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Store, Store]:
    monkeypatch.setenv("MDMEM_SEMANTIC", "off")
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    user = Store(tmp_path / "home" / ".PseudoClaude" / "memory", Level.USER)
    for store in (project, user):
        store.root.mkdir(parents=True, exist_ok=True)
    for slug, (title, body) in NOTES.items():
        note = Note(f"project_knowledge_{slug}.md", NoteType.PROJECT_KNOWLEDGE, title, "", body)
        (project.root / note.filename).write_text(render(note), encoding="utf-8")
    return project, user


def start(workspace: Path, session: str) -> list[str]:
    """SessionStart for a new session; the notes its block lists."""
    payload = {"session_id": session, "cwd": str(workspace), "source": "startup"}
    out = json.loads(claude_code.session_start(payload, None, None))
    return names_in(out["hookSpecificOutput"]["additionalContext"])


def prompt(workspace: Path, text: str, session: str) -> list[str]:
    """The notes the UserPromptSubmit hook recalls for ``text``."""
    out = user_prompt_submit(
        {"session_id": session, "cwd": str(workspace), "hook_event_name": "x", "prompt": text}
    )
    return names_in(json.loads(out)["hookSpecificOutput"]["additionalContext"]) if out else []


def evidence_of(stores: tuple[Store, Store], text: str) -> dict[str, float]:
    ranked, _ = engine._rank(list(stores), text, None, False, 0.0, None)
    return {c.row.name: engine.evidence(c) for c in ranked}


def test_a_listed_note_the_prompt_is_about_comes_back_though_it_shares_few_words(
    workspace: Path, stores: tuple[Store, Store]
) -> None:
    listed = start(workspace, "g-1")
    assert "project_knowledge_seed.md" in listed  # a small store is listed whole
    question = "make training results repeatable"
    evidence = evidence_of(stores, question)
    seed = evidence.pop("project_knowledge_seed.md")
    # Few of the prompt's words, but no other note has any of them: the prompt is about it.
    assert MIN_COVERAGE <= seed < engine.ABOUT
    assert all(e < RELATIVE * seed for e in evidence.values())
    assert prompt(workspace, question, "g-1") == ["project_knowledge_seed.md"]
    assert prompt(workspace, question, "g-1") == []  # once per session


def test_a_prompt_many_notes_match_equally_recalls_none(
    workspace: Path, stores: tuple[Store, Store]
) -> None:
    start(workspace, "g-2")
    evidence = evidence_of(stores, "run it again")
    # Every note with "run" holds the whole prompt: more than CROWD of them, none singled out.
    assert sum(1 for e in evidence.values() if e == 1.0) > engine.CROWD
    assert prompt(workspace, "run it again", "g-2") == []


def test_one_shared_word_that_leads_by_little_recalls_nothing(
    workspace: Path, stores: tuple[Store, Store]
) -> None:
    start(workspace, "g-3")
    # "pushing" is in two notes, the rest of the prompt in none: no note is what it asks.
    question = "stop pushing buttons on the keyboard"
    evidence = evidence_of(stores, question)
    assert evidence and max(evidence.values()) < engine.ABOUT
    assert prompt(workspace, question, "g-3") == []
    # Off-topic prompts stay quiet too.
    assert prompt(workspace, "what is the capital of Australia", "g-3") == []


def test_a_prompt_about_a_note_that_was_not_listed_still_needs_evidence(
    workspace: Path, stores: tuple[Store, Store]
) -> None:
    # Without SessionStart's record nothing is listed: the same decisions hold.
    assert prompt(workspace, "colour palette of the greenhouse heatmap", "g-4") == [
        "project_knowledge_heatmap-colours.md"
    ]
    assert prompt(workspace, "run it again", "g-4") == []


def test_a_chinese_question_is_not_diluted_by_grams_across_its_words(
    stores: tuple[Store, Store],
) -> None:
    project, _ = stores
    note = Note(
        "project_knowledge_push.md",
        NoteType.PROJECT_KNOWLEDGE,
        "Push notifications",
        "",
        "Push notifications go through Firebase Cloud Messaging.",
    )
    (project.root / note.filename).write_text(render(note), encoding="utf-8")
    # "推送通知" is cut into 推送 送通 通知: the English note holds both words (推送 push,
    # 通知 notification); 送通 straddles them, is in no note, and does not count against it.
    assert evidence_of(stores, "推送通知")["project_knowledge_push.md"] == pytest.approx(1.0)
    # A word no note has still does: 延迟 (and 知延, half of it unknown) are missing.
    assert evidence_of(stores, "推送通知延迟")["project_knowledge_push.md"] < 0.7


def test_a_long_chinese_note_still_gets_its_index_line_in_the_prompt_block(
    workspace: Path, stores: tuple[Store, Store]
) -> None:
    from mdmem.integrations.prompt_recall import BUDGET_TOKENS

    project, _ = stores
    summary = "熔断器的阈值是每分钟五十次失败，" * 12  # 192 characters: ~192 tokens
    body = "半开状态下只放行一个请求，成功后关闭熔断器。" * 10
    title = "熔断器阈值" + "与半开状态的放行规则" * 4
    note = Note("project_knowledge_breaker.md", NoteType.PROJECT_KNOWLEDGE, title, summary, body)
    (project.root / note.filename).write_text(render(note), encoding="utf-8")
    whole = engine.render_hit(engine.search([project], "熔断器阈值", semantic=False)[0])
    assert engine.estimate_tokens(whole) > BUDGET_TOKENS  # with its snippet it cannot fit
    assert "\n  > " in whole
    out = user_prompt_submit(
        {"session_id": "g-5", "cwd": str(workspace), "hook_event_name": "x", "prompt": "熔断器阈值"}
    )
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert names_in(context) == ["project_knowledge_breaker.md"]
    assert "> 半开" not in context  # its index line, without the snippet
