"""Claude Code's settings files: install, uninstall and check mdmem's hooks.

Scopes (Claude Code's own): ``project`` is the repository's committed
``.claude/settings.json`` (shared: every teammate runs the hooks),
``local`` is ``.claude/settings.local.json`` (this clone only, git-ignored),
``user`` is ``~/.claude/settings.json`` (every project of this user).

A hook command names the mdmem that ran ``install`` by absolute path (its
interpreter, with ``-E``, running its entry point; see
:func:`mdmem._spawn.hook_command`), so it depends neither on the ``PATH``
Claude Code happens to be started with nor on the current directory (a cloned
repository, whose ``mdmem/`` or ``typer.py`` must never be imported).
:func:`check` runs each installed command the way Claude Code would, with a
sample payload, and says what fails; it runs only the exact commands mdmem
writes (:func:`written_commands`), never another command found in the file.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import tempfile
import time
from dataclasses import dataclass

from mdmem import _json
from mdmem._install import INSTALL_HINT
from mdmem.store import files

__all__ = [
    "HOOKS",
    "SCOPES",
    "CheckResult",
    "check",
    "default_command",
    "ensure_ignored",
    "hook_command",
    "install",
    "installed_commands",
    "plugin_enabled",
    "settings_path",
    "uninstall",
    "written_commands",
]

SCOPES = ("project", "local", "user")


@dataclass(frozen=True)
class _Hook:
    sub: str
    matcher: str | None
    timeout: int


#: The hooks mdmem installs, by Claude Code event. SessionEnd's timeout also
#: raises Claude Code's 1.5 s budget for it (settings-file hooks only).
HOOKS = {
    "SessionStart": _Hook("session-start", "startup|resume|clear|compact|fork", 30),
    "UserPromptSubmit": _Hook("user-prompt-submit", None, 10),
    "Stop": _Hook("stop", None, 30),
    "PreCompact": _Hook("pre-compact", None, 30),
    "SessionEnd": _Hook("session-end", None, 5),
}
_SUBS = "|".join(re.escape(h.sub) for h in HOOKS.values())
_OURS = re.compile(rf"mdmem\S*\s+(?:.*\s)?hook\s+({_SUBS})\s*$")
PLUGIN_NAME = "mdmem"


#: What a shared (committed) settings file runs: each teammate's own ``mdmem``,
#: found on their PATH at run time, or one clear line on stderr and exit 0, so a
#: teammate without mdmem sees why memory is off instead of a silent exit 127.
SHARED_COMMAND = (
    "sh -c "
    + shlex.quote(
        'command -v mdmem >/dev/null 2>&1 && exec mdmem "$@"; '
        f'echo "mdmem is not installed ({INSTALL_HINT}): memory is off" >&2'
    )
    + " mdmem"
)


def default_command() -> str:
    """This mdmem, as a shell command that imports nothing from the current directory.

    Raises:
        OSError: the interpreter's absolute path is unknown.
    """
    from mdmem import _spawn

    return _spawn.hook_command()


def hook_command(base: str, event: str) -> str:
    """The command mdmem writes for ``event`` (a key of :data:`HOOKS`) with ``base``."""
    return f"{base} hook {HOOKS[event].sub}"


def written_commands(extra: str | None = None) -> dict[str, set[str]]:
    """Every command ``install`` could have written, by event: this mdmem's, the shared one's.

    This mdmem's as written now and as it was written before (through its console
    script, :func:`mdmem._spawn.console_command`), so hooks an earlier ``install``
    wrote are still checked. ``extra`` is a ``--command`` given to ``install``.
    """
    from mdmem import _spawn

    bases = {default_command(), _spawn.console_command(), SHARED_COMMAND}
    bases |= {extra} if extra else set()
    return {event: {hook_command(base, event) for base in bases} for event in HOOKS}


def settings_path(scope: str, workspace: str) -> str:
    """The settings file of a scope: ``project``, ``local`` or ``user``.

    Raises:
        ValueError: an unknown scope.
    """
    if scope == "project":
        return os.path.join(workspace, ".claude", "settings.json")
    if scope == "local":
        return os.path.join(workspace, ".claude", "settings.local.json")
    if scope == "user":
        path = os.path.join(os.path.expanduser("~"), ".claude", "settings.json")
        # The user's own file may be a dotfiles symlink: edit its target, keep the link.
        # A repository's settings files are never followed (they are untrusted input).
        return os.path.realpath(path) if os.path.islink(path) else path
    raise ValueError(f"unknown scope {scope!r}: use one of {', '.join(SCOPES)}")


def _load(path: str) -> dict[str, object]:
    from mdmem.errors import InvalidSettings

    try:
        data = files.read_bytes(path, 2 * 1024 * 1024)
    except FileNotFoundError:
        return {}
    except ValueError:
        raise InvalidSettings(path, "larger than 2 MiB") from None
    try:
        settings = _json.loads(data) if data.strip() else {}
    except ValueError as exc:
        reason = getattr(exc, "msg", "not JSON")
        line = getattr(exc, "lineno", None)
        where = f" at line {line}" if line else ""
        raise InvalidSettings(path, f"not valid JSON ({reason}{where}); fix it by hand") from None
    if not isinstance(settings, dict):
        raise InvalidSettings(path, "not a JSON object; fix it by hand")
    return settings


def _dump(path: str, settings: dict[str, object]) -> None:
    files.ensure_dir(os.path.dirname(path))
    files.atomic_write(path, (json.dumps(settings, indent=2, ensure_ascii=False) + "\n").encode())


def _is_ours(hook: object) -> bool:
    return isinstance(hook, dict) and bool(_OURS.search(str(hook.get("command", ""))))


def _groups(settings: dict[str, object], path: str) -> dict[str, object]:
    from mdmem.errors import InvalidSettings

    hooks = settings.setdefault("hooks", {})
    if not isinstance(hooks, dict):
        raise InvalidSettings(path, "'hooks' is not an object; fix it by hand")
    return hooks


def _without_ours(groups: list[object]) -> list[object]:
    kept_groups: list[object] = []
    for group in groups:
        inner = group.get("hooks") if isinstance(group, dict) else None
        if isinstance(group, dict) and isinstance(inner, list):
            kept = [h for h in inner if not _is_ours(h)]
            if len(kept) != len(inner):
                if not kept:
                    continue
                group = {**group, "hooks": kept}
        kept_groups.append(group)
    return kept_groups


def install(path: str, command: str | None = None) -> bool:
    """Put mdmem's hooks into a settings file, keeping everything else; False if already so.

    An mdmem hook already there with another command (a bare ``mdmem``, an
    older interpreter) is replaced.

    Raises:
        InvalidSettings: the file is not a JSON object, or its hooks are malformed.
    """
    from mdmem.errors import InvalidSettings

    base = command or default_command()
    settings = _load(path)
    hooks = _groups(settings, path)
    before = json.dumps(hooks, sort_keys=True)
    for event, spec in HOOKS.items():
        groups = hooks.get(event, [])
        if not isinstance(groups, list):
            raise InvalidSettings(path, f"hooks.{event} is not a list; fix it by hand")
        handler: dict[str, object] = {
            "type": "command",
            "command": hook_command(base, event),
            "timeout": spec.timeout,
        }
        group: dict[str, object] = {"hooks": [handler]}
        if spec.matcher:
            group = {"matcher": spec.matcher, **group}
        hooks[event] = [*_without_ours(groups), group]
    if json.dumps(hooks, sort_keys=True) == before:
        return False
    _dump(path, settings)
    return True


def uninstall(path: str) -> bool:
    """Remove mdmem's hooks (all five events) from a settings file, and nothing else.

    Returns False if there were none.

    Raises:
        InvalidSettings: the file is not a JSON object.
    """
    settings = _load(path)
    hooks = settings.get("hooks")
    if not isinstance(hooks, dict):
        return False
    changed = False
    for event in list(hooks):
        groups = hooks[event]
        if not isinstance(groups, list):
            continue
        kept = _without_ours(groups)
        if kept != groups:
            changed = True
            if kept:
                hooks[event] = kept
            else:
                del hooks[event]
    if not hooks:
        del settings["hooks"]
    if changed:
        _dump(path, settings)
    return changed


def installed_commands(path: str) -> dict[str, str]:
    """mdmem's hook commands in a settings file, by event."""
    settings = _load(path)
    hooks = settings.get("hooks")
    found: dict[str, str] = {}
    if not isinstance(hooks, dict):
        return found
    for event, groups in hooks.items():
        for group in groups if isinstance(groups, list) else []:
            inner = group.get("hooks") if isinstance(group, dict) else None
            for hook in inner if isinstance(inner, list) else []:
                if _is_ours(hook):
                    found[event] = str(hook["command"])
    return found


