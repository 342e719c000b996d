"""The Claude Code provider: extraction through the user's own Claude Code login.

For people with the ``claude`` command and a subscription but no API key. One
turn is one run of Claude Code's headless mode::

    claude -p --output-format json --tools "" --max-turns 1 --model haiku
           --no-session-persistence --settings '{"disableAllHooks":true}'
           --strict-mcp-config --mcp-config '{"mcpServers":{}}'
           --system-prompt-file <a 0600 file: the instructions and the memory>

with the turn's prompt on stdin, in an empty temporary directory (so no
project's ``CLAUDE.md`` or settings are loaded), within a bounded time
(``MDMEM_CLAUDE_TIMEOUT`` seconds, 180 by default), and with
``CLAUDE_CODE_DISABLE_AUTO_MEMORY=1`` and ``MDMEM_NESTED=1`` in its
environment.

Nothing private is on the command line, which every local user can read
(``ps``): the system prompt holds the existing memory, user notes included, so
it goes in a file only this user can read, in a private (``0700``) temporary
folder removed after the run, and the turn goes on stdin.

Recursion is impossible twice over: ``disableAllHooks`` keeps Claude Code from
running any hook of the user's settings, and every ``mdmem hook ...`` command
exits 0 at once, doing nothing, when it sees ``MDMEM_NESTED`` (a hook inherits
its parent's environment).

Failures are :class:`~mdmem.errors.ProviderError`: ``claude`` missing or not
logged in (not retryable: the turn waits in the journal until the user fixes
it and runs ``mdmem doctor --fix``), a timeout, a crash or output that is not
Claude Code's JSON (retryable). The executable is ``MDMEM_CLAUDE`` or
``claude`` on ``PATH``; ``MDMEM_MODEL`` picks the model (``haiku`` by default).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
from typing import TYPE_CHECKING, Any

from mdmem.errors import ProviderError
from mdmem.extract.providers.base import Usage

if TYPE_CHECKING:
    from mdmem.extract.providers.base import Answer, ExtractionRequest

__all__ = [
    "DEFAULT_MODEL",
    "NESTED_ENV",
    "ClaudeCodeProvider",
    "claude_command",
    "command_line",
]

DEFAULT_MODEL = "haiku"
#: Set in the environment of every ``claude`` mdmem starts; mdmem's hooks do nothing under it.
NESTED_ENV = "MDMEM_NESTED"
_LOGIN = ("not logged in", "please run /login", "login expired", "invalid api key")


def claude_command() -> str | None:
    """The Claude Code executable to run: ``MDMEM_CLAUDE``, else ``claude`` on ``PATH``."""
    named = os.environ.get("MDMEM_CLAUDE")
    if named:
        return shutil.which(named) or None
    return shutil.which("claude")


def command_line(executable: str, model: str, system_file: str) -> list[str]:
    """The ``claude`` command line for one extraction: the system prompt in a file, the turn
    on stdin, nothing private in it."""
    return [
        executable,
        "-p",
        "--output-format",
        "json",
        "--tools",
        "",
        "--max-turns",
        "1",
        "--model",
        model,
        "--no-session-persistence",
        "--settings",
        json.dumps({"disableAllHooks": True}),
        "--strict-mcp-config",
        "--mcp-config",
        json.dumps({"mcpServers": {}}),
        "--system-prompt-file",
        system_file,
    ]


class ClaudeCodeProvider:
    """Extraction through ``claude -p``, the headless mode of Claude Code."""

    name = "claude-code"

    def __init__(
        self,
        model: str | None = None,
        *,
        executable: str | None = None,
        timeout: float | None = None,
    ) -> None:
        env = os.environ
        self.model = model or env.get("MDMEM_MODEL") or DEFAULT_MODEL
        self.executable = executable
        if timeout is None:
            try:
                timeout = float(env.get("MDMEM_CLAUDE_TIMEOUT") or 180)
            except ValueError:
                timeout = 180.0
        self.timeout = timeout
        self.last_usage: Usage | None = None

    def _executable(self) -> str:
        if self.executable:
            return self.executable
        found = claude_command()
        if found is None:
            raise ProviderError(
                "the claude command is not on PATH (install Claude Code, set MDMEM_CLAUDE, "
                "or choose another provider with MDMEM_PROVIDER)",
                retryable=False,
            )
        return found

    def extract(self, request: ExtractionRequest) -> Answer:
        """Run ``claude -p`` on this turn and return its answer's text.

        Raises:
            ProviderError: ``claude`` is missing, not logged in, timed out, failed
                or printed something that is not its JSON result.
        """
        self.last_usage = None
        executable = self._executable()
        env = dict(os.environ)
        env[NESTED_ENV] = "1"
        env["CLAUDE_CODE_DISABLE_AUTO_MEMORY"] = "1"
        try:
            # mkdtemp makes the folder 0700; the system prompt file is 0600 inside it,
            # and the empty working directory beside it.
            with tempfile.TemporaryDirectory(prefix="mdmem-claude-") as scratch:
                system_file = os.path.join(scratch, "system-prompt.md")
                fd = os.open(system_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as f:
                    f.write(request.full_system)
                cwd = os.path.join(scratch, "work")
                os.mkdir(cwd, 0o700)
                argv = command_line(executable, self.model, system_file)
                done = self._run(argv, request.prompt, cwd, env)
        except FileNotFoundError:
            raise ProviderError(f"cannot run {executable}: not found", retryable=False) from None
        except PermissionError:
            raise ProviderError(
                f"cannot run {executable}: permission denied", retryable=False
            ) from None
        except subprocess.TimeoutExpired:
            raise ProviderError(
                f"claude did not answer within {self.timeout:g} s", retryable=True
            ) from None
        except OSError as exc:
            raise ProviderError(f"cannot run {executable}: {exc}", retryable=True) from None
        return self._answer(done)

    def _run(
        self, argv: list[str], prompt: str, cwd: str, env: dict[str, str]
    ) -> subprocess.CompletedProcess[str]:
        """Run ``claude`` in a session of its own, so a timeout ends it and all it started.

        Raises:
            subprocess.TimeoutExpired: it did not finish in time (it was killed).
            OSError: it could not be started.
        """
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        try:
            out, err = proc.communicate(prompt, timeout=self.timeout)
        finally:
            if proc.poll() is None:
                # Timed out or interrupted: a child left holding the pipes would block us.
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.communicate()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def _answer(self, done: subprocess.CompletedProcess[str]) -> Answer:
        out, err = done.stdout.strip(), done.stderr.strip()
        data: Any = None
        try:
            data = json.loads(out) if out else None
        except ValueError:
            data = None
        if isinstance(data, list):  # some versions print every message: the result is last
            data = next(
                (d for d in reversed(data) if isinstance(d, dict) and d.get("type") == "result"),
                None,
            )
        said = " ".join(
            str(part)
            for part in (
                data.get("result") if isinstance(data, dict) else out,
                *(data.get("errors") or [] if isinstance(data, dict) else []),
                err,
            )
            if part
        )
        if any(phrase in said.lower() for phrase in _LOGIN):
            raise ProviderError(
                f"Claude Code is not logged in ({_first_line(said)}): run `claude` and /login, "
                "then `mdmem doctor --fix` processes the waiting turns",
                retryable=False,
            )
        if not isinstance(data, dict) or data.get("type", "result") != "result":
            raise ProviderError(
                f"claude exited {done.returncode} without its JSON result: "
                f"{_first_line(err or out) or 'no output'}",
                retryable=True,
            )
        self.last_usage = _usage(data, self.model)
        if (
            data.get("is_error")
            or done.returncode != 0
            or data.get("subtype", "success") != "success"
        ):
            raise ProviderError(
                f"claude failed ({data.get('subtype') or f'exit {done.returncode}'}): "
                f"{_first_line(said) or 'no message'}",
                retryable=True,
            )
        structured = data.get("structured_output")
        if isinstance(structured, (dict, list)):
            return structured
        result = data.get("result")
        if not isinstance(result, str):
            raise ProviderError("claude's JSON result has no text", raw=out[:2000], retryable=True)
        return result


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def _usage(data: dict[str, Any], model: str) -> Usage | None:
    """Tokens from ``modelUsage`` (every model of the run) or else ``usage`` (the main loop)."""

    def count(obj: Any, *names: str) -> int:
        for name in names:
            value = obj.get(name) if isinstance(obj, dict) else None
            if isinstance(value, int) and value > 0:
                return value
        return 0

    per_model = data.get("modelUsage")
    if isinstance(per_model, dict) and per_model:
        entries = [v for v in per_model.values() if isinstance(v, dict)]
        return Usage(
            input_tokens=sum(count(e, "inputTokens", "input_tokens") for e in entries),
            output_tokens=sum(count(e, "outputTokens", "output_tokens") for e in entries),
            cache_read_tokens=sum(
                count(e, "cacheReadInputTokens", "cache_read_input_tokens") for e in entries
            ),
            cache_write_tokens=sum(
                count(e, "cacheCreationInputTokens", "cache_creation_input_tokens") for e in entries
            ),
            model=",".join(str(k) for k in per_model),
        )
    usage = data.get("usage")
    if not isinstance(usage, dict):
        return None
    return Usage(
        input_tokens=count(usage, "input_tokens"),
        output_tokens=count(usage, "output_tokens"),
        cache_read_tokens=count(usage, "cache_read_input_tokens"),
        cache_write_tokens=count(usage, "cache_creation_input_tokens"),
        model=model,
    )
