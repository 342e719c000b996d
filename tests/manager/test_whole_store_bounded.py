"""`mdmem doctor` and `mdmem stats` cost what changed, not what the store holds (issue 23).

Counters, not timings: doctor on a settled store parses no note (the catalog's
rows prove them) and a hand edit is parsed, and found, alone; doctor on a
healthy store and stats on a settled one change no file under the store or
mdmem's state; stats takes no
listing of a store its catalog may be read for; both draw a progress bar on a
terminal's stderr and nothing on a pipe.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest

from builders import fill, on_a_terminal
from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.manager import stats as stats_module
from mdmem.manager.doctor import examine
from mdmem.store import survey
from mdmem.store.block import cached_block


def _mdmem(
    ws: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), *args],
        env=env or python_env(MDMEM_SEMANTIC="off"),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _snapshot(*roots: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under ``roots``: (size, mtime, content hash).

    SQLite's ``-shm`` files are left out of the content and times: a reader of a live
    WAL database records where it reads in that shared memory, by design; it holds
    nothing of the data (it is rebuilt from the WAL whenever it is missing).
    """
    found: dict[str, tuple[int, int, str]] = {}
    for root in roots:
        for folder, _, names in os.walk(root):
            for name in names:
                path = Path(folder) / name
                st = path.lstat()
                if name.endswith("-shm"):
                    found[str(path)] = (st.st_size, 0, "")
                    continue
                digest = hashlib.blake2b(path.read_bytes(), digest_size=8).hexdigest()
                found[str(path)] = (st.st_size, st.st_mtime_ns, digest)
    return found


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    (ws / "src").mkdir()
    (ws / "src" / "app.py").write_text("def main():\n    pass\n")
    return ws


def _settled(ws: Path, count: int) -> Store:
    root = ws / ".PseudoClaude" / "memory"
    fill(root, count)
    store = Store(root, Level.PROJECT)
    store.entries()  # the catalog learns every note, as the first read of a clone does
    time.sleep(0.05)  # past the file-system clock tick of the notes: their rows prove them
    store.entries()
    return store