def plugin_enabled(workspace: str) -> list[str]:
    """The settings files that enable the mdmem Claude Code plugin (``mdmem@<marketplace>``)."""
    found = []
    for scope in SCOPES:
        path = settings_path(scope, workspace)
        try:
            enabled = _load(path).get("enabledPlugins")
        except Exception:
            continue
        if isinstance(enabled, dict) and any(
            str(k).split("@")[0] == PLUGIN_NAME and v for k, v in enabled.items()
        ):
            found.append(path)
    return found


def ensure_ignored(path: str, workspace: str) -> str | None:
    """Add ``path`` (inside ``workspace``) to the workspace's .gitignore unless git ignores it.

    Returns the .gitignore changed, or None. Outside a git repository, nothing.
    """
    if not os.path.exists(os.path.join(workspace, ".git")):
        return None
    rel = os.path.relpath(path, workspace).replace(os.sep, "/")
    try:
        ignored = subprocess.run(
            ["git", "-C", workspace, "check-ignore", "-q", "--", rel],
            capture_output=True,
            timeout=10,
        )
        if ignored.returncode == 0:
            return None
    except (OSError, subprocess.SubprocessError):
        pass
    gitignore = os.path.join(workspace, ".gitignore")
    try:
        text = files.read_bytes(gitignore, 1024 * 1024).decode("utf-8", "replace")
    except FileNotFoundError:
        text = ""
    if f"/{rel}" in text.split("\n") or rel in text.split("\n"):
        return None
    sep = "" if not text or text.endswith("\n") else "\n"
    files.atomic_write(gitignore, (text + sep + f"/{rel}\n").encode())
    return gitignore


