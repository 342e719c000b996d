"""The Claude Code provider against a fake ``claude`` executable on PATH."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from builders import journaled
from conftest import SRC, state
from mdmem import Manager, Operation, ProviderError
from mdmem.extract.providers import choose, default_provider, set_login_choice
from mdmem.extract.providers.claude_code import ClaudeCodeProvider
from mdmem.store import ledger

OP = {
    "action": "create",
    "level": "user",
    "type": "user_preference",
    "title": "Answer in Chinese",
    "summary": "The user wants answers in Chinese.",
    "content": "Answer in Chinese.",
}
TURN = [
    {"role": "user", "content": "From now on, answer in Chinese please."},
    {"role": "assistant", "content": "好的，以后我用中文回答。"},
]
NOTE = "user_preference_answer-in-chinese.md"

# The fake: records what it got, runs mdmem's own hooks as a real nested session
# would (they must do nothing), then answers as FAKE_CLAUDE_MODE says.
FAKE = r"""#!{python}
import json, os, subprocess, sys, time
log = os.environ["FAKE_CLAUDE_LOG"]
prompt = sys.stdin.read()
env = dict(os.environ)
env["PYTHONPATH"] = {src!r}
hooks = []
ws = os.environ["FAKE_WORKSPACE"]
stop = {{"session_id": "s1", "transcript_path": os.environ["FAKE_TRANSCRIPT"], "cwd": ws}}
for hook, payload in (("stop", stop), ("session-start", {{"cwd": ws}})):
    done = subprocess.run([sys.executable, "-m", "mdmem", "hook", hook], input=json.dumps(payload),
                          capture_output=True, text=True, env=env)
    hooks.append([hook, done.returncode, done.stdout, done.stderr])
system = smode = None
if "--system-prompt-file" in sys.argv:
    named = sys.argv[sys.argv.index("--system-prompt-file") + 1]
    smode = oct(os.stat(named).st_mode & 0o777)
    system = open(named, encoding="utf-8").read()
with open(log, "a") as f:
    f.write(json.dumps({{"argv": sys.argv[1:], "prompt": prompt, "cwd": os.getcwd(),
                        "system": system, "system_mode": smode,
                        "nested": os.environ.get("MDMEM_NESTED"),
                        "auto_memory_off": os.environ.get("CLAUDE_CODE_DISABLE_AUTO_MEMORY"),
                        "hooks": hooks}}) + "\n")
mode = os.environ.get("FAKE_CLAUDE_MODE", "ok")
if mode == "ok":
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": False,
                      "result": "Here:\n" + os.environ["FAKE_ANSWER"],
                      "usage": {{"input_tokens": 5, "output_tokens": 6}},
                      "modelUsage": {{"claude-haiku": {{
                          "inputTokens": 120, "outputTokens": 30,
                          "cacheReadInputTokens": 2000, "cacheCreationInputTokens": 50}}}},
                      "total_cost_usd": 0.001}}))
elif mode == "login":
    print(json.dumps({{"type": "result", "subtype": "success", "is_error": True,
                      "result": "Not logged in · Please run /login"}}))
    sys.exit(1)
elif mode == "garbage":
    print("Welcome to Claude Code! ✻")
elif mode == "crash":
    print("Error: something broke", file=sys.stderr)
    sys.exit(3)
