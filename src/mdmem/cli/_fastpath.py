"""What the commands hooks and scripts run at every turn need, without typer.

``try_fast`` recognises the plain forms of ``mdmem index``, ``mdmem hook
session-start``, ``mdmem hook user-prompt-submit``, ``mdmem search``,
``mdmem recall``, ``mdmem add --title T TEXT`` and ``mdmem rm NAME`` and answers them with nothing
but the store (and, for search and recall, the recall) modules imported; any
other command line (``--help``, a typo, another command, ``add`` without a
text, which opens an editor) returns None and goes to the typer CLI, which
calls the same functions here, so both paths print the same bytes.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from mdmem.store.hit import Hit
    from mdmem.store.store import Store

__all__ = [
    "add_note",
    "index_text",
    "no_project",
    "redacted_line",
    "say_refusal",
    "search_text",
    "try_fast",
]

_VALUE_OPTIONS = {"--workspace": "workspace", "--user-dir": "user_dir"}
_HANDOVER = ("stop", "pre-compact", "session-end")
_FLAGS = {"-q": "quiet", "--quiet": "quiet", "-v": "verbose", "--verbose": "verbose"}


def index_text(workspace: str | None, user_dir: str | None, level: str, as_json: bool) -> str:
    """The text ``mdmem index`` prints (without the final newline)."""
    from mdmem.store.block import cached_block
    from mdmem.store.workspace import resolve

    ws, project, user = resolve(workspace, user_dir)
    block = cached_block(project, user, level=level)
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


def say_refusal(workspace: str | None, user_dir: str | None, start: str | None = None) -> None:
    """Write one line on stderr when the workspace's project store is refused (someone
    else's, writable by others, ``/``, a symlink); nothing when it is fine. Never raises."""
    try:
        from mdmem.store.workspace import refusal, resolve

        line = refusal(resolve(workspace, user_dir, start=start)[1])
    except Exception:  # a warning must never break the command or the hook
        return
    if line:
        sys.stderr.write(line + "\n")


def search_text(hits: list[Hit], as_json: bool) -> str:
    """What ``mdmem search`` prints for ``hits`` (without the final newline)."""
    if as_json:
        import json

        rows = [
            {
                "filename": h.filename,
                "level": h.level.value,
                "type": h.type,
                "title": h.title,
                "summary": h.summary,
                "score": h.score,
                "updated": h.updated.isoformat() if h.updated else None,
                "snippet": h.snippet,
            }
            for h in hits
        ]
        return json.dumps(rows, ensure_ascii=False, indent=2)
    lines = []
    for h in hits:
        lines.append(f"{h.level.value:<8} {h.filename}  {h.title}")
        if h.snippet:
            lines.append(f"         {h.snippet}")
    return "\n".join(lines)


_TYPES = ("user_preference", "correction_feedback", "project_knowledge", "reference_material")


