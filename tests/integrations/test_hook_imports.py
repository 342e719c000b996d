"""What the per-prompt hook's process loads: only what its answer needs (a probe, not a timing).

The UserPromptSubmit hook is a fresh process at every prompt, so what it imports
and compiles is most of what it costs (benchmarks/bench_paths.py times it). On a
settled store, in a session SessionStart began, it must not load the store class,
the catalog, the SessionStart block's code, the ledger (there is none here) or
anything heavy, nor compile the CJK ranges, a secret pattern or the past-work
pattern for an English prompt that does not ask about past work; and its answer
is the same as in-process. The command Claude Code runs is the interpreter with
mdmem's entry point, not pip's console script (which imports ``re`` and puts its
own folder first on the path): the last test runs it as installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.integrations.prompt_recall import user_prompt_submit

#: The mdmem modules the settled hook may load (the recall engine and what it stands on).
ALLOWED = {
    "mdmem",
    "mdmem.__main__",
    "mdmem._dates",
    "mdmem._json",
    "mdmem._kinds",
    "mdmem._lines",
    "mdmem._sqlite",
    "mdmem.errors",
    "mdmem.privacy",
    "mdmem.privacy._filter",
    "mdmem.privacy._rules",
    "mdmem.cli",
    "mdmem.cli._fastpath",
    "mdmem.integrations",
    "mdmem.integrations._session",
    "mdmem.integrations.prompt_recall",
    "mdmem.integrations.prompt_server",
    "mdmem.integrations.session_control",
    "mdmem.recall",
    "mdmem.recall.dictionary",
    "mdmem.recall.disputes",
    "mdmem.recall.engine",
    "mdmem.recall.glossary",
    "mdmem.recall.fts",
    "mdmem.recall.tally",
    "mdmem.recall.text",
    "mdmem.recall.usage",
    "mdmem.recall.weights",
    "mdmem.store",
    "mdmem.store.activity",
    "mdmem.store.cedict",
    "mdmem.store.files",
    "mdmem.store.hit",
    "mdmem.store.paths",
    "mdmem.store.quicknote",
    "mdmem.store.state",
    "mdmem.store.watch",
    "mdmem.store.watcher",
    "mdmem._unixsock",
    "mdmem.store.workspace",
}
#: Never on that path: the store class and its catalog, the block's code, heavy libraries.
NEVER = {
    "mdmem.store.store",
    "mdmem.store._catalog",
    "mdmem.store.catalog",
    "mdmem.store.note",
    "mdmem.store.ledger",
    "mdmem.store.block",
    "mdmem.store.blockcache",
    "mdmem.integrations.claude_code",
    "mdmem.recall.semantic",
    "mdmem.manager",
    "typer",
    "yaml",
    "frontmatter",
    "filelock",
    "typing",
    "hashlib",
    "logging",
    "dataclasses",
    "pathlib",
    "watchfiles",
    # The sqlite3 package (its dbapi2 imports datetime): the C module is enough.
    "sqlite3",
    # The json package (its import compiles five patterns): mdmem._json calls the C
    # module; nor the array module (the inode generation is read into a bytearray).
    "json",
    "json.decoder",
    "json.encoder",
    "json.scanner",
    "array",
}

_PROBE = """
import runpy, sys
sys.argv = ["mdmem", "hook", sys.argv[1]]
try:
    runpy.run_module("mdmem", run_name="__main__")
except SystemExit:
    pass
