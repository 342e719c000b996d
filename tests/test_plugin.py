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


def test_plugin_manifest_and_layout() -> None:
    root = plugin_dir()
    manifest = load(root / ".claude-plugin" / "plugin.json")
    assert KEBAB.match(str(manifest["name"]))
    [entry] = load(MARKETPLACE)["plugins"]  # type: ignore[misc]
    assert manifest["name"] == entry["name"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    [version] = re.findall(r'^version = "([^"]+)"$', pyproject, re.MULTILINE)
    assert manifest["version"] == entry["version"] == version
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
    out = json.loads(stdout)["hookSpecificOutput"]
    return out["hookEventName"] == event and len(out["additionalContext"]) <= 10_000


@pytest.mark.parametrize("found_as", ["mdmem", "python3"])
def test_the_hook_commands_run(found_as: str, workspace: Path, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if found_as == "mdmem":
        script = Path(sys.executable).parent / "mdmem"
        if not script.exists():
            pytest.skip("no mdmem console script next to this interpreter")
        (bin_dir / "mdmem").symlink_to(script)
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


def test_without_mdmem_the_hooks_say_so_and_exit_zero(workspace: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    python = empty / "python3"  # a Python without mdmem's dependencies does not count
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    for event, command in hook_commands().items():
        proc = run_hook(event, command, empty, workspace)
        assert proc.returncode == 0, event
        assert proc.stdout == ""
        [line] = proc.stderr.splitlines()
        assert line.startswith("mdmem plugin: the mdmem command is not installed")
