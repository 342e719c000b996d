"""The ``mdmem`` command line: a thin layer over the public API.

Each command parses its arguments, calls the library, and echoes the result.
Errors become one line on stderr: exit status 1 for an operational error, 2
for a usage error; a traceback only with ``-v``.

Layout: the group and its error handling, the global options, helpers shared
by several commands (finding a note, the editor), then the commands, one
after another; a new command is appended at the end of that section.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from mdmem._fastpath import index_text, resolve
from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidNote, MdmemError, NoteNotFound

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from typer._click._termui_impl import ProgressBar

    from mdmem.results import ApplyResult
    from mdmem.store import Store

__all__ = ["app", "run"]

_T = TypeVar("_T")


class _Group(TyperGroup):
    """Turns errors into one line on stderr: exit status 1 for mdmem's, 2 for usage errors."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except BrokenPipeError:
            raise  # `mdmem list | head`: typer exits quietly
        except (MdmemError, OSError) as exc:
            options = ctx.obj if isinstance(ctx.obj, Options) else None
            if options is not None and options.verbose:
                import traceback

                traceback.print_exc()
            typer.echo(f"mdmem: error: {exc}", err=True)
            raise typer.Exit(1) from None

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        forward = (args, prog_name, complete_var, False, windows_expand_args)
        if not standalone_mode:
            return super().main(*forward, **extra)
        try:
            # Not standalone, so that usage errors come here and become one line.
            status = super().main(*forward, **extra)
        except typer.Abort:
            typer.echo("mdmem: aborted", err=True)
            sys.exit(1)
        except typer.TyperException as exc:  # click's usage errors, as vendored by typer
            message = exc.format_message()
            context = getattr(exc, "ctx", None)
            if "\n" in message:  # `mdmem` alone: the "error" is the help text
                typer.echo(message, err=True)
            elif context is not None:
                hint = f"{context.command_path} {context.help_option_names[0]}"
                typer.echo(f"mdmem: error: {message} (see '{hint}')", err=True)
            else:
                typer.echo(f"mdmem: error: {message}", err=True)
            sys.exit(getattr(exc, "exit_code", 2))
        sys.exit(status if isinstance(status, int) else 0)


app = typer.Typer(
    cls=_Group,
    help="Long-term memory for coding agents, kept as Markdown notes.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


@dataclass
class Options:
    """The global options, shared by every command."""

    workspace: str | None
    user_dir: str | None
    quiet: bool
    verbose: bool

    def stores(self) -> tuple[str, Store, Store]:
        """The workspace, the project store and the user store."""
        return resolve(self.workspace, self.user_dir)


@app.callback()
def _global(
    ctx: typer.Context,
    workspace: Annotated[
        str | None,
        typer.Option(
            envvar="MDMEM_WORKSPACE",
            help="The workspace (default: the nearest ancestor with .PseudoClaude/ or .git).",
        ),
    ] = None,
    user_dir: Annotated[
        str | None,
        typer.Option(
            envvar="MDMEM_USER_DIR", help="The user store (default: ~/.PseudoClaude/memory)."
        ),
    ] = None,
    quiet: Annotated[
        bool,
        typer.Option("--quiet", "-q", envvar="MDMEM_QUIET", help="Print only what was asked for."),
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            envvar="MDMEM_VERBOSE",
            help="Log details, and show tracebacks on errors.",
        ),
    ] = False,
) -> None:
    """mdmem keeps what a coding agent learns as Markdown notes you can read, edit and commit."""
    ctx.obj = Options(workspace, user_dir, quiet, verbose)
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="mdmem: %(levelname)s: %(message)s")


def _options(ctx: typer.Context) -> Options:
    assert isinstance(ctx.obj, Options)
    return ctx.obj


def _selected(options: Options, level: Which) -> list[Store]:
    _, project, user = options.stores()
    return [s for s in (project, user) if level.value in ("all", s.level.value)]


class Which(str, Enum):
    """Which store(s) a command looks at."""

    all = "all"
    project = "project"
    user = "user"


def _complete_note(ctx: typer.Context, incomplete: str) -> list[str]:
    """Shell completion of note names, from both stores."""
    params = ctx.find_root().params
    _, project, user = resolve(params.get("workspace"), params.get("user_dir"))
    names = {e.filename for store in (project, user) for e in store.entries()}
    return sorted(n for n in names if n.startswith(incomplete))


