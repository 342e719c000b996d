"""Consolidation (``mdmem consolidate``): the model tidies a store, a bounded batch at a time.

The configured provider reads the store's current notes in batches (at most
:data:`BATCH_NOTES` notes and :data:`BATCH_BYTES` bytes each) and proposes
ordinary operations: merge two notes that say the same thing (update one,
``supersedes`` or delete the other), rewrite relative dates ("last week") as
absolute ones, supersede an outdated note, delete an obsolete one. They go
through the same validation, history and trash as every write, and:

- only notes of the batch the model was shown may be updated, deleted or superseded;
- never more than ``max_changes`` operations are applied in one run, whatever
  the model answers; the rest are reported as dropped;
- ``dry_run`` returns the plan and writes nothing;
- every model call goes through the same daily budget (``MDMEM_DAILY_TOKENS``)
  and usage ledger (the user store's) as the worker's turns: a batch that would
  pass the budget is not sent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import date, datetime, timezone

from mdmem.errors import InvalidOperation, InvalidPath, ProviderError
from mdmem.extract.providers.base import ExtractionRequest, Provider
from mdmem.store.operations import Operation, parse_answer, validate
from mdmem.store.results import ApplyResult, Rejected
from mdmem.store.store import Store

__all__ = [
    "BATCH_BYTES",
    "BATCH_NOTES",
    "INSTRUCTIONS",
    "MAX_CHANGES",
    "ConsolidateReport",
    "consolidate",
]

BATCH_NOTES = 25
BATCH_BYTES = 24_000
MAX_CHANGES = 10
_BODY_CHARS = 2_000

INSTRUCTIONS = """\
You tidy the long-term memory of a coding agent: a small set of Markdown notes.
You are shown some notes of one store, each with its file name and the date it
was last updated. Propose only changes that make the memory more correct and
easier to use, as a JSON array of operations (call the tool with them as
`operations` when one is offered); `[]` when the notes are fine.

- Two notes say the same thing: `update` the better one with the merged text and
  give it `"supersedes": ["<the other file name>"]`; the other stays on disk but
  leaves the prompt.
- A note was replaced by a newer note that contradicts it: `update` the newer one
  with `"supersedes": ["<the older file name>"]`.
- A note uses a relative date ("yesterday", "next week", "last sprint"):
  `update` it with the absolute date, worked out from the note's updated date.
- A note is obsolete or wrong and nothing replaces it: `delete` it.

