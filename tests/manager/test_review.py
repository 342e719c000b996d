"""Review mode: proposals instead of writes, decided once, never lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Scripted
from builders import create_op as _op
from conftest import PYTHON, python_env, state
from fake_anthropic import FakeAnthropic
from mdmem import Level, Manager, Store
from mdmem.cli import app
from mdmem.manager import review
from mdmem.store.paths import project_root

TURN = [
    {"role": "user", "content": "Please make the tests faster."},
    {"role": "assistant", "content": "Done: the suite now runs with `pytest -n 4`."},
]


def create_op(title: str, level: str = "project") -> dict[str, object]:
    return _op(title, f"{title}: the details.", level=level, summary=f"About {title}.")


def notes(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("*.md") if p.name != "MEMORY.md")


def cli(workspace: Path, *args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["--workspace", str(workspace), *args], env=env or None)
    return result.exit_code, result.stdout, result.stderr


def listed(workspace: Path) -> list[dict[str, object]]:
    code, out, err = cli(workspace, "review", "list", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert isinstance(data, list)
    return data


def test_a_turn_through_the_sdk_makes_proposals_and_no_notes(
    workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    ops = [create_op("Parallel tests"), create_op("Answer in Chinese", level="user")]
    fake_anthropic.enqueue(FakeAnthropic.tool_use("record_memory_operations", {"operations": ops}))
    with Manager(workspace, review="all") as manager:
        result = manager.update_async(TURN).result(timeout=30)
        assert len(result.proposals) == 2
        assert manager.index == ""  # proposals never reach the prompt block
        project, user = manager.project, manager.user
    assert notes(project.root) == [] and notes(user.root) == []
    assert review.pending_count(project) == 1 and review.pending_count(user) == 1
    assert review.pending_line([project, user]).startswith("2 memory proposals wait")
    # The session-start hook says so in one line, and shows no proposed note.
    from mdmem.integrations.claude_code import session_start

    hook = json.loads(session_start({"cwd": str(workspace)}, str(workspace), None))
    context = hook["hookSpecificOutput"]["additionalContext"]
    assert "2 memory proposals wait for review (`mdmem review`)." in context
    assert "Parallel tests" not in context
    rows = listed(workspace)
    assert {r["title"] for r in rows} == {"Parallel tests", "Answer in Chinese"}
    assert all(str(r["source"]).startswith(f"turn {result.turn_id}") for r in rows)
    assert all("+title: Parallel tests" in str(r["diff"]) for r in rows if r["level"] == "project")


def test_accept_writes_exactly_the_proposed_note(workspace: Path) -> None:
    with Manager(workspace, provider=Scripted([create_op("Build")]), review="all") as manager:
        manager.update_async(TURN).result(timeout=30)
        project = manager.project
    [row] = listed(workspace)
    code, out, err = cli(workspace, "review", "accept", str(row["id"]))
    assert code == 0, err
    assert out.strip() == f"{row['id']}: create project_knowledge_build.md (project)"
    note = project.read("project_knowledge_build.md")
    op = row["op"]
    assert isinstance(op, dict)
    assert (note.title, note.summary, note.body) == (op["title"], op["summary"], op["content"])
    assert note.extra["source"] == row["source"]
    assert "Build" in project.load_index()
    assert listed(workspace) == []
    # Decided once: a second accept finds nothing.
    code, _, err = cli(workspace, "review", "accept", str(row["id"]))
    assert code == 1 and "no waiting proposal" in err


def test_reject_leaves_nothing(workspace: Path) -> None:
    ops = [create_op("One"), create_op("Two")]
    with Manager(workspace, provider=Scripted(ops), review="project") as manager:
        manager.update_async(TURN).result(timeout=30)
        project = manager.project
    ids = [str(r["id"]) for r in listed(workspace)]
    code, out, _ = cli(workspace, "review", "reject", *ids)
    assert code == 0 and out.count("rejected") == 2
    assert notes(project.root) == [] and listed(workspace) == []
    assert project.load_index() == ""


def test_per_level_review_saves_the_other_level_at_once(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_REVIEW", "project")
    ops = [create_op("Team fact"), create_op("Terse answers", level="user")]
    with Manager(workspace, provider=Scripted(ops)) as manager:
        result = manager.update_async(TURN).result(timeout=30)
        assert [a.filename for a in result.user.applied] == ["user_preference_terse-answers.md"]
        assert len(result.proposals) == 1
        assert "Terse answers" in manager.index and "Team fact" not in manager.index


def test_accept_all(workspace: Path) -> None:
    ops = [create_op("One"), create_op("Two"), create_op("Me", level="user")]
    with Manager(workspace, provider=Scripted(ops), review="all") as manager:
        manager.update_async(TURN).result(timeout=30)
        project, user = manager.project, manager.user
    code, out, err = cli(workspace, "review", "accept", "--all")
    assert code == 0, err
    assert out.count(": create ") == 3
    assert len(notes(project.root)) == 2 and len(notes(user.root)) == 1


EDITOR = """
import sys
open(sys.argv[2], "w", encoding="utf-8").write(open(sys.argv[1], encoding="utf-8").read())
"""


def editor(tmp_path: Path, text: str) -> str:
    script = tmp_path / "editor.py"
    script.write_text(EDITOR)
    content = tmp_path / "edited.md"
    content.write_text(text)
    # The editor is given the file to edit last; the script copies `content` over it.
    return f"{PYTHON} {script} {content}"


def test_edit_with_a_broken_front_matter_rescues_the_text(workspace: Path, tmp_path: Path) -> None:
    with Manager(workspace, provider=Scripted([create_op("Build")]), review="all") as manager:
        manager.update_async(TURN).result(timeout=30)
        project = manager.project
    [row] = listed(workspace)
    broken = "---\ntitle: [unclosed\n---\nMy careful edit of the build note.\n"
    code, _, err = cli(workspace, "review", "edit", str(row["id"]), EDITOR=editor(tmp_path, broken))
    assert code == 1 and "your text is kept in" in err
    rescued = list((state(project.path) / "rescued").iterdir())
    assert [p.read_text() for p in rescued] == [broken]
    assert notes(project.root) == [] and len(listed(workspace)) == 1  # still waiting
    # A valid edit is accepted as edited.
    fixed = "---\ntype: project_knowledge\ntitle: Build, edited\nsummary: S.\n---\nEdited body.\n"
    code, _, err = cli(workspace, "review", "edit", str(row["id"]), EDITOR=editor(tmp_path, fixed))
    assert code == 0, err
    note = project.read("project_knowledge_build-edited.md")
    assert (note.title, note.body) == ("Build, edited", "Edited body.")
    assert note.extra["source"] == row["source"]


CHILD = """
import os, signal, sys
from mdmem import Manager

