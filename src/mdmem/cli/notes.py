"""The everyday commands: init, index, list, show, add, edit, rm, restore, reindex, doctor.

Each parses its arguments, calls the library, and echoes the result.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated

import typer

from mdmem._kinds import Level, NoteType
from mdmem.cli._base import (
    FindOption,
    JsonOption,
    LevelOption,
    NameArgument,
    StoreOption,
    Which,
    app,
    checked,
    find_note,
    options_of,
    progress_bar,
    selected,
)
from mdmem.cli._fastpath import index_text, no_project, say_refusal
from mdmem.cli.editor import (
    DEFAULT_TYPE,
    create_note,
    edit_until_saved,
    note_template,
    tell_redacted,
)
from mdmem.errors import InvalidNote, NoteNotFound


@app.command()
def init(
    ctx: typer.Context,
    driver_command: Annotated[
        str | None,
        typer.Option(
            help="The merge driver's command, before '%O %A %B %P' (default: this mdmem by "
            "its absolute path, merge-index).",
        ),
    ] = None,
) -> None:
    """Set up the project store for sharing through git.

    Creates the store (.PseudoClaude/memory) with an empty MEMORY.md and
    .gitattributes (MEMORY.md merge=mdmem-index), and, inside a git work tree,
    the merge driver in the repository's git config, naming this mdmem by its
    absolute path. mdmem's own state is kept outside the repository. Run it once
    in every clone: git config is not committed (mdmem install claude-code runs
    it too). Safe to run again.

    Example: mdmem init --driver-command "$HOME/.venvs/mdmem/bin/mdmem merge-index"
    """
    from mdmem.store.merge import init_store

    options = options_of(ctx)
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
    options = options_of(ctx)
    text = index_text(options.workspace, options.user_dir, level.value, as_json)
    say_refusal(options.workspace, options.user_dir)
    if text:
        typer.echo(text)


@app.command("list")
def list_(
    ctx: typer.Context,
    level: LevelOption = Which.all,
    note_type: Annotated[
        NoteType | None, typer.Option("--type", help="Only notes of this type.")
    ] = None,
    show_all: Annotated[
        bool, typer.Option("--all", help="Also superseded notes (kept on disk, not shown).")
    ] = False,
    limit: Annotated[
        int | None, typer.Option("--limit", min=0, help="Show at most this many notes.")
    ] = None,
    offset: Annotated[int, typer.Option("--offset", min=0, help="Skip this many notes first.")] = 0,
    as_json: JsonOption = False,
) -> None:
    """List notes: level, type, file name and title, streamed (a page at a time).

    Superseded notes are listed only with --all.

    Example: mdmem list --level user --type user_preference --limit 50 --offset 100 --json
    """
    import itertools

    rows = (
        {"level": store.level.value, **vars(entry), "supersedes": list(entry.supersedes)}
        for store in selected(options_of(ctx), level)
        for entry in store.iter_entries()
        if (note_type is None or entry.type == note_type.value)
        and (show_all or not entry.superseded_by)
    )
    page = itertools.islice(rows, offset, None if limit is None else offset + limit)
    if as_json:
        # One element per line, written as it comes: a large store is never held whole.
        first = True
        for row in page:
            text = json.dumps(row, ensure_ascii=False)
            typer.echo(("[\n  " if first else ",\n  ") + text, nl=False)
            first = False
        typer.echo("[]" if first else "\n]")
        return
    for row in page:
        flag = f"  (superseded by {row['superseded_by']})" if row["superseded_by"] else ""
        typer.echo(f"{row['level']:<8} {row['type']:<20} {row['filename']}  {row['title']}{flag}")


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
    from mdmem.store import ledger
    from mdmem.store.note import format_time, render

    store = find_note(options_of(ctx), name, level)
    note = store.read(name)
    ledger.record(store.path, "read", n=[name], via="cli")
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
    A project note needs a project: a folder with .git or .PseudoClaude (here
    or above), or --workspace; elsewhere `mdmem init` makes one.

    Example: mdmem add --title "Build" "Run make test before pushing."
    """
    from mdmem.store.note import parse

    options = options_of(ctx)
    workspace, project, user = options.stores()
    store = project if level is Level.PROJECT else user
    if level is Level.PROJECT and options.workspace is None and no_project(workspace, project):
        # Discovery found no marker and fell back to this folder: a store made here
        # silently would hold the note where no later session looks for it.
        typer.echo(
            f"mdmem: error: {workspace} is in no project (no .git or .PseudoClaude here or "
            "above): run `mdmem init` to keep project notes here, give --workspace DIR, or "
            "--level user for your user store",
            err=True,
        )
        raise typer.Exit(1)
    kind = note_type or DEFAULT_TYPE[level]
    if body is not None:
        if title is None:
            raise typer.BadParameter("required when the text is given", param_hint="'--title'")
        text = sys.stdin.read() if body == "-" else body
        created = create_note(store, kind, title, summary or "", text)
        tell_redacted(title, summary or "", text)
        typer.echo(created)
        return
    template = note_template(level, kind, title, summary)

    def save(text: str) -> str:
        note = parse(text, "new note")
        created = create_note(store, note.type, note.title, note.summary, note.body)
        tell_redacted(note.title, note.summary, note.body)
        return created

    name = edit_until_saved(store, "new-note.md", template, save)
    if name is None:
        typer.echo("mdmem: nothing added", err=True)
        raise typer.Exit(1)
    typer.echo(name)


