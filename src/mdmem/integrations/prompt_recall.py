"""Claude Code's ``UserPromptSubmit`` hook: the notes relevant to the prompt, as context.

``mdmem hook user-prompt-submit`` reads the hook's JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``prompt``),
recalls the notes of the workspace's two stores that answer the prompt, within
a small budget (:data:`BUDGET_TOKENS`), and prints::

    {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                            "additionalContext": "<the recalled block>"}}

What it shows is decided in one place, :func:`mdmem.recall.engine.gate` (with
``per_prompt``): it prints nothing when no note is relevant: a note must hold
a share of the prompt's words (or, with vectors, be close in meaning); the
prompt must be about something (a note :data:`mdmem.recall.engine.ABOUT` it,
or a first note well ahead of the second, and not a word that many notes
share alike); and a note must come near the best candidate's evidence, the
best counted before anything already seen is left out, so a prompt whose
answer was shown already is not padded with weak matches. It never repeats a
note an earlier prompt of the same session recalled; a note the SessionStart
block listed (recorded by the SessionStart hook, :func:`remember_session_start`,
or, when it did not run, read from its cached block), which gave only its
title and summary, comes again when it is one of the prompt's first
candidates or the prompt is about it, once. Both are kept
per session in a small file of the project store's state
folder: reading it costs the same whatever the store's size and the session's
length (it keeps at most :data:`MAX_SEEN` recalled names, the latest). After
``/compact`` or ``/clear`` (a SessionStart of that source) the notes recalled
before are no longer in the context, and may be recalled again. The output
stays under Claude Code's 10,000-character cap on hook output. The workspace
is ``$CLAUDE_PROJECT_DIR`` when set, else the hook's ``cwd``.

It runs as a cold process at every prompt, so it matches by meaning only when
the resident embedder (:mod:`mdmem.recall.resident`) answers at once, and
starts it for the next prompt when a store has vectors (the model takes a
second or more to load); ``MDMEM_SEMANTIC=on`` / ``off`` decides otherwise. It
imports only what the answer needs (no typer, no YAML on a settled store).
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache

from mdmem import _json
from mdmem.integrations._session import (
    MAX_SEEN,
    names_in,
    read_seen,
    seen_path,
    workspace_of,
    write_seen,
)

TYPE_CHECKING = False  # typing costs milliseconds on the hook path
if TYPE_CHECKING:
    import re
    from collections.abc import Sequence

    from mdmem.store.hit import Hit
    from mdmem.store.store import Store
    from mdmem.store.workspace import ReadingStore

__all__ = [
    "BUDGET_TOKENS",
    "MAX_OUTPUT_CHARS",
    "MAX_SEEN",
    "MIN_COVERAGE",
    "PAST_WORK",
    "RELATIVE",
    "asks_about_past",
    "output",
    "past_sessions",
    "read_input",
    "user_prompt_submit",
]

#: The recalled block's budget, in estimated tokens: small, since it comes with every prompt.
BUDGET_TOKENS = 400
#: Claude Code's documented cap on what a hook may add to the context.
MAX_OUTPUT_CHARS = 10_000
#: A note must hold this IDF-weighted share of the prompt's terms to count as relevant (or,
#: with vectors, be this close in meaning: mdmem.recall.engine.MIN_COSINE). Calibrated on
#: benchmarks/data/recall-calib (`bench_recall.py hooks`), never on recall-dev's queries.
MIN_COVERAGE = 0.25
#: ... and at least this share of the best candidate's evidence: no padding with weak matches.
RELATIVE = 0.6
_MAX_PROMPT_CHARS = 4000


def read_input() -> dict[str, object]:
    """The hook's JSON from stdin; an empty object when there is none or it is not JSON."""
    try:
        text = sys.stdin.read(1_000_000)
        data = _json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def output(block: str) -> str:
    """The JSON the hook prints for ``block`` (``""`` when there is nothing to add)."""
    if not block:
        return ""
    context = f"# Recalled from long-term memory (mdmem), for this prompt\n{block}"
    context = context[: MAX_OUTPUT_CHARS - 200]
    return _json.dumps(
        {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}},
        ensure_ascii=False,
    )


def _in_session_start(
    payload: dict[str, object],
    workspace: str | None,
    user_dir: str | None,
    stores: tuple[ReadingStore, ReadingStore],
) -> list[str]:
    """The notes the SessionStart block lists, when its hook did not record them: those of
    the block it last cached for these stores (what a session begun earlier was shown,
    however the stores changed since: one read, at any size), else the block made now."""
    from mdmem.store import blockcache

    try:
        block = blockcache.latest("session-start-", stores[0].state, stores[1].state)
        if block is not None:
            return names_in(block)
        from mdmem.integrations.claude_code import session_block

        return names_in(session_block(payload, workspace, user_dir))
    except Exception:  # a hook never fails for this: worst case, a note is shown twice
        return []


def _by_meaning(stores: Sequence[Store | ReadingStore]) -> bool:
    """Whether this prompt is matched by meaning too: ``MDMEM_SEMANTIC`` ``on`` / ``off``;
    else only when a store has vectors and the resident embedder answers now (a model load
    is seconds; see :func:`mdmem.recall.semantic.for_prompt`)."""
    setting = os.environ.get("MDMEM_SEMANTIC", "auto").strip().lower()
    if setting in ("on", "1", "yes", "true"):
        return True
    if setting in ("0", "off", "no", "false"):
        return False
    folders = [store.state.path for store in stores]
    # semantic.FILE: without vectors there is nothing to match by meaning, nothing to import.
    if not any(os.path.exists(os.path.join(folder, "vectors.sqlite")) for folder in folders):
        return False
    from mdmem.recall.semantic import for_prompt

    return for_prompt(folders)


