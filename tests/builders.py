"""Builders shared by the tests: one way to spell an operation and a store.

Import them as ``from builders import create_op, new_store`` (``tests/`` is on the path);
the matching fixtures (``store``) live in ``conftest.py``.
"""

from __future__ import annotations

import json
import subprocess
import threading
from datetime import date, datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING

from hypothesis import strategies as st

from conftest import PYTHON, python_env, state
from mdmem import Level, Note, NoteType, Store
from mdmem.store.note import clean_inline

if TYPE_CHECKING:
    import httpx2

    from mdmem.extract.providers.base import ExtractionRequest
    from mdmem.recall.fts import Index
    from mdmem.store.hit import Hit
    from mdmem.ui.guard import Settings
    from mdmem.ui.model import Stores

__all__ = [
    "BASE",
    "TOKEN",
    "TURN",
    "Page",
    "Scripted",
    "add_note",
    "cold_search",
    "create_op",
    "delete_op",
    "extraction_request",
    "fill",
    "forget_open_indexes",
    "form_value",
    "git",
    "index_dump",
    "journaled",
    "mdmem_process",
    "modules_loaded_by",
    "new_store",
    "note_names",
    "notes",
    "on_a_terminal",
    "pending_turns",
    "per_prompt_recall",
    "project_store",
    "text_of",
    "ui_settings",
    "update_op",
    "write_note",
]


def create_op(
    title: str,
    content: str | None = None,
    *,
    level: str = "project",
    type: str | None = None,
    summary: str | None = None,
    **extra: object,
) -> dict[str, object]:
    """A ``create`` operation as a model would answer it.

    The type follows the level (``project_knowledge`` / ``user_preference``) unless
    given; the content defaults to a sentence naming the title, so two titles never
    make two identical notes; ``extra`` adds keys (``supersedes``, ``expires``, ``slug``).
    """
    op: dict[str, object] = {
        "action": "create",
        "level": level,
        "type": type or ("project_knowledge" if level == "project" else "user_preference"),
        "title": title,
    }
    if summary is not None:
        op["summary"] = summary
    op["content"] = f"What {title} says." if content is None else content
    op.update(extra)
    return op


def update_op(
    filename: str, content: str, *, level: str = "project", **extra: object
) -> dict[str, object]:
    """An ``update`` operation of ``filename``."""
    return {"action": "update", "level": level, "filename": filename, "content": content, **extra}


def delete_op(filename: str, *, level: str = "project") -> dict[str, object]:
    """A ``delete`` operation of ``filename``."""
    return {"action": "delete", "level": level, "filename": filename}


def new_store(root: Path, level: Level = Level.PROJECT) -> Store:
    """A store at ``root`` (created on first write)."""
    return Store(root, level)


def project_store(workspace: Path) -> Store:
    """The project store of ``workspace``, where discovery puts it (``.PseudoClaude/memory``)."""
    return Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)


def note_names(store: Store) -> list[str]:
    """The note files of ``store``, sorted (MEMORY.md left out)."""
    return sorted(p.name for p in store.root.glob("*.md") if p.name != "MEMORY.md")


def write_note(
    root: Path,
    name: str,
    title: str,
    body: str = "",
    *,
    summary: str = "",
    kind: NoteType = NoteType.PROJECT_KNOWLEDGE,
    updated: datetime | None = None,
    **extra: object,
) -> None:
    """Write a note file in place, as a person (or git) would: mdmem finds it on its next look."""
    from mdmem.store.note import Note, render

    root.mkdir(parents=True, exist_ok=True)
    note = Note(name, kind, title, summary, body, updated, updated, extra)
    (root / name).write_text(render(note), encoding="utf-8")


def add_note(store: Store, title: str, body: str = "Some body.", **fields: object) -> str:
    """Apply one ``create`` at ``store``'s level; assert it was applied; return the file name."""
    op = create_op(title, body, level=store.level.value, **fields)
    result = store.apply([op])
    assert not result.rejected, result.rejected
    return result.applied[0].filename


#: A note as a clone brings it: front matter and body, nothing derived.
CLONED_NOTE = (
    "---\ntype: {type}\ntitle: {title}\nsummary: {summary}\nupdated: {updated}\n---\n{body}\n"
)
CLONED_TYPES = ["project_knowledge", "reference_material", "user_preference", "correction_feedback"]


def fill(root: Path, count: int) -> None:
    """``count`` notes written as a clone brings them (no derived state), names out of order."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        kind = CLONED_TYPES[i % 4]
        title = f"构建 {i}" if i % 5 == 0 else f"Note number {i}"
        name = f"{kind}_n{(i * 7919) % 100_000:05d}.md" if i % 3 else f"{kind}_笔记-{i}.md"
        (root / name).write_text(
            CLONED_NOTE.format(
                type=kind,
                title=title,
                summary=f"About {i}.",
                updated=f"2026-01-{1 + i % 28:02d}T00:00:00Z",
                body=f"cache retry worker {i} " * 5,
            ),
            encoding="utf-8",
        )


# -- the web page: a logged-in client of the app (tests/ui/) ------------------------------

UI_PORT = 8765
BASE = f"http://127.0.0.1:{UI_PORT}"
TOKEN = "the-token-of-this-run"


def ui_settings() -> Settings:
    """The page's settings for a test: the token above, the loopback names on ``UI_PORT``."""
    from mdmem.ui.guard import Settings

    hosts = frozenset({f"127.0.0.1:{UI_PORT}", f"localhost:{UI_PORT}", f"[::1]:{UI_PORT}"})
    return Settings(token=TOKEN, allowed_hosts=hosts, cookie_name=f"mdmem-ui-{UI_PORT}")


