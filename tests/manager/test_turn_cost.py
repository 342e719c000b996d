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


def test_a_turn_sweeps_each_store_once(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn's four queries (the related notes of the extraction prompt, the correction's
    candidates, in both stores) look at each store's notes' ctimes once, not four times:
    a warm process that swept a store less than SWEEP_AGAIN ago does not sweep it again
    (counted as the sweep's lstat calls, relative to the store's folder)."""
    import os
    import time

    from mdmem.recall import engine, fts
    from mdmem.recall.fts import Index, freshness_key

    # The turn's later queries come within it on a loaded machine too (2 s by default).
    monkeypatch.setattr(fts, "SWEEP_AGAIN", 60.0)

    notes = [create(f"Cache rule {i}", f"Cache {i} is kept a day.") for i in range(30)]
    correction = create(
        "Cache kept a day", "The deploy cache is kept a day, not a week.", "correction_feedback"
    )
    user_note = create_op("Answer about caches", "Check the schedule first.", level="user")
    provider = Scripted(notes, [correction, user_note])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async([{"role": "user", "content": "Caches?"}]).result(60)
        # Settled, as a store is between a user's turns: its key recorded (trusted).
        for store in (manager.project, manager.user):
            for _ in range(200):
                engine.recheck()
                search([store], "anything", semantic=False)
                if Index(store)._trusted(freshness_key(store.path, store.state)):
                    break
                time.sleep(0.02)
            else:
                raise AssertionError(f"{store.path} never settled")
        counted = len(manager.project.entries()) + len(manager.user.entries())
        swept: list[str] = []
        real_stat = os.stat

        def stat(path: object, *a: object, **k: object) -> os.stat_result:
            if k.get("dir_fd") is not None and k.get("follow_symlinks") is False:
                swept.append(str(path))
            return real_stat(path, *a, **k)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "stat", stat)
        engine.recheck()  # as if the last turn were seconds ago: every store is swept again
        result = manager.update_async(
            [
                {"role": "assistant", "content": "The deploy cache is kept a week."},
                {"role": "user", "content": "No, it is kept a day, not a week."},
            ]
        ).result(60)
    assert result.project.applied and result.user.applied  # the turn wrote to both stores
    # Each store swept once (its notes, the ones this turn wrote included), not twice.
    assert 0 < len(swept) <= counted + 2, (len(swept), counted)
