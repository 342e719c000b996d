"""What agents and their hooks run: extract, demo, worker, hook, install, uninstall, mcp."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from mdmem._kinds import Level
from mdmem.cli._base import app, options_of, progress_bar

if TYPE_CHECKING:
    from mdmem.manager.demo import DemoResult


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
    list of Anthropic content blocks. The provider is the one `mdmem doctor`
    names (MDMEM_PROVIDER, else an API key, else the Claude Code login, else
    offline).

    Example: mdmem extract turn.json
    """
    import logging

    from mdmem.manager.manager import Manager

    options = options_of(ctx)
    messages = _read_messages(sys.stdin.read() if source == "-" else _read_file(source), source)
    workspace, _, user = options.stores()
    if not options.verbose:
        # The error reaches the user once, as the CLI's own line, not also as a log record.
        logging.getLogger("mdmem").addHandler(logging.NullHandler())
    with Manager(
        workspace, user_dir=user.path, include_tools=include_tools, discover=False, resume=False
    ) as manager:
        try:
            result = manager.update_async(messages).result()
        except TypeError as exc:
            raise typer.BadParameter(str(exc), param_hint=source) from None
    for store_result in (result.project, result.user):
        for applied in store_result.applied:
            typer.echo(f"{applied.action:<9} {applied.level.value:<8} {applied.filename}")
        for rejected in store_result.rejected:
            typer.echo(f"rejected: {rejected.reason}", err=True)
    for rejected in result.rejected:
        typer.echo(f"rejected: {rejected.reason}", err=True)
    for proposal in result.proposals:
        typer.echo(f"proposed  {proposal}  (for review: mdmem review accept {proposal})")
    if result.held and not options.quiet:
        typer.echo("held: the daily token budget is spent; the turn waits in the journal", err=True)
    elif not options.quiet and not (
        result.project.applied or result.user.applied or result.proposals
    ):
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
        typer.Option(
            "--dir",
            help="Run in this (empty) directory, and keep it, instead of a temporary one "
            "removed afterwards.",
        ),
    ] = None,
) -> None:
    """Show the whole pipeline on the bundled example, offline: no API key, no network.

    Copies the example project store into a scratch workspace, extracts
    memory from the example turn with the offline provider, and prints what
    was remembered and the prompt block an agent would now get. The temporary
    workspace and mdmem's state for it are removed at the end; --dir keeps them.

    Example: mdmem demo
    """
    from mdmem.manager import demo as demo_

    outcome = demo_.run(directory)
    try:
        _show_demo(outcome, kept=directory is not None)
    finally:
        if directory is None:
            demo_.remove(outcome)