elif mode == "slow":  # with a child that keeps our stdout open, as a real claude may
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    time.sleep(30)
"""


@pytest.fixture
def fake_claude(tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``claude`` on PATH; returns its log (a JSON line per run)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = bin_dir / "claude"
    script.write_text(FAKE.format(python=sys.executable, src=str(SRC)))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text(
        json.dumps(
            {
                "type": "user",
                "uuid": "u1",
                "message": {"role": "user", "content": "Remember that x is 1."},
            }
        )
        + "\n"
    )
    log = tmp_path / "claude.log"
    monkeypatch.delenv("MDMEM_CLAUDE")
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_CLAUDE_LOG", str(log))
    monkeypatch.setenv("FAKE_TRANSCRIPT", str(transcript))
    monkeypatch.setenv("FAKE_WORKSPACE", str(workspace))
    monkeypatch.setenv("FAKE_ANSWER", json.dumps([OP]))
    return log


def runs(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_never_chosen_silently(fake_claude: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Installed is not chosen: the subscription is spent only when the user says so.
    name, reason = choose()
    assert name == "offline" and "--use-login" in reason and "MDMEM_PROVIDER" in reason
    assert default_provider().name == "offline"
    set_login_choice(True)
    name, reason = choose()
    assert name == "claude-code" and "you chose your Claude Code login" in reason
    assert default_provider().name == "claude-code"
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    assert choose()[0] == "anthropic"  # a key wins over the login
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    set_login_choice(False)
    assert choose()[0] == "offline"


def test_the_prompt_reaches_claude_and_the_answer_is_applied(
    workspace: Path, fake_claude: Path
) -> None:
    with Manager(workspace, provider=ClaudeCodeProvider()) as manager:
        result = manager.update_async(TURN).result(timeout=60)
    assert [a.filename for a in result.user.applied] == [NOTE]
    assert (Path(manager.user.path) / NOTE).read_text().endswith("Answer in Chinese.\n")
    [run] = runs(fake_claude)
    argv = run["argv"]
    assert isinstance(argv, list)
    assert argv[:2] == ["-p", "--output-format"] and "--no-session-persistence" in argv
    assert argv[argv.index("--tools") + 1] == ""
    assert json.loads(argv[argv.index("--settings") + 1]) == {"disableAllHooks": True}
    assert argv[argv.index("--model") + 1] == "haiku"
    assert "long-term memory of a coding agent" in str(run["system"])
    assert "--system-prompt" not in argv and run["system_mode"] == "0o600"
    assert "role=user\nFrom now on, answer in Chinese please." in str(run["prompt"])
    assert run["nested"] == "1" and run["auto_memory_off"] == "1"
    assert not str(run["cwd"]).startswith(str(workspace))
    # Tokens from modelUsage reached the ledger.
    [call] = ledger.load(manager.user.path)["turns"]  # type: ignore[misc]
    assert call[4:] == [120, 30, 2000, 50]


def test_no_memory_reaches_the_command_line(workspace: Path, fake_claude: Path) -> None:
    """The attack: any local user reads ``claude -p``'s argv (ps): no memory may be there."""
    with Manager(workspace, provider=ClaudeCodeProvider()) as manager:
        note = {**OP, "title": "Private habit", "content": "Zanzibar quokka rituals every Tuesday."}
        manager.user.apply([Operation.from_dict({**note, "summary": "Zanzibar quokka rituals."})])
        manager.refresh_index()
        manager.update_async(TURN).result(timeout=60)
    [run] = runs(fake_claude)
    argv = " ".join(str(a) for a in run["argv"])  # type: ignore[union-attr]
    assert "Zanzibar" not in argv and "answer in Chinese" not in argv
    assert "long-term memory" not in argv  # no part of the system prompt either
    assert "Zanzibar quokka" in str(run["system"]) and run["system_mode"] == "0o600"
    assert "From now on, answer in Chinese please." in str(run["prompt"])  # on stdin


def test_recursion_is_impossible(workspace: Path, fake_claude: Path) -> None:
    with Manager(workspace, provider=ClaudeCodeProvider()) as manager:
        manager.update_async(TURN).result(timeout=60)
    [run] = runs(fake_claude)
    # The nested `mdmem hook stop` and `hook session-start` did nothing and said nothing.
    assert run["hooks"] == [["stop", 0, "", ""], ["session-start", 0, "", ""]]
    assert journaled(workspace) == 0
    assert not (state(workspace / ".PseudoClaude" / "memory") / "cursors").exists()


@pytest.mark.parametrize(
    ("mode", "retryable", "words"),
    [
        ("login", False, "not logged in"),
        ("garbage", True, "without its JSON result"),
        ("crash", True, "exited 3"),
        ("slow", True, "within 1 s"),
    ],
)
def test_failures_are_clean_and_the_turn_stays_journaled(
    workspace: Path,
    fake_claude: Path,
    monkeypatch: pytest.MonkeyPatch,
    mode: str,
    retryable: bool,
    words: str,
) -> None:
    monkeypatch.setenv("FAKE_CLAUDE_MODE", mode)
    # Only the slow fake is meant to time out: the others get time to start on a busy machine.
    timeout = 1 if mode == "slow" else 60
    manager = Manager(workspace, provider=ClaudeCodeProvider(timeout=timeout), retry_delay=3600)
    future = manager.update_async(TURN)
    assert manager.flush(timeout=60)
    manager.close()
    error = future.exception()
    assert isinstance(error, ProviderError)
    assert error.retryable is retryable
    assert words in str(error)
    assert journaled(workspace) == 1
    assert not (Path(manager.user.path) / NOTE).exists()


def test_a_missing_claude_is_a_clean_error(workspace: Path, tmp_path: Path) -> None:
    provider = ClaudeCodeProvider()  # MDMEM_CLAUDE names nothing that exists (conftest)
    manager = Manager(workspace, provider=provider, retry_delay=3600)
    future = manager.update_async(TURN)
    assert manager.flush(timeout=30)
    manager.close()
    error = future.exception()
    assert isinstance(error, ProviderError) and not error.retryable
    assert "not on PATH" in str(error)
    assert journaled(workspace) == 1


def test_every_hook_command_does_nothing_when_nested(
    workspace: Path, fake_claude: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app

    monkeypatch.setenv("MDMEM_NESTED", "1")
    payload = json.dumps(
        {"session_id": "s", "transcript_path": os.environ["FAKE_TRANSCRIPT"], "cwd": str(workspace)}
    )
    from mdmem.__main__ import main

    hooks = ("stop", "session-start", "pre-compact", "session-end", "user-prompt-submit")
    for hook in hooks:
        result = CliRunner().invoke(app, ["hook", hook], input=payload)
        assert (result.exit_code, result.output) == (0, "")
        assert main(["hook", hook]) == 0  # the typer-free path, without reading stdin
    assert journaled(workspace) == 0
