"""A turn costs what it writes: a correction is checked against the notes that match it
(the search index), not against every note of both stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from builders import Scripted, create_op
from mdmem import Level, Manager, Store
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


def test_a_store_that_holds_none_of_the_wrong_words_is_not_ranked(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A correction can only contradict a note that says what it calls wrong: a store in
    which no note holds those words is not asked to rank its notes (the user store of a
    turn correcting a project fact, say), and the store that holds them still is."""
    from mdmem.recall.fts import Index

    misleading = create("Deploy cache lifetime", "The deploy cache is kept a week.")
    # The user store shares the turn's other words (cache, deploy), not "week".
    user_notes = [
        create_op(f"Deploy cache answer {i}", f"Answers about the deploy cache {i}.", level="user")
        for i in range(5)
    ]
    correction = create(
        "Nightly clearing", "The worker clears it nightly, not weekly.", kind="correction_feedback"
    )
    provider = Scripted([misleading, *user_notes], [correction])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async([{"role": "user", "content": "How long is the cache kept?"}]).result(
            60
        )
        ranked: list[str] = []
        real_match = Index.match

        def match(self: Index, *a: object, **k: object) -> object:
            if k.get("heading"):
                ranked.append(self.store.level.value)
            return real_match(self, *a, **k)  # type: ignore[arg-type]

        monkeypatch.setattr(Index, "match", match)
        manager.update_async(
            [
                {"role": "assistant", "content": "The deploy cache is kept a week."},
                {"role": "user", "content": "No, the deploy cache is kept a day, not a week."},
            ]
        ).result(60)
    assert set(disputed(manager.project)) == {"project_knowledge_deploy-cache-lifetime.md"}
    assert ranked == ["project"]


_VOCAB = [
    *("cache", "caches", "deploy", "week", "weeks", "printf", "log.Printf", "v1.2", "v1", "60"),
    *("node_modules", "modules", "C++", "x86_64", "config.yaml", "sphinx-build", "缓存", "删了"),
]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    headings=st.lists(
        st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=4), min_size=1, max_size=6
    ),
    wrong=st.lists(st.sampled_from(_VOCAB), min_size=1, max_size=2),
)
def test_leaving_a_store_unranked_never_changes_what_a_correction_disputes(
    tmp_path: Path, headings: list[list[str]], wrong: list[str]
) -> None:
    """The shortcut above against the full ranking, on random notes: whenever a store is
    left unranked, the full candidates hold no note the correction contradicts."""
    from mdmem.recall.engine import index_of

    root = tmp_path / f"s{len(list(tmp_path.iterdir()))}"
    store = Store(root, Level.PROJECT)
    ops = [create(" ".join(words).title(), f"About {' '.join(words)}.") for words in headings]
    for i, op in enumerate(ops):
        op["filename"] = f"project_knowledge_n{i}.md"
    store.apply(ops)
    said = f"No, that is wrong: not {' '.join(wrong)}."
    index_of(store).sync()
    found = feedback.wrong_terms(feedback.correcting(said))
    assume(found)
    shortcut = feedback._candidates(store, said, 0, found)
    full = feedback._candidates(store, said, 0)
    as_notes = [(e.filename, f"{e.title} — {e.summary}") for e in full]
    if not shortcut:
        assert feedback.contradicted(said, as_notes) == []
    else:
        assert [e.filename for e in shortcut] == [e.filename for e in full]