@app.command()
def edit(ctx: typer.Context, name: NameArgument, level: FindOption = Which.all) -> None:
    """Edit a note in $VISUAL or $EDITOR; MEMORY.md follows.

    The note is checked on save. When the front matter is broken, mdmem says
    what is wrong and offers to edit again, keep the text aside in mdmem's
    state folder (mdmem doctor lists it), or abort; without a terminal it keeps
    the text aside and
    exits with status 1.

    Example: EDITOR=nano mdmem edit project_knowledge_build-and-test.md
    """
    from mdmem.store.note import parse

    options = options_of(ctx)
    store = find_note(options, name, level)
    before = store.read_text(name)

    def save(text: str) -> str:
        note = parse(text, name)
        if not note.body:
            raise InvalidNote(name, "the body is empty (to delete the note, use `mdmem rm`)")
        # expect=before: a note changed on disk meanwhile is not overwritten (the
        # edited text is kept aside instead).
        action = store.save(note, expect=before, source="cli")
        from mdmem.store import ledger

        ledger.record(store.path, "write", n=[name], via="cli")
        tell_redacted(note.title, note.summary, note.body, *map(str, note.extra.values()))
        return action

    action = edit_until_saved(store, name, before, save)
    if not options.quiet:
        typer.echo(f"{name}: {'no changes' if action in (None, 'unchanged') else 'saved'}")