def user_prompt_submit(
    payload: dict[str, object], workspace: str | None = None, user_dir: str | None = None
) -> str:
    """What ``mdmem hook user-prompt-submit`` prints for one hook input (see the module)."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    from mdmem.integrations import session_control

    if session_control.skip(payload):  # paused, or MDMEM_DISABLE
        return ""
    prompt = prompt[:_MAX_PROMPT_CHARS]
    from mdmem.recall.engine import recalled
    from mdmem.store.workspace import resolve_reading

    _, project, user = resolve_reading(workspace, user_dir, start=workspace_of(payload))
    stores = [project, user]
    semantic = _by_meaning(stores)
    path = seen_path(project.path, payload.get("session_id"))
    known = read_seen(path)
    seen: list[str]
    if known is None:
        start, seen = _in_session_start(payload, workspace, user_dir, (project, user)), []
    else:
        start, seen = known
    past = past_sessions(project.path, prompt, payload.get("session_id"))
    block, hits = recalled(
        stores,
        prompt,
        BUDGET_TOKENS,
        hint="call the memory_search tool or run `mdmem search QUERY`",
        semantic=semantic,
        min_coverage=MIN_COVERAGE,
        relative=RELATIVE,
        exclude=seen,
        listed=start,
        limit=8,
        per_prompt=True,
    )
    _log_recall(project.path, payload.get("session_id"), prompt, block, hits)
    if not block:
        if known is None:
            write_seen(project.path, path, start, seen)
        return output(past)
    write_seen(project.path, path, start, [*seen, *(h.filename for h in hits)])
    return output(f"{block}\n{past}" if past else block)


#: A prompt that asks about past work ("did we fix ... before?"): it may recall a session.
PAST_WORK = (
    r"\b(?:did (?:we|you|i)|have (?:we|you)|had we|last time|before|earlier|previous(?:ly)?|"
    r"yesterday|already|ago|history of)\b|之前|上次|以前|昨天|已经"
)
#: What every match of :data:`PAST_WORK` in an ASCII prompt holds, in lower case: an
#: ASCII prompt with none of them does not ask about past work, and the pattern (~2 M
#: instructions to compile, a fiftieth of the hook) is not compiled for it.
_PAST_HINTS = (
    "did ",
    "have ",
    "had we",
    "last time",
    "before",
    "earlier",
    "previous",
    "yesterday",
    "already",
    "ago",
    "history of",
)


@lru_cache(maxsize=1)
def _past_work() -> re.Pattern[str]:
    import re

    return re.compile(PAST_WORK, re.I)


def asks_about_past(prompt: str) -> bool:
    """Whether ``prompt`` asks about past work: :data:`PAST_WORK` (case aside) is in it."""
    if prompt.isascii():
        lower = prompt.lower()
        if not any(hint in lower for hint in _PAST_HINTS):
            return False
    return _past_work().search(prompt) is not None


#: At most this many sessions, within this many characters, join the recalled block.
PAST_SESSIONS = 2
PAST_SESSION_CHARS = 700


def past_sessions(store_path: str, prompt: str, current: object = None) -> str:
    """The sessions that answer a prompt about past work, as a short block; ``""`` otherwise.

    Only when the prompt asks about the past, only sessions holding a good share
    of its words (:data:`MIN_COVERAGE`), never the session asking, within
    :data:`PAST_SESSION_CHARS`. Never fails the hook.
    """
    if not asks_about_past(prompt):
        return ""
    from mdmem._lines import clean_inline
    from mdmem.recall.sessions import search_sessions
    from mdmem.store.sessions import built_summary, resolve_id

    try:
        here = resolve_id(store_path, current) if isinstance(current, str) and current else ""
        hits = search_sessions(store_path, prompt, limit=PAST_SESSIONS + 1)
    except Exception:  # a hook never fails for this
        return ""
    lines = ["## Past sessions (what the agent did; `mdmem timeline` shows more)"]
    size = len(lines[0])
    for hit in hits:
        s = hit.session
        if hit.coverage < MIN_COVERAGE or s.session_id == here or here in s.aliases:
            continue
        files = f" Files: {', '.join(s.files[:4])}." if s.files else ""
        line = clean_inline(
            f"- {s.started[:10]} (session {s.session_id[:8]}): "
            f"{s.summary or built_summary(s)}{files}",
            PAST_SESSION_CHARS // PAST_SESSIONS,
        )
        if size + len(line) > PAST_SESSION_CHARS or len(lines) > PAST_SESSIONS:
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) if len(lines) > 1 else ""


def _log_recall(root: str, session: object, prompt: str, block: str, hits: Sequence[Hit]) -> None:
    """What this prompt recalled, for the web page's activity view (first words, redacted)."""
    if not isinstance(session, str) or not session:
        return
    from mdmem.store import activity

    names: dict[str, list[str]] = {}
    for hit in hits:
        names.setdefault(getattr(hit.level, "value", str(hit.level)), []).append(hit.filename)
    activity.record(
        root,
        session,
        "recall",
        prompt=activity.first_words(prompt),
        n=names,
        tokens=activity.tokens(block) if block else 0,
    )
