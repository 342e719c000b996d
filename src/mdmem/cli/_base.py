"""The ``mdmem`` command line's frame: the group, its error handling, the global options.

Errors become one line on stderr: exit status 1 for an operational error, 2
for a usage error; a traceback only with ``-v``. The commands live in
``cli_notes`` (everyday note commands) and ``cli_agents`` (what agents and
their hooks run); ``cli`` puts them together.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from mdmem._kinds import Level
from mdmem.errors import InvalidNote, MdmemError, NoteNotFound
from mdmem.store.workspace import resolve

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence

    from typer._click._termui_impl import ProgressBar

    from mdmem.store.results import ApplyResult
    from mdmem.store.store import Store


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
            _in_plain_words(exc)
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


_PYDANTIC_WORDS = {
    "float_parsing": "is not a number",
    "int_parsing": "is not a whole number",
    "int_from_float": "is not a whole number",
    "bool_parsing": "is not true or false",
}


def _in_plain_words(exc: Exception) -> None:
    """Reword a usage error that typer built from a pydantic ValidationError.

    This typer checks values with pydantic, whose wording ("Input should be a
    valid number, unable to parse string as a number", "Value error, ...") is
    not mdmem's: the message becomes "'abc' is not a number".
    """
    cause = exc.__cause__
    errors = getattr(cause, "errors", None)
    if (
        type(cause).__name__ != "ValidationError"
        or not callable(errors)
        or not hasattr(exc, "message")
    ):
        return
    parts = []
    for error in errors():
        value, kind = error.get("input"), str(error.get("type", ""))
        text = str(error.get("msg", "")).removeprefix("Value error, ")
        if kind in _PYDANTIC_WORDS:
            text = f"{value!r} {_PYDANTIC_WORDS[kind]}"
        elif text.startswith("Input should be "):
            text = f"{value!r}: expected {text.removeprefix('Input should be ')}"
        parts.append(text.rstrip("."))
    if parts:
        exc.message = "; ".join(parts)


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


def _version(value: bool) -> None:
    if value:
        from mdmem import __version__

        typer.echo(f"mdmem {__version__}")
        raise typer.Exit()


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
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print mdmem's version and exit."
        ),
    ] = False,
) -> None:
    """mdmem keeps what a coding agent learns as Markdown notes you can read, edit and commit."""
    import os

    # A hook must exit 0 whatever its options say (exit 2 would block Claude
    # Code's Stop); the hook commands report a bad workspace themselves.
    if (
        workspace
        and not os.path.isdir(os.path.expanduser(workspace))
        and (ctx.invoked_subcommand != "hook")
    ):
        raise typer.BadParameter(
            f"{workspace} is not a directory (give an existing one)", param_hint="--workspace"
        )
    ctx.obj = Options(workspace, user_dir, quiet, verbose)
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG, format="mdmem: %(levelname)s: %(message)s")


def options_of(ctx: typer.Context) -> Options:
    assert isinstance(ctx.obj, Options)
    return ctx.obj


def selected(options: Options, level: Which) -> list[Store]:
    _, project, user = options.stores()
    return [s for s in (project, user) if level.value in ("all", s.level.value)]


class Which(str, Enum):
    """Which store(s) a command looks at."""

    all = "all"
    project = "project"
    user = "user"


def complete_note(ctx: typer.Context, incomplete: str) -> list[str]:
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
    str, typer.Argument(metavar="NAME", help="The note's file name.", autocompletion=complete_note)
]


# -- helpers shared by commands --------------------------------------------------------


def find_note(options: Options, name: str, level: Which) -> Store:
    """The store holding note ``name``: the one ``--level`` names, else project, then user.

    Raises:
        InvalidPath: not a note name.
        NoteNotFound: no store holds it.
    """
    stores = selected(options, level)
    for store in stores:
        if store.exists(name):
            return store
    raise NoteNotFound(name, " or ".join(s.path for s in stores))


def checked(result: ApplyResult, label: str) -> str:
    """The file name an applied operation touched; a rejected one becomes an InvalidNote."""
    if result.rejected:
        raise InvalidNote(label, result.rejected[0].reason)
    return result.applied[0].filename


PROGRESS_MIN_ITEMS = 200


@contextlib.contextmanager
def progress_bar(
    options: Options, label: str, min_items: int = PROGRESS_MIN_ITEMS
) -> Iterator[Callable[[int, int], None] | None]:
    """A progress callback drawing a bar on stderr, for long work on a terminal; else None.

    The bar appears once the work counts at least ``min_items`` items. A new
    pass (a count that starts again, or another total: the next store) ends the
    bar and starts another.
    """
    if options.quiet or not sys.stderr.isatty():
        yield None
        return
    with contextlib.ExitStack() as stack:
        bars: list[ProgressBar[int]] = []
        passes: list[contextlib.ExitStack] = []

        def update(done: int, total: int) -> None:
            if bars and (total != bars[0].length or done < bars[0].pos):
                passes.pop().close()  # the pass before is over: its bar ends
                bars.clear()
            if not bars and total >= min_items:
                bar = typer.progressbar(length=total, label=label, file=sys.stderr)
                one = stack.enter_context(contextlib.ExitStack())
                bars.append(one.enter_context(bar))
                passes.append(one)
            # Redraw about a hundred times, whatever the number of notes.
            if bars and (done == total or done - bars[0].pos >= max(1, total // 100)):
                bars[0].update(done - bars[0].pos)

        yield update


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