@app.command()
def rm(ctx: typer.Context, name: NameArgument, level: FindOption = Which.all) -> None:
    """Move a note to the trash; `mdmem restore` brings it back.

    Example: mdmem rm project_knowledge_old-build.md
    """
    options = options_of(ctx)
    store = find_note(options, name, level)
    checked(
        store.apply(
            [{"action": "delete", "level": store.level.value, "filename": name}], source="cli"
        ),
        name,
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
    version: Annotated[
        int | None,
        typer.Option("--version", help="Bring back this version (see `mdmem history NAME`)."),
    ] = None,
    from_old_state: Annotated[
        bool,
        typer.Option(
            "--from-old-state",
            help="From the trash an earlier clone at this path left (see `mdmem doctor`).",
        ),
    ] = False,
) -> None:
    """Bring back a deleted note or an earlier version, or list the trash.

    Without --version, the newest deleted note of that name comes back. With
    --version, that version from `mdmem history` is written back, byte for
    byte, as a new version. With --from-old-state, the note comes from the
    trash of an earlier clone at the same path, which is otherwise never used.

    Example: mdmem restore project_knowledge_old-build.md --version 2
    """
    from mdmem.store.paths import check_name

    stores = selected(options_of(ctx), level)
    if from_old_state:
        from mdmem.store import earlier

        if name is None:
            for store in stores:
                for item in earlier.trash(store.path):
                    typer.echo(f"{store.level.value:<8} {item.deleted_at:<18} {item.filename}")
            return
        check_name(name)
        for store in stores:
            if any(item.filename == name for item in earlier.trash(store.path)):
                earlier.take(store, name)
                typer.echo(f"restored {store.restore(name)} ({store.level.value}, old state)")
                return
        raise NoteNotFound(name, "the trash of an earlier clone at this path")
    if version is not None:
        if name is None:
            raise typer.BadParameter("a note name is required", param_hint="'NAME'")
        check_name(name)
        for store in stores:
            if any(v.version == version for v in store.history(name)):
                action = store.restore_version(name, version, source="cli")
                typer.echo(f"restored {name} version {version} ({store.level.value}): {action}")
                return
        raise NoteNotFound(f"{name} version {version}", " or ".join(s.path for s in stores))
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
    options = options_of(ctx)
    problems = 0
    for store in selected(options, level):
        with progress_bar(options, store.level.value) as progress:
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
    as_json: JsonOption = False,
) -> None:
    """Check the stores; --fix repairs what it can.

    Finds index lines without a note, notes missing from MEMORY.md, malformed
    notes (reported, never changed), stray temporary files, interrupted
    batches, wrong permissions in the user store, who holds a lock, and turns
    stuck in the journal (--fix processes them, failed ones included), and
    whether the dictionary extra's file is built (--fix builds it). Exit
    status 1 while problems remain.

    Example: mdmem doctor --fix
    """
    from dataclasses import asdict, replace

    from mdmem.manager.doctor import dictionary_findings, examine, worker_findings

    options = options_of(ctx)
    remaining = 0
    stores: list[dict[str, object]] = []
    worker = worker_findings(options.stores()[2])  # which provider, and the token budget
    remaining += sum(f.problem for f in worker)
    if not as_json:
        typer.echo("worker (extraction)")
        for finding in worker:
            if finding.problem or not options.quiet:
                typer.echo(f"  {'problem' if finding.problem else 'note'}: {finding.message}")
    words, words_fixed, words_failed = dictionary_findings(fix=fix)  # once per user
    remaining += sum(f.problem for f in words)
    if not as_json:
        typer.echo("dictionary (English <-> Chinese recall)")
        for line in words_fixed:
            typer.echo(f"  fixed: {line}")
        for line in words_failed:
            typer.echo(f"  could not fix: {line}")
        for finding in words:
            if finding.problem or not options.quiet:
                kind = ("fixable" if finding.fixable else "problem") if finding.problem else "note"
                typer.echo(f"  {kind}: {finding.message}")
    for store in selected(options, level):
        # A bar on a terminal's stderr while the notes are gone through (at 100,000 notes,
        # seconds); nothing on a pipe.
        with progress_bar(options, f"checking the {store.level.value} store") as progress:
            report = examine(store, fix=fix, progress=progress)
        if fix and any("/pending/" in f.subject for f in report.findings):
            # Stuck turns were queued again: finishing them is the repair.
            from mdmem.manager.manager import Manager

            workspace, _, user = options.stores()
            with Manager(workspace, user_dir=user.path, discover=False) as manager:
                manager.flush(timeout=300)
            again = examine(store, fix=True)
            report = replace(
                again, fixed=report.fixed + again.fixed, failed=report.failed + again.failed
            )
        remaining += len(report.problems)
        if as_json:
            stores.append(
                {
                    "level": store.level.value,
                    "path": store.path,
                    "ok": not report.problems,
                    "findings": [asdict(f) for f in report.findings],
                    "fixed": list(report.fixed),
                    "failed": list(report.failed),
                }
            )
            continue
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
    if as_json:
        payload = {
            "problems": remaining,
            "stores": stores,
            "worker": [asdict(f) for f in worker],
            "dictionary": {
                "findings": [asdict(f) for f in words],
                "fixed": words_fixed,
                "failed": words_failed,
            },
        }
        typer.echo(json.dumps(payload, indent=2))
    if remaining:
        hint = "" if fix else "; `mdmem doctor --fix` repairs the fixable ones"
        typer.echo(f"{remaining} problem{'s' if remaining != 1 else ''}{hint}", err=True)
        raise typer.Exit(1)


@app.command("merge-index")
def merge_index(
    base: Annotated[str, typer.Argument(help="The common ancestor's MEMORY.md (git's %O).")],
    ours: Annotated[str, typer.Argument(help="Our MEMORY.md (%A); the result is written here.")],
    theirs: Annotated[str, typer.Argument(help="Their MEMORY.md (%B).")],
    path: Annotated[
        str | None,
        typer.Argument(help="The file's path in the repository (%P); must be a store's MEMORY.md."),
    ] = None,
) -> None:
    """Merge MEMORY.md note by note: git's merge driver.

    Set up by `mdmem init`. A line added on either side is kept, deleted on
    either side dropped, changed on one side takes that side; changed on both,
    ours. The result goes to OURS, sorted by file name, and the exit status is
    0. A file that is not a store's MEMORY.md (by PATH, or because a side has a
    line that is not an index line) is refused: OURS gets git's own text merge
    with conflict markers, and the exit status is 1, so git reports a conflict.

    Example: git config merge.mdmem-index.driver "mdmem merge-index %O %A %B %P"
    """
    from mdmem.store.merge import merge_files

    merge_files(base, ours, theirs, path)
