"""A cloned repository never runs code through mdmem: every mdmem child, hook and check.

The attack: a repository commits a top-level ``mdmem/__init__.py`` and
``typer.py``, ``yaml.py``, ``frontmatter.py``, ``filelock.py`` (modules mdmem
imports first), and ``os.py``, ``site.py``, ``json.py`` (standard modules), each of
which leaves a marker file when imported. Claude Code
runs hooks with the repository as the current directory, and
``python -m mdmem`` / ``python -c`` put the current directory first on
``sys.path`` (an empty ``PYTHONPATH`` entry does too). The real hooks, the
worker they start, ``install claude-code`` and its ``--check``, and the plugin
launcher all run here with that repository as their cwd; no marker may appear.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, state
from mdmem import _spawn

MODULES = ("typer", "yaml", "frontmatter", "filelock")
#: Standard modules, which a clone may shadow as well: ``python -c`` puts the current
#: directory before the standard library (the frozen ones aside).
STDLIB = ("os", "site", "sitecustomize", "json", "shlex")
MARKER = "import os\nopen(os.path.join({markers!r}, {name!r}), 'w').close()\n"


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A hostile clone: a git work tree whose top level shadows mdmem and its dependencies."""
    markers = tmp_path / "markers"
    markers.mkdir()
    root = tmp_path / "clone"
    (root / ".git").mkdir(parents=True)
    (root / "mdmem").mkdir()
    (root / "mdmem" / "__init__.py").write_text(
        MARKER.format(markers=str(markers), name="mdmem") + "raise SystemExit(0)\n"
    )
    for name in MODULES:
        (root / f"{name}.py").write_text(MARKER.format(markers=str(markers), name=name))
    for name in STDLIB:  # no import in them: `import os` in os.py would be itself
        (root / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    return root


def markers(repo: Path) -> list[str]:
    return sorted(os.listdir(repo.parent / "markers"))


def hostile_env(**extra: str) -> dict[str, str]:
    """The test's environment, with an empty PYTHONPATH entry (the current directory)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep  # two empty entries: the cwd, for a careless Python
    env["MDMEM_PROVIDER"] = "offline"
    env.update(extra)
    return env


def transcript(path: Path, tag: str) -> Path:
    lines = [
        {"type": "user", "uuid": f"u-{tag}", "message": {"role": "user", "content": (
            f"Remember: the {tag} build of this project runs with `make {tag}`."
        )}},
        {"type": "assistant", "uuid": f"a-{tag}", "message": {
            "id": f"m-{tag}", "role": "assistant",
            "content": [{"type": "text", "text": f"Noted: `make {tag}` builds it."}],
        }},
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


def cli(*args: str) -> str:
    """The installed console script, as a person types it in the clone."""
    script = _spawn.console_script()
    if script is None:
        pytest.skip("no mdmem console script installed")
    return shlex.join([script, *args])


def run_shell(
    command: str, cwd: Path, payload: dict[str, object] | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    shell = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
    return subprocess.run(
        [shell, "-c", command],
        input=json.dumps(payload or {}),
        capture_output=True,
        text=True,
        cwd=cwd,
        env=hostile_env(**env),
        timeout=120,
    )


def wait_for_worker(repo: Path, turns: int) -> None:
    """Until the workers have written the notes of ``turns`` turns (bounded, not timed)."""
    store = repo / ".PseudoClaude" / "memory"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        pending = state(store) / "turns" / "pending"
        left = list(pending.iterdir()) if pending.is_dir() else []
        notes = [p for p in store.glob("*.md") if p.name != "MEMORY.md"] if store.is_dir() else []
        if not left and len(notes) >= turns:
            return
        time.sleep(0.2)
    log = state(store) / "worker.log"
    raise AssertionError(f"the worker did not finish: {log.read_text() if log.exists() else ''}")


def test_hooks_install_and_check_import_nothing_from_the_clone(repo: Path, tmp_path: Path) -> None:
    install = run_shell(cli("install", "claude-code", "--local"), repo, PYTHONPATH="")
    assert install.returncode == 0, install.stderr
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    commands = {
        event: groups[-1]["hooks"][0]["command"] for event, groups in settings["hooks"].items()
    }
    for command in commands.values():
        first = shlex.split(command)[0]
        assert os.path.isabs(first) and " -m mdmem" not in command
    # Each handover hook as Claude Code runs it: the written command, the clone as cwd.
    for number, event in enumerate(("Stop", "PreCompact", "SessionEnd")):
        payload = {
            "session_id": "s1",
            "cwd": str(repo),
            "hook_event_name": event,
            "transcript_path": str(transcript(tmp_path / f"t{number}.jsonl", f"t{number}")),
        }
        proc = run_shell(commands[event], repo, payload, CLAUDE_PROJECT_DIR=str(repo))
        assert proc.returncode == 0 and proc.stdout == "", (event, proc.stderr)
        wait_for_worker(repo, number + 1)  # the worker it started has run, too
    start = run_shell(commands["SessionStart"], repo, {"cwd": str(repo)})
    assert "make t0" in start.stdout
    asked = {"session_id": "s2", "cwd": str(repo), "prompt": "how is the t0 build made?"}
    prompt = run_shell(commands["UserPromptSubmit"], repo, asked)
    assert prompt.returncode == 0, prompt.stderr
    check = run_shell(cli("install", "claude-code", "--check"), repo, PYTHONPATH="")
    assert check.returncode == 0, check.stdout + check.stderr
    assert markers(repo) == []


def test_the_prompt_server_imports_nothing_from_the_clone(repo: Path) -> None:
    """The server SessionStart starts, and then serves prompts in, the clone's folder."""
    from mdmem import Level, Store
    from mdmem.integrations import prompt_server

    store = Store(repo / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply([{"action": "create", "level": "project", "type": "project_knowledge",
                  "title": "Release build", "summary": "",
                  "content": "The release build runs with make release."}])  # fmt: skip
    install = run_shell(cli("install", "claude-code", "--local"), repo, PYTHONPATH="")
    assert install.returncode == 0, install.stderr
    settings = json.loads((repo / ".claude" / "settings.local.json").read_text())
    commands = {
        event: groups[-1]["hooks"][0]["command"] for event, groups in settings["hooks"].items()
    }
    on = {"MDMEM_PROMPT_SERVER": "on", "MDMEM_PROMPT_SERVER_IDLE": "20"}
    on["MDMEM_PROMPT_SERVER_WAIT"] = "10"  # a loaded machine: relayed all the same
    start = run_shell(commands["SessionStart"], repo, {"cwd": str(repo)}, **on)
    assert start.returncode == 0, start.stderr
    folder = Path(prompt_server.folder())
    deadline = time.monotonic() + 30
    while not list(folder.glob("prompt-v*.sock")) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(folder.glob("prompt-v*.sock")), "SessionStart started no prompt server"
    try:
        for n in range(3):
            prompt = "how is the release build made?"
            asked = {"session_id": f"s{n}", "cwd": str(repo), "prompt": prompt}
            done = run_shell(commands["UserPromptSubmit"], repo, asked, **on)
            assert done.returncode == 0 and "make release" in done.stdout, done.stderr
        # The server answered them: it holds the clone's search index open.
        pid = next(lock.read_text().strip() for lock in folder.glob("prompt-v*.lock"))
        fds = Path(f"/proc/{pid}/fd")
        held = {os.readlink(fd) for fd in fds.iterdir() if fd.is_symlink()}
        assert any(path.startswith(str(state(store.path))) for path in held), held
    finally:
        for lock in folder.glob("prompt-v*.lock"):
            pid = lock.read_text().strip()
            if pid.isdigit():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), signal.SIGKILL)
    assert markers(repo) == []


