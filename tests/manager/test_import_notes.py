"""`mdmem import notes`: many notes at once, a batch at a time, as every write (issue 23)."""

from __future__ import annotations

import json
import os
import random
import subprocess
from pathlib import Path

import pytest

from builders import on_a_terminal
from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.manager.bulk import Item, import_items, read_source
from mdmem.store import files
from mdmem.store.paths import state_dir


def _mdmem(ws: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), *args],
        env=python_env(MDMEM_SEMANTIC="off"),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    return ws


def test_json_lines_are_imported_and_bad_lines_named(ws: Path, tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "b" * 40
    lines = [
        json.dumps({"title": f"Migration {i:04d}", "content": f"Adds column {i}."})
        for i in range(30)
    ]
    lines += [
        json.dumps({"title": "Migration 0003", "content": "Adds column 3."}),  # again
        "{not json",
        json.dumps({"title": "No content"}),
        json.dumps({"title": "Odd", "content": "x", "type": "diary"}),
        json.dumps({"title": "Key", "content": f"The key {secret} rotates.", "level": "user"}),
    ]
    source = tmp_path / "notes.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    done = _mdmem(ws, "import", "notes", str(source))
    assert done.returncode == 1
    assert done.stdout == (
        "imported 31 notes; 1 already there, 0 near-duplicates updated, 3 refused\n"
    )
    assert f"{source}:32: not JSON" in done.stderr
    assert f"{source}:33: a note needs a title and a content" in done.stderr
    assert f"{source}:34: type 'diary'" in done.stderr
    assert "%" not in done.stderr  # no bar on a pipe
    project = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    assert len(project.entries()) == 30
    user = Store(Path(os.environ["MDMEM_USER_DIR"]), Level.USER)
    (key,) = user.notes()
    assert secret not in key.body and "REDACTED" in key.body


def test_a_bar_on_a_terminal_for_worded_titles(ws: Path, tmp_path: Path) -> None:
    # Titles of a few everyday words and no numbers (one dedupe group): imported with
    # a bar on a terminal, a repeat found, the rest created.
    words = ["cache", "deploy", "worker", "queue", "retry", "build", "lint", "server"]
    rng = random.Random(3)

    def spelled() -> str:  # a word of its own, no digit in it
        return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(7))

    lines = [
        json.dumps(
            {
                "title": f"{words[i % 8]} {words[i // 8 % 8]} {words[i // 64 % 8]}",
                "content": " ".join(spelled() for _ in range(12)) + ".",
            }
        )
        for i in range(300)
    ]
    source = tmp_path / "notes.jsonl"
    source.write_text("\n".join([*lines, lines[17]]) + "\n", encoding="utf-8")
    code, terminal = on_a_terminal(ws, "import", "notes", str(source))
    assert code == 0, terminal
    assert "importing" in terminal and "100%" in terminal
    project = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    assert len(project.entries()) == 300


def test_stdin_and_a_folder_of_markdown(ws: Path, tmp_path: Path) -> None:
    done = _mdmem(ws, "import", "notes", "-", stdin='{"title": "From stdin", "body": "Hi."}\n')
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "deploy.md").write_text("# How we deploy\n\nTag, then push the tag.\n")
    (folder / "plain-note.md").write_text("No heading here, the name is the title.\n")
    (folder / "typed.md").write_text(
        "---\ntype: correction_feedback\ntitle: Not a week\nsummary: A day.\n---\n\nA day.\n"
    )
    (folder / "MEMORY.md").write_text("- not imported\n")
    done = _mdmem(ws, "import", "notes", str(folder))
    assert done.returncode == 0, done.stderr
    notes = {n.title: n for n in Store(ws / ".PseudoClaude" / "memory", Level.PROJECT).notes()}
    assert set(notes) == {"From stdin", "How we deploy", "plain note", "Not a week"}
    assert notes["Not a week"].type.value == "correction_feedback"
    assert notes["How we deploy"].body == "Tag, then push the tag."


def test_a_large_batch_is_made_durable_together_before_its_journal_goes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([])  # nothing: no store made
    seen: list[tuple[bool, int]] = []
    fsyncs: list[int] = []
    real_sync, real_fsync = files.sync_all, os.fsync

    def sync_all(paths: list[str]) -> None:
        journal = os.path.join(state_dir(store.path), "txn.json")
        seen.append((os.path.exists(journal), sum(os.path.exists(p) for p in paths)))
        real_sync(paths)

    def fsync(fd: int) -> None:
        fsyncs.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(files, "sync_all", sync_all)
    monkeypatch.setattr(os, "fsync", fsync)
    count = 40  # past the 16 notes from which a batch is made durable together
    items = [Item(f"n:{i}", f"Fact {i}", f"Fact number {i} holds.") for i in range(count)]
    report = import_items({Level.PROJECT: store, Level.USER: store}, items, batch=count)
    assert report.created == count
    # Once, while the journal (every note's bytes) still stood, every note written.
    assert seen == [(True, count)]
    assert len(fsyncs) < 10  # the journal and the directories: not one a note


def test_read_source_refuses_what_is_no_text(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe not utf-8\n")
    with pytest.raises(ValueError):
        read_source(str(bad))
    with pytest.raises(FileNotFoundError):
        read_source(str(tmp_path / "missing.jsonl"))
