"""Installing into Claude Code's settings, checking the hooks run, importing its auto memory."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from builders import mdmem_process
from conftest import CLAUDE_CODE_FIXTURES, SRC
from mdmem import Level, NoteType, Store, _spawn
from mdmem.integrations.claude_code_import import project_key
from mdmem.integrations.claude_code_settings import HOOKS, check, install, installed_commands

FIXTURES = CLAUDE_CODE_FIXTURES


def mdmem(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return mdmem_process(list(args), cwd=cwd, **env)


def test_local_is_the_default_and_is_git_ignored(workspace: Path) -> None:
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    proc = mdmem("--workspace", str(workspace), "install", "claude-code")
    assert proc.returncode == 0, proc.stderr
    local = workspace / ".claude" / "settings.local.json"
    assert f"installed in {local}" in proc.stdout
    assert (workspace / ".gitignore").read_text() == "/.claude/settings.local.json\n"
    ignored = subprocess.run(
        ["git", "-C", str(workspace), "check-ignore", "-q", ".claude/settings.local.json"]
    )
    assert ignored.returncode == 0
    assert set(installed_commands(str(local))) == set(HOOKS)
    again = mdmem("--workspace", str(workspace), "install", "claude-code", "--local")
    assert "already installed" in again.stdout
    assert (workspace / ".gitignore").read_text() == "/.claude/settings.local.json\n"
    gone = mdmem("--workspace", str(workspace), "uninstall", "claude-code")
    assert gone.stdout == f"removed from {local}\n"
    assert json.loads(local.read_text()) == {}


def test_the_hooks_run_without_mdmem_on_the_path(workspace: Path, tmp_path: Path) -> None:
    settings = workspace / ".claude" / "settings.local.json"
    assert install(str(settings))  # the default command: this interpreter, -m mdmem
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env = {
        "PATH": str(empty),  # no mdmem, no python: only what the command names itself
        "HOME": os.environ["HOME"],
        "MDMEM_WATCHER": "off",  # no watcher outliving the test
        "MDMEM_PROMPT_SERVER": "off",  # nor a prompt server
        "PYTHONPATH": str(SRC),
        "CLAUDE_PROJECT_DIR": str(workspace),
    }
    (workspace / ".PseudoClaude" / "memory").mkdir(parents=True)
    Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT).apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Tests",
                "content": "Run make test.",
            }
        ]
    )
    command = installed_commands(str(settings))["SessionStart"]
    proc = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps({"cwd": str(workspace), "hook_event_name": "SessionStart"}),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    context = json.loads(proc.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "Run make test." in context


def test_check_runs_every_installed_hook(workspace: Path) -> None:
    assert mdmem("--workspace", str(workspace), "install", "claude-code", "--user").returncode == 0
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--user", "--check")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()[1:]
    assert [line.split()[0] for line in lines] == list(HOOKS)
    assert all(re.search(r" ok \(\d+\.\d\d s\)$", line) for line in lines), lines


def test_check_reports_a_hook_that_fails(workspace: Path) -> None:
    path = workspace / ".claude" / "settings.json"
    install(str(path), "false mdmem")  # runs `false`, which fails whatever its arguments
    results = check(str(path), str(workspace), command="false mdmem")
    assert [r.event for r in results] == list(HOOKS)
    assert all(not r.ok and r.problem == "exit status 1" for r in results)
    check_it = ("install", "claude-code", "--project", "--check", "--command", "false mdmem")
    proc = mdmem("--workspace", str(workspace), *check_it)
    assert proc.returncode == 1
    assert "Stop              FAILED: exit status 1" in proc.stdout


def test_check_of_nothing_installed_fails(workspace: Path) -> None:
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--check")
    assert proc.returncode == 1
    assert "not installed in" in proc.stderr


def test_project_scope_warns_and_the_plugin_is_detected(workspace: Path) -> None:
    user_settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    user_settings.parent.mkdir(parents=True)
    user_settings.write_text(json.dumps({"enabledPlugins": {"mdmem@mdmem": True}}))
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--project")
    assert proc.returncode == 0
    assert "teammate" in proc.stderr
    assert f"plugin is enabled in {user_settings}" in proc.stderr
    assert "both run" in proc.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--project", "--local"], "give one of --project, --local, --user"),
        (["--command", "no-such-mdmem-here"], "'no-such-mdmem-here' is not found"),
    ],
)
def test_install_usage_errors(workspace: Path, args: list[str], message: str) -> None:
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", *args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (workspace / ".claude").exists()


def test_a_broken_settings_file_is_one_line(workspace: Path) -> None:
    path = workspace / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text('{"hooks": {,}}')
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--project")
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith(f"mdmem: error: {path}: not valid JSON (")
    assert path.read_text() == '{"hooks": {,}}'


def test_version_workspace_and_doctor_json(workspace: Path, tmp_path: Path) -> None:
    import mdmem as package

    assert mdmem("--version").stdout == f"mdmem {package.__version__}\n"
    missing = tmp_path / "nowhere"
    for args in (["list"], ["index"], ["doctor"]):
        proc = mdmem("--workspace", str(missing), *args)
        assert proc.returncode == 2, args
        assert "is not a directory" in proc.stderr
    assert not missing.exists()
    hook = mdmem("--workspace", str(missing), "hook", "stop")
    assert hook.returncode == 0  # a hook never blocks the session
    doctor = mdmem("--workspace", str(workspace), "doctor", "--json")
    report = json.loads(doctor.stdout)
    assert [s["level"] for s in report["stores"]] == ["project", "user"]
    assert report["problems"] == 0


def test_extract_reports_an_error_once(workspace: Path, tmp_path: Path) -> None:
    turn = tmp_path / "turn.json"
    turn.write_text(json.dumps([{"role": "user", "content": "Remember that x is y."}]))
    proc = mdmem(
        "--workspace",
        str(workspace),
        "extract",
        str(turn),
        MDMEM_PROVIDER="anthropic",
    )
    assert proc.returncode == 1
    assert proc.stderr.count("no Anthropic credentials") == 1, proc.stderr
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"role": 5, "content": 3}]))
    proc = mdmem("--workspace", str(workspace), "extract", str(bad))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr


# -- import claude-code ----------------------------------------------------------------


def auto_memory(workspace: Path, claude_dir: Path) -> Path:
    memory = claude_dir / "projects" / project_key(str(workspace)) / "memory"
    shutil.copytree(FIXTURES / "auto_memory", memory)
    return memory


def test_import_of_auto_memory(workspace: Path, tmp_path: Path) -> None:
    claude = tmp_path / "claude"
    auto_memory(workspace, claude)
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    project.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Staging",
                "content": "The  staging database is DB-staging-2.",
            }
        ]
    )
    args = ["--workspace", str(workspace), "import", "claude-code", "--claude-dir", str(claude)]
    dry = mdmem(*args, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("would import") == 4
    assert "duplicate" in dry.stdout  # the staging note is already kept
    assert len(project.notes()) == 1

    done = mdmem(*args)
    assert done.returncode == 0, done.stderr
    notes = {n.title: n for n in project.notes()}
    user = Store(Path(os.environ["MDMEM_USER_DIR"]), Level.USER)
    [terse] = user.notes()
    assert terse.type is NoteType.USER_PREFERENCE and terse.title == "Terse answers"
    assert notes["No mocked database in integration tests"].type is NoteType.CORRECTION_FEEDBACK
    assert notes["Dashboards"].type is NoteType.REFERENCE_MATERIAL
    release = notes["Release process"]
    assert release.type is NoteType.PROJECT_KNOWLEDGE
    assert release.summary == "Tags are cut from main by CI after the changelog is updated"
    assert "ghp_0123456789" not in release.body and "[REDACTED:" in release.body
    assert "MEMORY.md" not in done.stdout

    again = mdmem(*args)
    assert again.stdout.count("duplicate") == 5 and "imported" not in again.stdout


def test_import_offers_claude_md_sections(workspace: Path, tmp_path: Path) -> None:
    (workspace / "CLAUDE.md").write_text(
        "# Shop API\n\nIntro text.\n\n## Build\n\nRun `make build`.\n\n"
        "## Style\n\nGo code is gofmt'ed; errors wrap with %w.\n\n## Empty\n"
    )
    args = ["--workspace", str(workspace), "import", "claude-code", "--claude-dir", str(tmp_path)]
    assert "nothing to import" in mdmem(*args).stderr
    proc = mdmem(*args, "--claude-md")
    assert proc.returncode == 0, proc.stderr
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    assert sorted(n.title for n in project.notes()) == ["Build", "Style"]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["worker", "--timeout", "abc"], "Invalid value for '--timeout': 'abc' is not a number"),
        (
            ["list", "--level", "bogus"],
            "Invalid value for '--level': 'bogus' is not one of 'all', 'project', 'user'",
        ),
    ],
)
def test_usage_errors_speak_mdmem_not_pydantic(
    args: list[str], expected: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdmem.cli.main import run

    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"mdmem: error: {expected} (see 'mdmem ")
    assert "Input should be" not in err and "Value error" not in err


def test_a_symlinked_user_settings_file_keeps_its_link(workspace: Path, tmp_path: Path) -> None:
    dotfiles = tmp_path / "dotfiles" / "claude-settings.json"
    dotfiles.parent.mkdir()
    dotfiles.write_text('{"model": "opus"}')
    link = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    link.parent.mkdir()
    link.symlink_to(dotfiles)
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--user")
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink()
    assert json.loads(dotfiles.read_text())["model"] == "opus"
    assert set(installed_commands(str(dotfiles))) == set(HOOKS)


def test_a_symlinked_project_settings_file_is_refused(workspace: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "bashrc"
    elsewhere.write_text("export X=1\n")
    (workspace / ".claude").mkdir()
    (workspace / ".claude" / "settings.json").symlink_to(elsewhere)  # committed by someone
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--project")
    assert proc.returncode == 1
    assert "symlink" in proc.stderr and proc.stderr.count("\n") == 1
    assert elsewhere.read_text() == "export X=1\n"


def test_project_scope_hooks_say_clearly_when_mdmem_is_missing(workspace: Path) -> None:
    """A teammate without mdmem: every shared hook exits 0 and names the missing command."""
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", "--project")
    assert proc.returncode == 0, proc.stderr
    settings = json.loads((workspace / ".claude" / "settings.json").read_text())
    commands = [
        h["command"] for groups in settings["hooks"].values() for g in groups for h in g["hooks"]
    ]
    assert len(commands) == len(HOOKS)
    for command in commands:
        run = subprocess.run(
            ["bash", "-c", command],
            input="{}",
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], "MDMEM_WATCHER": "off"},
            timeout=30,
        )
        assert run.returncode == 0 and run.stdout == ""
        assert "mdmem is not installed" in run.stderr
    # uninstall still recognises them as mdmem's
    assert (
        mdmem("--workspace", str(workspace), "uninstall", "claude-code", "--project").returncode
        == 0
    )
    after = json.loads((workspace / ".claude" / "settings.json").read_text())
    assert not any(after.get("hooks", {}).values())


def test_install_sets_the_project_store_up_for_the_team(workspace: Path) -> None:
    """install runs `mdmem init`: the first turn lands in a store with its merge driver."""
    subprocess.run(["git", "init", "-q", str(workspace)], check=True)
    proc = mdmem("--workspace", str(workspace), "install", "claude-code")
    assert proc.returncode == 0, proc.stderr
    store = workspace / ".PseudoClaude" / "memory"
    assert (store / "MEMORY.md").is_file()
    assert "MEMORY.md merge=mdmem-index" in (store / ".gitattributes").read_text()
    driver = subprocess.run(
        ["git", "-C", str(workspace), "config", "--local", "merge.mdmem-index.driver"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    # This mdmem by its absolute path: git's PATH need not hold mdmem.
    assert driver == f"{_spawn.console_command('merge-index')} %O %A %B %P"
    assert f"init: created {store}" in proc.stdout


@pytest.mark.parametrize("flags", [["--no-init"], ["--user"]])
def test_install_leaves_the_store_alone_with_no_init_or_user(
    workspace: Path, flags: list[str]
) -> None:
    proc = mdmem("--workspace", str(workspace), "install", "claude-code", *flags)
    assert proc.returncode == 0, proc.stderr
    assert not (workspace / ".PseudoClaude").exists()
    assert "init:" not in proc.stdout


def test_install_in_the_home_directory_warns_that_no_store_was_set_up(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    proc = mdmem("--workspace", str(home), "install", "claude-code")
    assert proc.returncode == 0, proc.stderr
    assert "warning: the project store was not set up:" in proc.stderr
    assert not (home / ".PseudoClaude" / "memory" / ".gitattributes").exists()


def test_a_shared_settings_file_says_how_to_install_mdmem(workspace: Path) -> None:
    from mdmem._install import INSTALL_HINT
    from mdmem.integrations.claude_code_settings import SHARED_COMMAND

    proc = subprocess.run(
        ["bash", "-c", SHARED_COMMAND + " hook stop"],
        input="{}",
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], "MDMEM_WATCHER": "off"},
        timeout=30,
    )
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr == f"mdmem is not installed ({INSTALL_HINT}): memory is off\n"


def test_hooks_an_earlier_install_wrote_through_the_console_script_are_still_checked(
    workspace: Path,
) -> None:
    # Before the entry point was written out, install named the console script
    # (<python> -E <script> hook ...): --check still runs those, and a new install
    # replaces them with the command written now.
    if _spawn.console_script() is None:
        pytest.skip("no mdmem console script installed")
    earlier = _spawn.console_command()
    assert earlier != _spawn.hook_command()
    path = workspace / ".claude" / "settings.local.json"
    assert install(str(path), earlier)
    results = check(str(path), str(workspace))
    assert [r.event for r in results] == list(HOOKS)
    assert all(r.ran and r.ok for r in results), [(r.event, r.problem) for r in results]
    assert install(str(path))
    written = installed_commands(str(path))
    assert written == {e: f"{_spawn.hook_command()} hook {h.sub}" for e, h in HOOKS.items()}