class Page:
    """A logged-in client of the app, and the stores it serves."""

    def __init__(self, stores: Stores, settings: Settings) -> None:
        from starlette.testclient import TestClient

        from mdmem.ui.app import create_app

        self.stores = stores
        self.settings = settings
        self.client = TestClient(create_app(stores, settings), base_url=BASE)
        response = self.client.get(f"/?token={TOKEN}", follow_redirects=False)
        assert response.status_code == 303

    @property
    def project(self) -> Store:
        return self.stores.project

    @property
    def user(self) -> Store:
        return self.stores.user

    def get(
        self, path: str, *, headers: dict[str, str] | None = None, follow_redirects: bool = True
    ) -> httpx2.Response:
        return self.client.get(path, headers=headers, follow_redirects=follow_redirects)

    def post(
        self,
        path: str,
        data: dict[str, str],
        *,
        csrf: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        form = {"csrf": self.settings.csrf, **data} if csrf else data
        sent = {"origin": BASE, **(headers or {})}  # as a browser says on every POST
        return self.client.post(path, data=form, headers=sent, follow_redirects=False)


def text_of(response: httpx2.Response) -> str:
    """The page's text without tags, unescaped, white space collapsed: what a person reads."""
    import re
    from html import unescape

    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


def form_value(html: str, name: str) -> str:
    """The value of the form field ``name`` in ``html``."""
    import re
    from html import unescape

    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, name
    return unescape(match.group(1))


# -- the worker's side: providers, journaled turns ------------------------------------------


class Scripted:
    """A provider behind the same Protocol, answering from a list and recording requests.

    Each answer is returned as it is, raised if it is an exception, or called with the
    request if it is callable; ``gate``, when set, holds each call until it is set.
    """

    name = "scripted"
    model = "test-model"

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.requests: list[ExtractionRequest] = []
        self.gate: threading.Event | None = None

    def extract(self, request: ExtractionRequest) -> object:
        self.requests.append(request)
        if self.gate is not None:
            assert self.gate.wait(10)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


#: A turn as Claude Code's transcript gives it: a request, a tool call and its result, an answer.
TURN = [
    {"role": "user", "content": "Please make the tests faster."},
    {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I'll look at the test setup."},
            {"type": "tool_use", "id": "toolu_1", "name": "Bash", "input": {"command": "ls"}},
        ],
    },
    {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "x"}],
    },
    {"role": "assistant", "content": "Done: the suite now runs in parallel with `pytest -n 4`."},
]


def extraction_request(
    *messages: tuple[str, str],
    system: str = "system",
    prompt: str = "prompt",
    today: date = date(2026, 1, 1),
) -> ExtractionRequest:
    """What the Manager hands a provider: ``messages`` as (role, text), empty indexes."""
    from mdmem.extract.providers.base import ExtractionRequest, Message

    return ExtractionRequest(
        system=system,
        prompt=prompt,
        messages=tuple(Message(role, text) for role, text in messages),
        project_index="",
        user_index="",
        today=today,
    )


def pending_turns(workspace: Path) -> list[list[list[str]]]:
    """The messages of each turn a hook left for the worker (``turns/pending/``), oldest first."""
    pending = state(workspace / ".PseudoClaude" / "memory") / "turns" / "pending"
    return [json.loads(p.read_text())["messages"] for p in sorted(pending.glob("*.json"))]


def journaled(workspace: Path) -> int:
    """How many turns the worker's journal holds, in any place (pending, claimed, failed)."""
    # manager/ offers no public listing of its journal (doctor reports it as findings):
    # the one private read of it outside tests/manager/ (tests/test_boundaries.py allows it).
    from mdmem.manager._journal import listing

    turns = listing(str(state(workspace / ".PseudoClaude" / "memory") / "turns"))
    return sum(len(ids) for ids in turns.values())


# -- processes -------------------------------------------------------------------------------