def _show_demo(outcome: DemoResult, *, kept: bool) -> None:
    kept_note = "" if kept else " (removed afterwards; --dir DIR keeps one)"
    typer.echo(f"Scratch workspace: {outcome.workspace}{kept_note}")
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
    finish turns left by a process that exited. With a model, it then
    summarises the sessions that ended (within the daily token budget).

    Example: mdmem worker
    """
    import logging

    from mdmem.manager.manager import Manager

    options = options_of(ctx)
    if not options.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s mdmem: %(message)s")
    from mdmem.store import watch

    workspace, project, user = options.stores()
    # A worker may run for minutes: its turns' lookups see hand edits through a watch.
    watch.start([project.path, user.path])
    with Manager(workspace, user_dir=user.path, discover=False) as manager:
        if not manager.flush(timeout):
            raise typer.Exit(1)
        manager.summarise_sessions()  # sessions that ended, by the model, within the budget


hook_app = typer.Typer(help="Claude Code hooks (they always exit 0).", no_args_is_help=True)
app.add_typer(hook_app, name="hook")


@hook_app.callback()
def _hooks(ctx: typer.Context) -> None:
    # MDMEM_NESTED: this process runs inside a model call mdmem itself started
    # (the claude-code provider's `claude -p`); a hook here would recurse.
    from mdmem.integrations.session_control import disabled_by_env

    if os.environ.get("MDMEM_NESTED") or disabled_by_env():  # MDMEM_DISABLE: do nothing
        raise typer.Exit(0)


@hook_app.command("session-start")
def hook_session_start(ctx: typer.Context) -> None:
    """Print the memory block as SessionStart additionalContext (JSON on stdout).

    Reads the hook's JSON from stdin; the workspace is $CLAUDE_PROJECT_DIR, else
    its "cwd". MDMEM_SESSION_BUDGET caps the block (characters); MDMEM_DISABLE=1,
    or a session paused with `mdmem pause`, prints nothing.

    Example: echo '{"cwd": "."}' | mdmem hook session-start
    """
    from mdmem.cli._fastpath import say_refusal
    from mdmem.integrations.claude_code import read_hook_input, session_start, workspace_of

    options = options_of(ctx)
    try:
        payload = read_hook_input()
        out = session_start(payload, options.workspace, options.user_dir)
        if out:  # nothing when the session is paused
            typer.echo(out)
            say_refusal(options.workspace, options.user_dir, workspace_of(payload))
    except Exception as exc:  # a memory problem must never break a session
        typer.echo(f"mdmem: {exc}", err=True)
        typer.echo(json.dumps({}))


def _hand_over_hook(ctx: typer.Context, event: str) -> None:
    """Journal the session's messages not handed over yet and start a worker; print nothing.

    The fast path (``_fastpath``) answers these commands without typer; this is
    the same work, for a command line it does not recognise.
    """
    from mdmem.cli._fastpath import say_refusal
    from mdmem.integrations.claude_code import handover_hook, read_hook_input, workspace_of

    options = options_of(ctx)
    payload = read_hook_input()
    say_refusal(options.workspace, options.user_dir, workspace_of(payload))
    try:
        handover_hook(event, payload, options.workspace, options.user_dir)
    except ValueError as exc:  # never block the session: it is logged; exit 0
        typer.echo(f"mdmem: hook {event}: {exc}", err=True)


@hook_app.command("user-prompt-submit")
def hook_user_prompt_submit(ctx: typer.Context) -> None:
    """Print the notes relevant to the prompt as UserPromptSubmit additionalContext (JSON).

    Reads the hook's JSON from stdin; the workspace is $CLAUDE_PROJECT_DIR, else
    its "cwd". Prints nothing when no note is relevant or all were shown already.

    Example: echo '{"prompt": "how do we deploy?", "cwd": "."}' | mdmem hook user-prompt-submit
    """
    from mdmem.integrations.prompt_recall import read_input, user_prompt_submit

    options = options_of(ctx)
    try:
        out = user_prompt_submit(read_input(), options.workspace, options.user_dir)
    except Exception as exc:  # a memory problem must never break a session
        typer.echo(f"mdmem: {exc}", err=True)
        return
    if out:
        typer.echo(out)


@hook_app.command("stop")
def hook_stop(ctx: typer.Context) -> None:
    """Hand the finished turn to mdmem: journal it, extract in the background.

    Reads transcript_path and cwd from stdin, takes the messages not handed
    over yet (by message uuid, so a resumed or forked session repeats none),
    and returns at once, printing nothing (a Stop hook's output would make
    Claude go on).

    Example: mdmem hook stop < stop-hook-input.json
    """
    _hand_over_hook(ctx, "stop")


@hook_app.command("pre-compact")
def hook_pre_compact(ctx: typer.Context) -> None:
    """Hand over what the session said before Claude Code compacts it (as Stop does).

    Example: mdmem hook pre-compact < pre-compact-input.json
    """
    _hand_over_hook(ctx, "pre-compact")


@hook_app.command("session-end")
def hook_session_end(ctx: typer.Context) -> None:
    """Hand over the last messages when the session ends, even an interrupted turn.

    Claude Code gives SessionEnd hooks about 1.5 s: this journals and returns;
    the extraction runs in a detached worker.

    Example: mdmem hook session-end < session-end-input.json
    """
    _hand_over_hook(ctx, "session-end")


SessionArgument = Annotated[
    str,
    typer.Argument(metavar="SESSION_ID", help="Claude Code's session id (the hooks' session_id)."),
]


@app.command()
def pause(session: SessionArgument) -> None:
    """Pause mdmem's Claude Code hooks for one session: nothing injected, nothing handed over.

    The plugin's /mdmem:pause runs it for the current session. The marker is
    kept in mdmem's private state; `mdmem resume` removes it. To switch every
    hook off instead, set MDMEM_DISABLE=1.

    Example: mdmem pause 0f6c2a1e-8d2b-4c55-9a57-3b1f2e4d5c6a
    """
    from mdmem.integrations.session_control import pause as pause_

    try:
        changed = pause_(session)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="SESSION_ID") from None
    typer.echo(f"mdmem is {'now' if changed else 'already'} paused for session {session}")


@app.command()
def resume(session: SessionArgument) -> None:
    """Let mdmem's hooks work again for a session paused with `mdmem pause`.

    What the session said while paused is never handed over, not even now:
    the paused hooks marked those messages as seen.

    Example: mdmem resume 0f6c2a1e-8d2b-4c55-9a57-3b1f2e4d5c6a
    """
    from mdmem.integrations.session_control import resume as resume_

    try:
        changed = resume_(session)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="SESSION_ID") from None
    typer.echo(
        f"mdmem is on again for session {session}"
        if changed
        else f"session {session} was not paused"
    )


def _scope(project: bool, local: bool, user: bool) -> str | None:
    chosen = [name for name, on in (("project", project), ("local", local), ("user", user)) if on]
    if len(chosen) > 1:
        raise typer.BadParameter("give one of --project, --local, --user")
    return chosen[0] if chosen else None


ProjectFlag = Annotated[
    bool,
    typer.Option(
        "--project", help="The repository's committed .claude/settings.json (shared with the team)."
    ),
]
LocalFlag = Annotated[
    bool,
    typer.Option(
        "--local", help="The repository's .claude/settings.local.json (this clone; the default)."
    ),
]
UserFlag = Annotated[
    bool, typer.Option("--user", help="~/.claude/settings.json (every project of yours).")
]
CommandOption = Annotated[
    str | None,
    typer.Option(
        "--command",
        help=(
            "How Claude Code runs mdmem (default: this mdmem's interpreter and entry point,"
            " by absolute path)."
        ),
    ),
]

install_app = typer.Typer(help="Set mdmem up in an agent.", no_args_is_help=True)
app.add_typer(install_app, name="install")
uninstall_app = typer.Typer(help="Remove what `mdmem install` set up.", no_args_is_help=True)
app.add_typer(uninstall_app, name="uninstall")
import_app = typer.Typer(help="Bring another memory's notes into mdmem.", no_args_is_help=True)
app.add_typer(import_app, name="import")


def _warn_plugin(workspace: str) -> None:
    from mdmem.integrations.claude_code_settings import plugin_enabled

    for other in plugin_enabled(workspace):
        typer.echo(
            f"warning: the mdmem Claude Code plugin is enabled in {other}: its hooks and these "
            "would both run (every turn handed over twice); keep one of them.",
            err=True,
        )


def _report_check(path: str, workspace: str, scope: str, command: str | None) -> bool:
    from mdmem.integrations.claude_code_settings import HOOKS, check

    results = check(path, workspace, command=command)
    for result in results:
        if not result.ran:
            continue
        status = f"ok ({result.seconds:.2f} s)" if result.ok else f"FAILED: {result.problem}"
        typer.echo(f"{result.event:<17} {status}")
        if result.ok and result.event == "SessionEnd" and result.seconds > 1.5:
            typer.echo(
                "warning: Claude Code gives SessionEnd hooks about 1.5 s unless a settings "
                "file raises it (mdmem's hook sets a 5 s timeout, which does)",
                err=True,
            )
    foreign = [r.event for r in results if not r.ran]
    if foreign:
        # One line: these commands were not run, a cloned repository may have put them there.
        typer.echo(
            f"not run: {', '.join(foreign)} (not a command mdmem writes; "
            f"`mdmem install claude-code --{scope}` replaces them)",
            err=True,
        )
    missing = [event for event in HOOKS if event not in {r.event for r in results}]
    if missing:
        typer.echo(f"not installed in {path}: {', '.join(missing)}", err=True)
    return bool(results) and not missing and all(r.ok for r in results)


@install_app.command("claude-code")
def install_claude_code(
    ctx: typer.Context,
    project: ProjectFlag = False,
    local: LocalFlag = False,
    user: UserFlag = False,
    command: CommandOption = None,
    check_only: Annotated[
        bool,
        typer.Option("--check", help="Change nothing: run the installed hooks and report."),
    ] = False,
    init: Annotated[
        bool | None,
        typer.Option(
            "--init/--no-init",
            help="Also set the project store up for git, as `mdmem init` does "
            "(default: yes, except with --user).",
        ),
    ] = None,
    use_login: Annotated[
        bool | None,
        typer.Option(
            "--use-login/--no-use-login",
            help="Extract with your Claude Code login (`claude -p`, on your subscription) when "
            "no API key is set; recorded once for every workspace. --no-use-login withdraws it.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Add mdmem's hooks to Claude Code's settings (five events, this mdmem's path).

    The hooks are SessionStart, UserPromptSubmit, Stop, PreCompact and
    SessionEnd; they run this mdmem by its absolute path, so they work
    whatever PATH Claude Code has. Other hooks are kept; running it twice changes nothing.
    It also runs `mdmem init` for the workspace (the project store, its
    .gitattributes and the git merge driver), so the first turn lands in a
    store a team can merge; --no-init leaves that out. --check runs each
    installed hook with a sample input and reports; it runs only the commands
    mdmem itself writes (give --command if you installed with one).
    Without an API key, extraction is offline until you choose --use-login (asked
    once on a terminal when claude is installed; --no-use-login answers no).
    With the dictionary extra, it also builds CC-CEDICT's file (a few seconds, once).

    Example: mdmem install claude-code --local --use-login
    """
    import shlex
    import shutil

    from mdmem.integrations import claude_code_settings as settings

    workspace, _, _ = options_of(ctx).stores()
    scope = _scope(project, local, user) or "local"
    path = settings.settings_path(scope, workspace)
    if check_only:
        typer.echo(f"checking {path}")
        _warn_plugin(workspace)
        if not _report_check(path, workspace, scope, command):
            raise typer.Exit(1)
        return
    if command is not None:
        first = shlex.split(command)[0] if command.strip() else ""
        if not first or shutil.which(first) is None:
            typer.echo(f"mdmem: error: --command {command!r}: {first!r} is not found", err=True)
            raise typer.Exit(2)
    if command is None and scope == "project":
        # A committed file must not name this machine's interpreter: teammates
        # run the mdmem on their own PATH, or are told in one line that it is missing.
        command = settings.SHARED_COMMAND
    existed = os.path.exists(path)
    changed = settings.install(path, command)
    typer.echo(f"{'installed in' if changed else 'already installed in'} {path}")
    if scope == "local" and not existed:
        ignore = settings.ensure_ignored(path, workspace)
        if ignore:
            typer.echo(f"added {os.path.relpath(path, workspace)} to {ignore}")
    if scope == "project":
        typer.echo(
            "warning: .claude/settings.json is shared: the hooks run `mdmem` from each "
            "teammate's PATH, and fail for anyone without it; --local keeps them to this "
            "clone, and the mdmem plugin finds mdmem or says it is missing.",
            err=True,
        )
        if command == settings.SHARED_COMMAND and shutil.which("mdmem") is None:
            typer.echo("warning: `mdmem` is not on this PATH either.", err=True)
    _warn_plugin(workspace)
    if init if init is not None else scope != "user":
        _init_project(ctx)
    _build_dictionary()
    _login_choice(
        use_login,
        interactive=sys.stdin.isatty() and sys.stdout.isatty() and not options_of(ctx).quiet,
    )
    if not options_of(ctx).quiet:
        typer.echo(f"check it with: mdmem install claude-code --{scope} --check")


