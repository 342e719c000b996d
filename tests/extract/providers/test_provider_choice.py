"""Which provider extracts is a visible choice: the Claude Code login is opt-in (issue 27)."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mdmem.cli import app
from mdmem.extract.providers import choose, login_choice
from mdmem.integrations import claude_code
from mdmem.store import ledger
from mdmem.store.paths import state_base, user_root


@pytest.fixture
def claude_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A ``claude`` executable on PATH that must never be run by these tests."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    claude = bin_dir / "claude"
    claude.write_text('#!/bin/sh\necho ran >> "$0.ran"\nexit 3\n')
    claude.chmod(claude.stat().st_mode | stat.S_IXUSR)
    monkeypatch.delenv("MDMEM_CLAUDE", raising=False)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    return claude


def test_installed_claude_is_not_chosen(claude_on_path: Path) -> None:
    name, reason = choose()
    assert name == "offline"
    assert "mdmem install claude-code --use-login" in reason
    assert not Path(f"{claude_on_path}.ran").exists()


def test_install_use_login_records_the_choice_once(
    claude_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    monkeypatch.chdir(workspace)
    runner = CliRunner()
    result = runner.invoke(app, ["install", "claude-code", "--local", "--use-login"])
    assert result.exit_code == 0, result.output
    assert "extraction provider: claude-code" in result.output
    recorded = Path(state_base()) / "provider.json"
    assert json.loads(recorded.read_text())["provider"] == "claude-code"
    assert login_choice() is not None
    assert choose()[0] == "claude-code"
    # Withdrawn the same way.
    result = runner.invoke(app, ["install", "claude-code", "--local", "--no-use-login"])
    assert result.exit_code == 0, result.output
    assert "extraction provider: offline" in result.output
    assert json.loads(recorded.read_text())["provider"] == "offline"  # "no" is an answer
    assert login_choice() is None


def test_install_asks_once_on_a_terminal(
    claude_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.cli import agents

    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    monkeypatch.chdir(workspace)
    asked: list[str] = []

    def confirm(text: str, default: bool = False) -> bool:
        asked.append(text)
        return True

    monkeypatch.setattr(agents.typer, "confirm", confirm)
    agents._login_choice(None, interactive=True)
    assert len(asked) == 1 and "claude -p" in asked[0]
    assert choose()[0] == "claude-code"
    agents._login_choice(None, interactive=True)  # answered: not asked again
    assert len(asked) == 1
    # Not on a terminal (hooks, scripts): never asked.
    (Path(state_base()) / "provider.json").unlink()
    agents._login_choice(None, interactive=False)
    assert len(asked) == 1 and choose()[0] == "offline"


def test_env_opt_in_still_works(claude_on_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDMEM_PROVIDER", "claude-code")
    assert choose() == ("claude-code", "MDMEM_PROVIDER=claude-code")


def test_stats_and_doctor_say_which_provider(
    claude_on_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    monkeypatch.chdir(workspace)
    runner = CliRunner()
    data = json.loads(runner.invoke(app, ["stats", "--json"]).output)
    assert data["extraction"]["provider"] == "offline"
    assert "--use-login" in data["extraction"]["reason"]
    text = runner.invoke(app, ["stats"]).output
    assert "Extraction: offline" in text
    doctor = runner.invoke(app, ["doctor"]).output
    assert "the worker will use offline" in doctor


def test_session_start_footer_names_the_provider_and_todays_spend(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    user = user_root()
    assert "offline provider" in claude_code.extraction_line(user)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    now = time.time()
    ledger.record(user, "call", now, turn="t1", provider="anthropic", model="m", **{"in": 1200})
    ledger.record(user, "call", now, turn="t2", provider="anthropic", model="m", out=34)
    line = claude_code.extraction_line(user, now)
    assert "anthropic" in line and "1,234 model tokens spent today" in line


def test_session_start_block_ends_with_the_footer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem import Level, Store

    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    Store(str(workspace / ".PseudoClaude" / "memory"), Level.PROJECT).apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Build",
                "content": "Run make.",
            }
        ]
    )
    out = claude_code.session_start({"cwd": str(workspace)}, None, None)
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert context.splitlines()[-1].startswith("_Notes from this session: the offline provider")


def test_choosing_imports_nothing_heavy(claude_on_path: Path) -> None:
    """The SessionStart hook asks which provider extracts: that must cost no imports."""
    import subprocess

    from conftest import PYTHON, python_env

    code = (
        "import sys\n"
        "from mdmem.extract.providers import choose\n"
        "choose()\n"
        "heavy = ('dataclasses', 'shutil', 'typing', 'subprocess', 'datetime',\n"
        "         'mdmem.extract.providers.base', 'mdmem.extract.providers.claude_code')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run(
        [PYTHON, "-c", code], env=python_env(), capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
