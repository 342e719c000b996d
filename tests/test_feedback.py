"""Feedback: a correction disputes the note that misled; a later confirmation clears it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import create_op
from mdmem import Manager
from mdmem.cli import app
from mdmem.manager import feedback
from mdmem.recall import search
from mdmem.recall.disputes import dispute_penalty, disputed


class Scripted:
    name = "scripted"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)

    def extract(self, request: object) -> object:
        return self.answers.pop(0)


def create(title: str, content: str, kind: str = "project_knowledge") -> dict[str, object]:
    return create_op(title, content, type=kind)


MISLEADING = create("Test command", "Run the tests with `make test`.")
UNRELATED = create("Release tags", "Tag releases as vX.Y.Z on main.")
CORRECTION = create(
    "Test command is pytest",
    "Tests run with `pytest -n 4`; `make test` was removed.",
    kind="correction_feedback",
)


@pytest.mark.parametrize(
    "text",
    [
        "That's wrong, we use pytest.",
        "no, it's pytest now",
        "You are mistaken: the port is 8081.",
        "Nope, wrong.",
        "不对，测试用 pytest",
        "你记错了，是 8081 端口",
        "错了，应该用 make check",
    ],
)
def test_corrections_are_detected(text: str) -> None:
    assert feedback.correction([("assistant", "Run make test."), ("user", text)]) is not None


@pytest.mark.parametrize(
    "text",
    [
        "Please make the tests faster.",
        "Is that right?",
        "I know, no problem.",
        "The wrong-answer test should pass.",
        "对，就是这样",
    ],
)
def test_ordinary_messages_are_not_corrections(text: str) -> None:
    assert feedback.correction([("user", text)]) is None


def test_only_the_user_corrects() -> None:
    assert feedback.correction([("assistant", "That's wrong, I misread it.")]) is None


def test_a_misleading_note_ends_disputed_and_ranked_below_its_correction(workspace: Path) -> None:
    provider = Scripted([MISLEADING, UNRELATED], [CORRECTION], [MISLEADING])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async(
            [
                {"role": "user", "content": "How do I run the tests?"},
                {"role": "assistant", "content": "Run `make test`."},
            ]
        ).result(30)
        # Next session: the injected note misleads, the user corrects the agent.
        assert "Test command" in manager.index
        manager.update_async(
            [
                {"role": "assistant", "content": "As noted, run the tests with `make test`."},
                {"role": "user", "content": "不对，make test 早就删了，测试用 pytest -n 4"},
                {"role": "assistant", "content": "Sorry: tests run with `pytest -n 4`."},
            ]
        ).result(30)
        project = manager.project
        marks = disputed(project)
        assert set(marks) == {"project_knowledge_test-command.md"}
        assert "不对" in str(marks["project_knowledge_test-command.md"]["reason"])
        assert dispute_penalty(project, "project_knowledge_test-command.md") < 1.0
        assert dispute_penalty(project, "project_knowledge_release-tags.md") == 1.0
        hits = search([project], "test command", semantic=False)
        names = [h.filename for h in hits]  # the engine applies the dispute penalty
        assert names.index("correction_feedback_test-command-is-pytest.md") < names.index(
            "project_knowledge_test-command.md"
        )
        # `why` shows the dispute.
        result = CliRunner().invoke(
            app,
            ["--workspace", str(workspace), "why", "project_knowledge_test-command.md", "--json"],
        )
        assert json.loads(result.stdout)["disputed"]["count"] == 1
        # A later turn writes the same note again: confirmed, it recovers.
        manager.update_async([{"role": "user", "content": "Keep the old note."}]).result(30)
        assert disputed(project) == {}
        assert dispute_penalty(project, "project_knowledge_test-command.md") == 1.0


def test_a_model_flagged_correction_counts_without_a_phrase(workspace: Path) -> None:
    provider = Scripted([MISLEADING], [CORRECTION])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async([{"role": "user", "content": "remember the test command"}]).result(30)
        manager.update_async(
            [
                {
                    "role": "user",
                    "content": "The test command is pytest -n 4 since make test is gone.",
                }
            ]
        ).result(30)
        assert set(disputed(manager.project)) == {"project_knowledge_test-command.md"}


def test_repeated_disputes_lower_the_rank_further(workspace: Path) -> None:
    from mdmem.recall.disputes import mark

    with Manager(workspace, provider=Scripted([MISLEADING])) as manager:
        manager.update_async([{"role": "user", "content": "x"}]).result(30)
        name = "project_knowledge_test-command.md"
        mark(manager.project, [name], turn="t", at="now", reason="no")
        once = dispute_penalty(manager.project, name)
        mark(manager.project, [name], turn="t", at="now", reason="no")
        assert 0 < dispute_penalty(manager.project, name) < once


def test_salient_words() -> None:
    assert {"pytest", "make"} <= feedback.salient("Run the tests with pytest, not make")
    assert "the" not in feedback.salient("the the the")
    assert "测试" in feedback.salient("测试命令")


def test_stats_show_disputed_notes_and_waiting_proposals(workspace: Path) -> None:
    from mdmem.manager import review
    from mdmem.recall.disputes import mark

    with Manager(workspace, provider=Scripted([MISLEADING])) as manager:
        manager.update_async([{"role": "user", "content": "x"}]).result(30)
        mark(
            manager.project, ["project_knowledge_test-command.md"], turn="t", at="now", reason="no"
        )
        review.propose(manager.project, [UNRELATED], turn="t2")
    base = ["--workspace", str(workspace), "stats"]
    data = json.loads(CliRunner().invoke(app, [*base, "--json"]).stdout)
    assert [d["filename"] for d in data["disputed"]] == ["project_knowledge_test-command.md"]
    assert data["proposals_waiting"]["project"] == 1
    text = CliRunner().invoke(app, base).stdout
    assert "Disputed notes: 1" in text and "Proposals waiting for review: 1" in text