def test_doctor_on_a_settled_store_parses_no_note_and_a_hand_edit_alone(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _settled(ws, 60)
    parsed: list[str] = []
    real = survey.Survey._parse

    def counting(self: survey.Survey, name: str) -> tuple[str | None, str | None]:
        parsed.append(name)
        return real(self, name)

    monkeypatch.setattr(survey.Survey, "_parse", counting)
    report = examine(store)
    assert not [f for f in report.findings if f.check in ("notes", "index")]
    assert parsed == []
    # A hand edit in place that breaks one note, its old mtime put back (the ctime moves).
    name = sorted(e.filename for e in store.entries())[7]
    path = Path(store.path) / name
    before = path.stat()
    path.write_text("---\ntitle: [unclosed\n---\n\nbody\n")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    report = examine(store)
    # Parsed by the notes check, and again by the index check (MEMORY.md no longer matches).
    assert parsed == [name, name]
    notes = [f for f in report.findings if f.check == "notes"]
    assert [f.subject for f in notes] == [name] and "cannot be read" in notes[0].message
    index = [f for f in report.findings if f.check == "index"]
    assert [f.subject for f in index] == [name]


def test_doctor_reports_what_the_old_full_read_reported(ws: Path) -> None:
    """A note the catalog never saw, one gone, a line changed by hand: the same findings as
    reading every note gives (the survey reads what the catalog cannot vouch for)."""
    store = _settled(ws, 30)
    root = Path(store.path)
    names = sorted(e.filename for e in store.entries())
    (root / names[3]).unlink()
    (root / "project_knowledge_new.md").write_text(
        "---\ntype: project_knowledge\ntitle: New\nsummary: New one.\n---\n\nNew.\n"
    )
    text = (root / names[5]).read_text().replace("title: ", "title: Changed ", 1)
    (root / names[5]).write_text(text)
    found = {(f.check, f.subject, f.message) for f in examine(store).findings}
    assert ("index", names[3], "MEMORY.md lists this note, which does not exist") in found
    assert ("index", "project_knowledge_new.md", "this note is missing from MEMORY.md") in found
    assert ("index", names[5], "MEMORY.md's line for this note is out of date") in found


def test_doctor_on_a_healthy_store_changes_no_file(ws: Path, tmp_path: Path) -> None:
    user = tmp_path / "user"
    env = python_env(MDMEM_SEMANTIC="off", MDMEM_USER_DIR=str(user))
    for i in range(3):
        done = _mdmem(ws, "add", "--title", f"Deploy note {i}", f"See `src/app.py` ({i}).", env=env)
        assert done.returncode == 0
    assert _mdmem(ws, "add", "--level", "user", "--title", "Tabs", "Tabs.", env=env).returncode == 0
    # What a session does: the block, a search, the worker's staleness pass (`mdmem stale`).
    for args in (("index",), ("search", "deploy"), ("stale",)):
        assert _mdmem(ws, *args, env=env).returncode == 0
    roots = (ws, user, state(ws / ".PseudoClaude" / "memory").parent)
    before = _snapshot(*roots)
    for _ in range(2):
        done = _mdmem(ws, "doctor", env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert _snapshot(*roots) == before


def test_stats_on_a_settled_store_changes_no_file(ws: Path, tmp_path: Path) -> None:
    user = tmp_path / "user"
    env = python_env(MDMEM_SEMANTIC="off", MDMEM_USER_DIR=str(user))
    for i in range(3):
        done = _mdmem(ws, "add", "--title", f"Deploy note {i}", f"See `src/app.py` ({i}).", env=env)
        assert done.returncode == 0
    assert _mdmem(ws, "add", "--level", "user", "--title", "Tabs", "Tabs.", env=env).returncode == 0
    for args in (("index",), ("search", "deploy"), ("stats",)):  # a session; stats once
        assert _mdmem(ws, *args, env=env).returncode == 0
    roots = (ws, user, state(ws / ".PseudoClaude" / "memory").parent)
    before = _snapshot(*roots)
    for args in (("stats",), ("stats", "--json"), ("stats",)):
        done = _mdmem(ws, *args, env=env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Not used in 30 days: 0 notes" in done.stdout or args[-1] == "--json"
        assert _snapshot(*roots) == before


def test_stats_reads_the_catalog_without_listing_a_current_store(
    ws: Path, tmp_path: Path, listings: list[str]
) -> None:
    store = _settled(ws, 40)
    user = Store(tmp_path / "user", Level.USER)
    cached_block(store, user)  # the session's start showed the block (it is cached)
    del listings[:]
    data = stats_module.collect(store, user, per_note=False, stream=True)
    assert listings == []  # no stat pass: the catalog was settled moments ago
    notes = data["notes"]
    assert isinstance(notes, dict) and notes["project"]["total"] == 40
    # A note added by hand: the directory changed, so the catalog is brought up to date.
    (Path(store.path) / "project_knowledge_by-hand.md").write_text(
        "---\ntype: project_knowledge\ntitle: By hand\n---\n\nWritten by hand.\n"
    )
    data = stats_module.collect(Store(store.path, Level.PROJECT), user, per_note=False)
    assert isinstance(data["notes"], dict) and data["notes"]["project"]["total"] == 41
    assert store.path in listings


def test_doctor_and_stats_draw_a_bar_on_a_terminal_and_nothing_on_a_pipe(ws: Path) -> None:
    fill(ws / ".PseudoClaude" / "memory", 260)  # past the bar's 200 notes
    code, terminal = on_a_terminal(ws, "doctor", "--level", "project")
    assert code in (0, 1) and "checking the project store" in terminal and "100%" in terminal
    code, terminal = on_a_terminal(ws, "stats")
    assert code == 0 and "100%" in terminal, terminal
    for args in (("doctor", "--level", "project"), ("stats",)):
        done = _mdmem(ws, *args)
        assert "%" not in done.stderr and "checking" not in done.stderr