Operations: `{"action": "update", "level": "<level>", "filename": "<file name>",
"content": "<whole new body>", "summary": "<optional>", "supersedes": [...]}` and
`{"action": "delete", "level": "<level>", "filename": "<file name>"}`. Use only
file names you were shown. Keep every fact that is still true; when unsure,
change nothing.
"""


@dataclass(frozen=True)
class ConsolidateReport:
    """What a consolidation run proposed and did."""

    planned: tuple[dict[str, object], ...] = ()
    """The operations kept (validated, within the bound), in order."""
    result: ApplyResult = field(default_factory=ApplyResult)
    """What applying them did (empty in a dry run)."""
    rejected: tuple[Rejected, ...] = ()
    """Operations dropped before applying, and why."""
    dropped: int = 0
    """Valid operations left out because the run reached ``max_changes``."""
    batches: int = 0
    budget_spent: bool = False
    """The daily token budget stopped the run before every batch was shown to the model."""


def _batches(store: Store) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    current: list[tuple[str, str]] = []
    size = 0
    for entry in store.entries():
        if entry.superseded_by:
            continue
        try:
            note = store.read(entry.filename)
        except (InvalidPath, InvalidOperation, KeyError, ValueError):
            continue
        body = note.body if len(note.body) <= _BODY_CHARS else note.body[:_BODY_CHARS] + " …"
        updated = note.updated.date().isoformat() if note.updated else "unknown"
        text = (
            f'<note file="{note.filename}" type="{note.type.value}" updated="{updated}">\n'
            f"# {note.title}\n{note.summary}\n\n{body}\n</note>\n"
        )
        if current and (len(current) >= BATCH_NOTES or size + len(text) > BATCH_BYTES):
            out.append(current)
            current, size = [], 0
        current.append((note.filename, text))
        size += len(text)
    if current:
        out.append(current)
    return out


def _check(item: object, store: Store, shown: set[str]) -> dict[str, object]:
    op = Operation.from_dict(item)
    if op.level in (None, ""):
        op = Operation.from_dict({**op.to_dict(), "level": store.level.value})
    valid = validate(op, store.level)
    if valid is None:
        raise InvalidOperation("nothing to do", "action")
    named = [getattr(valid, "filename", None), *getattr(valid, "supersedes", ())]
    for name in named:
        if name is not None and name not in shown:
            raise InvalidOperation(f"{name!r} was not among the notes shown", "filename")
    return op.to_dict()


def consolidate(
    store: Store,
    provider: Provider,
    *,
    max_changes: int = MAX_CHANGES,
    dry_run: bool = False,
    today: date | None = None,
    ledger_root: str | None = None,
    daily_tokens: int | None = None,
) -> ConsolidateReport:
    """Ask ``provider`` to tidy ``store``; apply at most ``max_changes`` operations.

    ``ledger_root`` is the store whose usage ledger counts the model's tokens
    (default: the user store, as for turns); ``daily_tokens`` the daily budget
    (default: ``MDMEM_DAILY_TOKENS``).

    Raises:
        ProviderError: the model could not be reached, answered no operations, or
            the daily token budget is spent before the first batch.
        LockTimeout: the store is locked by someone else.
    """
    from mdmem.manager.manager import budget_from_env, budgeted_call, tokens_needed
    from mdmem.store import ledger
    from mdmem.store.paths import user_root

    root = ledger_root if ledger_root is not None else user_root()
    daily = daily_tokens if daily_tokens is not None else budget_from_env("MDMEM_DAILY_TOKENS")
    budget_spent = False
    day = today or datetime.now(timezone.utc).date()
    planned: list[dict[str, object]] = []
    rejected: list[Rejected] = []
    dropped = 0
    batches = 0
    touched: set[str] = set()
    for batch in _batches(store):
        if len(planned) >= max_changes:
            break
        batches += 1
        shown = {name for name, _ in batch}
        prompt = (
            f"Today is {day.isoformat()}. These are {len(batch)} notes of the "
            f"{store.level.value} store:\n\n" + "".join(text for _, text in batch)
        )
        request = ExtractionRequest(
            system=INSTRUCTIONS,
            prompt=prompt,
            messages=(),
            project_index="",
            user_index="",
            today=day,
        )
        if daily is not None and provider.name != "offline":
            used = ledger.tokens_on(root, ledger.day_of(time.time()))
            if used + tokens_needed(request) > daily:
                if not planned:
                    raise ProviderError(
                        f"the daily token budget (MDMEM_DAILY_TOKENS={daily}) is spent: "
                        f"{used} tokens used today (UTC); consolidate tomorrow or raise it",
                        retryable=False,
                    )
                budget_spent = True
                break
        try:
            items = parse_answer(budgeted_call(provider, request, root, "consolidate"))
        except ProviderError:
            if planned:
                break  # keep what earlier batches proposed
            raise
        for item in items:
            try:
                op = _check(item, store, shown)
            except (InvalidOperation, InvalidPath) as exc:
                rejected.append(Rejected(item, str(exc)))
                continue
            name = str(op.get("filename", ""))
            if name in touched:
                rejected.append(Rejected(item, f"{name} was already changed in this run"))
                continue
            if len(planned) >= max_changes:
                dropped += 1
                continue
            touched.add(name)
            planned.append(op)
    apply = planned and not dry_run
    result = store.apply(planned, source="consolidate") if apply else ApplyResult()
    return ConsolidateReport(
        tuple(planned), result, tuple(rejected), dropped, batches, budget_spent
    )