class P:
    name = "scripted"
    def extract(self, request):
        return [{"action": "create", "level": "project", "type": "project_knowledge",
                 "title": "Survives a kill", "content": "It does."}]

m = Manager(sys.argv[1], provider=P(), review="all")
m.update_async([{"role": "user", "content": "remember this"}]).result(timeout=30)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_kill_between_proposal_and_accept_loses_nothing(workspace: Path) -> None:
    child = subprocess.run(
        [PYTHON, "-c", CHILD, str(workspace)], env=python_env(), capture_output=True, timeout=60
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    [row] = listed(workspace)
    code, _, err = cli(workspace, "review", "accept", str(row["id"]))
    assert code == 0, err
    assert notes(Path(project_root(str(workspace)))) == ["project_knowledge_survives-a-kill.md"]


def test_a_claim_left_by_a_dead_process_goes_back_to_waiting(workspace: Path) -> None:
    store = Store(project_root(str(workspace)), Level.PROJECT)
    [pid], _ = review.propose(store, [create_op("Claimed")], turn="t1")
    folder = state(store.path) / "proposals"
    (folder / "claimed").mkdir()
    os.rename(folder / f"{pid}.json", folder / "claimed" / f"{pid}.99999.json")
    assert [p.id for p in review.pending(store)] == [pid]


def test_a_replayed_turn_does_not_bring_back_a_decided_proposal(workspace: Path) -> None:
    store = Store(project_root(str(workspace)), Level.PROJECT)
    [pid], _ = review.propose(store, [create_op("Once")], turn="t1")
    review.reject(store, pid)
    assert review.propose(store, [create_op("Once")], turn="t1")[0] == [pid]
    assert review.pending(store) == []


ACCEPT_ALL = "from mdmem.cli import run; import sys; sys.exit(run(sys.argv[1:]))"


def test_two_processes_reviewing_at_once_never_apply_a_proposal_twice(workspace: Path) -> None:
    store = Store(project_root(str(workspace)), Level.PROJECT)
    count = 30
    ids, _ = review.propose(store, [create_op(f"Note {n}") for n in range(count)], turn="t1")
    assert len(ids) == count
    argv = [PYTHON, "-c", ACCEPT_ALL, "--workspace", str(workspace), "review", "accept", "--all"]
    procs = [
        subprocess.Popen(argv, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    created = [line for out, _ in outs for line in out.decode().splitlines()]
    assert len(created) == count, outs
    assert all(": create " in line for line in created), created
    assert len({line.split(":")[0] for line in created}) == count
    assert len(notes(store.root)) == count
    assert review.pending(store) == []


# -- the setting ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "levels"),
    [
        ("off", set()),
        ("", set()),
        ("all", {"project", "user"}),
        ("project", {"project"}),
        ("USER", {"user"}),
        ("project,user", {"project", "user"}),
    ],
)
def test_modes(value: str, levels: set[str]) -> None:
    assert review.parse_mode(value) == levels


def test_an_unknown_mode_is_an_error(workspace: Path) -> None:
    with pytest.raises(ValueError, match="review mode"):
        review.parse_mode("sometimes")
    with pytest.raises(ValueError):
        Manager(workspace, provider=Scripted(), review="sometimes")


def config(workspace: Path) -> Path:
    path = workspace / ".PseudoClaude" / "mdmem.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def test_the_project_file_sets_the_mode(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config(workspace).write_text('{"review": "project"}')
    assert review.levels(str(workspace)) == {"project"}
    monkeypatch.setenv("MDMEM_REVIEW", "off")  # the environment wins over the file
    assert review.levels(str(workspace)) == set()
    assert review.levels(str(workspace), "all") == {"project", "user"}  # the argument wins


@pytest.mark.parametrize(
    "content",
    [
        b'{"review": 1}',
        b"[1, 2]",
        b"not json",
        b'{"review": "sometimes"}',
        b"\xff\xfe",
        b'{"review": "all"' + b" " * 5000 + b"}",
    ],
)
def test_a_bad_project_file_is_ignored(workspace: Path, content: bytes) -> None:
    config(workspace).write_bytes(content)
    assert review.levels(str(workspace)) == set()


def test_unknown_keys_are_ignored(workspace: Path) -> None:
    config(workspace).write_text('{"review": "all", "exec": "rm -rf /"}')
    assert review.levels(str(workspace)) == {"project", "user"}


def test_a_symlinked_or_special_project_file_is_ignored(workspace: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.json"
    outside.write_text('{"review": "all"}')
    path = config(workspace)
    path.symlink_to(outside)
    assert review.levels(str(workspace)) == set()
    path.unlink()
    os.mkfifo(path)
    assert review.levels(str(workspace)) == set()  # and it did not hang


def test_proposals_are_redacted_and_validated(workspace: Path) -> None:
    store = Store(project_root(str(workspace)), Level.PROJECT)
    secret = "sk-ant-api03-FAKEfake0123456789FAKEfake01"
    bad = {"action": "create", "level": "project", "type": "nonsense", "title": "x", "content": "y"}
    ids, result = review.propose(store, [create_op(f"Key {secret}"), bad], turn="t1")
    assert len(ids) == 1 and len(result.rejected) == 1
    raw = b"".join(p.read_bytes() for p in (state(store.path) / "proposals").glob("*.json"))
    assert secret.encode() not in raw and b"[REDACTED:anthropic_key]" in raw


def test_the_child_script_is_valid_python() -> None:
    compile(textwrap.dedent(CHILD), "child", "exec")


def test_interactive_review_shows_a_diff_and_decides(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mdmem.cli.review as cli_review

    store = Store(project_root(str(workspace)), Level.PROJECT)
    store.apply([create_op("Build")])
    update = {
        "action": "update",
        "level": "project",
        "filename": "project_knowledge_build.md",
        "content": "Build with `make all` now.",
    }
    review.propose(store, [update, create_op("Other")], turn="t1", source="turn t1 · m · now")
    monkeypatch.setattr(cli_review, "interactive", lambda: True)
    result = CliRunner().invoke(app, ["--workspace", str(workspace), "review"], input="a\nr\n")
    assert result.exit_code == 0, result.output
    assert (
        "-Build: the details." in result.stdout and "+Build with `make all` now." in result.stdout
    )
    assert store.read("project_knowledge_build.md").body == "Build with `make all` now."
    assert store.read("project_knowledge_build.md").extra["source"] == "turn t1 · m · now"
    assert not store.exists("project_knowledge_other.md") and review.pending(store) == []


def test_review_without_a_terminal_points_to_the_script_forms(workspace: Path) -> None:
    code, _, err = cli(workspace, "review")
    assert code == 2 and "needs a terminal" in err
