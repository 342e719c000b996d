"""Per-session control: MDMEM_DISABLE, a paused session, and MDMEM_SESSION_BUDGET.

Every hook subcommand is run the two ways Claude Code can reach it: as a process
(the typer-free fast path) and through the full CLI (typer), with a store that has
notes and a transcript that has something to hand over, so that "nothing" is a
real difference.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import pending_turns
from conftest import CLAUDE_CODE_FIXTURES, PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.cli import app
from mdmem.integrations import claude_code, session_control
from mdmem.integrations.claude_code_settings import HOOKS

FIXTURES = CLAUDE_CODE_FIXTURES
SUBS = [hook.sub for hook in HOOKS.values()]


@pytest.fixture
def project(workspace: Path) -> Path:
    store = workspace / ".PseudoClaude" / "memory"
    store.mkdir(parents=True)
    Store(store, Level.PROJECT).apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Deploying the shop",
                "content": "Deploy the shop with fly deploy from a clean main branch.",
            }
        ]
    )
    return workspace


def hook_input(workspace: Path, transcript: Path, session: str = "s-1") -> dict[str, object]:
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(workspace),
        "hook_event_name": "Stop",
        "prompt": "how do we deploy the shop?",
        "source": "startup",
    }


def run(sub: str, payload: dict[str, object], how: str, **env: str) -> tuple[int, str, str]:
    if how == "process":
        proc = subprocess.run(
            [PYTHON, "-m", "mdmem", "hook", sub],
            input=json.dumps(payload),
            capture_output=True,
            text=True,
            env=python_env(MDMEM_PROVIDER="offline", **env),
            timeout=60,
        )
        return proc.returncode, proc.stdout, proc.stderr
    result = CliRunner().invoke(
        app,
        ["-v", "hook", sub],
        input=json.dumps(payload),
        env={"MDMEM_PROVIDER": "offline", **env},
    )
    return result.exit_code, result.stdout, result.stderr


def test_without_the_switch_the_hooks_do_their_work(project: Path, tmp_path: Path) -> None:
    """The control: what the disabled runs below must not do."""
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "two_turns.jsonl", transcript)
    payload = hook_input(project, transcript)
    code, out, _ = run("session-start", payload, "process")
    assert code == 0 and "Deploying the shop" in out
    code, out, _ = run("user-prompt-submit", payload, "process")
    # The only note is in the session's context already: not repeated, but recorded.
    recalled = state(project / ".PseudoClaude" / "memory") / "claude-code" / "recalled"
    assert code == 0 and (recalled / "s-1.json").is_file()
    assert claude_code.hand_over(payload, spawn=False) is not None
    assert pending_turns(project)


@pytest.mark.parametrize("how", ["process", "typer"])
@pytest.mark.parametrize("sub", SUBS)
@pytest.mark.parametrize("value", ["1", "true"])
def test_mdmem_disable_makes_every_hook_do_nothing(
    sub: str, how: str, value: str, project: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "two_turns.jsonl", transcript)
    before = files(tmp_path)
    code, out, err = run(sub, hook_input(project, transcript), how, MDMEM_DISABLE=value)
    assert (code, out, err) == (0, "", "")
    # Nothing handed over, nothing recorded: not a journal, a ledger or a session file.
    assert files(tmp_path) == before


def files(root: Path) -> dict[str, int]:
    """Every file under ``root`` with its size (SQLite's -shm/-wal come and go with connections)."""
    gc.collect()  # the fixture's store closes its catalog (a checkpoint) now, not mid-test
    return {
        str(p.relative_to(root)): p.stat().st_size
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    }


def test_a_paused_session_gets_nothing_and_hands_nothing_over_even_after_resume(
    project: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "two_turns.jsonl", transcript)
    payload = hook_input(project, transcript)
    assert session_control.pause("s-1") is True
    assert session_control.pause("s-1") is False
    for sub in SUBS:
        code, out, err = run(sub, payload, "process")
        assert (code, out) == (0, ""), (sub, err)
    assert pending_turns(project) == []
    # Another session is not paused.
    code, out, _ = run("session-start", hook_input(project, transcript, "s-2"), "process")
    assert "Deploying the shop" in out
    assert session_control.resume("s-1") is True
    assert session_control.resume("s-1") is False
    # What was said while paused stays unsaid; only what comes after is handed over.
    assert claude_code.hand_over(payload, spawn=False) is None
    shutil.copy(FIXTURES / "two_turns_more.jsonl", transcript)
    assert claude_code.hand_over(payload, spawn=False) is not None
    [turn] = pending_turns(project)
    paused_lines = [
        line["message"]["content"]
        for line in map(json.loads, (FIXTURES / "two_turns.jsonl").read_text().splitlines())
        if line.get("type") == "user" and isinstance(line["message"]["content"], str)
    ]
    assert paused_lines
    handed = json.dumps(turn)
    assert not [said for said in paused_lines if json.dumps(said)[1:-1] in handed]


def test_the_pause_marker_is_private_state_outside_the_repository(project: Path) -> None:
    session_control.pause("s-9")
    [marker] = (Path(os.environ["HOME"]) / ".local" / "state" / "mdmem").rglob("s-9")
    assert marker.parent.name == "paused"
    assert not list(project.rglob("s-9"))


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "x" * 101, "s 1"])
def test_pause_refuses_what_is_not_a_session_id(bad: str) -> None:
    result = CliRunner().invoke(app, ["pause", bad])
    assert result.exit_code == 2
    assert "is not a session id" in result.output
    assert not session_control.paused(bad)


def test_pause_and_resume_commands(project: Path) -> None:
    assert "now paused for session s-3" in CliRunner().invoke(app, ["pause", "s-3"]).stdout
    assert "already paused" in CliRunner().invoke(app, ["pause", "s-3"]).stdout
    assert "on again for session s-3" in CliRunner().invoke(app, ["resume", "s-3"]).stdout
    assert "was not paused" in CliRunner().invoke(app, ["resume", "s-3"]).stdout


def context_of(out: str) -> str:
    return str(json.loads(out)["hookSpecificOutput"]["additionalContext"])


def test_mdmem_session_budget_sets_the_session_start_block_size(
    workspace: Path, tmp_path: Path
) -> None:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Fact number {i}",
                "content": f"Fact {i} about the shop's services and how they are deployed.",
            }
            for i in range(40)
        ]
    )
    payload = hook_input(workspace, tmp_path / "none.jsonl")
    full = context_of(run("session-start", payload, "process")[1])
    head = context_of(run("session-start", payload, "process", MDMEM_SESSION_BUDGET="0")[1])
    assert head == ""  # 0: nothing at session start
    small = context_of(run("session-start", payload, "process", MDMEM_SESSION_BUDGET="600")[1])
    block = small.split("\n\n", 1)[1]  # after the header
    assert len(block) <= 600 < len(full.split("\n\n", 1)[1])
    assert "more notes not shown" in block or "more" in block.splitlines()[-1]
    # Too large, or not a number: Claude Code's cap (the default) decides.
    for value in ("1000000", "lots", "-5"):
        assert (
            context_of(run("session-start", payload, "process", MDMEM_SESSION_BUDGET=value)[1])
            == full
        )
