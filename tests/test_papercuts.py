"""The first ten minutes of a new user, as written: each papercut of issue 26, with its fix.

Each test does what the user did (the tutorial's commands, the example store,
the CLI) and checks what they now see.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import time
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import ROOT
from fake_anthropic import FakeAnthropic
from mdmem import Level, Store
from mdmem.cli import app

DOCS = ROOT / "docs"


def invoke(*args: str, **env: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def console_blocks(text: str) -> list[str]:
    return re.findall(r"```console\n(.*?)```", text, re.DOTALL)


# -- the tutorial's step 7 names the file extract creates ---------------------------------


def test_tutorial_step_7_shows_the_note_extract_created(workspace: Path) -> None:
    tutorial = (DOCS / "tutorial.md").read_text(encoding="utf-8")
    step = tutorial.split("## 7.", 1)[1].split("\n## ", 1)[0]
    [turn] = re.findall(r"```json\n(.*?)```", step, re.DOTALL)
    (workspace / "turn.json").write_text(turn, encoding="utf-8")
    code, out, err = invoke("--workspace", str(workspace), "extract", str(workspace / "turn.json"))
    assert code == 0, err
    console = console_blocks(step)[0]
    documented = re.findall(r"^(create +\w+ +\S+\.md)$", console, re.MULTILINE)
    assert [re.sub(r" +", " ", line) for line in documented] == [
        re.sub(r" +", " ", line) for line in out.splitlines()
    ]
    [shown] = re.findall(r"^\$ mdmem show (\S+)$", console, re.MULTILINE)
    created = {line.split()[-1] for line in out.splitlines()}
    assert shown in created
    code, _, _ = invoke("--workspace", str(workspace), "show", shown)
    assert code == 0


# -- no page describes mdmem's state as a .mdmem/ folder in the repository ----------------


@pytest.mark.parametrize(
    "page", ["tutorial.md", "how-to/hand-editing.md", "how-to/team-sharing.md", "cli.md"]
)
def test_mdmem_folder_is_only_mentioned_as_legacy(page: str) -> None:
    for line in (DOCS / page).read_text(encoding="utf-8").splitlines():
        if re.search(r"(?<![\w-])\.mdmem(?![\w-])", line):
            assert re.search(r"legacy|older", line), f"{page}: {line}"


def test_init_help_says_where_the_state_is() -> None:
    code, out, _ = invoke("init", "--help")
    assert code == 0
    assert ".mdmem" not in out and "outside the repository" in out
    assert "absolute path" in out


# -- the MCP how-to describes the search it has --------------------------------------------


def test_mcp_how_to_describes_recall_not_the_old_word_count() -> None:
    page = (DOCS / "how-to" / "mcp.md").read_text(encoding="utf-8")
    assert "title hits count 3×" not in page and "reads every note on each call" not in page
    [row] = [line for line in page.splitlines() if line.startswith("| `memory_search(")]
    assert "recall" in row and "BM25" in row and "Superseded and expired" in row


# -- review mode: extract says it proposed, not "nothing worth keeping" --------------------

TURN = [
    {"role": "user", "content": "Remember that the staging database is db-staging-2."},
    {"role": "assistant", "content": "Noted."},
]


def test_extract_in_review_mode_says_what_it_proposed(workspace: Path) -> None:
    (workspace / "turn.json").write_text(json.dumps(TURN), encoding="utf-8")
    code, out, err = invoke(
        "--workspace", str(workspace), "extract", str(workspace / "turn.json"), MDMEM_REVIEW="all"
    )
    assert code == 0, err
    assert "nothing worth keeping" not in err
    [line] = out.splitlines()
    proposal = line.split()[1]
    assert line.startswith("proposed  ") and f"mdmem review accept {proposal}" in line
    code, listed, _ = invoke("--workspace", str(workspace), "review", "list", "--json")
    assert proposal in {p["id"] for p in json.loads(listed)}


def test_extract_with_nothing_to_keep_still_says_so(workspace: Path) -> None:
    (workspace / "turn.json").write_text(
        json.dumps([{"role": "user", "content": "hello"}]), encoding="utf-8"
    )
    code, out, err = invoke("--workspace", str(workspace), "extract", str(workspace / "turn.json"))
    assert code == 0 and out == "" and "nothing worth keeping (offline provider)" in err


# -- stats: a note written today is not "not used in 30 days" ------------------------------


def test_stats_does_not_call_todays_notes_unused(workspace: Path) -> None:
    store = workspace / ".PseudoClaude" / "memory"
    code, _, err = invoke("--workspace", str(workspace), "add", "--title", "Fresh", "Just written.")
    assert code == 0, err
    old = store / "project_knowledge_old.md"
    old.write_text(
        "---\ntype: project_knowledge\ntitle: Old\nupdated: 2025-01-01T00:00:00+00:00\n---\nOld.\n"
    )
    code, out, _ = invoke("--workspace", str(workspace), "stats", "--json")
    unused = json.loads(out)["unused"]["notes"]
    assert [n["filename"] for n in unused if n["level"] == "project"] == [old.name]
    code, text, _ = invoke("--workspace", str(workspace), "stats")
    section = text.split("Not used in 30 days", 1)[1]
    assert old.name in section and "project_knowledge_fresh.md" not in section


def test_stats_falls_back_to_the_files_time_without_updated(workspace: Path) -> None:
    store = workspace / ".PseudoClaude" / "memory"
    store.mkdir(parents=True)
    note = store / "project_knowledge_hand.md"
    note.write_text("---\ntype: project_knowledge\ntitle: Hand\n---\nWritten by hand.\n")
    _, out, _ = invoke("--workspace", str(workspace), "stats", "--json")
    assert json.loads(out)["unused"]["notes"] == []
    month_ago = time.time() - 40 * 86_400
    os.utime(note, (month_ago, month_ago))
    _code, out, _ = invoke("--workspace", str(workspace), "stats", "--json")
    assert [n["filename"] for n in json.loads(out)["unused"]["notes"]] == [note.name]


# -- consolidate without a model says why -------------------------------------------------


def test_consolidate_without_a_model_says_it_needs_one(workspace: Path) -> None:
    invoke("--workspace", str(workspace), "add", "--title", "A note", "Some text.")
    code, out, err = invoke(
        "--workspace", str(workspace), "consolidate", "--dry-run", MDMEM_PROVIDER="offline"
    )
    assert code == 1 and out == ""
    assert err.startswith("mdmem: error: consolidate needs a model, and none is set up (")
    assert "MDMEM_PROVIDER=offline" in err and len(err.strip().splitlines()) == 1


def test_consolidate_with_a_model_that_changes_nothing_says_so(
    workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    invoke("--workspace", str(workspace), "add", "--title", "A note", "Some text.")
    fake_anthropic.enqueue(FakeAnthropic.tool_use("record_memory_operations", {"operations": []}))
    code, out, err = invoke(
        "--workspace", str(workspace), "consolidate", "--dry-run", "--level", "project"
    )
    assert code == 0, err
    assert out.strip() == (
        "project: plan: 0 change(s) (anthropic found nothing to change in 1 batch(es))"
    )


# -- the example's local dev URL is not a secret --------------------------------------------


def test_edit_keeps_the_examples_local_dev_url(tmp_path: Path) -> None:
    from mdmem.manager.demo import example_files

    example = Path(example_files()[0])
    name = "project_knowledge_build-and-test.md"
    text = (example / name).read_text(encoding="utf-8")
    assert "postgres://shop:shop@localhost:5433/shop_test" in text
    workspace = tmp_path / "shop"
    store = workspace / ".PseudoClaude" / "memory"
    store.mkdir(parents=True)
    (workspace / ".git").mkdir()
    (store / name).write_text(text, encoding="utf-8")
    editor = tmp_path / "editor.sh"  # saves the note with one more line
    editor.write_text('#!/bin/sh\nprintf "\\nChecked again.\\n" >> "$1"\n')
    editor.chmod(0o755)
    code, _, err = invoke("--workspace", str(workspace), "edit", name, VISUAL=str(editor))
    assert code == 0, err
    assert "redacted" not in err
    saved = (store / name).read_text(encoding="utf-8")
    assert "postgres://shop:shop@localhost:5433/shop_test" in saved and "Checked again." in saved


@pytest.mark.parametrize(
    ("url", "kept"),
    [
        ("postgres://shop:shop@localhost:5433/shop_test", True),
        ("mysql://root:root@127.0.0.1:3306/app", True),
        ("amqp://guest:guest@localhost:5672/", True),
        ("redis://app:password1@[::1]:6379", False),  # not a stock password
        ("postgres://shop:shop@db.prod.example.com/shop", False),  # not this machine
        ("postgres://shop:postgres@localhost.evil.example/x", False),
        ("postgres://shop:s3cret-Pa55@localhost:5433/shop_test", False),  # the tutorial's
    ],
)
def test_only_local_dev_defaults_stay_in_urls(url: str, kept: bool) -> None:
    from mdmem.privacy import redact

    assert (redact(url) == url) is kept, redact(url)


def test_edit_says_what_it_took_from_a_real_url_password(workspace: Path, tmp_path: Path) -> None:
    invoke("--workspace", str(workspace), "add", "--title", "DB", "The database.")
    editor = tmp_path / "editor.sh"
    editor.write_text('#!/bin/sh\nprintf "\\npostgres://app:Zq8-x1Lm@db.internal/app\\n" >> "$1"\n')
    editor.chmod(0o755)
    code, _, err = invoke(
        "--workspace", str(workspace), "edit", "project_knowledge_db.md", VISUAL=str(editor)
    )
    assert code == 0, err
    assert "mdmem: redacted from your text: url_password" in err


# -- the demo cleans up after itself --------------------------------------------------------


def test_demo_leaves_no_temporary_or_state_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    state = Path(os.environ["HOME"]) / ".local" / "state" / "mdmem"
    before = sorted(state.rglob("*")) if state.exists() else []
    code, out, err = invoke("demo")
    assert code == 0, err
    assert "(removed afterwards; --dir DIR keeps one)" in out
    assert list(scratch.iterdir()) == []
    after = sorted(state.rglob("*")) if state.exists() else []
    assert [p for p in after if p.parent.name == "stores"] == [
        p for p in before if p.parent.name == "stores"
    ]


def test_demo_with_dir_keeps_it(tmp_path: Path) -> None:
    code, out, _ = invoke("demo", "--dir", str(tmp_path / "keep"))
    assert code == 0 and "removed afterwards" not in out
    assert Store(tmp_path / "keep" / ".PseudoClaude" / "memory", Level.PROJECT).entries()


# -- YAML errors name the file's line --------------------------------------------------------

BAD_YAML = [
    # (the note, the 1-based line of the file its error is on)
    ("---\ntype: project_knowledge\ntitle: [WIP] Release steps\n---\nBody.\n", 3),
    ("---\ntitle: Fine\ntype: project_knowledge\nsummary: a: b: c\n---\nBody.\n", 4),
    ("---\ntitle: Fine\ntags: [a, b\ntype: project_knowledge\n---\nBody.\n", 4),
    ("---\n  title: x\n type: y\n---\nBody.\n", 3),
    ("\n\n---\ntype: project_knowledge\ntitle: [WIP] x\n---\nBody.\n", 5),  # blank lines first
    ("\ufeff---\ntype: project_knowledge\ntitle: [WIP] x\n---\nBody.\n", 3),  # a BOM
]


@pytest.mark.parametrize(("text", "line"), BAD_YAML)
def test_a_yaml_error_names_the_line_of_the_file(text: str, line: int) -> None:
    from mdmem.errors import InvalidNote
    from mdmem.store.note import parse

    with pytest.raises(InvalidNote) as caught:
        parse(text, "project_knowledge_x.md")
    assert f"bad YAML in the front matter (line {line}):" in str(caught.value)


def test_the_tutorials_yaml_error_is_the_line_it_shows(workspace: Path) -> None:
    tutorial = (DOCS / "tutorial.md").read_text(encoding="utf-8")
    step = tutorial.split("## 8.", 1)[1]
    [note] = re.findall(r"```markdown\n(.*?)```", step, re.DOTALL)
    store = workspace / ".PseudoClaude" / "memory"
    store.mkdir(parents=True)
    (store / "project_knowledge_release.md").write_text(note, encoding="utf-8")
    _, out, _ = invoke("--workspace", str(workspace), "doctor")
    [problem] = [line for line in out.splitlines() if "project_knowledge_release.md" in line]
    assert problem.strip() in step


# -- the OpenAI-compatible default is a current model ----------------------------------------


def test_the_openai_default_model_is_a_current_one_in_the_sdk() -> None:
    from typing import get_args

    chat_model = pytest.importorskip("openai.types.shared.chat_model")
    from mdmem.extract.providers.openai import DEFAULT_MODEL

    models = get_args(chat_model.ChatModel)
    assert DEFAULT_MODEL in models
    assert not DEFAULT_MODEL.startswith(("gpt-3", "gpt-4", "o1", "chatgpt-4o"))  # legacy


# -- hook session-start --help says which directory wins --------------------------------------


def test_session_start_help_says_the_project_dir_wins() -> None:
    code, out, _ = invoke("hook", "session-start", "--help")
    assert code == 0
    flat = " ".join(out.split())
    assert '$CLAUDE_PROJECT_DIR, else its "cwd"' in flat
    assert "MDMEM_SESSION_BUDGET" in flat and "MDMEM_DISABLE" in flat


# -- mdmem add outside any project refuses instead of making ./.PseudoClaude -----------------


def test_add_outside_a_project_refuses_and_creates_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "downloads"
    plain.mkdir()
    monkeypatch.chdir(plain)
    code, out, err = invoke("add", "--title", "Build", "Run make test.")
    assert code == 1 and out == ""
    assert err.startswith(f"mdmem: error: {plain} is in no project (no .git or .PseudoClaude")
    assert "mdmem init" in err and len(err.strip().splitlines()) == 1
    assert list(plain.iterdir()) == []
    # The ways out it names, each works.
    code, out, _ = invoke("add", "--level", "user", "--title", "Tone", "Short answers.")
    assert code == 0 and out.strip() == "user_preference_tone.md"
    code, _, _ = invoke("init")
    assert code == 0
    code, out, _ = invoke("add", "--title", "Build", "Run make test.")
    assert code == 0 and (plain / ".PseudoClaude" / "memory" / out.strip()).is_file()


def test_add_in_a_git_repository_or_with_workspace_just_works(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "src").mkdir()
    monkeypatch.chdir(repo / "src")
    code, out, _ = invoke("add", "--title", "Build", "Run make test.")
    assert code == 0 and (repo / ".PseudoClaude" / "memory" / out.strip()).is_file()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    code, out, _ = invoke("--workspace", str(elsewhere), "add", "--title", "X", "Y.")
    assert code == 0 and (elsewhere / ".PseudoClaude" / "memory" / out.strip()).is_file()


# -- mdmem ui collects its ended children ----------------------------------------------------


def _gone(pid: int) -> bool:
    """Whether ``pid`` is no process at all any more (a zombie still is one)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_the_page_reaps_the_browser_launcher_and_the_embedders(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    pytest.importorskip("uvicorn")
    from mdmem.recall import embedder
    from mdmem.store.workspace import resolve
    from mdmem.ui.model import Stores
    from mdmem.ui.server import Server

    ws, project, user = resolve(str(workspace), None)
    short = [sys.executable, "-c", "import time; time.sleep(0.3)"]
    with Server(Stores(ws, project, user)):
        # webbrowser's launcher: a Popen dropped while its process runs.
        launcher = subprocess.Popen(short)
        launcher_pid = launcher.pid
        with warnings.catch_warnings():  # "still running": what webbrowser leaves, on purpose
            warnings.simplefilter("ignore", ResourceWarning)
            del launcher
        # A background embedder, as embedder.request keeps it.
        child = subprocess.Popen(short)
        monkeypatch.setattr(embedder, "_CHILDREN", [child])
        deadline = time.monotonic() + 60  # a bound for a loaded machine, not a speed check
        while not (_gone(launcher_pid) and _gone(child.pid)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _gone(launcher_pid) and _gone(child.pid), "a zombie is left"
        assert embedder.reap() == 0
