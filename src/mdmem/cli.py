"""The ``mdmem`` command line: a thin layer over the public API.

Each command parses its arguments, calls the library, and echoes the result.
Errors become one line on stderr: exit status 1 for an operational error, 2
for a usage error; a traceback only with ``-v``.
"""

from __future__ import annotations

import json
import sys
import traceback
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from typer.core import TyperGroup

from mdmem._fastpath import index_text, resolve
from mdmem.errors import MdmemError

if TYPE_CHECKING:
    from mdmem.store import Store

__all__ = ["app", "run"]


class _Group(TyperGroup):
    """Turns mdmem errors into one line on stderr and exit status 1."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except (MdmemError, OSError) as exc:
            options = ctx.obj if isinstance(ctx.obj, Options) else None
            if options is not None and options.verbose:
                traceback.print_exc()
            typer.echo(f"mdmem: error: {exc}", err=True)
            raise typer.Exit(1) from None


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
        bool, typer.Option("--quiet", "-q", help="Print only what was asked for.")
    ] = False,
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log details, and show tracebacks on errors.")
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


LevelOption = Annotated[Which, typer.Option("--level", help="Which store(s).")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


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
def list_(ctx: typer.Context, level: LevelOption = Which.all, as_json: JsonOption = False) -> None:
    """List notes: level, type, file name and title.

    Example: mdmem list --level user --json
    """
    rows = [
        {"level": store.level.value, **vars(entry)}
        for store in _selected(_options(ctx), level)
        for entry in store.entries()
    ]
    if as_json:
        typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for row in rows:
        typer.echo(f"{row['level']:<8} {row['type']:<20} {row['filename']}  {row['title']}")


@app.command()
def reindex(ctx: typer.Context, level: LevelOption = Which.all) -> None:
    """Rebuild MEMORY.md from the notes; report notes that cannot be read (they are left alone).

    Example: mdmem reindex --level project
    """
    options = _options(ctx)
    problems = 0
    for store in _selected(options, level):
        report = store.reindex()
        problems += len(report.problems)
        if not options.quiet:
            state = "rewritten" if report.changed else "up to date"
            typer.echo(f"{store.level.value}: {report.notes} notes, MEMORY.md {state}")
        for problem in report.problems:
            typer.echo(f"{store.level.value}: {problem.filename}: {problem.reason}", err=True)
    if problems:
        raise typer.Exit(1)


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