def _init_project(ctx: typer.Context) -> None:
    """``mdmem init`` for the workspace; a store that cannot be set up is a warning here."""
    from mdmem.errors import StoreError
    from mdmem.store.merge import init_store

    workspace, project, _ = options_of(ctx).stores()
    try:
        report = init_store(project, workspace)
    except (StoreError, OSError) as exc:
        typer.echo(f"warning: the project store was not set up: {exc}", err=True)
        return
    for change in report.changes:
        typer.echo(f"init: {change}")
    for note in report.notes:
        typer.echo(f"mdmem: {note}", err=True)


def _build_dictionary() -> None:
    """The dictionary extra's file, now rather than at the first session (a few seconds, once)."""
    from mdmem.manager.doctor import dictionary_findings
    from mdmem.store import cedict

    if cedict.problem() is None:  # ready, or no dictionary to use
        return
    _, fixed, failed = dictionary_findings(fix=True)
    for line in fixed:
        typer.echo(f"{line} (English <-> Chinese recall, once per user)")
    for line in failed:
        typer.echo(f"warning: {line}; recall uses the small glossary until it is built", err=True)


def _login_choice(use_login: bool | None, *, interactive: bool) -> None:
    """Record the --use-login choice (asked once on a terminal), and say what will extract."""
    from mdmem.extract.providers import (
        choose,
        claude_installed,
        login_decided,
        set_login_choice,
    )

    if (
        use_login is None
        and interactive
        and not login_decided()
        and choose()[0] == "offline"
        and claude_installed()
    ):
        use_login = typer.confirm(
            "No API key is set. Extract notes with your Claude Code login (one `claude -p` "
            "per turn, on your subscription)?",
            default=False,
        )
    if use_login is not None:
        path = set_login_choice(use_login)
        if use_login:
            typer.echo(
                "extraction will use your Claude Code login when no API key is set "
                f"(`claude -p` on your subscription; recorded in {path}; undo: --no-use-login)"
            )
        else:
            typer.echo("extraction will not use your Claude Code login")
    name, reason = choose()
    typer.echo(f"extraction provider: {name} ({reason})")


