"""The Claude Code plugin and marketplace in this repository: documented shapes, and hooks that run.

Shapes follow Claude Code's plugins reference: a marketplace needs ``name``,
``owner.name`` and ``plugins[].name``/``source`` (a relative source starts with
``./``); a plugin manifest needs only ``name`` (kebab-case); hooks are
event -> matcher groups -> handlers; ``.mcp.json`` holds ``mcpServers``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, SRC
from mdmem.integrations.claude_code_settings import HOOKS

MARKETPLACE = ROOT / ".claude-plugin" / "marketplace.json"
KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
RESERVED = {"claude-plugins-official", "anthropic-plugins", "claude-code-marketplace"}
EVENTS_WITH_MATCHER = {"SessionStart", "PreCompact", "PostCompact", "SessionEnd", "PreToolUse"}
EVENTS = EVENTS_WITH_MATCHER | {"UserPromptSubmit", "Stop", "SubagentStop", "Notification"}


def load(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict), path
    return data


def plugin_dir() -> Path:
    [entry] = load(MARKETPLACE)["plugins"]  # type: ignore[misc]
    return (ROOT / entry["source"]).resolve()


def test_marketplace_has_the_required_fields() -> None:
    market = load(MARKETPLACE)
    name = market["name"]
    assert isinstance(name, str) and KEBAB.match(name) and name not in RESERVED
    owner = market["owner"]
    assert isinstance(owner, dict) and isinstance(owner["name"], str) and owner["name"]
    plugins = market["plugins"]
    assert isinstance(plugins, list) and plugins
    for entry in plugins:
        assert isinstance(entry["name"], str) and KEBAB.match(entry["name"])
        source = entry["source"]
        assert isinstance(source, str) and source.startswith("./")
        assert ".." not in Path(source).parts  # installed plugins are copied: no ../
        assert (ROOT / source / ".claude-plugin" / "plugin.json").is_file()
        for key in ("description", "version", "category"):
            assert isinstance(entry.get(key, ""), str)
        assert all(isinstance(t, str) for t in entry.get("tags", []))


# Claude Code's plugin manifest reference (plugins/manifest-reference): the fields a
# plugin.json may hold; only ``name`` is required, kebab-case starting with a letter.
MANIFEST_FIELDS = {
    "name",
    "displayName",
    "version",
    "description",
    "author",
    "homepage",
    "repository",
    "license",
    "keywords",
    "commands",
    "agents",
    "skills",
    "hooks",
    "mcpServers",
    "outputStyles",
    "lspServers",
    "userConfig",
    "channels",
}
MANIFEST_NAME = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)*$")
SEMVER = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+(?:-[0-9A-Za-z.-]+)?$")


def test_plugin_manifest_matches_the_reference() -> None:
    manifest = load(plugin_dir() / ".claude-plugin" / "plugin.json")
    assert set(manifest) <= MANIFEST_FIELDS, set(manifest) - MANIFEST_FIELDS
    assert MANIFEST_NAME.match(str(manifest["name"]))
    assert SEMVER.match(str(manifest["version"]))
    author = manifest["author"]
    assert isinstance(author, dict) and set(author) <= {"name", "email", "url"}
    # Components in the standard layout are found without being listed.
    assert not {"commands", "hooks", "mcpServers"} & set(manifest)


def test_plugin_manifest_says_what_it_needs() -> None:
    """The plugin runs the mdmem package: its description gives the install line (with mcp)."""
    from mdmem._install import FROM_CLONE, INSTALL_LINE

    description = str(load(plugin_dir() / ".claude-plugin" / "plugin.json")["description"])
    assert INSTALL_LINE in description and FROM_CLONE in description
    assert "mdmem[mcp," in INSTALL_LINE and "pip install mdmem" not in description


def test_plugin_manifest_and_layout() -> None:
    import mdmem

    root = plugin_dir()
    manifest = load(root / ".claude-plugin" / "plugin.json")
    assert KEBAB.match(str(manifest["name"]))
    [entry] = load(MARKETPLACE)["plugins"]  # type: ignore[misc]
    assert manifest["name"] == entry["name"]
    assert manifest["version"] == entry["version"] == mdmem.__version__
    for key in ("description", "license", "displayName"):
        assert isinstance(manifest[key], str)
    assert isinstance(manifest["author"], dict) and isinstance(manifest["author"]["name"], str)
    assert all(isinstance(k, str) for k in manifest["keywords"])  # type: ignore[attr-defined]
    # Components sit at the plugin root, never inside .claude-plugin/.
    assert sorted(p.name for p in (root / ".claude-plugin").iterdir()) == ["plugin.json"]
    assert (root / "hooks" / "hooks.json").is_file() and (root / ".mcp.json").is_file()
    launcher = root / "scripts" / "mdmem-run"
    assert os.access(launcher, os.X_OK)


def hook_commands() -> dict[str, str]:
    hooks = load(plugin_dir() / "hooks" / "hooks.json")
    assert isinstance(hooks.get("description", ""), str)
    events = hooks["hooks"]
    assert isinstance(events, dict)
    found = {}
    for event, groups in events.items():
        assert event in EVENTS, event
        assert isinstance(groups, list) and groups
        for group in groups:
            assert set(group) <= {"matcher", "hooks"}
            if "matcher" in group:
                assert event in EVENTS_WITH_MATCHER, f"{event} has no matcher support"
                assert isinstance(group["matcher"], str)
            for handler in group["hooks"]:
                assert handler["type"] == "command"
                assert isinstance(handler["command"], str)
                assert type(handler["timeout"]) is int and handler["timeout"] > 0
                assert (
                    '"${CLAUDE_PLUGIN_ROOT}"' in handler["command"]
                )  # quoted: paths may hold spaces
                found[event] = handler["command"]
    return found


def test_hooks_json_has_the_documented_shape_and_every_mdmem_hook() -> None:
    commands = hook_commands()
    assert set(commands) == set(HOOKS)
    for event, command in commands.items():
        assert command.endswith(f" hook {HOOKS[event].sub}")


def test_mcp_json_serves_mdmem_through_the_launcher() -> None:
    servers = load(plugin_dir() / ".mcp.json")["mcpServers"]
    assert isinstance(servers, dict)
    server = servers["mdmem"]
    assert server["command"] == "${CLAUDE_PLUGIN_ROOT}/scripts/mdmem-run"
    assert server["args"] == ["mcp"]


MCP_TOOLS = set(re.findall(r"def (memory_\w+)\(", (SRC / "mdmem/integrations/mcp.py").read_text()))


def front_matter(name: str) -> tuple[dict[str, str], str]:
    text = (plugin_dir() / "commands" / f"{name}.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    return dict(line.split(": ", 1) for line in header.splitlines()), body


def test_every_command_is_tested() -> None:
    names = {p.stem for p in (plugin_dir() / "commands").glob("*.md")}
    assert names == {"remember", "recall", "review", "doctor", "pause", "resume"}


SHELL_LINE = re.compile(r"^!`(.+)`$", re.MULTILINE)


@pytest.mark.parametrize("name", ["doctor", "pause", "resume"])
def test_launcher_commands_run_one_allowed_launcher_line(name: str) -> None:
    """/mdmem:doctor, :pause and :resume run the launcher (bash pre-execution) and only that."""
    fields, body = front_matter(name)
    assert set(fields) == {"description", "allowed-tools"} and fields["description"]
    [line] = SHELL_LINE.findall(body)
    launcher = "${CLAUDE_PLUGIN_ROOT}/scripts/mdmem-run"
    assert line.startswith(launcher + " ")
    allowed = re.fullmatch(r"Bash\((.+?)(:\*)?\)", fields["allowed-tools"])
    assert allowed is not None and line.startswith(allowed.group(1))
    if name != "doctor":  # the current session, as Claude Code substitutes it
        assert line.split()[1:3] == [name, "${CLAUDE_SESSION_ID}"]


@pytest.mark.parametrize("name", ["remember", "recall", "review"])
def test_commands_have_front_matter_and_name_real_tools(name: str) -> None:
    text = (plugin_dir() / "commands" / f"{name}.md").read_text(encoding="utf-8")
    assert text.startswith("---\n")
    header, body = text[4:].split("\n---\n", 1)
    fields = dict(line.split(": ", 1) for line in header.splitlines())
    assert set(fields) == {"description", "argument-hint", "allowed-tools"}
    assert fields["description"] and "$ARGUMENTS" in body
    tools = [t.strip() for t in fields["allowed-tools"].split(",")]
    prefix = "mcp__plugin_mdmem_mdmem__"  # mcp__plugin_<plugin>_<server>__<tool>
    assert all(t.startswith(prefix) and t[len(prefix) :] in MCP_TOOLS for t in tools), tools


def run_hook(
    event: str, command: str, path_dir: Path, workspace: Path
) -> subprocess.CompletedProcess[str]:
    payload = {
        "session_id": "s",
        "transcript_path": str(workspace / "none.jsonl"),
        "cwd": str(workspace),
        "hook_event_name": event,
    }
    env = {
        "PATH": str(path_dir),
        "HOME": os.environ["HOME"],
        "MDMEM_WATCHER": "off",  # no watcher outliving the test
        "MDMEM_PROMPT_SERVER": "off",  # nor a prompt server
        "MDMEM_USER_DIR": os.environ["MDMEM_USER_DIR"],
        "PYTHONPATH": str(SRC),
        "CLAUDE_PLUGIN_ROOT": str(plugin_dir()),
        "CLAUDE_PROJECT_DIR": str(workspace),
    }
    # Claude Code runs a command hook with bash; a bare /bin/sh expands the same way.
    shell = "/bin/bash" if Path("/bin/bash").exists() else "/bin/sh"
    return subprocess.run(
        [shell, "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def valid_output(event: str, stdout: str) -> bool:
    if event in ("Stop", "PreCompact", "SessionEnd"):
        return stdout == ""  # context from Stop would make Claude go on
    if not stdout.strip().startswith("{"):
        return True  # plain text is context
    data = json.loads(stdout)
    assert set(data) <= {"hookSpecificOutput", "systemMessage"}, data
    assert isinstance(data.get("systemMessage", ""), str)
    out = data["hookSpecificOutput"]
    return out["hookEventName"] == event and len(out["additionalContext"]) <= 10_000


@pytest.mark.parametrize("found_as", ["mdmem", "mdmem-wrapper", "python3"])
def test_the_hook_commands_run(found_as: str, workspace: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if found_as == "mdmem":  # its interpreter (the script's first line) runs mdmem's entry point
        script = Path(sys.executable).parent / "mdmem"
        if not script.exists():
            pytest.skip("no mdmem console script next to this interpreter")
        (bin_dir / "mdmem").symlink_to(script)
    elif found_as == "mdmem-wrapper":  # an mdmem whose first line names no Python: run as is
        wrapper = bin_dir / "mdmem"
        run = "import sys; del sys.path[0]; from mdmem.__main__ import main; sys.exit(main())"
        wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -c \'{run}\' "$@"\n')
        wrapper.chmod(0o755)
    else:  # a python3 that can run mdmem (a symlink would lose the virtual environment)
        python = bin_dir / "python3"
        python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
        python.chmod(0o755)
    for event, command in hook_commands().items():
        proc = run_hook(event, command, bin_dir, workspace)
        assert proc.returncode == 0, (event, proc.stderr)
        assert valid_output(event, proc.stdout), (event, proc.stdout)
        assert "not installed" not in proc.stderr
    start = run_hook("SessionStart", hook_commands()["SessionStart"], bin_dir, workspace)
    assert json.loads(start.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"


def no_mdmem_path(tmp_path: Path) -> Path:
    empty = tmp_path / "empty"
    empty.mkdir()
    python = empty / "python3"  # a Python without mdmem's dependencies does not count
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    return empty


def test_without_mdmem_the_hooks_say_so_and_exit_zero(workspace: Path, tmp_path: Path) -> None:
    from mdmem._install import INSTALL_HINT

    empty = no_mdmem_path(tmp_path)
    wanted = f"mdmem is not installed: {INSTALL_HINT}; memory is off until it is."
    for event, command in hook_commands().items():
        proc = run_hook(event, command, empty, workspace)
        assert proc.returncode == 0, event
        [line] = proc.stderr.splitlines()
        assert line == f"mdmem plugin: {wanted}"
        if event != "SessionStart":
            assert proc.stdout == ""
            continue
        # Visible: the session's context and a message to the user, as valid hook JSON.
        assert valid_output(event, proc.stdout)
        out = json.loads(proc.stdout)
        assert out["systemMessage"] == wanted
        assert out["hookSpecificOutput"]["additionalContext"] == wanted


def launcher_env(path_dir: Path, workspace: Path, **extra: str) -> dict[str, str]:
    return {
        "PATH": str(path_dir),
        "HOME": os.environ["HOME"],
        "MDMEM_WATCHER": "off",  # no watcher outliving the test
        "MDMEM_PROMPT_SERVER": "off",  # nor a prompt server
        "MDMEM_USER_DIR": os.environ["MDMEM_USER_DIR"],
        "CLAUDE_PLUGIN_ROOT": str(plugin_dir()),
        "CLAUDE_PROJECT_DIR": str(workspace),
        **extra,
    }


def test_launcher_check_says_what_is_missing(workspace: Path, tmp_path: Path) -> None:
    from mdmem._install import INSTALL_HINT

    launcher = str(plugin_dir() / "scripts" / "mdmem-run")
    empty = no_mdmem_path(tmp_path)
    proc = subprocess.run(
        [launcher, "--check"],
        capture_output=True,
        text=True,
        env=launcher_env(empty, workspace),
        timeout=30,
    )
    assert proc.returncode == 1
    assert proc.stdout.strip() == f"mdmem is not installed on this PATH ({empty}): {INSTALL_HINT}"


def python3_bin(tmp_path: Path) -> Path:
    """A PATH holding only a python3 that runs this checkout's mdmem."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{SRC}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    return bin_dir


