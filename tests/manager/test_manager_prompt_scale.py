"""A turn at a large store: a bounded prompt that carries the note the turn is about."""

from __future__ import annotations

import os
import time
from datetime import datetime, timezone
from pathlib import Path

import pytest

from mdmem import Manager, NoteType
from mdmem.extract import prompt
from mdmem.extract.providers.base import ExtractionRequest
from mdmem.extract.turn import estimate_tokens
from mdmem.store import files
from mdmem.store.note import Note, render

NOTES = 2_000
WORDS = [
    "cache",
    "queue",
    "retry",
    "deploy",
    "branch",
    "review",
    "format",
    "budget",
    "index",
    "schema",
    "worker",
    "lint",
]
TARGET = "project_knowledge_payments-ledger-rounding.md"


def make_store(workspace: Path) -> Path:
    """2,000 notes written straight to disk (an hour old), as a clone brings them."""
    root = workspace / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    past = time.time() - 3600
    types = list(NoteType)
    for i in range(NOTES):
        words = [WORDS[(i * 7 + k) % len(WORDS)] for k in range(60)]
        note = Note(
            filename=f"{types[i % 4].value}_n{i:05d}.md",
            type=types[i % 4],
            title=f"{words[0].capitalize()} {words[1]} note {i}",
            summary=f"About {words[2]} and {words[3]}.",
            body=" ".join(words),
            created=when,
            updated=when,
        )
        files.atomic_write(str(root / note.filename), render(note).encode(), durable=False)
        os.utime(root / note.filename, (past, past))
    target = Note(
        filename=TARGET,
        type=NoteType.PROJECT_KNOWLEDGE,
        title="Payments ledger rounding",
        summary="The ledger rounds half-up to whole cents.",
        body="The payments ledger rounds amounts half-up to whole cents (`ledger.round`).",
        created=when,
        updated=when,
    )
    files.atomic_write(str(root / TARGET), render(target).encode(), durable=False)
    os.utime(root / TARGET, (past, past))
    return root


class Recorder:
    name = "recorder"

    def __init__(self) -> None:
        self.requests: list[ExtractionRequest] = []

    def extract(self, request: ExtractionRequest) -> object:
        self.requests.append(request)
        return [
            {
                "action": "update",
                "level": "project",
                "filename": TARGET,
                "content": "The payments ledger now rounds half-even (banker's rounding).",
                "summary": "The ledger rounds half-even to whole cents.",
            }
        ]


TURN = [
    {"role": "user", "content": "The payments ledger rounding changed: it is half-even now."},
    {"role": "assistant", "content": "Understood: ledger rounding is half-even (banker's)."},
]


def test_a_turn_at_a_large_store_sends_a_bounded_prompt_and_updates_the_note(
    workspace: Path,
) -> None:
    root = make_store(workspace)
    provider = Recorder()
    with Manager(workspace, provider=provider) as manager:
        result = manager.update_async(TURN).result(120)
    [request] = provider.requests
    # Bounded: the memory part within its bytes, the whole request within its tokens,
    # far below what listing 2,001 notes would take.
    assert len(request.memory.encode()) <= prompt.INDEX_BYTES
    total = estimate_tokens(request.full_system) + estimate_tokens(request.prompt)
    assert total <= prompt.PROMPT_TOKENS
    listed = request.memory.count(".md)") + request.prompt.count(".md)")
    assert listed < 300
    assert "not every note" in request.memory
    # The note the turn is about is there (by recall), dated, with its store.
    assert TARGET in request.prompt
    [line] = [x for x in request.related.splitlines() if TARGET in x]
    assert line.startswith("- project: [project_knowledge] Payments ledger rounding")
    assert "[updated 2026-01-01]" in line
    # ... and the model's update of it is applied, not turned into a duplicate.
    assert [(a.action, a.filename) for a in result.project.applied] == [("update", TARGET)]
    assert "half-even" in (root / TARGET).read_text()
    assert len(list(root.glob("*.md"))) == NOTES + 2  # the notes and MEMORY.md


def test_an_update_of_a_note_the_prompt_did_not_list_is_still_applied(workspace: Path) -> None:
    """Validation checks that the note exists, not that the prompt showed it."""
    root = workspace / ".PseudoClaude" / "memory"
    unlisted = "project_knowledge_unlisted.md"

    class Answer:
        name = "answer"

        def extract(self, request: ExtractionRequest) -> object:
            # Written after the Manager computed its block, and unrelated to the turn.
            assert unlisted not in request.memory + request.prompt
            return [
                {"action": "update", "level": "project", "filename": unlisted, "content": "New."},
                {"action": "delete", "level": "project", "filename": "project_knowledge_n00001.md"},
                {
                    "action": "update",
                    "level": "project",
                    "filename": "project_knowledge_missing.md",
                    "content": "x",
                },
            ]

    with Manager(workspace, provider=Answer()) as manager:
        manager.project.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": "Unlisted",
                    "content": "Old.",
                },
                *[
                    {
                        "action": "create",
                        "level": "project",
                        "type": "project_knowledge",
                        "title": f"N{i:05d}",
                        "content": f"Filler {i} " + "z" * 300,
                    }
                    for i in range(2)
                ],
            ]
        )
        result = manager.update_async(TURN).result(60)
    applied = {(a.action, a.filename) for a in result.project.applied}
    assert ("update", unlisted) in applied
    assert ("delete", "project_knowledge_n00001.md") in applied
    [rejected] = result.project.rejected
    assert isinstance(rejected.operation, dict)
    assert rejected.operation.get("filename") == "project_knowledge_missing.md"
    assert (root / unlisted).read_text().endswith("New.\n")


def test_the_staleness_check_runs_after_a_turn_only_when_it_can_change_something(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.store import stale

    workspace = tmp_path / "plain"  # no git: only missing paths count
    workspace.mkdir()
    calls: list[str] = []
    real = stale.check

    def counting(store: object, ws: str, **kwargs: object) -> object:
        calls.append(ws)
        return real(store, ws, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stale, "check", counting)
    gone = {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": "Old entry point",
        "content": "Start with `src/app/old_main.py`.",
    }
    fact = {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": "Plain fact",
        "content": "Nothing to check.",
    }
    marked = "project_knowledge_old-entry-point.md"
    fix = {"action": "update", "level": "project", "filename": marked, "content": "Gone."}
    provider = ScriptedList([gone], [fact], [fix], [])
    with Manager(workspace, provider=provider, discover=False) as manager:
        manager.update_async(TURN).result(30)  # no marks yet: checked
        assert len(calls) == 1
        assert "[stale: path gone: src/app/old_main.py]" in manager.index
        manager.update_async(TURN).result(30)  # same code, a new note: not checked
        assert len(calls) == 1
        manager.update_async(TURN).result(30)  # a marked note rewritten: checked
        assert len(calls) == 2
        assert "[stale:" not in manager.index
        (workspace / ".git").mkdir()  # the code moved (here: it became a repository): checked
        manager.update_async(TURN).result(30)
        assert len(calls) == 3


class ScriptedList:
    name = "scripted"

    def __init__(self, *answers: list[dict[str, str]]) -> None:
        self.answers = list(answers)

    def extract(self, request: ExtractionRequest) -> object:
        return self.answers.pop(0)
