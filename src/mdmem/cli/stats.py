"""``mdmem stats``: what the memory holds, what it costs, and which notes are used."""

from __future__ import annotations

from itertools import islice
from typing import Annotated

import typer

from mdmem.cli._base import JsonOption, app, options_of, progress_bar


@app.command()
def stats(
    ctx: typer.Context,
    as_json: JsonOption = False,
    days: Annotated[int, typer.Option(min=1, help="Days of token totals to show.")] = 14,
    unused_days: Annotated[
        int, typer.Option("--unused-days", min=1, help="A note unused this long is listed.")
    ] = 30,
) -> None:
    """Show notes by level and type, the prompt block's size, model tokens per day and
    per turn, turns skipped, and which notes were injected, read and written.

    Model tokens are counted for the person (the user store's ledger), across
    workspaces; budgets come from MDMEM_DAILY_TOKENS and MDMEM_TURN_TOKENS.

    Example: mdmem stats --json
    """
    from mdmem.manager.manager import budget_from_env
    from mdmem.manager.stats import collect, json_chunks

    options = options_of(ctx)
    _, project, user = options.stores()
    # A bar on a terminal's stderr while a stat pass goes through the notes; none on a pipe.
    with progress_bar(options, "reading the stores") as progress:
        data = collect(
            project,
            user,
            days=days,
            unused_days=unused_days,
            daily_tokens=budget_from_env("MDMEM_DAILY_TOKENS"),
            turn_tokens=budget_from_env("MDMEM_TURN_TOKENS"),
            per_note=as_json,  # the text shows the most used and the unused, not every row
            stream=True,  # rows written as they are made, never all held
            progress=progress,
        )
    if as_json:
        for chunk in json_chunks(data):
            typer.echo(chunk, nl=False)
        typer.echo()
        return
    for line in render(data):
        typer.echo(line)


def render(data: dict[str, object]) -> list[str]:
    """The text form of :func:`mdmem.manager.stats.collect`'s figures."""
    notes, block, tokens = data["notes"], data["prompt_block"], data["tokens"]
    assert isinstance(notes, dict) and isinstance(block, dict) and isinstance(tokens, dict)
    out = ["Notes"]
    for level, counts in notes.items():
        kinds = ", ".join(f"{k} {v}" for k, v in counts["by_type"].items()) or "none"
        out.append(f"  {level:<8} {counts['total']:>5}  ({kinds})")
    out.append(
        f"Prompt block: ~{block['tokens']} tokens, {block['lines']} lines, {block['bytes']} bytes"
    )
    budget = tokens["daily_budget"]
    extraction = data.get("extraction")
    if isinstance(extraction, dict):
        out.append(f"Extraction: {extraction['provider']} ({extraction['reason']})")
    out.append(
        f"Model tokens today: {tokens['today']}"
        + (f" of {budget} (MDMEM_DAILY_TOKENS)" if budget else " (no daily budget)")
    )
    out.append("  day          input   output  cache-rd cache-wr  calls skipped held")
    for row in tokens["days"]:
        out.append(
            f"  {row['day']}  {row['input']:>7} {row['output']:>8} {row['cache_read']:>9}"
            f" {row['cache_write']:>8} {row['calls']:>6} {row['skipped']:>7} {row['held']:>4}"
        )
    per_turn = tokens["per_turn"]
    out.append(
        f"Per turn: {per_turn['turns']} turns with a model call, ~{per_turn['average']} tokens "
        f"on average, {per_turn['max']} at most; {data['turns_skipped']} turns skipped"
    )
    most = data["most_used"]
    assert isinstance(most, list)
    out.append("Most used notes" if most else "Most used notes: none recorded yet")
    for row in most:
        out.append(
            f"  {row['level']:<8} {row['filename']}: injected {row['injected']}, read {row['read']}"
            f", last {max(filter(None, [row['last_injected'], row['last_read']]), default='-')}"
        )
    unused = data["unused"]
    assert isinstance(unused, dict)
    out.append(f"Not used in {unused['days']} days: {len(unused['notes'])} notes")
    for entry in islice(unused["notes"], 20):
        out.append(f"  {entry['level']:<8} {entry['filename']}")
    disputed, waiting = data.get("disputed", []), data.get("proposals_waiting", {})
    assert isinstance(disputed, list) and isinstance(waiting, dict)
    out.append(f"Disputed notes: {len(disputed)}")
    for row in disputed[:20]:
        out.append(f"  {row['level']:<8} {row['filename']} ({row.get('count', 1)}x)")
    out.append(f"Proposals waiting for review: {sum(waiting.values())} (`mdmem review`)")
    semantic = data.get("semantic")
    if isinstance(semantic, dict):
        from mdmem.recall.embedder import describe

        out.append("Semantic recall")
        for level, state in semantic.items():
            if isinstance(state, dict):
                out.append(f"  {level:<8} {describe(state)}")
    return out
