"""doctor: each check finds its problem, each repair fixes it, nothing a person wrote is lost."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.manager import doctor
from mdmem.manager.doctor import Check, Finding, examine, lock_holders, rescue

DEAD_PID = 99_999_999  # above any pid_max: never a live process


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "mem", Level.PROJECT)
    s.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "content": f"Body {i}.",
            }
            for i in range(3)
        ]
    )
    return s


def problems(store: Store) -> list[tuple[str, str]]:
    return [(f.check, f.subject) for f in examine(store).problems]


def test_a_store_that_does_not_exist_is_no_problem(tmp_path: Path) -> None:
    report = examine(Store(tmp_path / "none", Level.USER), fix=True)
    assert report.problems == () and report.findings[0].message == "does not exist yet"
    assert not (tmp_path / "none").exists()


def test_a_healthy_store_has_no_findings(store: Store) -> None:
    assert examine(store).findings == ()
    assert examine(store, fix=True).fixed == ()


# -- the index --------------------------------------------------------------------------


def test_index_line_without_a_note(store: Store) -> None:
    os.unlink(store.root / "project_knowledge_note-1.md")  # behind mdmem's back
    found = examine(store).problems
    assert [(f.check, f.subject, f.fixable) for f in found] == [
        ("index", "project_knowledge_note-1.md", True)
    ]
    assert "does not exist" in found[0].message
    report = examine(store, fix=True)
    assert report.problems == () and report.fixed == ("rebuilt MEMORY.md from 2 notes",)
    assert "note-1" not in (store.root / "MEMORY.md").read_text()


def test_note_missing_from_the_index_and_stale_lines(store: Store) -> None:
    (store.root / "project_knowledge_hand.md").write_text(
        "---\ntype: project_knowledge\ntitle: By hand\n---\nWritten in an editor.\n"
    )
    index = store.root / "MEMORY.md"
    index.write_text(index.read_text().replace("Note 0", "Old title"))
    found = {f.subject: f.message for f in examine(store).problems}
    assert found == {
        "project_knowledge_hand.md": "this note is missing from MEMORY.md",
        "project_knowledge_note-0.md": "MEMORY.md's line for this note is out of date",
    }
    assert examine(store, fix=True).problems == ()
    assert store.reindex().changed is False


def test_stray_lines_and_order_in_the_index(store: Store) -> None:
    index = store.root / "MEMORY.md"
    lines = index.read_text().splitlines()
    index.write_text("# Memory\n" + "\n".join(reversed(lines)) + "\n")
    assert problems(store) == [("index", "MEMORY.md")]
    assert examine(store, fix=True).problems == ()
    assert index.read_text().splitlines() == lines


def test_malformed_notes_are_reported_never_changed(store: Store) -> None:
    bad = store.root / "project_knowledge_bad.md"
    bad.write_text("---\ntitle: [unclosed\n---\nprecious\n")
    odd = store.root / "odd(name).md"
    odd.write_text("---\ntype: project_knowledge\ntitle: x\n---\nbody\n")
    report = examine(store, fix=True)
    assert {(f.check, f.subject, f.fixable) for f in report.problems} == {
        ("notes", "project_knowledge_bad.md", False),
        ("notes", "odd(name).md", False),
    }
    assert bad.read_text() == "---\ntitle: [unclosed\n---\nprecious\n"
    assert odd.exists()


# -- temp files, the batch journal, locks ------------------------------------------------


def test_stray_temp_files(store: Store) -> None:
    dead = store.root / f".project_knowledge_x.md.{DEAD_PID}.abcd1234.tmp"
    dead.write_text("half")
    dead_state = state(store.root) / f".catalog.json.{DEAD_PID}.00ff.tmp"
    dead_state.write_text("half")
    live = store.root / f".MEMORY.md.{os.getpid()}.beef.tmp"
    live.write_text("being written")
    assert sorted(problems(store)) == sorted(
        [("temp-files", str(dead_state)), ("temp-files", dead.name)]
    )
    old = time.time() - 3600  # a live pid with an hour-old temp file: a reused pid
    os.utime(live, (old, old))
    assert ("temp-files", live.name) in problems(store)
    assert examine(store, fix=True).problems == ()
    assert not dead.exists() and not dead_state.exists() and not live.exists()


def test_interrupted_batch_is_finished_by_fix(store: Store) -> None:
    name = "project_knowledge_from-batch.md"
    text = "---\ntype: project_knowledge\ntitle: From batch\n---\nJournaled.\n"
    journal = {"writes": {name: text}, "deletes": {}, "before": {name: None}}
    (state(store.root) / "txn.json").write_text(json.dumps(journal))
    found = examine(store).problems
    assert [(f.check, f.fixable) for f in found] == [("batch", True)]
    assert not (store.root / name).exists()  # looking never repairs
    report = examine(store, fix=True)
    assert report.problems == ()
    assert "finished the interrupted batch of writes" in report.fixed
    assert (store.root / name).read_text() == text
    assert name in (store.root / "MEMORY.md").read_text()


HOLD = textwrap.dedent(
    """
    import sys, time
    from mdmem import Store, Level
    store = Store(sys.argv[1], Level.PROJECT)
    lock = store.lock() if sys.argv[2] == "lock" else store.turn_lock(5)
    with lock:
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.fixture
def holder(store: Store, request: pytest.FixtureRequest) -> object:
    proc = subprocess.Popen(
        [PYTHON, "-c", HOLD, str(store.root), request.param],
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    yield proc
    proc.kill()
    proc.wait()
    proc.stdout.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("holder", ["lock", "turn.lock"], indirect=True)
def test_a_held_lock_is_reported_with_its_holder_not_as_a_problem(
    store: Store, holder: subprocess.Popen[str], request: pytest.FixtureRequest
) -> None:
    name = request.node.callspec.params["holder"]
    assert lock_holders(str(state(store.root) / name)) == [holder.pid]
    report = examine(store)
    assert report.problems == ()
    [finding] = report.findings
    assert finding.subject == str(state(store.root) / name) and not finding.problem
    assert f"held by pid {holder.pid} (" in finding.message and "never stale" in finding.message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("holder", ["lock"], indirect=True)
def test_without_proc_locks_a_held_lock_is_probed(
    store: Store, holder: subprocess.Popen[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(doctor, "lock_holders", lambda path: None)
    [finding] = examine(store).findings
    assert "held by another process" in finding.message


@pytest.mark.timeout(60)
@pytest.mark.parametrize("holder", ["lock"], indirect=True)
def test_a_batch_under_a_held_lock_is_in_progress(
    store: Store, holder: subprocess.Popen[str]
) -> None:
    (state(store.root) / "txn.json").write_text("{}")
    report = examine(store)
    assert report.problems == ()
    assert any(f.check == "batch" and "being written" in f.message for f in report.findings)


def test_free_locks_are_not_mentioned(store: Store) -> None:
    with store.turn_lock(1):
        pass
    assert (state(store.root) / "turn.lock").exists()
    assert examine(store).findings == ()


# -- permissions, rescued texts, the extension point ------------------------------------


def test_user_store_permissions(tmp_path: Path) -> None:
    user = Store(tmp_path / "user", Level.USER)
    user.apply(
        [
            {
                "action": "create",
                "level": "user",
                "type": "user_preference",
                "title": "Tone",
                "content": "Brief.",
            }
        ]
    )
    assert examine(user).findings == ()
    note = user.root / "user_preference_tone.md"
    note.chmod(0o644)
    user.root.chmod(0o755)
    (state(user.root) / "catalog.sqlite").chmod(0o666)
    assert sorted(problems(user)) == [
        ("permissions", "."),
        ("permissions", str(state(user.root) / "catalog.sqlite")),
        ("permissions", "user_preference_tone.md"),
    ]
    assert examine(user, fix=True).problems == ()
    assert note.stat().st_mode & 0o777 == 0o600 and user.root.stat().st_mode & 0o777 == 0o700


def test_project_store_permissions_are_the_umasks_business(store: Store) -> None:
    (store.root / "project_knowledge_note-0.md").chmod(0o664)
    assert problems(store) == []


def test_rescued_texts_are_listed_for_information(store: Store) -> None:
    path = rescue(store, "project_knowledge_note-0.md", "typed text")
    assert Path(path).read_text() == "typed text"
    second = rescue(store, "project_knowledge_note-0.md", "more")
    assert second != path
    report = examine(store)
    assert report.problems == ()
    assert [f.check for f in report.findings] == ["rescued", "rescued"]


def test_pending_turn_checks_run_and_repair(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    stuck = [True]

    def find(s: Store) -> list[Finding]:
        return (
            [Finding("pending-turns", ".mdmem/turns/1.json", "stuck", fixable=True)]
            if stuck[0]
            else []
        )

    def repair(s: Store, findings: list[Finding]) -> list[str]:
        assert [f.subject for f in findings] == [".mdmem/turns/1.json"]
        stuck[0] = False
        return ["resumed 1 turn"]

    monkeypatch.setattr(doctor, "PENDING_TURN_CHECKS", [Check("pending-turns", find, repair)])
    assert problems(store) == [("pending-turns", ".mdmem/turns/1.json")]
    report = examine(store, fix=True)
    assert report.fixed == ("resumed 1 turn",) and report.problems == ()


def test_a_failing_repair_is_reported(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    def find(s: Store) -> list[Finding]:
        return [Finding("pending-turns", "x", "stuck", fixable=True)]

    def repair(s: Store, findings: list[Finding]) -> list[str]:
        raise OSError("disk on fire")

    monkeypatch.setattr(doctor, "PENDING_TURN_CHECKS", [Check("pending-turns", find, repair)])
    report = examine(store, fix=True)
    assert report.failed == ("pending-turns: disk on fire",) and len(report.problems) == 1


# -- turns stuck in the journal -----------------------------------------------------------


def test_stuck_and_failed_turns_are_found_and_finished(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app
    from mdmem.manager._journal import new_turn_id, put_pending

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    project = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    project.apply([])  # the store exists
    turns = state(project.root) / "turns"
    # A turn left by a killed process, one waiting for long, and one that failed.
    killed = textwrap.dedent(
        """
        import os, sys
        from mdmem.manager._journal import Journal, new_turn_id
        j = Journal(sys.argv[1]); j.open()
        text = "Remember that deploys run on Fridays."
        j.add({"id": new_turn_id(), "messages": [["user", text]]})
        os.kill(os.getpid(), 9)
        """
    )
    subprocess.run([PYTHON, "-c", killed, str(turns)], env=python_env(), check=False)
    old_id = f"{(time.time_ns() - 3_600 * 10**9):020d}-abcd0123"
    put_pending(
        str(turns), {"id": old_id, "messages": [["user", "Remember that CI uses Go 1.23."]]}
    )
    failed = turns / "failed" / f"{new_turn_id()}.json"
    failed.write_text(
        json.dumps(
            {
                "id": failed.stem,
                "attempts": 3,
                "errors": [{"error": "401"}],
                "messages": [["user", "From now on, answer briefly."]],
            }
        )
    )
    report = examine(project)
    stuck = [f for f in report.problems if f.check == "pending-turns"]
    assert len(stuck) == 3 and all(f.fixable for f in stuck)
    assert any("extraction failed (401)" in f.message for f in stuck)

    result = CliRunner().invoke(
        app,
        ["--workspace", str(ws), "--user-dir", str(tmp_path / "user"), "doctor", "--fix"],
        env={"MDMEM_PROVIDER": "offline"},
    )
    index = project.load_index() + Store(tmp_path / "user", Level.USER).load_index()
    assert "Fridays" in index and "Go 1.23" in index and "briefly" in index, result.output
    assert list(turns.rglob("*.json")) == []
    assert [f for f in examine(project).problems if f.check == "pending-turns"] == []


def test_a_fresh_pending_turn_is_information_only(store: Store) -> None:
    from mdmem.manager._journal import new_turn_id, put_pending

    put_pending(str(state(store.root) / "turns"), {"id": new_turn_id(), "messages": []})
    [finding] = [f for f in examine(store).findings if f.check == "pending-turns"]
    assert not finding.problem and finding.message == "waiting for a worker"
