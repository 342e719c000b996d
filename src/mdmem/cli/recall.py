"""Finding notes: search, recall, embed, eval recall; and eval extract.

Each parses its arguments, calls :mod:`mdmem.recall`, and echoes the result.
"""

from __future__ import annotations

import json
from contextlib import contextmanager, nullcontext
from enum import Enum
from typing import TYPE_CHECKING, Annotated

import typer

from mdmem._kinds import NoteType
from mdmem.cli._base import JsonOption, LevelOption, Which, app, options_of, progress_bar, selected
from mdmem.cli._fastpath import search_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mdmem.store.store import Store

SemanticOption = Annotated[
    bool | None,
    typer.Option(
        "--semantic/--lexical",
        help="Match by meaning too (needs mdmem[semantic]), or words only. "
        "Default: $MDMEM_SEMANTIC, else on when installed.",
        show_default=False,
    ),
]


@app.command()
def search(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="A question or keywords, in any language.")],
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 10,
    level: LevelOption = Which.all,
    note_type: Annotated[
        NoteType | None, typer.Option("--type", help="Only notes of this type.")
    ] = None,
    semantic: SemanticOption = None,
    sessions: Annotated[
        bool,
        typer.Option(
            "--sessions", help="Find past sessions (what the agent did) instead of notes."
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Find the notes that answer a question, best first.

    Superseded and expired notes are left out. --json prints an array of hits
    (filename, level, type, title, summary, score, updated, snippet). With
    --sessions, the sessions whose asks, files, commands or summary match
    ("did we fix the billing retry?"), each as a timeline entry with a score.

    Example: mdmem search "how do we deploy" --limit 5 --json
    """
    from mdmem.recall import search as search_notes

    if sessions:
        from mdmem.recall.sessions import search_sessions

        _, project, _ = options_of(ctx).stores()
        found = search_sessions(project.path, query, limit=limit)
        if as_json:
            typer.echo(json.dumps([h.as_dict() for h in found], ensure_ascii=False, indent=2))
        for hit in [] if as_json else found:
            typer.echo(_session_line(hit.session))
            for item in hit.matched[:3]:
                typer.echo(f"         {item}")
        return
    stores = selected(options_of(ctx), level)
    types = [note_type.value] if note_type is not None else None
    hits = search_notes(stores, query, limit=limit, types=types, semantic=semantic)
    text = search_text(hits, as_json)
    if text:
        typer.echo(text)


def _session_line(session: object) -> str:
    from mdmem.store.sessions import Session, built_summary

    assert isinstance(session, Session)
    when = session.started[:16].replace("T", " ") or "undated"
    state = "" if session.ended else " (open)"
    return f"{when}{state}  {session.session_id[:8]}  {session.summary or built_summary(session)}"


@app.command()
def timeline(
    ctx: typer.Context,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="At most this many.")] = 20,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="DATE", help="Only sessions active on or after DATE."),
    ] = None,
    file: Annotated[
        str | None,
        typer.Option("--file", metavar="PATH", help="Only sessions that changed PATH."),
    ] = None,
    restore: Annotated[
        str | None,
        typer.Option("--restore", metavar="ID", help="Bring a pruned session back, then list."),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """List the agent's past sessions in this workspace, newest first.

    Each session: when, branch, what was asked, the files changed, the commands
    and tests run, the notes written, a summary. --json prints an array of
    entries (session_id, started, ended, summary, files, commands, tests,
    notes, ...). Records live in mdmem's state (MDMEM_SESSIONS=project: the
    store's sessions/ folder); `mdmem prune` moves old ones to the trash.

    Example: mdmem timeline --since 2026-11-01 --file billing/retry.py --json
    """
    from mdmem.store import sessions as records

    workspace, project, _ = options_of(ctx).stores()
    if restore:
        with project.lock():
            back = records.restore(project.path, restore)
        if not as_json:
            typer.echo(f"restored session {back.session_id}")
    try:
        found = records.timeline(
            project.path, limit=limit, since=since, file=file, workspace=workspace
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--since") from None
    if as_json:
        typer.echo(json.dumps([s.as_dict() for s in found], ensure_ascii=False, indent=2))
        return
    for session in found:
        typer.echo(_session_line(session))
        for path in session.files[:5]:
            typer.echo(f"         changed {path}")
        for _, name in session.notes[:5]:
            typer.echo(f"         wrote {name}")
    if not found and not options_of(ctx).quiet:
        typer.echo("no sessions recorded")


@app.command()
def recall(
    ctx: typer.Context,
    query: Annotated[str, typer.Argument(help="A question or keywords, in any language.")],
    budget: Annotated[
        int, typer.Option("--budget", min=1, help="At most this many tokens (estimated).")
    ] = 1200,
    semantic: SemanticOption = None,
) -> None:
    """Print the Markdown block of the notes relevant to a question, within a token budget.

    What an agent would be given for that question: whole lines, the best
    notes first, and how many more matched.

    Example: mdmem recall "which Rust version do we need?" --budget 400
    """
    from mdmem.recall import recall_block

    _, project, user = options_of(ctx).stores()
    block = recall_block([project, user], query, budget, semantic=semantic)
    if block:
        typer.echo(block)


@app.command()
def embed(ctx: typer.Context, level: LevelOption = Which.all) -> None:
    """Embed the notes that have no vector yet, for semantic recall (needs mdmem[semantic]).

    Searches start this in the background by themselves and meanwhile rank the
    notes without a vector by their words; run it to have it done now. Only new
    and changed notes are embedded; it waits for an embedder already running,
    and what it embedded stays even if it is stopped. A terminal shows a
    progress bar.

    Example: mdmem embed --level project
    """
    from mdmem.recall import semantic
    from mdmem.recall.embedder import embed as embed_notes

    if not semantic.available():
        from mdmem._install import extra_hint

        typer.echo(
            f"mdmem: error: semantic recall is not installed: {extra_hint('semantic')}",
            err=True,
        )
        raise typer.Exit(1)
    options = options_of(ctx)
    for store in selected(options, level):
        with progress_bar(options, f"embedding {store.level.value}", min_items=1) as progress:
            report = embed_notes(store, progress=progress)
        if not options.quiet:
            typer.echo(
                f"{store.level.value}: {report.embedded} notes embedded, "
                f"{report.with_vectors} of {report.notes} have a vector ({report.seconds:.1f} s)"
            )


class Questions(str, Enum):
    """Where ``eval recall`` takes its queries from."""

    rules = "rules"
    sentences = "sentences"
    other_language = "other-language"
    model = "model"


@contextmanager
def _asker(stores: list[Store]) -> Iterator[Callable[[str, str], str]]:
    """The configured model's ``ask``, within the daily budget and recorded in the ledger.

    The provider is closed on leaving: its HTTP client's pooled keep-alive connection
    would otherwise stay open until the garbage collector finds it (a ResourceWarning
    for an unclosed socket, at a moment nobody chose).
    """
    import time

    from mdmem.errors import ProviderError
    from mdmem.extract.providers import choose, make
    from mdmem.manager.manager import budget_from_env
    from mdmem.store import ledger

    name, reason = choose()
    provider = make(name)
    ask = getattr(provider, "ask", None)
    if not callable(ask):
        raise typer.BadParameter(
            f"the {name} provider ({reason}) cannot write questions: set ANTHROPIC_API_KEY, "
            "or MDMEM_OPENAI_BASE_URL for an OpenAI-compatible server",
            param_hint="--questions",
        )
    user = next(s for s in stores if s.level.value == "user")  # the budget's ledger
    daily = budget_from_env("MDMEM_DAILY_TOKENS")

    def asked(system: str, prompt: str) -> str:
        now = time.time()
        if daily is not None and ledger.tokens_on(user.path, ledger.day_of(now)) >= daily:
            raise ProviderError(f"the daily token budget (MDMEM_DAILY_TOKENS={daily}) is spent")
        try:
            return str(ask(system, prompt))
        finally:
            usage = getattr(provider, "last_usage", None)
            if usage is not None:
                ledger.record(
                    user.path,
                    "call",
                    time.time(),
                    turn="eval-recall",
                    provider=name,
                    model=usage.model,
                    **{
                        "in": usage.input_tokens,
                        "out": usage.output_tokens,
                        "cr": usage.cache_read_tokens,
                        "cw": usage.cache_write_tokens,
                    },
                )

    try:
        yield asked
    finally:
        close = getattr(provider, "close", None)
        if callable(close):
            close()


eval_app = typer.Typer(help="Measure how well your memory works.", no_args_is_help=True)
app.add_typer(eval_app, name="eval")


@eval_app.command("recall")
def eval_recall(
    ctx: typer.Context,
    level: LevelOption = Which.all,
    limit: Annotated[
        int, typer.Option("--limit", min=1, help="At most this many probes (a fixed sample).")
    ] = 500,
    seconds: Annotated[
        float, typer.Option("--seconds", min=1, help="Stop after this long.")
    ] = 60.0,
    semantic: SemanticOption = None,
    questions: Annotated[
        Questions,
        typer.Option(
            "--questions",
            help="rules: the note's summary without its title's words, and its most telling "
            "sentence without its rarest words (no model, the default). sentences: a sentence "
            "of each note, copied (finds nearly every note). other-language: the rules' "
            "probes put in the other language (English <-> Chinese) word by word with "
            "CC-CEDICT (the dictionary extra; the embedder picks among translations when "
            "installed). model: the configured model writes a question each note answers, in "
            "its own words, and the same in the other language (costs tokens, counted in the "
            "daily budget).",
        ),
    ] = Questions.rules,
    as_json: JsonOption = False,
) -> None:
    """How well your own notes can be found: hit@1 and hit@5 of probes made from them.

    Each probe is a query made from a note by rule, without copying it (its
    summary without the title's words; its most telling sentence without its
    rarest words), with that note as the answer; no model is called. With
    --questions model, the model you configured for extraction (Anthropic or
    OpenAI-compatible) writes the questions instead, each also in the other
    language; with --questions other-language, the rule probes are put in the
    other language by CC-CEDICT. Reports per level, type,
    probe kind and split (dev, held-out), and the notes hardest to find, each
    with the note found instead and why.

    Example: mdmem eval recall --json
    """
    from mdmem.recall.probe import evaluate

    options = options_of(ctx)
    stores = selected(options, level)
    with (
        (
            _asker(selected(options, Which.all)) if questions is Questions.model else nullcontext()
        ) as ask,
        progress_bar(options, "probing") as progress,
    ):
        source = "rules" if questions is Questions.model else questions.value
        report = evaluate(
            stores,
            limit=limit,
            seconds=seconds,
            semantic=semantic,
            progress=progress,
            ask=ask,
            source=source,
        )
    if as_json:
        typer.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    if not report.run:
        typer.echo("No note has a sentence to probe with.")
        return
    typer.echo(
        f"{report.run} probes over {report.notes} notes: hit@1 {report.hit1:.2f}, "
        f"hit@5 {report.hit5:.2f} ({report.seconds:.1f} s"
        + (", stopped at the time limit" if report.stopped_early else "")
        + ")"
    )
    for key, group in report.groups.items():
        typer.echo(
            f"  {key:<32} n={group['n']:<5.0f} hit@1 {group['hit@1']:.2f}  "
            f"hit@5 {group['hit@5']:.2f}"
        )
    if report.hard:
        typer.echo("Hardest to find:")
        for miss in report.hard:
            where = f"rank {miss.rank}" if miss.rank else "not in the top 10"
            typer.echo(f"  {miss.level:<8} {miss.filename} ({where}, {miss.kind}): {miss.query}")
            if miss.why:
                typer.echo(f"           {miss.why}")


class Split(str, Enum):
    """Which part of the labelled set ``eval extract`` runs."""

    all = "all"
    tune = "tune"
    held_out = "held-out"


@eval_app.command("extract")
def eval_extract(
    ctx: typer.Context,
    provider: Annotated[
        str | None,
        typer.Option(
            "--provider",
            help="anthropic, openai, claude-code, offline, or recorded (with --answers). "
            "Default: the provider extraction uses ($MDMEM_PROVIDER, else an API key, else "
            "offline).",
            show_default=False,
        ),
    ] = None,
    split: Annotated[
        Split, typer.Option("--split", help="tune, held-out (never tuned on), or all.")
    ] = Split.all,
    answers: Annotated[
        str | None,
        typer.Option(
            "--answers",
            help="For --provider recorded: a JSON file of case id to the model's operations.",
            show_default=False,
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """What a provider keeps from about 120 labelled turns, scored without a model.

    Each turn (English and Chinese, from coding sessions: corrections,
    preferences, project facts, references, changed facts, noise, secrets)
    runs through the real pipeline into temporary stores. Prints precision,
    recall, store and type accuracy, noise notes, secrets on disk,
    supersession, and tokens and cost per turn, overall and per split,
    language and kind. A model provider spends tokens (about 120 calls),
    recorded in your usage ledger.

    Example: mdmem eval extract --provider offline --split held-out
    """
    from mdmem.manager.extract_eval import run

    options = options_of(ctx)
    chosen = None if split is Split.all else split.value
    try:
        with progress_bar(options, "turns") as progress:
            report = run(provider, split=chosen, answers=answers, progress=progress)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(report.as_dict(), ensure_ascii=False, indent=2))
        return
    typer.echo(_extract_text(report))


def _extract_text(report: object) -> str:
    from mdmem.manager.extract_eval import Report

    assert isinstance(report, Report)

    def num(value: object, fmt: str = ".2f") -> str:
        return "—" if value is None else format(value, fmt)

    def line(label: str, s: dict[str, object]) -> str:
        cost = s["cost_per_turn"]
        return (
            f"  {label:<22} n={s['turns']:<4} P {num(s['precision'])}  R {num(s['recall'])}  "
            f"store {num(s['store_accuracy'])}  type {num(s['type_accuracy'])}  "
            f"noise {s['noise_notes']}  secrets {s['secrets_on_disk']}  "
            f"supersede {num(s['supersession'])}  tok/turn {num(s['tokens_per_turn'], '.0f')}  "
            f"$/turn {num(cost, '.5f')}"
        )

    model = f" ({report.model})" if report.model else ""
    out = [
        f"eval extract: {report.provider}{model}, {len(report.results)} turns, "
        f"{report.seconds:.1f} s",
        line("all", report.summary()),
    ]
    out += [line(key, group) for key, group in report.groups().items()]
    if report.stopped:
        out.append(f"stopped after {len(report.results)} turns: {report.stopped}")
    errors = [r for r in report.results if r.error]
    if errors:
        out.append(f"{len(errors)} turn(s) failed, first: {errors[0].id}: {errors[0].error}")
    return "\n".join(out)
