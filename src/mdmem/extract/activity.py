"""What an agent did in a stretch of its session: asks, files changed, commands, tests.

:func:`observe` reads Anthropic-style messages (dicts or SDK objects with
``role`` and ``content``), as a Claude Code transcript or a runner's turn has
them, and keeps only what a session record needs:

* the person's asks: the text of ``user`` messages (never a ``tool_result``),
  Claude Code's own wrappers (``<system-reminder>``, slash-command echoes) left out;
* the files changed: the path in the input of an ``Edit``, ``Write``,
  ``MultiEdit`` or ``NotebookEdit`` tool call, relative to the workspace;
* the commands run: the ``command`` of a ``Bash`` tool call;
* the tests run: the commands that run a test runner, with the outcome the
  assistant's text gives after them ("all 12 tests pass", "2 failed").

Never a tool's output: ``tool_result`` blocks are not read at all, nor are
``thinking`` blocks, nor a tool call's other inputs (the text an ``Edit``
wrote). Everything kept is redacted first (secrets replaced, ``<private>``
blocks dropped, a block that spans messages included), then cut to one line.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdmem._lines import clean_inline

if TYPE_CHECKING:
    from mdmem.privacy import Redactor

__all__ = [
    "EDIT_TOOLS",
    "ITEM_CHARS",
    "Activity",
    "is_test_command",
    "lean_blocks",
    "observe",
    "outcome_of",
]

#: The tool calls whose input names a file they change.
EDIT_TOOLS = {"Edit": "file_path", "Write": "file_path", "MultiEdit": "file_path"}
_NOTEBOOK = ("NotebookEdit", "notebook_path")
#: One ask, path or command is cut to this many characters.
ITEM_CHARS = 300
#: At most this many asks are taken from one stretch (a record keeps 20).
MAX_GOALS = 20
#: The text of a message past this many characters is not looked at (an ask is short).
_TEXT_CHARS = 20_000

_WRAPPERS = re.compile(
    r"<(system-reminder|command-name|command-message|command-args|local-command-stdout|"
    r"local-command-stderr|user-prompt-submit-hook)>.*?</\1>",
    re.S,
)
_TEST_RUNNER = re.compile(
    r"(?:^|[\s;&|(/])(?:py\.?test|pytest|tox|nox|unittest|jest|vitest|mocha|rspec|phpunit|"
    r"ctest|(?:go|cargo|npm|pnpm|yarn|bun|deno|mix|dotnet|mvn|gradle|make|swift|zig)\s+"
    r"(?:run\s+)?test\w*|bundle\s+exec\s+rspec|python3?\s+-m\s+(?:pytest|unittest))\b",
    re.I,
)
_PASSED = re.compile(r"\b(?:pass(?:es|ed|ing)?|green|succeed(?:s|ed)?|all good)\b|通过|成功", re.I)
_FAILED = re.compile(r"\b(?:fail(?:s|ed|ing|ure|ures)?|red|broken|errors?)\b|失败|报错", re.I)


@dataclass
class Activity:
    """What one stretch of a session did (what :func:`observe` found), in order."""

    goals: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    tests: list[tuple[str, str]] = field(default_factory=list)
    """``(command, outcome)``; outcome ``passed``, ``failed`` or ``""`` (not said)."""
    said: str = ""
    """The assistant's last words, redacted and cut: how the stretch ended."""
    messages: int = 0

    def empty(self) -> bool:
        """Nothing worth a record: no ask, no file, no command."""
        return not (self.goals or self.files or self.commands)


def _get(obj: object, key: str) -> object:
    if isinstance(obj, Mapping):
        return obj.get(key)
    return getattr(obj, key, None)


def _blocks(content: object) -> list[object]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, Iterable) and not isinstance(content, (bytes, Mapping)):
        return list(content)
    return []


def _input_read(name: object) -> str | None:
    """The one input of a tool call :func:`observe` reads: the file it changes, a Bash command."""
    if not isinstance(name, str):
        return None
    if name == "Bash":
        return "command"
    if name == _NOTEBOOK[0]:
        return _NOTEBOOK[1]
    return EDIT_TOOLS.get(name)


def lean_blocks(content: object) -> list[object]:
    """Of a message's content, only what :func:`observe` and a turn without tool excerpts read.

    Text blocks whole; of a tool call its name and the one input :func:`observe`
    reads; nothing of tool results, thinking or images. For a reader that holds
    a long transcript whole (a session's first handover), whose bulk is tool
    input and output: ``observe`` finds the same in the lean blocks.
    """
    out: list[object] = []
    for block in _blocks(content):
        kind = _get(block, "type")
        # New dicts of constant keys (and a tool's name interned): a parsed line's own
        # strings for them would be held once per line.
        if kind == "text":
            out.append({"type": "text", "text": _get(block, "text")})
        elif kind == "tool_use":
            name = _get(block, "name")
            key = _input_read(name)
            value = _get(_get(block, "input"), key) if key else None
            lean = {key: value} if key and isinstance(value, str) else {}
            name = sys.intern(name) if isinstance(name, str) else name
            out.append({"type": "tool_use", "name": name, "input": lean})
    return out


