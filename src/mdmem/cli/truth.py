"""Commands that keep memory true: history, prune, stale, consolidate.

Each parses its arguments, calls the library, and echoes the result.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from mdmem.cli._base import FindOption, JsonOption, LevelOption, Which, app, options_of, selected
from mdmem.errors import NoteNotFound

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="Show what would change; change nothing.")
]


@app.command()
def history(
    ctx: typer.Context,
    name: Annotated[str, typer.Argument(metavar="NAME", help="The note's file name.")],
    level: FindOption = Which.all,
    as_json: JsonOption = False,
) -> None:
    """List the recorded versions of a note: number, when, by what, how.

    `mdmem restore NAME --version V` brings one back. Deleted notes keep
    their history too.

    Example: mdmem history project_knowledge_build.md --json
    """
    from mdmem.store.paths import check_name

    check_name(name)
    for store in selected(options_of(ctx), level):
        versions = store.history(name)
        if not versions:
            continue
        if as_json:
            rows = [{**v.to_dict(), "level": store.level.value} for v in versions]
            typer.echo(json.dumps(rows, ensure_ascii=False, indent=2))
            return
        for v in versions:
            typer.echo(f"{v.version:>4}  {v.at}  {v.source:<12} {v.action:<8} {v.size} bytes")
        return
    if as_json:
        typer.echo("[]")
        return
    raise NoteNotFound(
        name, " or ".join(f"the history of {s.path}" for s in selected(options_of(ctx), level))
    )


@app.command()
def prune(
    ctx: typer.Context,
    dry_run: DryRunOption = False,
    unused: Annotated[
        float | None,
        typer.Option(
            "--unused",
            metavar="DAYS",
            help="Also notes not recalled or read for DAYS (only where usage is recorded).",
        ),
    ] = None,
    level: LevelOption = Which.all,
    as_json: JsonOption = False,
) -> None:
    """Move expired notes (and with --unused, long-unused ones) to the trash.

    Every note moved is printed; `mdmem restore NAME` brings it back. Notes
    whose use is unknown are kept. Session records with no activity for
    MDMEM_SESSIONS_DAYS (90) go to their own trash too; `mdmem timeline
    --restore ID` brings one back.

    Example: mdmem prune --dry-run --unused 45
    """
    from mdmem.manager.prune import prune as prune_store
    from mdmem.manager.prune import prune_sessions

    options = options_of(ctx)
    rows = []
    for store in selected(options, level):
        for item in prune_store(store, dry_run=dry_run, unused_days=unused):
            rows.append(item)
        if store.level.value == "project":
            rows += prune_sessions(store, dry_run=dry_run)
    if as_json:
        typer.echo(json.dumps([vars(r) for r in rows], ensure_ascii=False, indent=2))
        return
    verb = "would move" if dry_run else "moved"
    for row in rows:
        typer.echo(f"{verb} {row.filename} ({row.level}) to the trash: {row.reason}")
    if not rows and not options.quiet:
        typer.echo("nothing to prune")


@app.command()
def stale(
    ctx: typer.Context,
    fix: Annotated[
        bool, typer.Option("--fix", help="Rewrite paths git saw renamed, in the notes.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """List project notes that name files the code no longer has as they had them.

    Paths in backticks are checked against the working tree and git history:
    renamed, gone, or changed since the note was updated.

    Example: mdmem stale --json
    """
    from mdmem.store.stale import check, fix_renames

    workspace, project, _ = options_of(ctx).stores()
    found = check(project, workspace)
    if fix:
        for name in fix_renames(project, found):
            typer.echo(f"updated {name}: renamed paths rewritten")
        found = check(project, workspace)
    if as_json:
        typer.echo(json.dumps([s.to_dict() for s in found], ensure_ascii=False, indent=2))
        return
    for item in found:
        typer.echo(f"{item.filename}: {'; '.join(item.reasons)}")
    if any(item.renames for item in found):
        typer.echo("`mdmem stale --fix` rewrites the renamed paths in these notes", err=True)
    if not found and not options_of(ctx).quiet:
        typer.echo("no stale notes")


@app.command()
def consolidate(
    ctx: typer.Context,
    dry_run: DryRunOption = False,
    max_changes: Annotated[
        int, typer.Option("--max-changes", min=0, help="At most this many changes in one run.")
    ] = 10,
    level: LevelOption = Which.all,
    as_json: JsonOption = False,
) -> None:
    """Let the model merge, date, supersede and delete notes, a bounded batch at a time.

    Every change goes through history and the trash; --dry-run prints the
    plan only.

    Example: mdmem consolidate --dry-run --max-changes 5 --level project
    """
    from mdmem.extract.providers import default_provider
    from mdmem.manager.consolidate import consolidate as run

    provider = default_provider()
    if provider.name == "offline":
        # The offline provider keeps only what a person asked for in so many words:
        # it cannot judge notes, so a plan from it would always be empty.
        from mdmem.extract.providers import choose

        typer.echo(
            f"mdmem: error: consolidate needs a model, and none is set up ({choose()[1]}): "
            "set ANTHROPIC_API_KEY, MDMEM_OPENAI_BASE_URL, or MDMEM_PROVIDER=claude-code",
            err=True,
        )
        raise typer.Exit(1)
    out = []
    user = options_of(ctx).stores()[2]  # whose usage ledger counts the tokens, as for turns
    try:
        for store in selected(options_of(ctx), level):
            report = run(
                store, provider, max_changes=max_changes, dry_run=dry_run, ledger_root=user.path
            )
            out.append((store, report))
    finally:
        closer = getattr(provider, "close", None)
        if callable(closer):
            closer()  # the SDK's connection pool, or a socket is left for the GC
    if as_json:
        data = [
            {
                "level": store.level.value,
                "planned": list(r.planned),
                "applied": [vars(a) | {"level": a.level.value} for a in r.result.applied],
                "rejected": [x.reason for x in r.rejected],
                "dropped": r.dropped,
            }
            for store, r in out
        ]
        typer.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))
        return
    for store, report in out:
        head = "plan" if dry_run else "applied"
        why = ""
        if not report.planned and not report.rejected:
            why = (
                " (the store has no notes)"
                if not report.batches
                else f" ({provider.name} found nothing to change in {report.batches} batch(es))"
            )
        typer.echo(f"{store.level.value}: {head}: {len(report.planned)} change(s){why}")
        for op in report.planned:
            typer.echo(f"  {op.get('action')} {op.get('filename', op.get('title', ''))}")
        for item in report.rejected:
            typer.echo(f"  rejected: {item.reason}")
        if report.dropped:
            typer.echo(f"  {report.dropped} more left for a later run (--max-changes)")
        if report.budget_spent:
            typer.echo("  the daily token budget (MDMEM_DAILY_TOKENS) stopped the run early")
