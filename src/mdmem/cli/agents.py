"""What agents and their hooks run: extract, demo, worker, hook, install, uninstall, mcp."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mdmem.cli._base import app, options_of

if TYPE_CHECKING:
    pass


@app.command()
def extract(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="FILE", help="A JSON array of messages, JSONL (a message per line), or '-'."
        ),
    ],
    include_tools: Annotated[
        bool, typer.Option("--include-tools", help="Show tool calls and results as excerpts.")
    ] = False,
) -> None:
    """Extract memory from one turn now, in the foreground, and print what was applied.

    Messages are {"role": ..., "content": ...} objects, content a string or a
    list of Anthropic content blocks. The provider is Anthropic when
    ANTHROPIC_API_KEY is set, else offline.

    Example: mdmem extract turn.json
    """
    from mdmem.manager.manager import Manager

    options = options_of(ctx)
    messages = _read_messages(sys.stdin.read() if source == "-" else _read_file(source), source)
    workspace, _, user = options.stores()
    with Manager(
        workspace, user_dir=user.path, include_tools=include_tools, discover=False, resume=False
    ) as manager:
        result = manager.update_async(messages).result()
    for store_result in (result.project, result.user):
        for applied in store_result.applied:
            typer.echo(f"{applied.action:<9} {applied.level.value:<8} {applied.filename}")
        for rejected in store_result.rejected:
            typer.echo(f"rejected: {rejected.reason}", err=True)
    for rejected in result.rejected:
        typer.echo(f"rejected: {rejected.reason}", err=True)
    if not options.quiet and not (result.project.applied or result.user.applied):
        typer.echo(f"nothing worth keeping ({manager.provider.name} provider)", err=True)


def _read_file(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def _read_messages(text: str, source: str) -> list[object]:
    """Messages from a JSON array (or an object with "messages") or from JSONL."""
    stripped = text.strip()
    try:
        data = json.loads(stripped) if stripped else []
    except ValueError:
        try:
            data = [json.loads(line) for line in stripped.splitlines() if line.strip()]
        except ValueError as exc:
            raise typer.BadParameter(f"not JSON or JSONL: {exc}", param_hint=source) from None
    if isinstance(data, dict):
        data = data.get("messages", [data])
    if not isinstance(data, list) or not all(isinstance(m, dict) for m in data):
        raise typer.BadParameter("expected a list of message objects", param_hint=source)
    return list(data)


@app.command()
def demo(
    directory: Annotated[
        str | None,
        typer.Option("--dir", help="Run in this (empty) directory instead of a new temporary one."),
    ] = None,
) -> None:
    """Show the whole pipeline on the bundled example, offline: no API key, no network.

    Copies the example project store into a scratch workspace, extracts
    memory from the example turn with the offline provider, and prints what
    was remembered and the prompt block an agent would now get.

    Example: mdmem demo
    """
    from mdmem.manager import demo as demo_

    outcome = demo_.run(directory)
    typer.echo(f"Scratch workspace: {outcome.workspace}")
    typer.echo("Example turn: examples/turn.json (10 messages, with secrets in a tool result)")
    typer.echo(
        f"Secrets in the turn: {outcome.secrets}; found on disk afterwards: "
        f"{outcome.secrets_on_disk} (tool output is left out and secrets redacted before any write)"
    )
    typer.echo("Remembered by the offline provider:")
    for applied in outcome.result.project.applied + outcome.result.user.applied:
        typer.echo(f"  {applied.action} {applied.level.value}: {applied.filename}")
    typer.echo("\nThe prompt block a new session starts with:\n")
    typer.echo(outcome.block)


@app.command()
def worker(
    ctx: typer.Context,
    timeout: Annotated[float, typer.Option(help="Give up after this many seconds.")] = 900.0,
) -> None:
    """Process the turns waiting in this workspace's journal, then exit.

    The Claude Code Stop hook starts it in the background; run it by hand to
    finish turns left by a process that exited.

    Example: mdmem worker
    """
    import logging

    from mdmem.manager.manager import Manager

    options = options_of(ctx)
    if not options.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s mdmem: %(message)s")
    workspace, _, user = options.stores()
    with Manager(workspace, user_dir=user.path, discover=False) as manager:
        if not manager.flush(timeout):
            raise typer.Exit(1)


hook_app = typer.Typer(help="Claude Code hooks (they always exit 0).", no_args_is_help=True)
app.add_typer(hook_app, name="hook")


@hook_app.command("session-start")
def hook_session_start(ctx: typer.Context) -> None:
    """Print the memory block as SessionStart additionalContext (JSON on stdout).

    Reads the hook's JSON from stdin; the workspace is its "cwd".

    Example: echo '{"cwd": "."}' | mdmem hook session-start
    """
    from mdmem.integrations.claude_code import read_hook_input, session_start

    options = options_of(ctx)
    try:
        typer.echo(session_start(read_hook_input(), options.workspace, options.user_dir))
    except Exception as exc:  # a memory problem must never break a session
        typer.echo(f"mdmem: {exc}", err=True)
        typer.echo(json.dumps({}))


@hook_app.command("stop")
def hook_stop(ctx: typer.Context) -> None:
    """Hand the finished turn to mdmem: journal it, extract in the background.

    Reads session_id, transcript_path and cwd from stdin, takes the messages
    after the last one already handed over, and returns at once.

    Example: mdmem hook stop < stop-hook-input.json
    """
    from mdmem.integrations.claude_code import hand_over, log_to_file, read_hook_input
    from mdmem.store._catalog import ensure_state_dir

    options = options_of(ctx)
    payload = read_hook_input()
    try:
        _, project, _ = options.stores()
        log_to_file(ensure_state_dir(project.path))
        hand_over(payload, options.workspace, options.user_dir)
    except Exception as exc:  # never block the stop: log, and exit 0
        import logging

        logging.getLogger("mdmem").error("hook stop failed: %s", exc)
        typer.echo(f"mdmem: hook stop: {exc}", err=True)


ScopeOption = Annotated[
    bool,
    typer.Option(
        "--project/--user",
        help="The workspace's .claude/settings.json, or ~/.claude/settings.json.",
    ),
]
CommandOption = Annotated[
    str, typer.Option("--command", help="How Claude Code runs mdmem (must be on its PATH).")
]

install_app = typer.Typer(help="Set mdmem up in an agent.", no_args_is_help=True)
app.add_typer(install_app, name="install")
uninstall_app = typer.Typer(help="Remove what `mdmem install` set up.", no_args_is_help=True)
app.add_typer(uninstall_app, name="uninstall")


@install_app.command("claude-code")
def install_claude_code(
    ctx: typer.Context, project: ScopeOption = True, command: CommandOption = "mdmem"
) -> None:
    """Add mdmem's SessionStart and Stop hooks to Claude Code's settings.

    Hooks already there are kept; running it twice changes nothing.

    Example: mdmem install claude-code --user
    """
    from mdmem.integrations.claude_code import install, settings_path

    workspace, _, _ = options_of(ctx).stores()
    path = settings_path("project" if project else "user", workspace)
    changed = install(path, command=command)
    typer.echo(f"{'installed in' if changed else 'already installed in'} {path}")


@uninstall_app.command("claude-code")
def uninstall_claude_code(
    ctx: typer.Context, project: ScopeOption = True, command: CommandOption = "mdmem"
) -> None:
    """Remove mdmem's hooks from Claude Code's settings, and nothing else.

    Example: mdmem uninstall claude-code --user
    """
    from mdmem.integrations.claude_code import settings_path, uninstall

    workspace, _, _ = options_of(ctx).stores()
    path = settings_path("project" if project else "user", workspace)
    changed = uninstall(path, command=command)
    typer.echo(f"{'removed from' if changed else 'not installed in'} {path}")


@app.command()
def mcp(ctx: typer.Context) -> None:
    """Serve both stores to an MCP client over stdio (needs `pip install 'mdmem[mcp]'`).

    Example: claude mcp add mdmem -- mdmem mcp
    """
    options = options_of(ctx)
    try:
        from mdmem.integrations.mcp import serve
    except ImportError as exc:
        typer.echo(f"mdmem: error: {exc}", err=True)
        raise typer.Exit(1) from None
    serve(options.workspace, options.user_dir)