@uninstall_app.command("claude-code")
def uninstall_claude_code(
    ctx: typer.Context,
    project: ProjectFlag = False,
    local: LocalFlag = False,
    user: UserFlag = False,
) -> None:
    """Remove mdmem's hooks from Claude Code's settings, and nothing else.

    Without a scope, from every scope that has them.

    Example: mdmem uninstall claude-code
    """
    from mdmem.integrations import claude_code_settings as settings

    workspace, _, _ = options_of(ctx).stores()
    chosen = _scope(project, local, user)
    scopes = [chosen] if chosen else list(settings.SCOPES)
    for scope in scopes:
        path = settings.settings_path(scope, workspace)
        if settings.uninstall(path):
            typer.echo(f"removed from {path}")
        elif chosen:
            typer.echo(f"not installed in {path}")


@import_app.command("claude-code")
def import_claude_code(
    ctx: typer.Context,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Show what would be imported; write nothing.")
    ] = False,
    claude_dir: Annotated[
        str | None, typer.Option("--claude-dir", help="Claude Code's folder (default: ~/.claude).")
    ] = None,
    claude_md: Annotated[
        bool,
        typer.Option("--claude-md", help="Also offer each '## ' section of CLAUDE.md as a note."),
    ] = False,
) -> None:
    """Import Claude Code's auto-memory notes of this workspace as mdmem notes.

    Types map user/feedback/project/reference onto user_preference (user
    store), correction_feedback, project_knowledge, reference_material;
    notes whose text is already stored are skipped; secrets are redacted.

    Example: mdmem import claude-code --dry-run
    """
    from mdmem.integrations.claude_code_import import auto_memory_dir, candidates, import_notes

    workspace, project, user = options_of(ctx).stores()
    stores = {Level.PROJECT: project, Level.USER: user}
    found = candidates(workspace, stores, claude_dir=claude_dir, claude_md=claude_md)
    if not found:
        typer.echo(f"nothing to import from {auto_memory_dir(workspace, claude_dir)}", err=True)
        return
    done = found if dry_run else import_notes(found, stores)
    for item in done:
        outcome = f"would {item.outcome}" if dry_run and item.outcome == "import" else item.outcome
        typer.echo(f"{item.level.value:<8} {item.type.value:<20} {item.title}: {outcome}")


