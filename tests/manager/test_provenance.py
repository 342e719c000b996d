"""Provenance: every worker write says where it came from; `mdmem why` tells it."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import Scripted, create_op, git
from conftest import SRC
from mdmem import Manager
from mdmem.cli import app
from mdmem.manager import provenance

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")

SECRET = "sk-ant-api03-FAKEfake0123456789FAKEfake01"


@pytest.fixture(autouse=True)
def _children_import_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Git's own config is isolated by conftest's autouse fixture.
    monkeypatch.setenv("PYTHONPATH", str(SRC))


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    (ws / "README").write_text("hi\n")
    git(ws, "add", ".")
    git(ws, "commit", "-qm", "first")
    return ws


def create(title: str, content: str = "Run `make test` before pushing.") -> dict[str, object]:
    return create_op(title, content)


def turn(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": "Noted."}]


def why(ws: Path, name: str) -> dict[str, object]:
    result = CliRunner().invoke(app, ["--workspace", str(ws), "why", name, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert isinstance(data, dict)
    return data


def test_a_worker_note_records_its_turn_model_and_commit(repo: Path) -> None:
    with Manager(repo, provider=Scripted([create("Build")])) as manager:
        result = manager.update_async(turn(f"we build with make; key {SECRET}")).result(30)
        note = manager.project.read("project_knowledge_build.md")
    source = provenance.parse_source(note.extra["source"])
    assert source is not None
    assert source.turn == result.turn_id
    assert source.model == "scripted/test-model"
    assert source.git == git(repo, "rev-parse", "HEAD").stdout.strip()[:7]
    data = why(repo, "project_knowledge_build.md")
    assert data["written_by"] == "worker"
    assert isinstance(data["source"], dict) and data["source"]["turn"] == result.turn_id
    excerpt = str(data["excerpt"])
    assert "we build with make" in excerpt
    assert SECRET not in excerpt and "[REDACTED:anthropic_key]" in excerpt
    text = CliRunner().invoke(app, ["--workspace", str(repo), "why", "project_knowledge_build.md"])
    assert f"turn {result.turn_id}" in text.stdout and "the turn (redacted)" in text.stdout


def test_provenance_follows_an_update_and_a_rename(repo: Path) -> None:
    update = {
        "action": "update",
        "level": "project",
        "filename": "project_knowledge_build.md",
        "content": "Run `make check` now.",
    }
    with Manager(repo, provider=Scripted([create("Build")], [update])) as manager:
        manager.update_async(turn("first")).result(30)
        second = manager.update_async(turn("second: make check")).result(30)
        manager.project.rename("project_knowledge_build.md", "project_knowledge_make.md")
    data = why(repo, "project_knowledge_make.md")
    assert isinstance(data["source"], dict) and data["source"]["turn"] == second.turn_id
    assert "second: make check" in str(data["excerpt"])


def test_a_hand_written_note_shows_what_git_knows(repo: Path) -> None:
    result = CliRunner().invoke(
        app, ["--workspace", str(repo), "add", "--title", "Hand", "Written by a person."]
    )
    assert result.exit_code == 0, result.output
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "add a note by hand")
    data = why(repo, "project_knowledge_hand.md")
    assert data["written_by"] == "hand" and data["source"] is None
    assert isinstance(data["git"], list) and "add a note by hand" in data["git"][0]


DRIVER = f"{shlex.quote(sys.executable)} -m mdmem merge-index"


def test_provenance_survives_a_git_merge_of_memory_md(repo: Path) -> None:
    assert (
        CliRunner()
        .invoke(app, ["--workspace", str(repo), "init", "--driver-command", DRIVER])
        .exit_code
        == 0
    )
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "init memory")
    git(repo, "checkout", "-qb", "side")
    with Manager(repo, provider=Scripted([create("Side fact", "On the side.")])) as manager:
        side = manager.update_async(turn("side")).result(30)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "side note")
    git(repo, "checkout", "-q", "main")
    with Manager(repo, provider=Scripted([create("Main fact", "On main.")])) as manager:
        main = manager.update_async(turn("main")).result(30)
    git(repo, "add", ".")
    git(repo, "commit", "-qm", "main note")
    git(repo, "merge", "-q", "--no-edit", "side")
    index = (repo / ".PseudoClaude" / "memory" / "MEMORY.md").read_text()
    assert "Side fact" in index and "Main fact" in index and "<<<<" not in index
    for name, result in (
        ("project_knowledge_side-fact.md", side),
        ("project_knowledge_main-fact.md", main),
    ):
        data = why(repo, name)
        assert isinstance(data["source"], dict) and data["source"]["turn"] == result.turn_id


def test_source_lines_round_trip() -> None:
    source = provenance.Source("123-ab", "2026-12-01T09:33Z", "anthropic/x", "2d611e2abc", "s1")
    line = source.line()
    assert line == "turn 123-ab · anthropic/x · 2026-12-01T09:33Z · git 2d611e2 · session s1"
    back = provenance.parse_source(line)
    assert back is not None and (back.turn, back.model, back.session) == (
        "123-ab",
        "anthropic/x",
        "s1",
    )
    assert provenance.parse_source("a person's own source") is None
    assert provenance.parse_source(7) is None


def test_kept_turns_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(provenance, "KEEP_TURNS", 5)
    root = str(tmp_path / "store")
    for n in range(12):
        source = provenance.Source(f"{n:04d}-x", "now")
        provenance.record_turn(root, source, "x" * 10_000, [("create", "a.md")], private=True)
    from conftest import state

    kept = sorted(p.name for p in (state(root) / "provenance").iterdir())
    assert kept == [f"{n:04d}-x.json" for n in range(7, 12)]
    record = provenance.load_turn(root, "0011-x")
    assert record is not None and len(str(record["excerpt"])) <= provenance.EXCERPT_BYTES + 10


def test_records_past_the_kept_days_go_checked_once_an_hour(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os
    import time

    from conftest import state

    root = str(tmp_path / "store")
    folder = state(root) / "provenance"
    clock = [time.time()]
    monkeypatch.setattr(provenance.time, "time", lambda: clock[0])
    monkeypatch.setattr(provenance, "_AGED", {})
    provenance.record_turn(root, provenance.Source("0001-old", "then"), "x", [], private=True)
    old = folder / "0001-old.json"
    past = clock[0] - (provenance.KEEP_DAYS + 1) * 86400
    os.utime(old, (past, past))
    provenance.record_turn(root, provenance.Source("0002-new", "now"), "x", [], private=True)
    assert old.exists()  # the age was checked with the first record: not again within the hour
    clock[0] += 3601
    provenance.record_turn(root, provenance.Source("0003-new", "now"), "x", [], private=True)
    assert sorted(p.name for p in folder.iterdir()) == ["0002-new.json", "0003-new.json"]


def test_git_head_outside_git_and_in_a_worktree(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert provenance.git_head(str(plain)) == ""
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert provenance.git_head(str(repo)) == head
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"), "-b", "other")
    assert provenance.git_head(str(tmp_path / "wt")) == head
    git(repo, "pack-refs", "--all")
    assert provenance.git_head(str(repo)) == head


def test_the_agent_session_is_recorded_when_known(repo: Path) -> None:
    with Manager(repo, provider=Scripted([create("Build")])) as manager:
        manager.update_async(turn("build"), session="session-42").result(30)
        note = manager.project.read("project_knowledge_build.md")
    assert str(note.extra["source"]).endswith(" · session session-42")
    data = why(repo, "project_knowledge_build.md")
    assert isinstance(data["source"], dict) and data["source"]["session"] == "session-42"
