"""Claude Code's ``UserPromptSubmit`` hook: the notes relevant to the prompt, as context.

``mdmem hook user-prompt-submit`` reads the hook's JSON on stdin
(``session_id``, ``transcript_path``, ``cwd``, ``hook_event_name``, ``prompt``),
recalls the notes of the workspace's two stores that answer the prompt, within
a small budget (:data:`BUDGET_TOKENS`), and prints::

    {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                            "additionalContext": "<the recalled block>"}}

It prints nothing when no note is relevant. It never repeats a note already in
the session's context: those in the SessionStart block (every note line of the
prompt block names its file in parentheses; worked out at the session's first
recall) and those an earlier prompt of the same session recalled, both
remembered per session in the project store's state folder. The output stays
under Claude Code's 10,000-character cap on hook output. The workspace is
``$CLAUDE_PROJECT_DIR`` when set, else the hook's ``cwd``.

It runs as a cold process at every prompt, so it is lexical only (the semantic
model takes about a second to load) unless ``MDMEM_SEMANTIC=on``.
"""

from __future__ import annotations

import json
import os
import re
import sys

from mdmem.recall.engine import recalled, search
from mdmem.store import _catalog, _fs
from mdmem.store.index import line_filename, prompt_block
from mdmem.store.paths import state_dir
from mdmem.store.workspace import resolve

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = [
    "BUDGET_TOKENS",
    "MAX_OUTPUT_CHARS",
    "MIN_COVERAGE",
    "output",
    "read_input",
    "user_prompt_submit",
]

#: The recalled block's budget, in estimated tokens: small, since it comes with every prompt.
BUDGET_TOKENS = 400
#: Claude Code's documented cap on what a hook may add to the context.
MAX_OUTPUT_CHARS = 10_000
#: A note must hold this IDF-weighted share of the prompt's terms to count as relevant.
MIN_COVERAGE = 0.25
_SEEN_DIR = os.path.join("claude-code", "recalled")
_SESSION = re.compile(r"^[A-Za-z0-9_-]{1,100}$")
_MAX_PROMPT_CHARS = 4000
_MAX_SEEN = 2000


def read_input() -> dict[str, object]:
    """The hook's JSON from stdin; an empty object when there is none or it is not JSON."""
    try:
        text = sys.stdin.read(1_000_000)
        data = json.loads(text) if text.strip() else {}
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def output(block: str) -> str:
    """The JSON the hook prints for ``block`` (``""`` when there is nothing to add)."""
    if not block:
        return ""
    context = f"# Recalled from long-term memory (mdmem), for this prompt\n{block}"
    context = context[: MAX_OUTPUT_CHARS - 200]
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}},
        ensure_ascii=False,
    )


def _seen_path(store: Store, session: str) -> str | None:
    if not _SESSION.match(session):
        return None
    return os.path.join(state_dir(store.path), _SEEN_DIR, f"{session}.json")


def _read_seen(path: str | None) -> tuple[set[str], set[str]] | None:
    """What the session has seen: (notes SessionStart listed, notes recalled); None if unknown."""
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    start, recalled = data.get("start"), data.get("recalled")
    if not isinstance(start, list) or not isinstance(recalled, list):
        return None
    return (
        {n for n in start if isinstance(n, str)},
        {n for n in recalled if isinstance(n, str)},
    )


def _write_seen(store: Store, path: str | None, start: set[str], recalled: set[str]) -> None:
    if path is None:
        return
    try:
        _catalog.ensure_state_dir(store.path)
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        payload = json.dumps(
            {"start": sorted(start), "recalled": sorted(recalled)[:_MAX_SEEN]},
            ensure_ascii=False,
        )
        _fs.atomic_write(path, payload.encode("utf-8"), private=True, durable=False)
    except OSError:
        pass  # remembering is a nicety; the next prompt may repeat a note, nothing worse


def _in_session_start(project: Store, user: Store) -> set[str]:
    """The notes the SessionStart block lists (worked out at the session's first recall)."""
    names = set()
    for line in prompt_block(project, user).splitlines():
        name = line_filename(line)
        if name:
            names.add(name)
    return names


def user_prompt_submit(
    payload: dict[str, object], workspace: str | None = None, user_dir: str | None = None
) -> str:
    """What ``mdmem hook user-prompt-submit`` prints for one hook input (see the module)."""
    prompt = payload.get("prompt")
    if not isinstance(prompt, str) or not prompt.strip():
        return ""
    prompt = prompt[:_MAX_PROMPT_CHARS]
    where = os.environ.get("CLAUDE_PROJECT_DIR") or payload.get("cwd")
    _, project, user = resolve(
        workspace, user_dir, start=where if isinstance(where, str) and where else None
    )
    stores = [project, user]
    semantic = os.environ.get("MDMEM_SEMANTIC", "").strip().lower() in ("on", "1", "yes", "true")
    # Nothing relevant at all: stop before working out what the session has seen.
    if not search(stores, prompt, limit=1, semantic=semantic, min_coverage=MIN_COVERAGE):
        return ""
    session = payload.get("session_id")
    seen_path = _seen_path(project, session) if isinstance(session, str) else None
    known = _read_seen(seen_path)
    seen: set[str]
    if known is None:
        start, seen = _in_session_start(project, user), set()
    else:
        start, seen = known
    exclude = start | seen
    block, hits = recalled(
        stores,
        prompt,
        BUDGET_TOKENS,
        hint="call the memory_search tool or run `mdmem search QUERY`",
        semantic=semantic,
        min_coverage=MIN_COVERAGE,
        exclude=exclude,
        limit=8,
    )
    if not block:
        if known is None:
            _write_seen(project, seen_path, start, seen)
        return ""
    _write_seen(project, seen_path, start, seen | {h.filename for h in hits})
    return output(block)