def mdmem_process(
    args: list[str],
    stdin: str = "",
    *,
    cwd: Path | None = None,
    flags: tuple[str, ...] = (),
    **env: str,
) -> subprocess.CompletedProcess[str]:
    """``python FLAGS -m mdmem ARGS`` in a child process of this checkout, ``env`` added."""
    return subprocess.run(
        [PYTHON, *flags, "-m", "mdmem", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=python_env(**env),
        cwd=cwd,
        timeout=60,
    )


#: Run ``python -m mdmem ARGS`` in this process, then say which modules it loaded.
_MODULES_PROBE = (
    "import json, runpy, sys\n"
    "sys.argv = ['mdmem'] + sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_module('mdmem', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "sys.stderr.write('\\nMODULES=' + json.dumps(sorted(sys.modules)) + '\\n')\n"
)


def modules_loaded_by(
    args: list[str], *, stdin: str = "", env: dict[str, str] | None = None, check: bool = True
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """``mdmem ARGS`` in a child process, and every module it had loaded when it ended.

    For the import budget: what the fast path, a hook or a command pulls in.
    """
    proc = subprocess.run(
        [PYTHON, "-c", _MODULES_PROBE, *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=python_env() if env is None else env,
        timeout=60,
        check=check,
    )
    line = next(x for x in proc.stderr.splitlines() if x.startswith("MODULES="))
    return proc, set(json.loads(line.removeprefix("MODULES=")))


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``git ARGS`` in ``cwd`` as a test author (the system and global config are never read)."""
    return subprocess.run(
        ["git", "-c", "user.name=Test", "-c", "user.email=test@example.com", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=check,
    )


# -- recall as a new process sees it ---------------------------------------------------------


def forget_open_indexes() -> None:
    """Drop the search indexes this process keeps open, as a new process starts without them."""
    # The engine keeps each store's index open for the next call, and offers no public way
    # to drop it; a real process per search would cost a second each. The one private
    # touch of it outside tests/recall/ (tests/test_boundaries.py allows it).
    from mdmem.recall import engine

    engine._INDEXES.clear()


def index_dump(index: Index) -> list[tuple[object, ...]]:
    """Everything a search index holds, in a fixed order, without row ids: two indexes of
    the same notes compare equal (one built afresh against one kept up to date)."""
    return (
        index._connect()
        .execute(
            "SELECT n.name, n.sha, n.type, n.title, n.summary, n.body, n.updated, n.expires,"
            " n.supersedes, n.terms, f.title, f.summary, f.body, f.type"
            " FROM notes n JOIN fts f ON f.rowid = n.id ORDER BY n.name"
        )
        .fetchall()
    )


def cold_search(root: Path, query: str) -> list[Hit]:
    """A lexical search of the project store at ``root`` as a new process makes it."""
    from mdmem.recall.engine import search

    forget_open_indexes()
    return search([Store(root, Level.PROJECT)], query, semantic=False)


def per_prompt_recall(stores: list[Store], prompt: str) -> tuple[str, list[str]]:
    """What the per-prompt hook's gate recalls for ``prompt`` (its thresholds, lexical only):
    the block and the recalled notes' file names."""
    from mdmem.integrations.prompt_recall import MIN_COVERAGE, RELATIVE
    from mdmem.recall import engine

    block, hits = engine.recalled(
        stores,
        prompt,
        400,
        semantic=False,
        min_coverage=MIN_COVERAGE,
        relative=RELATIVE,
        limit=8,
        per_prompt=True,
    )
    return block, [h.filename for h in hits]


# -- hypothesis: notes as a person or a model could write them ---------------------------------

inline_text = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=60).filter(
    lambda s: clean_inline(s) != ""
)
body_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(timezone.utc)
).map(lambda d: d.replace(microsecond=0))
extra_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@st.composite
def notes(draw: st.DrawFn) -> Note:
    """Any note that round-trips: Unicode text, optional dates, a few extra front-matter keys."""
    extra_keys = draw(
        st.lists(
            st.text(st.characters(categories=("L", "N")), min_size=1, max_size=10).filter(
                lambda k: k not in ("type", "title", "summary", "created", "updated")
            ),
            unique=True,
            max_size=3,
        )
    )
    created = draw(st.none() | moments)
    return Note(
        filename="n.md",
        type=draw(st.sampled_from(list(NoteType))),
        title=clean_inline(draw(inline_text)),
        summary=clean_inline(draw(st.just("") | inline_text)),
        body=draw(body_text).strip(),
        created=created,
        updated=None
        if created is None
        else created + timedelta(seconds=draw(st.integers(0, 10**8))),
        extra={k: draw(extra_values) for k in extra_keys},
    )


def on_a_terminal(ws: Path, *args: str, timeout: float = 60) -> tuple[int, str]:
    """Run ``mdmem --workspace ws ARGS`` with stderr on a pseudo-terminal and stdout on a
    pipe: (its status, what the terminal showed)."""
    import os
    import pty
    import select

    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), *args],
        env=python_env(MDMEM_SEMANTIC="off", COLUMNS="100"),
        stdout=subprocess.DEVNULL,
        stderr=slave,
        stdin=subprocess.DEVNULL,
    )
    os.close(slave)
    seen = b""
    # poll, not select: a long suite's process may hold descriptors past select's 1,024.
    poller = select.poll()
    poller.register(master, select.POLLIN)
    while poller.poll(int(timeout * 1000)):
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return proc.wait(timeout=timeout), seen.decode("utf-8", "replace")