@dataclass(frozen=True)
class CheckResult:
    """How one installed hook command behaved when run with a sample payload."""

    event: str
    command: str
    ok: bool
    problem: str = ""
    seconds: float = 0.0
    ran: bool = True
    """False for a command mdmem did not write: it was not run."""


def _payload(event: str, workspace: str, transcript: str) -> dict[str, object]:
    base: dict[str, object] = {
        "session_id": "00000000-0000-4000-8000-000000000000",
        "transcript_path": transcript,
        "cwd": workspace,
        "hook_event_name": event,
    }
    extra: dict[str, dict[str, object]] = {
        "SessionStart": {"source": "startup"},
        "UserPromptSubmit": {"prompt": "mdmem install check"},
        "Stop": {"stop_hook_active": False, "last_assistant_message": ""},
        "PreCompact": {"trigger": "manual", "custom_instructions": ""},
        "SessionEnd": {"reason": "other"},
    }
    return {**base, **extra.get(event, {})}


def _output_problem(event: str, stdout: str) -> str:
    """What is wrong with a hook's stdout for its event, or ''."""
    text = stdout.strip()
    if event in ("Stop", "PreCompact", "SessionEnd"):
        # A Stop hook's context would make Claude go on: these must print nothing.
        return f"printed {text[:80]!r}, expected nothing" if text else ""
    if not text.startswith("{"):
        return ""  # plain text is added as context
    try:
        data = json.loads(text)
    except ValueError:
        return "printed invalid JSON"
    specific = data.get("hookSpecificOutput") if isinstance(data, dict) else None
    if specific is None:
        return ""
    if not isinstance(specific, dict) or specific.get("hookEventName") != event:
        return f"hookSpecificOutput.hookEventName is not {event!r}"
    context = specific.get("additionalContext", "")
    if not isinstance(context, str):
        return "additionalContext is not a string"
    if len(context) > 10_000:
        return f"additionalContext has {len(context)} characters, over Claude Code's 10,000"
    return ""


def check(
    path: str, workspace: str, *, timeout: float = 30.0, command: str | None = None
) -> list[CheckResult]:
    """Run each mdmem hook command of a settings file as Claude Code would; one result each.

    Only a command exactly as ``install`` writes it (:func:`written_commands`,
    ``command`` being a ``--command`` given to install) is run: the settings
    file may come with the repository, and a command that merely looks like
    mdmem's (``touch x; mdmem hook stop``) gets a result with ``ran=False``.
    Each runs in ``bash -c`` (``sh`` where there is no bash) in the workspace, with
    ``CLAUDE_PROJECT_DIR`` set and a sample payload on stdin (an empty
    transcript, so nothing is handed over); it must exit 0, print what its
    event accepts, and write nothing to stderr.

    Raises:
        InvalidSettings: the file is not a JSON object.
    """
    import shutil

    shell = shutil.which("bash") or "/bin/sh"
    env = {**os.environ, "CLAUDE_PROJECT_DIR": workspace}
    ours = written_commands(command)
    results = []
    with tempfile.TemporaryDirectory() as scratch:
        transcript = os.path.join(scratch, "transcript.jsonl")
        open(transcript, "wb").close()
        for event, command_line in installed_commands(path).items():
            if command_line not in ours.get(event, set()):
                problem = "not run: not a command mdmem writes"
                results.append(CheckResult(event, command_line, False, problem, ran=False))
                continue
            payload = json.dumps(_payload(event, workspace, transcript))
            started = time.monotonic()
            try:
                proc = subprocess.run(
                    [shell, "-c", command_line],
                    input=payload,
                    capture_output=True,
                    text=True,
                    cwd=workspace,
                    env=env,
                    timeout=timeout,
                )
            except subprocess.TimeoutExpired:
                problem = f"took over {timeout:g} s"
                results.append(CheckResult(event, command_line, False, problem))
                continue
            except OSError as exc:
                results.append(CheckResult(event, command_line, False, str(exc)))
                continue
            took = time.monotonic() - started
            first = proc.stderr.strip().splitlines()[0] if proc.stderr.strip() else ""
            if proc.returncode != 0:
                problem = f"exit status {proc.returncode}" + (f": {first}" if first else "")
            else:
                problem = _output_problem(event, proc.stdout) or (first and f"stderr: {first}")
            results.append(CheckResult(event, command_line, not problem, problem, took))
    return results