loaded = set(sys.modules)  # before this probe's own json
import json
from mdmem.privacy import _rules
from mdmem.integrations import prompt_recall
from mdmem.recall import text
print(json.dumps({
    "modules": sorted(m for m in sys.modules if m == "mdmem" or m.startswith("mdmem.")),
    "never": sorted(m for m in %r if m in loaded),
    "cjk_compiled": text._cjk_run.cache_info().currsize,
    "past_compiled": prompt_recall._past_work.cache_info().currsize,
    "rules_compiled": sum(r._pattern is not None for r in _rules._compiled().rules),
    "datetime": "datetime" in loaded,
}), file=sys.stderr)
"""


TOPICS = [
    ("Release deploys", "Deploy the release branch with make ship after the review."),
    ("Lint settings", "The server's lint config is ruff with line length 100."),
    ("Queue retries", "The queue worker retries a job three times, then parks it."),
    ("Cache lifetime", "The build cache is kept for a day and cleared nightly."),
    ("Database migrations", "Migrations run with alembic upgrade head before the tests."),
    ("Local services", "docker compose up brings the database and the broker."),
]


def _store(workspace: Path) -> Store:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    ops = [
        {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": title,
            "content": content,
        }
        for title, content in TOPICS
    ]
    store.apply(ops)
    return store


def _env(workspace: Path, user: Path) -> dict[str, str]:
    return python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_USER_DIR=str(user),
        MDMEM_SEMANTIC="off",
        HOME=os.environ["HOME"],
    )


def _run(args: str, payload: dict[str, object], env: dict[str, str]) -> tuple[str, dict]:
    done = subprocess.run(
        [PYTHON, "-c", _PROBE % (sorted(NEVER),), args],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return done.stdout, report


def _started(workspace: Path, tmp_path: Path, session: str) -> tuple[Store, Path, dict, dict]:
    """The topics' store, the user store's folder, the hooks' environment, and the
    SessionStart payload of ``session``, run once."""
    store = _store(workspace)
    user = tmp_path / "user"
    env = _env(workspace, user)
    start = {"session_id": session, "cwd": str(workspace), "source": "startup"}
    _run("session-start", start, env)
    return store, user, env, start


def test_the_settled_prompt_hook_loads_only_what_its_answer_needs(
    workspace: Path, tmp_path: Path
) -> None:
    _store(workspace)
    user = tmp_path / "user"
    env = _env(workspace, user)
    start = {"session_id": "s-imports", "cwd": str(workspace), "source": "startup"}
    prompt = {**start, "hook_event_name": "UserPromptSubmit"}
    # The first session settles the store and its index; the second is measured.
    for session in ("s-warm", "s-imports"):
        _run("session-start", {**start, "session_id": session}, env)
        asked = {**prompt, "session_id": session, "prompt": "how do we deploy the release branch?"}
        out, first = _run("user-prompt-submit", asked, env)
        assert "release" in json.loads(out)["hookSpecificOutput"]["additionalContext"].lower()
    # SessionStart recorded what it showed in the usage ledger: the session's first prompt
    # reads the ledger's read counts once and keeps them in the recall index.
    assert first["never"] in ([], ["mdmem.store.ledger"])
    asked = {
        **prompt,
        "session_id": "s-imports",
        "prompt": "which lint config does the server use?",
    }
    out, later = _run("user-prompt-submit", asked, env)
    assert "ruff" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    for report in (first, later):
        assert set(report["modules"]) <= ALLOWED | {"mdmem.store.ledger"}
        assert report["cjk_compiled"] == 0
        assert report["rules_compiled"] == 0
        assert report["past_compiled"] == 0  # neither prompt asks about past work
        assert report["datetime"] is False
    assert later["never"] == []
    assert set(later["modules"]) <= ALLOWED, set(later["modules"]) - ALLOWED


def test_a_chinese_prompt_compiles_no_cjk_ranges_and_answers_as_in_process(
    workspace: Path, tmp_path: Path
) -> None:
    # A prompt's CJK runs are found without compiling the ranges, and the answer is the same
    # bytes as the in-process call gives.
    store = _store(workspace)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "构建缓存的配置",
                "content": "构建缓存的配置在 config/cache.toml（ｃａｃｈｅ）。",
            }
        ]
    )
    user = tmp_path / "user"
    env = _env(workspace, user)
    question = "构建 缓存 的 配置 在哪里？ｃａｃｈｅ"
    payload = {"session_id": "s-zh", "cwd": str(workspace), "prompt": question}
    out, report = _run("user-prompt-submit", payload, env)
    assert report["cjk_compiled"] == 0
    assert "cache.toml" in out
    again = user_prompt_submit({**payload, "session_id": "s-zh-2"}, str(workspace), str(user))
    assert json.loads(out) == json.loads(again)


def test_a_session_without_a_start_record_takes_the_last_cached_block_after_a_write(
    workspace: Path, tmp_path: Path
) -> None:
    # A resumed or older session whose SessionStart left no record: after a write (which
    # makes the cached block stale) its first prompt takes the listing of the block last
    # cached, without the block's code or a ranking of every note; with no cache at all,
    # the block made now, as before.
    from mdmem.integrations._session import names_in, read_seen, seen_path
    from mdmem.integrations.claude_code import session_block
    from mdmem.store import blockcache

    store, user, env, _ = _started(workspace, tmp_path, "s-started")
    cached = blockcache.latest("session-start-", store.state, Store(user, Level.USER).state)
    assert cached is not None and names_in(cached)
    # On the settled store, the cached block is read with mdmem._json and the marks' names
    # come from the state folder's module: neither the json package nor the marks module.
    settled = {"session_id": "s-unstarted", "cwd": str(workspace), "prompt": "how do we lint?"}
    _, report = _run("user-prompt-submit", settled, env)
    assert "mdmem.store.blockcache" in report["never"]  # the path that reads the cache
    assert not {"json", "json.decoder", "json.scanner", "json.encoder"} & set(report["never"])
    assert "mdmem.store.marks" not in report["modules"]
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Release freeze",
                "content": "No deploys on Fridays.",
            }
        ]
    )
    asked = {"session_id": "s-resumed", "cwd": str(workspace), "prompt": "how do we deploy?"}
    _, report = _run("user-prompt-submit", asked, env)
    assert "mdmem.store.block" not in report["modules"]
    assert "mdmem.integrations.claude_code" not in report["modules"]
    known = read_seen(seen_path(store.path, "s-resumed"))
    assert known is not None and known[0] == names_in(cached)
    # No cached block at all: the block made now.
    for name in os.listdir(store.state.path):
        if name.startswith("block-"):
            os.unlink(os.path.join(store.state.path, name))
    _run("user-prompt-submit", {**asked, "session_id": "s-fresh"}, env)
    known = read_seen(seen_path(store.path, "s-fresh"))
    made = names_in(session_block(asked, str(workspace), str(user)))
    assert known is not None and known[0] == made and "project_knowledge_release-freeze.md" in made


def test_the_installed_prompt_hook_runs_mdmem_without_its_console_script(
    workspace: Path, tmp_path: Path
) -> None:
    # What `mdmem install claude-code` writes: this interpreter, -E, mdmem's entry point;
    # pip's wrapper script is not run (it imports re to rewrite argv[0], and its folder
    # first on the path costs a stat for each import). It answers as the hook in-process.
    import shlex

    from mdmem import _spawn
    from mdmem.integrations.claude_code_settings import install, installed_commands

    script = _spawn.console_script()
    if script is None:
        pytest.skip("no mdmem console script installed")
    _store(workspace)
    user = tmp_path / "user"
    settings = workspace / ".claude" / "settings.local.json"
    assert install(str(settings))
    command = installed_commands(str(settings))["UserPromptSubmit"]
    words = shlex.split(command)
    assert words == [sys.executable, "-E", "-c", _spawn.HOOK_BOOT, "hook", "user-prompt-submit"]
    assert script not in command
    env = _env(workspace, user)
    payload = {"session_id": "s-installed", "cwd": str(workspace), "prompt": "which lint config?"}
    done = subprocess.run(
        ["/bin/sh", "-c", command],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=env,
        cwd=workspace,
        timeout=60,
        check=True,
    )
    assert "ruff" in done.stdout
    again = user_prompt_submit({**payload, "session_id": "s-in-process"}, str(workspace), str(user))
    assert json.loads(done.stdout) == json.loads(again)


@pytest.mark.parametrize("by", ["worker", "cli"])
def test_the_prompt_right_after_a_write_reads_the_change_log_without_the_store_class(
    workspace: Path, tmp_path: Path, by: str
) -> None:
    # A turn's worker wrote a note (with its provenance line, as every note it writes has;
    # or `mdmem add` did, without one); the next prompt catches the search index up by the
    # change log (no watcher here: MDMEM_WATCHER is off in tests) and finds it, loading the
    # catalog to read that log but not the store class, its coherence engine, YAML, the
    # sqlite3 package or datetime (a note mdmem wrote is read without them).
    from mdmem.manager.provenance import Source

    store, _, env, start = _started(workspace, tmp_path, f"s-after-{by}")
    asked = {**start, "hook_event_name": "UserPromptSubmit", "prompt": "how do we deploy?"}
    _run("user-prompt-submit", asked, env)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Nightly vacuum",
                "content": "The broker's queues are vacuumed nightly by the janitor job.",
            }
        ],
        source=by,
        provenance=(
            Source(
                "20261201093300-1a2b3c4d", "2026-12-01T09:33Z", "anthropic/claude-haiku-4-5"
            ).line()
            if by == "worker"
            else None
        ),
    )
    if by == "worker":
        note = Path(store.path) / "project_knowledge_nightly-vacuum.md"
        assert "\nsource: turn " in note.read_text(encoding="utf-8")
    asked["prompt"] = "when does the janitor vacuum the broker queues?"
    out, report = _run("user-prompt-submit", asked, env)
    assert "janitor" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    never = {"mdmem.store.store", "mdmem.store.sync", "mdmem.store.note", "mdmem.store.rows"}
    assert never.isdisjoint(report["modules"]), never & set(report["modules"])
    assert "mdmem.store._catalog" in report["modules"]  # the change log: no listing
    assert set(report["never"]) <= {"mdmem.store._catalog", "array"}, report["never"]
    assert report["datetime"] is False
