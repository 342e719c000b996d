"""What ``mdmem index`` needs, without typer: a coding-agent hook runs it at every session start.

``try_fast`` recognises the plain forms of ``mdmem index`` and answers them
with nothing but the store and index modules imported; any other command line
(``--help``, a typo, another command) returns None and goes to the typer CLI,
which calls the same :func:`index_text`, so both paths print the same bytes.
"""

from __future__ import annotations

import os
import sys

from mdmem.store.index import merge
from mdmem.store.marks import prompt_index
from mdmem.store.workspace import resolve

__all__ = ["index_text", "try_fast"]

_VALUE_OPTIONS = {"--workspace": "workspace", "--user-dir": "user_dir"}
_HANDOVER = ("stop", "pre-compact", "session-end")
_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}


def index_text(workspace: str | None, user_dir: str | None, level: str, as_json: bool) -> str:
    """The text ``mdmem index`` prints (without the final newline)."""
    ws, project, user = resolve(workspace, user_dir)
    project_index = prompt_index(project) if level in ("all", "project") else ""
    user_index = prompt_index(user) if level in ("all", "user") else ""
    block = merge(project_index, user_index)
    if not as_json:
        return block
    import json

    return json.dumps(
        {
            "workspace": ws,
            "project_store": project.path,
            "user_store": user.path,
            "level": level,
            "block": block,
        },
        ensure_ascii=False,
        indent=2,
    )


def try_fast(argv: list[str]) -> int | None:
    """Answer ``mdmem [globals] index [--level L] [--json]`` and the Claude Code hooks.

    The hooks are ``hook session-start`` and the handover hooks ``hook stop``,
    ``hook pre-compact`` and ``hook session-end``.

    Globals are ``--workspace W``, ``--user-dir U``, ``-q``, ``-v``.
    """
    opts: dict[str, str | None] = {
        "workspace": os.environ.get("MDMEM_WORKSPACE") or None,
        "user_dir": os.environ.get("MDMEM_USER_DIR") or None,
    }
    level, as_json = "all", False
    args = list(argv)
    command_seen = False
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if not command_seen and key in _VALUE_OPTIONS:
            if not eq:
                if not args:
                    return None
                value = args.pop(0)
            opts[_VALUE_OPTIONS[key]] = value
        elif not command_seen and arg in _FLAGS:
            continue
        elif not command_seen and arg == "index":
            command_seen = True
        elif not command_seen and arg == "hook" and os.environ.get("MDMEM_NESTED"):
            return 0  # inside a model call mdmem started (claude -p): no hook may run
        elif not command_seen and arg == "hook" and len(args) == 1 and args[0] in _HANDOVER:
            # Stop, PreCompact and SessionEnd: SessionEnd has about 1.5 s, and typer
            # alone would take a good part of it.
            from mdmem.integrations.claude_code import handover_hook, read_hook_input

            try:
                handover_hook(args[0], read_hook_input(), opts["workspace"], opts["user_dir"])
            except ValueError as exc:  # logged; a hook always exits 0
                sys.stderr.write(f"mdmem: hook {args[0]}: {exc}\n")
            return 0
        elif not command_seen and arg == "hook" and args == ["session-start"]:
            from mdmem.integrations.claude_code import read_hook_input, session_start

            try:
                out = session_start(read_hook_input(), opts["workspace"], opts["user_dir"])
            except Exception:
                return None  # the full CLI handles it, and still exits 0
            sys.stdout.write(out + "\n")
            return 0
        elif command_seen and key == "--level":
            if not eq:
                if not args:
                    return None
                value = args.pop(0)
            if value not in ("all", "project", "user"):
                return None
            level = value
        elif command_seen and arg == "--json":
            as_json = True
        else:
            return None
    if not command_seen:
        return None
    if opts["workspace"] and not os.path.isdir(os.path.expanduser(opts["workspace"])):
        return None  # the full CLI says it is not a directory
    try:
        text = index_text(opts["workspace"], opts["user_dir"], level, as_json)
    except Exception:
        return None  # let the full CLI report it, with its error handling
    if text:
        sys.stdout.write(text + "\n")
    return 0