@import_app.command("notes")
def import_notes_command(
    ctx: typer.Context,
    source: Annotated[
        str,
        typer.Argument(
            metavar="SOURCE",
            help="A JSON Lines file (one note a line), '-' for stdin, or a folder of .md files.",
        ),
    ],
    level: Annotated[
        Level, typer.Option("--level", help="The store of notes that name no level.")
    ] = Level.PROJECT,
    batch: Annotated[int, typer.Option(min=1, help="Notes written per batch.")] = 500,
) -> None:
    """Import many notes at once, a batch at a time, with a progress bar on a terminal.

    Each JSON line is {"title": ..., "content": ..., "type": ..., "summary": ...,
    "level": ...} (type, summary and level optional); a Markdown file is an mdmem
    note or plain Markdown titled by its first '# ' heading. Every note is
    redacted and deduplicated as any write; lines that cannot be read are listed
    on stderr (exit status 1) and the others imported.

    Example: mdmem import notes notes.jsonl
    """
    from mdmem.manager.bulk import import_items, read_source

    options = options_of(ctx)
    _, project, user = options.stores()
    items = read_source(source, sys.stdin.read)
    with progress_bar(options, "importing") as progress:
        report = import_items(
            {Level.PROJECT: project, Level.USER: user},
            items,
            level=level,
            batch=batch,
            progress=progress,
        )
    for where, reason in report.refused:
        typer.echo(f"mdmem: {where}: {reason}", err=True)
    typer.echo(
        f"imported {report.created} notes; {report.unchanged} already there, "
        f"{report.updated} near-duplicates updated, {len(report.refused)} refused"
    )
    if report.refused:
        raise typer.Exit(1)