def is_test_command(command: str) -> bool:
    """Whether a shell command runs tests (pytest, go test, npm test, cargo test, ...)."""
    return bool(_TEST_RUNNER.search(command))


def outcome_of(text: str) -> str:
    """``passed`` or ``failed`` from what an assistant says of a test run; ``""`` if neither.

    The last word that says so counts ("failed before the fix, all pass now":
    passed); "0 failed" is not a failure.
    """
    text = re.sub(r"\b(?:0|no|zero|without)\s+(?:fail\w*|errors?)", " ", text, flags=re.I)
    last = ("", -1)
    for outcome, pattern in (("passed", _PASSED), ("failed", _FAILED)):
        for m in pattern.finditer(text):
            if m.start() > last[1]:
                last = (outcome, m.start())
    return last[0]


def _relative(path: str, workspace: str) -> str:
    """A changed file as the workspace sees it: relative inside it, ``~/...`` under home."""
    path = os.path.normpath(os.path.join(workspace, os.path.expanduser(path)))
    if workspace:
        rel = os.path.relpath(path, workspace)
        if not rel.startswith(".."):
            return rel.replace(os.sep, "/")
    home = os.path.expanduser("~")
    if home and path.startswith(home + os.sep):
        return "~" + path[len(home) :]
    return path


def observe(
    messages: Iterable[object], workspace: str, redactor: Redactor | None = None
) -> Activity:
    """What the messages did, redacted and cut (see the module's docstring).

    Raises:
        TypeError: a message is not a mapping or an object (it has no role).
    """
    if redactor is None:
        from mdmem.privacy import Redactor

        redactor = Redactor()
    # Every text that may be kept, in order, with what it is: private blocks are
    # taken out over all of them at once (a block may open in one and close later).
    parts: list[tuple[str, str]] = []
    count = 0
    for message in messages:
        role = _get(message, "role")
        if not isinstance(role, str):
            raise TypeError(f"a message needs a 'role' string, got {message!r:.80}")
        count += 1
        for block in _blocks(_get(message, "content")):
            kind = _get(block, "type")
            if kind == "text":
                text = _get(block, "text")
                if isinstance(text, str) and text.strip():
                    parts.append(("ask" if role == "user" else "said", text[:_TEXT_CHARS]))
            elif kind == "tool_use" and role == "assistant":
                name = _get(block, "name")
                key = _input_read(name)
                value = _get(_get(block, "input"), key) if key else None
                if not isinstance(value, str):
                    continue
                if name == "Bash":
                    if value.strip():
                        parts.append(("command", value[:_TEXT_CHARS]))
                elif value:
                    parts.append(("file", value[:4096]))
            # tool_result, thinking, images: never read
    texts = redactor.strip_private_many([text for _, text in parts])
    out = Activity(messages=count)
    pending_tests: list[int] = []
    # A long session repeats its paths and commands: each distinct one is redacted once.
    seen: dict[str, str] = {}

    def clean(text: str) -> str:
        done = seen.get(text)
        if done is None:
            done = seen[text] = clean_inline(redactor.redact_secrets(text), ITEM_CHARS)
        return done

    said = ""
    for (what, _), text in zip(parts, texts, strict=True):
        if not text.strip():
            continue
        if what == "ask":
            if len(out.goals) >= MAX_GOALS:
                continue
            ask = clean(_WRAPPERS.sub(" ", text))
            if ask and not ask.startswith(("<", "Caveat:")) and ask not in out.goals:
                out.goals.append(ask)
        elif what == "file":
            path = clean(_relative(text, workspace))
            if path and path not in out.files:
                out.files.append(path)
        elif what == "command":
            command = clean(text)
            if not command:
                continue
            if command in out.commands:
                out.commands.remove(command)  # kept once, where it last ran
            out.commands.append(command)
            if is_test_command(command):
                out.tests.append((command, ""))
                pending_tests.append(len(out.tests) - 1)
        else:  # the assistant's text: the outcome of the tests run before it
            outcome = outcome_of(text)
            if outcome and pending_tests:
                for position in pending_tests:
                    out.tests[position] = (out.tests[position][0], outcome)
                pending_tests = []
            said = text  # only the last is kept: redacted once, below
    if said.strip():
        out.said = clean_inline(redactor.redact_secrets(said), ITEM_CHARS)
    return out