def _parsed(
    args: list[str], names: dict[str, str], switches: set[str] | None = None, *, stdin: bool = False
) -> tuple[dict[str, str], set[str], str | None] | None:
    """A fast-path command's options (``names``: each spelling to its key, ``--x V`` or
    ``--x=V``), its switches and its one positional argument (``stdin``: ``-`` is one); None
    for any other form, which the full CLI parses and explains."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    positional: str | None = None
    while args:
        arg = args.pop(0)
        key, eq, value = arg.partition("=")
        if key in names:
            if not eq:
                if not args:
                    return None
                value = args.pop(0)
            values[names[key]] = value
        elif switches and arg in switches:
            flags.add(arg)
        elif arg == "--":
            if len(args) != 1 or positional is not None:
                return None
            positional = args.pop(0)
        elif (arg.startswith("-") and not (stdin and arg == "-")) or positional is not None:
            return None
        else:
            positional = arg
    return values, flags, positional


def _recall_command(command: str, args: list[str], opts: dict[str, str | None]) -> int | None:
    """``search QUERY [--limit N] [--level L] [--type T] [--json] [--semantic|--lexical]``
    and ``recall QUERY [--budget N] [--semantic|--lexical]``; None for anything else."""
    names = (
        {"--limit": "--limit", "-n": "--limit", "--level": "--level", "--type": "--type"}
        if command == "search"
        else {"--budget": "--budget"}
    )
    switches = {"--semantic", "--lexical"} | ({"--json"} if command == "search" else set())
    parsed = _parsed(args, names, switches)
    if parsed is None:
        return None
    values, flags, query = parsed
    if query is None or ("--semantic" in flags and "--lexical" in flags):
        return None
    semantic = True if "--semantic" in flags else False if "--lexical" in flags else None
    try:
        number = int(values.get("--limit", values.get("--budget", "10")))
    except ValueError:
        return None
    level = values.get("--level", "all")
    note_type = values.get("--type")
    if number < 1 or level not in ("all", "project", "user") or note_type not in (None, *_TYPES):
        return None
    if opts["workspace"] and not os.path.isdir(os.path.expanduser(opts["workspace"])):
        return None  # the full CLI says it is not a directory
    try:
        from mdmem.store.workspace import resolve

        _, project, user = resolve(opts["workspace"], opts["user_dir"])
        stores = [s for s in (project, user) if level in ("all", s.level.value)]
        if command == "search":
            from mdmem.recall import search

            types = [note_type] if note_type else None
            hits = search(stores, query, limit=number, types=types, semantic=semantic)
            text = search_text(hits, "--json" in flags)
        else:
            from mdmem.recall import recall_block

            text = recall_block(stores, query, number, semantic=semantic)
    except Exception:
        return None  # the full CLI reports it, with its error handling
    if text:
        sys.stdout.write(text + "\n")
    return 0


def add_note(store: Store, kind: str, title: str, summary: str, body: str) -> str:
    """Create a note through the store, as ``mdmem add`` does; its file name.

    Raises:
        InvalidNote: the store rejected it (the reason is the store's).
    """
    from mdmem.errors import InvalidNote
    from mdmem.store import ledger

    op = {"action": "create", "level": store.level.value, "type": kind, "title": title}
    result = store.apply([{**op, "summary": summary, "content": body}], source="cli")
    if result.rejected:
        raise InvalidNote("new note", result.rejected[0].reason)
    name = result.applied[0].filename
    ledger.record(store.path, "write", n=[name], via="cli")
    return name


def redacted_line(*texts: str) -> str | None:
    """The line that tells a person what redaction takes out of their own text (None: nothing)."""
    from mdmem.privacy import kinds_found

    kinds = sorted({kind for text in texts for kind in kinds_found(text)})
    return f"mdmem: redacted from your text: {', '.join(kinds)}" if kinds else None


def no_project(workspace: str, project: Store) -> bool:
    """Whether ``workspace`` is discovery's fallback: no store yet, no marker to find it by."""
    if project.unavailable is not None:
        return False  # refused for a reason of its own, which the write says
    return not os.path.isdir(project.path) and not any(
        os.path.exists(os.path.join(workspace, marker)) for marker in (".git", ".PseudoClaude")
    )


_ADD_VALUES = {"--level": "level", "--type": "type", "--title": "title", "--summary": "summary"}


def _add_command(args: list[str], opts: dict[str, str | None]) -> int | None:
    """``add [--level L] [--type T] --title T [--summary S] (TEXT | -)``: the plain write,
    without typer's import (most of such a process's time); None for any other form."""
    parsed = _parsed(args, _ADD_VALUES, stdin=True)
    if parsed is None:
        return None
    values, _, body = parsed
    level = values.get("level", "project")
    default = "project_knowledge" if level == "project" else "user_preference"
    kind = values.get("type", default)
    title = values.get("title")
    if body is None or title is None or level not in ("project", "user") or kind not in _TYPES:
        return None  # the editor, or a usage error: the full CLI says it
    if opts["workspace"] and not os.path.isdir(os.path.expanduser(opts["workspace"])):
        return None
    from mdmem.store.workspace import resolve

    try:
        ws, project, user = resolve(opts["workspace"], opts["user_dir"])
    except Exception:
        return None  # nothing written yet: the full CLI reports it
    store = project if level == "project" else user
    if level == "project" and opts["workspace"] is None and no_project(ws, project):
        return None  # the full CLI explains `mdmem init`
    text = sys.stdin.read() if body == "-" else body
    summary = values.get("summary", "")
    from mdmem.errors import MdmemError

    try:
        name = add_note(store, kind, title, summary, text)
    except (MdmemError, OSError) as exc:  # as the full CLI says it: one line, status 1
        sys.stderr.write(f"mdmem: error: {exc}\n")
        return 1
    line = redacted_line(title, summary, text)
    if line:
        sys.stderr.write(line + "\n")
    sys.stdout.write(name + "\n")
    return 0


def _rm_command(args: list[str], opts: dict[str, str | None]) -> int | None:
    """``rm [--level L] NAME``: a note to the trash without typer's import (most of such a
    process's time); None for any other form, and for a name no store holds (the full CLI
    says where it looked)."""
    parsed = _parsed(args, {"--level": "level"})
    if parsed is None:
        return None
    values, _, name = parsed
    level = values.get("level", "all")
    if name is None or level not in ("all", "project", "user"):
        return None
    if opts["workspace"] and not os.path.isdir(os.path.expanduser(opts["workspace"])):
        return None
    from mdmem.errors import InvalidNote, MdmemError
    from mdmem.store.workspace import resolve

    try:
        _, project, user = resolve(opts["workspace"], opts["user_dir"])
        stores = [s for s in (project, user) if level in ("all", s.level.value)]
        # Project, then user, as the full CLI looks (cli/_base.find_note).
        found = [s for s in stores if s.unavailable is None and s.exists(name)][:1]
    except Exception:
        return None  # an invalid name, a store that cannot be read: the full CLI says it
    if not found or any(s.unavailable is not None for s in stores):
        return None
    store = found[0]
    op = {"action": "delete", "level": store.level.value, "filename": name}
    try:
        result = store.apply([op], source="cli")
        if result.rejected:
            raise InvalidNote(name, result.rejected[0].reason)
    except (MdmemError, OSError) as exc:  # as the full CLI says it: one line, status 1
        sys.stderr.write(f"mdmem: error: {exc}\n")
        return 1
    if not opts.get("quiet"):
        sys.stdout.write(f"moved {name} to the trash; `mdmem restore {name}` brings it back\n")
    return 0


def _disabled() -> bool:
    from mdmem.integrations.session_control import disabled_by_env

    return disabled_by_env()


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
            opts[_FLAGS[arg]] = "1"
        elif not command_seen and arg == "index":
            command_seen = True
        elif not command_seen and arg == "hook" and os.environ.get("MDMEM_NESTED"):
            return 0  # inside a model call mdmem started (claude -p): no hook may run
        elif not command_seen and arg == "hook" and _disabled():
            return 0  # MDMEM_DISABLE: nothing injected, nothing handed over
        elif not command_seen and arg == "hook" and len(args) == 1 and args[0] in _HANDOVER:
            # Stop, PreCompact and SessionEnd: SessionEnd has about 1.5 s, and typer
            # alone would take a good part of it.
            from mdmem.integrations.claude_code import (
                handover_hook,
                read_hook_input,
                workspace_of,
            )

            payload = read_hook_input()
            say_refusal(opts["workspace"], opts["user_dir"], workspace_of(payload))
            try:
                handover_hook(args[0], payload, opts["workspace"], opts["user_dir"])
            except ValueError as exc:  # logged; a hook always exits 0
                sys.stderr.write(f"mdmem: hook {args[0]}: {exc}\n")
            return 0
        elif not command_seen and arg == "add":
            if opts.get("verbose"):
                return None  # -v: the full CLI, which shows a traceback on an error
            return _add_command(args, opts)
        elif not command_seen and arg == "rm":
            if opts.get("verbose"):
                return None  # -v: the full CLI, which shows a traceback on an error
            return _rm_command(args, opts)
        elif not command_seen and arg in ("search", "recall"):
            return _recall_command(arg, args, opts)
        elif not command_seen and arg == "hook" and args == ["user-prompt-submit"]:
            from mdmem.integrations.prompt_recall import read_input, user_prompt_submit

            try:
                out = user_prompt_submit(read_input(), opts["workspace"], opts["user_dir"])
            except Exception:
                return None  # the full CLI handles it, and still exits 0
            if out:
                sys.stdout.write(out + "\n")
            return 0
        elif not command_seen and arg == "hook" and args == ["session-start"]:
            from mdmem.integrations.claude_code import (
                read_hook_input,
                session_start,
                workspace_of,
            )

            payload = read_hook_input()
            try:
                out = session_start(payload, opts["workspace"], opts["user_dir"])
            except Exception:
                return None  # the full CLI handles it, and still exits 0
            if out:  # nothing when the session is paused
                say_refusal(opts["workspace"], opts["user_dir"], workspace_of(payload))
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
    say_refusal(opts["workspace"], opts["user_dir"])
    if text:
        sys.stdout.write(text + "\n")
    return 0


def embedder_child(args: list[str]) -> int:
    """A background embedder process (``recall/embedder.py`` starts it): ``[ROOT, LEVEL]``.

    Here rather than in ``recall/``, because it makes the store: recall reads
    stores only through a protocol and never imports the store class.
    """
    from mdmem.recall.embedder import background
    from mdmem.store.store import Store

    background(Store(args[0], args[1]))
    return 0


def prompt_server_child(args: list[str]) -> int:
    """The resident prompt server's process (``integrations/prompt_server.py`` starts it):
    ``[FOLDER]``. Here because it answers each hook with :func:`try_fast`; what the prompt
    hook's answer imports is imported once, now."""
    from mdmem.integrations import prompt_recall, session_control  # noqa: F401
    from mdmem.integrations.prompt_server import serve
    from mdmem.recall import engine  # noqa: F401
    from mdmem.store import activity, blockcache, workspace  # noqa: F401

    return serve(args, try_fast)