@app.command()
def mcp(
    ctx: typer.Context,
    check: Annotated[
        bool,
        typer.Option("--check", help="Only say whether the server can start here, and exit."),
    ] = False,
) -> None:
    """Serve both stores to an MCP client over stdio (needs mdmem's `mcp` extra).

    Install mdmem with it (or add it to an installed mdmem: pipx inject mdmem
    'mcp>=2.3,<3'):

    pipx install 'mdmem[mcp,dictionary] @ git+<repository URL>'

    Example: claude mcp add mdmem -- mdmem mcp
    """
    options = options_of(ctx)
    try:
        from mdmem.integrations.mcp import serve
    except ImportError as exc:
        from mdmem._install import INSTALL_HINT

        typer.echo(f"mdmem: error: {exc}; install mdmem with it: {INSTALL_HINT}", err=True)
        raise typer.Exit(1) from None
    if check:
        from mdmem.integrations.session_control import DISABLE_ENV, disabled_by_env

        _, project, user = options.stores()
        typer.echo("mcp server: can start (the mcp extra is installed)")
        typer.echo(f"project store: {project.path}")
        typer.echo(f"user store: {user.path}")
        if disabled_by_env():
            typer.echo(f"hooks: off ({DISABLE_ENV} is set)")
        return
    serve(options.workspace, options.user_dir)
