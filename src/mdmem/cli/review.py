"""Control and provenance: ``mdmem review`` (proposals of review mode) and ``mdmem why``.

Each parses its arguments, calls the library, and echoes the result.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import TYPE_CHECKING, Annotated

import typer

from mdmem.cli._base import FindOption, JsonOption, NameArgument, Which, app, find_note, options_of
from mdmem.cli.editor import edit_until_saved, interactive
from mdmem.errors import InvalidNote, InvalidOperation
from mdmem.manager import review as review_

if TYPE_CHECKING:
    from mdmem.cli._base import Options
    from mdmem.store.store import Store

review_app = typer.Typer(invoke_without_command=True)
app.add_typer(review_app, name="review")

IdsArgument = Annotated[
    list[str] | None, typer.Argument(metavar="ID...", help="Proposal ids (see `review list`).")
]


def _stores(options: Options) -> list[Store]:
    _, project, user = options.stores()
    return [project, user]


def _diff(store: Store, proposal: review_.Proposal) -> str:
    import difflib

    name, before, after = review_.preview(store, proposal)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        fromfile=f"{name} (now)" if before else "/dev/null",
        tofile=f"{name} (proposed)" if after else "/dev/null",
    )
    return "".join(lines)


def _headline(store: Store, proposal: review_.Proposal) -> str:
    op = proposal.op
    what = op.get("title") or op.get("filename") or ""
    return f"{proposal.id}  {store.level.value:<7} {op.get('action')!s:<6} {what}"


@review_app.callback()
def review(ctx: typer.Context) -> None:
    """Go through waiting proposals: see each as a diff, then accept, edit or reject it.

    Without a subcommand this is interactive (a terminal is needed); for
    scripts use `review list --json`, `review accept ID...` (or `--all`) and
    `review reject ID...`. Review mode is set by MDMEM_REVIEW (off, all,
    project, user), Manager(review=...) or .PseudoClaude/mdmem.json.

    Example: MDMEM_REVIEW=all mdmem worker; mdmem review
    """
    if ctx.invoked_subcommand is not None:
        return
    if not interactive():
        typer.echo("mdmem: `mdmem review` needs a terminal; see `mdmem review --help`", err=True)
        raise typer.Exit(2)
    stores = _stores(options_of(ctx))
    for store in stores:
        for proposal in review_.pending(store):
            typer.echo(_headline(store, proposal))
            typer.echo(_diff(store, proposal))
            _decide(store, proposal)
    for store in stores:
        from mdmem.recall.disputes import clear, disputed

        for name, info in disputed(store).items():
            typer.echo(f"disputed: {store.level.value} {name}: {info.get('reason', '')}")
            answer = str(typer.prompt("[k]eep it (clear the dispute), [s]kip?", "s", err=True))
            if answer.strip()[:1].lower() == "k":
                clear(store, [name])


def _decide(store: Store, proposal: review_.Proposal) -> None:
    while True:
        answer = str(typer.prompt("[a]ccept, [e]dit, [r]eject, [s]kip?", "s", err=True))
        choice = answer.strip()[:1].lower()
        if choice == "a":
            _report(store, proposal.id, review_.accept(store, proposal.id))
        elif choice == "r":
            review_.reject(store, proposal.id)
            typer.echo(f"{proposal.id}: rejected")
        elif choice == "e":
            _edit(store, proposal)
        elif choice != "s":
            continue
        return


def _edit(store: Store, proposal: review_.Proposal) -> None:
    _, _, text = review_.preview(store, proposal)
    if not text:
        typer.echo("mdmem: a deletion has nothing to edit; accept or reject it", err=True)
        return

    def save(edited: str) -> str:
        op = review_.op_from_note_text(proposal, edited)
        try:
            result = review_.accept(store, proposal.id, op)
        except InvalidOperation as exc:
            raise InvalidNote(f"proposal {proposal.id}", str(exc)) from None
        _report(store, proposal.id, result)
        return "saved"

    if edit_until_saved(store, f"proposal-{proposal.id}.md", text, save) is None:
        typer.echo(f"{proposal.id}: left waiting")


def _report(store: Store, pid: str, result: object) -> None:
    from mdmem.store.results import ApplyResult

    assert isinstance(result, ApplyResult)
    for applied in result.applied:
        typer.echo(f"{pid}: {applied.action} {applied.filename} ({store.level.value})")
    for rejected in result.rejected:
        typer.echo(f"mdmem: {pid}: not applied: {rejected.reason}", err=True)


@review_app.command("list")
def review_list(ctx: typer.Context, as_json: JsonOption = False) -> None:
    """List waiting proposals, each with a diff against the current note.

    Example: mdmem review list --json
    """
    rows = []
    for store in _stores(options_of(ctx)):
        for proposal in review_.pending(store):
            rows.append((store, proposal))
    if as_json:
        data = [{**p.as_dict(), "diff": _diff(s, p)} for s, p in rows]
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2))
        return
    for store, proposal in rows:
        typer.echo(_headline(store, proposal))
        typer.echo(_diff(store, proposal))


@review_app.command("accept")
def review_accept(
    ctx: typer.Context,
    ids: IdsArgument = None,
    every: Annotated[bool, typer.Option("--all", help="Accept every waiting proposal.")] = False,
) -> None:
    """Accept proposals: write exactly the proposed notes, with their provenance.

    Example: mdmem review accept 3f9c0a1b2d
    """
    stores = _stores(options_of(ctx))
    chosen = _chosen(stores, ids, every)
    failed = 0
    for store, pid in chosen:
        try:
            result = review_.accept(store, pid)
        except review_.ProposalGone as exc:
            typer.echo(f"mdmem: {exc}", err=True)
            failed += 1
            continue
        _report(store, pid, result)
        failed += bool(result.rejected)
    if failed:
        raise typer.Exit(1)


@review_app.command("reject")
def review_reject(ctx: typer.Context, ids: IdsArgument = None) -> None:
    """Reject proposals: nothing is written.

    Example: mdmem review reject 3f9c0a1b2d
    """
    stores = _stores(options_of(ctx))
    failed = 0
    for store, pid in _chosen(stores, ids, False):
        try:
            review_.reject(store, pid)
        except review_.ProposalGone as exc:
            typer.echo(f"mdmem: {exc}", err=True)
            failed += 1
            continue
        typer.echo(f"{pid}: rejected")
    if failed:
        raise typer.Exit(1)


@review_app.command("edit")
def review_edit(ctx: typer.Context, pid: Annotated[str, typer.Argument(metavar="ID")]) -> None:
    """Edit a proposal in $VISUAL or $EDITOR, then accept it as edited.

    A broken front matter is never lost: as with `mdmem edit`, the text is
    offered back, or kept aside in mdmem's state folder.

    Example: EDITOR=nano mdmem review edit 3f9c0a1b2d
    """
    stores = _stores(options_of(ctx))
    store = review_.find(stores, pid)
    proposal = next(p for p in review_.pending(store) if p.id == pid)
    _edit(store, proposal)


def _chosen(stores: list[Store], ids: list[str] | None, every: bool) -> list[tuple[Store, str]]:
    if every:
        return [(s, p.id) for s in stores for p in review_.pending(s)]
    if not ids:
        raise typer.BadParameter("give proposal ids, or --all", param_hint="'ID...'")
    out = []
    for pid in ids:
        try:
            out.append((review_.find(stores, pid), pid))
        except review_.ProposalGone:
            out.append((stores[0], pid))  # reported when it is decided
    return out


@app.command()
def why(
    ctx: typer.Context,
    name: NameArgument,
    level: FindOption = Which.all,
    as_json: JsonOption = False,
) -> None:
    """Show where a note came from: its turn, model, commit, excerpt and history.

    For notes written by hand, what git knows (the last five commits).

    Example: mdmem why project_knowledge_build.md --json
    """
    from mdmem.manager import provenance
    from mdmem.recall.disputes import disputed

    options = options_of(ctx)
    store = find_note(options, name, level)
    note = store.read(name)
    source = provenance.parse_source(note.extra.get(provenance.SOURCE_KEY))
    record = provenance.load_turn(store.path, source.turn) if source else None
    history = getattr(store, "history", None)
    versions: list[object] = []
    if callable(history):
        try:
            versions = [getattr(v, "__dict__", v) for v in history(name)]
        except Exception:  # an optional feature: never fatal here
            versions = []
    workspace, project, _ = options.stores()
    git_lines = _git_log(workspace, os.path.join(store.path, name))
    session = None
    if source and source.session:
        from mdmem.store import sessions

        found = sessions.load(project.path, source.session)
        session = (
            {"session_id": found.session_id, "started": found.started, "title": found.title}
            if found
            else {"session_id": source.session, "started": None, "title": None}
        )
    data = {
        "filename": name,
        "level": store.level.value,
        "written_by": "worker" if source else "hand",
        "source": source.as_dict() if source else None,
        "excerpt": record.get("excerpt") if record else None,
        "turn_notes": record.get("notes") if record else None,
        "disputed": disputed(store).get(name),
        "history": versions,
        "git": git_lines,
        "session": session,
    }
    if as_json:
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return
    typer.echo(f"{name} ({store.level.value})")
    if source:
        typer.echo(f"  written by the worker: turn {source.turn} at {source.at}")
        typer.echo(f"  model: {source.model or 'unknown'}")
        if source.git:
            typer.echo(f"  commit: {source.git}")
        if session and session["started"]:
            typer.echo(
                f"  session: {session['session_id']} ({session['started']}: {session['title']})"
            )
        elif source.session:
            typer.echo(f"  session: {source.session} (its record is not kept here)")
        excerpt = data["excerpt"]
        if excerpt:
            typer.echo("  the turn (redacted):")
            for line in str(excerpt).splitlines()[:40]:
                typer.echo(f"    {line}")
        else:
            typer.echo("  the turn's excerpt is no longer kept")
    else:
        typer.echo("  written by hand (no source: line)")
    if data["disputed"]:
        typer.echo(f"  disputed: {data['disputed']}")
    for version in versions:
        typer.echo(f"  version: {version}")
    for line in git_lines:
        typer.echo(f"  git: {line}")


def _git_log(workspace: str, path: str) -> list[str]:
    """The last five commits touching ``path`` (following renames); [] outside git."""
    try:
        out = subprocess.run(
            [
                "git",
                "-C",
                workspace,
                "log",
                "--follow",
                "-n",
                "5",
                "--format=%h %ad %an: %s",
                "--date=short",
                "--",
                path,
            ],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return []
    return out.stdout.splitlines() if out.returncode == 0 else []