@pytest.mark.parametrize("found_as", ["mdmem", "python3"])
def test_the_plugin_launcher_imports_nothing_from_the_clone(
    found_as: str, repo: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"  # mdmem on PATH, or only a python3 that can run it
    bin_dir.mkdir()
    if found_as == "mdmem":
        script = _spawn.console_script()
        if script is None:
            pytest.skip("no mdmem console script installed")
        (bin_dir / "mdmem").symlink_to(script)
    else:
        python = bin_dir / "python3"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
    launcher = ROOT / "plugins" / "mdmem" / "scripts" / "mdmem-run"
    payload = {
        "session_id": "s1",
        "cwd": str(repo),
        "transcript_path": str(transcript(tmp_path / "t.jsonl", "plugin")),
    }
    path = f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"
    proc = run_shell(f"{shlex.quote(str(launcher))} hook stop", repo, payload, PATH=path)
    assert proc.returncode == 0 and "not installed" not in proc.stderr, proc.stderr
    wait_for_worker(repo, 1)
    assert markers(repo) == []


def test_a_child_of_mdmem_never_imports_the_cwd(repo: Path) -> None:
    proc = subprocess.run(
        _spawn.argv("--version"), capture_output=True, text=True, cwd=repo, env=hostile_env()
    )
    assert proc.returncode == 0 and proc.stdout.startswith("mdmem "), proc.stderr
    assert markers(repo) == []


def test_check_runs_only_the_commands_mdmem_writes(repo: Path) -> None:
    """A committed ``.claude/settings.local.json`` whose hooks only look like mdmem's."""
    planted = repo.parent / "markers" / "planted"
    sub = {"SessionStart": "session-start", "Stop": "stop", "SessionEnd": "session-end"}
    hooks = {
        event: [{"hooks": [{"type": "command", "command": f"touch {planted}; mdmem hook {name}"}]}]
        for event, name in sub.items()
    }
    hooks["PreCompact"] = [
        {"hooks": [{"type": "command", "command": f"{_spawn.hook_command()} hook stop"}]}
    ]  # mdmem's own command, but under another event: not what mdmem writes there
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.local.json").write_text(json.dumps({"hooks": hooks}))
    proc = run_shell(cli("install", "claude-code", "--check"), repo, PYTHONPATH="")
    assert proc.returncode == 1
    assert markers(repo) == []
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("not run:")]
    assert "SessionStart" in line and "Stop" in line and "PreCompact" in line
    assert "FAILED" not in proc.stdout and " ok " not in proc.stdout