LevelOption = Annotated[Which, typer.Option("--level", help="Which store(s).")]
FindOption = Annotated[
    Which, typer.Option("--level", help="Which store (default: project, then user).")
]
StoreOption = Annotated[Level, typer.Option("--level", help="Which store.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]
NameArgument = Annotated[
    str, typer.Argument(metavar="NAME", help="The note's file name.", autocompletion=_complete_note)
]


# -- helpers shared by commands --------------------------------------------------------


def _find(options: Options, name: str, level: Which) -> Store:
    """The store holding note ``name``: the one ``--level`` names, else project, then user.

    Raises:
        InvalidPath: not a note name.
        NoteNotFound: no store holds it.
    """
    stores = _selected(options, level)
    for store in stores:
        if store.exists(name):
            return store
    raise NoteNotFound(name, " or ".join(s.path for s in stores))


def _checked(result: ApplyResult, label: str) -> str:
    """The file name an applied operation touched; a rejected one becomes an InvalidNote."""
    if result.rejected:
        raise InvalidNote(label, result.rejected[0].reason)
    return result.applied[0].filename


def _interactive() -> bool:
    return sys.stdin.isatty()


def _editor(text: str, filename: str) -> tuple[int, str]:
    """Open ``text`` in ``$VISUAL``/``$EDITOR`` (else vi) as ``filename``; (status, text after)."""
    import shlex
    import subprocess
    import tempfile

    command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "") or ["vi"]
    with tempfile.TemporaryDirectory(prefix="mdmem-") as folder:
        path = os.path.join(folder, filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            status = subprocess.run([*command, path], check=False).returncode
        except OSError as exc:
            raise OSError(
                f"cannot run the editor {command[0]!r} ({exc.strerror}); set $VISUAL or $EDITOR"
            ) from None
        with open(path, encoding="utf-8", errors="replace") as f:
            return status, f.read()


def _ask() -> str:
    while True:
        answer = str(
            typer.prompt("[e]dit again, [k]eep the text aside, or [a]bort?", "e", err=True)
        )
        if answer.strip()[:1].lower() in ("e", "k", "a"):
            return answer.strip()[:1].lower()


def _edit_until_saved(
    store: Store, filename: str, text: str, save: Callable[[str], _T]
) -> _T | None:
    """Edit ``text`` until ``save`` accepts it; None when left unchanged. Never loses typed text.

    When ``save`` finds the text invalid, say why and ask: edit again, keep the
    text aside under ``.mdmem/rescued/``, or abort. Without a terminal to ask
    on, or when saving fails otherwise, the text is kept aside.
    """
    from mdmem.doctor import rescue

    original = text
    while True:
        status, text = _editor(text, filename)
        if status != 0 or text == original:
            if text != original:
                typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            if status != 0:
                typer.echo(f"mdmem: error: the editor exited with status {status}", err=True)
                raise typer.Exit(1)
            return None
        try:
            return save(text)
        except InvalidNote as exc:
            typer.echo(f"mdmem: {exc}", err=True)
            choice = _ask() if _interactive() else "k"
            if choice == "e":
                continue
            if choice == "k":
                typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            typer.echo("mdmem: nothing was saved", err=True)
            raise typer.Exit(1) from None
        except MdmemError:
            typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            raise


@contextlib.contextmanager
def _progress(options: Options, label: str) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr, for long work on a terminal; else None."""
    if options.quiet or not sys.stderr.isatty():
        yield None
        return
    with contextlib.ExitStack() as stack:
        bars: list[ProgressBar[int]] = []

        def update(done: int, total: int) -> None:
            if not bars and total >= _PROGRESS_MIN_ITEMS:
                bar = typer.progressbar(length=total, label=label, file=sys.stderr)
                bars.append(stack.enter_context(bar))
            # Redraw about a hundred times, whatever the number of notes.
            if bars and (done == total or done - bars[0].pos >= max(1, total // 100)):
                bars[0].update(done - bars[0].pos)

        yield update


_PROGRESS_MIN_ITEMS = 200
_DEFAULT_TYPE = {Level.PROJECT: NoteType.PROJECT_KNOWLEDGE, Level.USER: NoteType.USER_PREFERENCE}
_TEMPLATE = """\
---
# A new {level} note. Fill in the title (the summary may stay empty: the first
# sentence is used), write the note below the closing '---', save and quit.
# Leave the file as it is to add nothing.
type: {type}
title: {title}
summary: {summary}
---

"""


def _template(level: Level, kind: NoteType, title: str | None, summary: str | None) -> str:
    """What `mdmem add` opens in the editor; JSON strings are valid YAML scalars."""
    return _TEMPLATE.format(
        level=level.value,
        type=kind.value,
        title=json.dumps(title, ensure_ascii=False) if title else "",
        summary=json.dumps(summary, ensure_ascii=False) if summary else "",
    )


def _create(store: Store, kind: NoteType, title: str, summary: str, body: str) -> str:
    """Create a note through the store; its file name. A rejected one is an InvalidNote."""
    op = {"action": "create", "level": store.level.value, "type": kind.value, "title": title}
    return _checked(store.apply([{**op, "summary": summary, "content": body}]), "new note")


# -- commands --------------------------------------------------------------------------
# Each is a few lines: parse arguments -> call the public API -> echo. New ones go last.


@app.command()
def init(
    ctx: typer.Context,
    driver_command: Annotated[
        str | None,
        typer.Option(
            help="The merge driver's command, before '%O %A %B' (default: mdmem merge-index).",
        ),
    ] = None,
) -> None:
    """Set up the project store for sharing through git.

    Creates the store with an empty MEMORY.md, .gitignore (.mdmem/) and
    .gitattributes (MEMORY.md merge=mdmem-index), and, inside a git work tree,
    the merge driver in the repository's git config. Run it once in every
    clone: git config is not committed. Safe to run again.

    Example: mdmem init --driver-command "python3 -m mdmem merge-index"
    """
    from mdmem.merge import init_store

    options = _options(ctx)
    workspace, project, _ = options.stores()
    report = init_store(project, workspace, driver_command)
    for change in report.changes:
        typer.echo(change)
    for note in report.notes:
        typer.echo(f"mdmem: {note}", err=True)
    if not report.changes and not options.quiet:
        typer.echo(f"{project.path} is already set up")


@app.command()
def index(ctx: typer.Context, level: LevelOption = Which.all, as_json: JsonOption = False) -> None:
    """Print the memory block an agent gets in its system prompt.

    Example: mdmem index --level project
    """
    options = _options(ctx)
    text = index_text(options.workspace, options.user_dir, level.value, as_json)
    if text:
        typer.echo(text)


@app.command("list")
def list_(
    ctx: typer.Context,
    level: LevelOption = Which.all,
    note_type: Annotated[
        NoteType | None, typer.Option("--type", help="Only notes of this type.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List notes: level, type, file name and title.

    Example: mdmem list --level user --type user_preference --json
    """
    rows = [
        {"level": store.level.value, **vars(entry)}
        for store in _selected(_options(ctx), level)
        for entry in store.entries()
        if note_type is None or entry.type == note_type.value
    ]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    width = max((len(str(row["filename"])) for row in rows), default=0)
    for row in rows:
        name = str(row["filename"])
        typer.echo(f"{row['level']:<8} {row['type']:<20} {name:<{width}}  {row['title']}")


@app.command()
def show(
    ctx: typer.Context,
    name: NameArgument,
    level: FindOption = Which.all,
    as_json: JsonOption = False,
) -> None:
    """Print a note: its front matter and body.

    Example: mdmem show project_knowledge_build-and-test.md
    """
    from mdmem.note import format_time, render

    store = _find(_options(ctx), name, level)
    note = store.read(name)
    if not as_json:
        typer.echo(render(note), nl=False)
        return
    data = {
        "level": store.level.value,
        "path": os.path.join(store.path, name),
        **vars(note),
        "type": note.type.value,
        "created": format_time(note.created) if note.created else None,
        "updated": format_time(note.updated) if note.updated else None,
    }
    typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


@app.command()
def add(
    ctx: typer.Context,
    body: Annotated[
        str | None,
        typer.Argument(
            metavar="TEXT", help="The note's text; '-' reads stdin; none opens $EDITOR."
        ),
    ] = None,
    level: StoreOption = Level.PROJECT,
    note_type: Annotated[
        NoteType | None,
        typer.Option(
            "--type",
            help="What the note means (default: project_knowledge, user_preference for user).",
        ),
    ] = None,
    title: Annotated[str | None, typer.Option(help="Required with a text.")] = None,
    summary: Annotated[
        str | None, typer.Option(help="One line for MEMORY.md (default: the first sentence).")
    ] = None,
) -> None:
    """Add a note; print its file name.

    Without a text, the note is written in $VISUAL or $EDITOR from a template.

    Example: mdmem add --title "Build" "Run make test before pushing."
    """
    from mdmem.note import parse

    _, project, user = _options(ctx).stores()
    store = project if level is Level.PROJECT else user
    kind = note_type or _DEFAULT_TYPE[level]
    if body is not None:
        if title is None:
            raise typer.BadParameter("required when the text is given", param_hint="'--title'")
        text = sys.stdin.read() if body == "-" else body
        typer.echo(_create(store, kind, title, summary or "", text))
        return
    template = _template(level, kind, title, summary)

    def save(text: str) -> str:
        note = parse(text, "new note")
        return _create(store, note.type, note.title, note.summary, note.body)

    name = _edit_until_saved(store, "new-note.md", template, save)
    if name is None:
        typer.echo("mdmem: nothing added", err=True)
        raise typer.Exit(1)
    typer.echo(name)


@app.command()
def edit(ctx: typer.Context, name: NameArgument, level: FindOption = Which.all) -> None:
    """Edit a note in $VISUAL or $EDITOR; MEMORY.md follows.

    The note is checked on save. When the front matter is broken, mdmem says
    what is wrong and offers to edit again, keep the text aside under
    .mdmem/rescued/, or abort; without a terminal it keeps the text aside and
    exits with status 1.

    Example: EDITOR=nano mdmem edit project_knowledge_build-and-test.md
    """
    from mdmem.note import parse

    options = _options(ctx)
    store = _find(options, name, level)
    before = store.read_text(name)

    def save(text: str) -> str:
        note = parse(text, name)
        if not note.body:
            raise InvalidNote(name, "the body is empty (to delete the note, use `mdmem rm`)")
        # expect=before: a note changed on disk meanwhile is not overwritten (the
        # edited text is kept aside instead).
        return store.save(note, expect=before)

    action = _edit_until_saved(store, name, before, save)
    if not options.quiet:
        typer.echo(f"{name}: {'no changes' if action in (None, 'unchanged') else 'saved'}")


@app.command()
def rm(ctx: typer.Context, name: NameArgument, level: FindOption = Which.all) -> None:
    """Move a note to the trash; `mdmem restore` brings it back.

    Example: mdmem rm project_knowledge_old-build.md
    """
    options = _options(ctx)
    store = _find(options, name, level)
    _checked(
        store.apply([{"action": "delete", "level": store.level.value, "filename": name}]), name
    )
    if not options.quiet:
        typer.echo(f"moved {name} to the trash; `mdmem restore {name}` brings it back")


@app.command()
def restore(
    ctx: typer.Context,
    name: Annotated[
        str | None,
        typer.Argument(metavar="NAME", help="The note's file name; none lists the trash."),
    ] = None,
    level: FindOption = Which.all,
) -> None:
    """Bring back a deleted note, or list the trash.

    The newest deleted note of that name comes back.

    Example: mdmem restore project_knowledge_old-build.md
    """
    from mdmem.paths import check_name

    stores = _selected(_options(ctx), level)
    if name is None:
        for store in stores:
            for item in store.trash():
                typer.echo(f"{store.level.value:<8} {item.deleted_at:<18} {item.filename}")
        return
    check_name(name)
    for store in stores:
        if any(item.filename == name for item in store.trash()):
            typer.echo(f"restored {store.restore(name)} ({store.level.value})")
            return
    raise NoteNotFound(name, " or ".join(f"the trash of {s.path}" for s in stores))


@app.command()
def reindex(ctx: typer.Context, level: LevelOption = Which.all) -> None:
    """Rebuild MEMORY.md from the notes.

    Notes that cannot be read are reported, and left alone. A terminal shows
    a progress bar for large stores.

    Example: mdmem reindex --level project
    """
    options = _options(ctx)
    problems = 0
    for store in _selected(options, level):
        with _progress(options, store.level.value) as progress:
            report = store.reindex(progress=progress)
        problems += len(report.problems)
        if not options.quiet:
            state = "rewritten" if report.changed else "up to date"
            typer.echo(f"{store.level.value}: {report.notes} notes, MEMORY.md {state}")
        for problem in report.problems:
            typer.echo(f"{store.level.value}: {problem.filename}: {problem.reason}", err=True)
    if problems:
        raise typer.Exit(1)


@app.command()
def doctor(
    ctx: typer.Context,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what can be repaired.")] = False,
    level: LevelOption = Which.all,
) -> None:
    """Check the stores; --fix repairs what it can.

    Finds index lines without a note, notes missing from MEMORY.md, malformed
    notes (reported, never changed), stray temporary files, interrupted
    batches, wrong permissions in the user store, who holds a lock, and turns
    stuck in the journal (--fix processes them, failed ones included). Exit
    status 1 while problems remain.

    Example: mdmem doctor --fix
    """
    from dataclasses import replace

    from mdmem.doctor import examine

    options = _options(ctx)
    remaining = 0
    for store in _selected(options, level):
        report = examine(store, fix=fix)
        if fix and any("/pending/" in f.subject for f in report.findings):
            # Stuck turns were queued again: finishing them is the repair.
            from mdmem.manager import Manager

            workspace, _, user = options.stores()
            with Manager(workspace, user_dir=user.path, discover=False) as manager:
                manager.flush(timeout=300)
            again = examine(store, fix=True)
            report = replace(
                again, fixed=report.fixed + again.fixed, failed=report.failed + again.failed
            )
        remaining += len(report.problems)
        typer.echo(f"{store.level.value} store {store.path}")
        for line in report.fixed:
            typer.echo(f"  fixed: {line}")
        for line in report.failed:
            typer.echo(f"  could not fix: {line}")
        for finding in report.findings:
            if finding.problem or not options.quiet:
                kind = ("fixable" if finding.fixable else "problem") if finding.problem else "note"
                typer.echo(f"  {kind}: {finding.subject}: {finding.message}")
        if not report.problems:
            typer.echo("  ok")
    if remaining:
        hint = "" if fix else "; `mdmem doctor --fix` repairs the fixable ones"
        typer.echo(f"{remaining} problem{'s' if remaining != 1 else ''}{hint}", err=True)
        raise typer.Exit(1)


@app.command("merge-index")
def merge_index(
    base: Annotated[str, typer.Argument(help="The common ancestor's MEMORY.md (git's %O).")],
    ours: Annotated[str, typer.Argument(help="Our MEMORY.md (%A); the result is written here.")],
    theirs: Annotated[str, typer.Argument(help="Their MEMORY.md (%B).")],
) -> None:
    """Merge MEMORY.md note by note: git's merge driver.

    Set up by `mdmem init`. A line added on either side is kept, deleted on
    either side dropped, changed on one side takes that side; changed on both,
    ours. The result goes to OURS, sorted by file name, and the exit status is
    0.

    Example: git config merge.mdmem-index.driver "mdmem merge-index %O %A %B"
    """
    from mdmem.merge import merge_files

    merge_files(base, ours, theirs)


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
    from mdmem.manager import Manager

    options = _options(ctx)
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
    from mdmem import demo as demo_

    outcome = demo_.run(directory)
    typer.echo(f"Scratch workspace: {outcome.workspace}")
    typer.echo("Example turn: examples/turn.json (10 messages, with secrets in a tool result)")
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

    from mdmem.manager import Manager

    options = _options(ctx)
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

    options = _options(ctx)
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

    options = _options(ctx)
    payload = read_hook_input()
    try:
        _, project, _ = options.stores()
        log_to_file(os.path.join(project.path, ".mdmem"))
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

    workspace, _, _ = _options(ctx).stores()
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

    workspace, _, _ = _options(ctx).stores()
    path = settings_path("project" if project else "user", workspace)
    changed = uninstall(path, command=command)
    typer.echo(f"{'removed from' if changed else 'not installed in'} {path}")


@app.command()
def mcp(ctx: typer.Context) -> None:
    """Serve both stores to an MCP client over stdio (needs `pip install 'mdmem[mcp]'`).

    Example: claude mcp add mdmem -- mdmem mcp
    """
    options = _options(ctx)
    try:
        from mdmem.mcp_server import serve
    except ImportError as exc:
        typer.echo(f"mdmem: error: {exc}", err=True)
        raise typer.Exit(1) from None
    serve(options.workspace, options.user_dir)


def run(argv: list[str]) -> int:
    """Run the command line with ``argv``; return the exit status."""
    try:
        app(args=argv, prog_name="mdmem")
    except SystemExit as exc:
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    finally:
        sys.stdout.flush()
    return 0