def test_launcher_check_names_the_mdmem_and_its_mcp_server(workspace: Path, tmp_path: Path) -> None:
    import mdmem

    launcher = str(plugin_dir() / "scripts" / "mdmem-run")
    proc = subprocess.run(
        [launcher, "--check"],
        capture_output=True,
        text=True,
        env=launcher_env(python3_bin(tmp_path), workspace),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(f"python3 -m mdmem (mdmem {mdmem.__version__})")
    assert "mcp server: can start (the mcp extra is installed)" in lines
    assert f"project store: {workspace / '.PseudoClaude' / 'memory'}" in lines


def shell_line(name: str, session: str) -> str:
    [line] = SHELL_LINE.findall(front_matter(name)[1])
    return line.replace("${CLAUDE_PLUGIN_ROOT}", str(plugin_dir())).replace(
        "${CLAUDE_SESSION_ID}", session
    )


def test_pause_and_resume_commands_switch_this_session_only(
    workspace: Path, tmp_path: Path
) -> None:
    bin_dir = python3_bin(tmp_path)
    env = launcher_env(bin_dir, workspace)
    (workspace / ".PseudoClaude" / "memory").mkdir(parents=True)
    (workspace / ".PseudoClaude" / "memory" / "project_knowledge_build.md").write_text(
        "---\ntype: project_knowledge\ntitle: Build\nsummary: make test\n---\nRun make test.\n"
    )
    start = hook_commands()["SessionStart"]

    def session_start(session: str) -> str:
        payload = json.dumps({"session_id": session, "cwd": str(workspace)})
        proc = subprocess.run(
            ["/bin/sh", "-c", start], input=payload, capture_output=True, text=True, env=env
        )
        assert proc.returncode == 0 and proc.stderr == "", proc.stderr
        return proc.stdout

    assert "Build" in session_start("s-1")
    run = subprocess.run(
        ["/bin/sh", "-c", shell_line("pause", "s-1")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0 and "paused for session s-1" in run.stdout, run.stderr
    assert session_start("s-1") == ""  # nothing injected in the paused session
    assert "Build" in session_start("s-2")  # another session is not paused
    run = subprocess.run(
        ["/bin/sh", "-c", shell_line("resume", "s-1")], capture_output=True, text=True, env=env
    )
    assert run.returncode == 0 and "on again for session s-1" in run.stdout
    assert "Build" in session_start("s-1")


def test_mdmem_disable_makes_the_launcher_do_nothing(workspace: Path, tmp_path: Path) -> None:
    """MDMEM_DISABLE=1 stops every hook in the launcher, installed mdmem or not."""
    for path_dir in (no_mdmem_path(tmp_path), python3_bin(tmp_path)):
        for command in hook_commands().values():
            proc = subprocess.run(
                ["/bin/sh", "-c", command],
                input=json.dumps({"session_id": "s", "cwd": str(workspace)}),
                capture_output=True,
                text=True,
                env=launcher_env(path_dir, workspace, MDMEM_DISABLE="1"),
                timeout=30,
            )
            assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", ""), command
