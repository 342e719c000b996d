"""A turn costs what it writes: a correction is checked against the notes that match it
(the search index), not against every note of both stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from builders import Scripted, create_op
from mdmem import Manager, Store
from mdmem.manager import feedback
from mdmem.recall import search
from mdmem.recall.disputes import disputed

FILLERS = 90  # a turn writes at most 100 notes


def create(title: str, content: str, kind: str = "project_knowledge", **extra: str) -> dict:
    return create_op(title, content, type=kind, **extra)


def test_a_turn_with_a_correction_does_not_read_every_note(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    misleading = create("Test command", "Run the tests with `make test`.")
    # Notes on the same subject (they share "test"), that the correction does not contradict.
    fillers = [
        create(
            f"Test fixture {i}",
            f"Fixture {i} builds a database.",
            filename=f"project_knowledge_fixture-{i}.md",
        )
        for i in range(FILLERS)
    ]
    correction = create(
        "Test command is pytest",
        "Tests run with `pytest -n 4`; `make test` was removed.",
        kind="correction_feedback",
    )
    provider = Scripted([misleading, *fillers], [correction])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async(
            [
                {"role": "user", "content": "How do I run the tests?"},
                {"role": "assistant", "content": "Run `make test`."},
            ]
        ).result(60)
        assert len(manager.project.entries()) == FILLERS + 1
        # The next prompt's search indexes what the turn wrote (as the prompt hook does).
        assert search([manager.project, manager.user], "test command", semantic=False)

        reads: list[str] = []
        checked: list[int] = []
        real_read_text, real_read = Store.read_text, Store.read
        real_contradicted = feedback.contradicted

        def read_text(self: Store, name: str, *a: object, **k: object) -> str:
            reads.append(name)
            return real_read_text(self, name, *a, **k)

        def read(self: Store, name: str, *a: object, **k: object) -> object:
            reads.append(name)
            return real_read(self, name, *a, **k)

        def contradicted(said: str, notes: object, *a: object, **k: object) -> list[str]:
            listed = list(notes)  # type: ignore[call-overload]
            checked.append(len(listed))
            return real_contradicted(said, listed, *a, **k)

        monkeypatch.setattr(Store, "read_text", read_text)
        monkeypatch.setattr(Store, "read", read)
        monkeypatch.setattr(feedback, "contradicted", contradicted)
        manager.update_async(
            [
                {"role": "assistant", "content": "As noted, run the tests with `make test`."},
                {"role": "user", "content": "不对，make test 早就删了，测试用 pytest -n 4"},
            ]
        ).result(60)

    assert set(disputed(manager.project)) == {"project_knowledge_test-command.md"}
    # Checked against the best matches of its words, not the 91 notes.
    assert checked and max(checked) <= feedback.CANDIDATES
    # No note file read for it beyond what the turn wrote.
    assert len(reads) < 10, reads
