"""Prune: expired and long-unused notes go to the trash, visibly and restorably."""

from __future__ import annotations

import json
import time
from pathlib import Path

from typer.testing import CliRunner

from builders import create_op, project_store
from mdmem.cli import app
from mdmem.manager.prune import ledger_last_use, prune

DAY = 86_400.0


def create(title: str, **extra: object) -> dict[str, object]:
    return create_op(title, f"{title}: the details of this note.", **extra)


def test_expired_notes_are_moved_to_the_trash_and_restorable(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create("Freeze", expires="2020-01-01"), create("Build")])
    name = "project_knowledge_freeze.md"
    runner = CliRunner()
    args = ["--workspace", str(workspace)]
    dry = runner.invoke(app, [*args, "prune", "--dry-run"])
    assert dry.exit_code == 0 and f"would move {name}" in dry.output
    assert (store.root / name).exists()
    done = runner.invoke(app, [*args, "prune", "--json"])
    [row] = json.loads(done.output)
    assert row["filename"] == name and row["reason"].startswith("expired")
    assert not (store.root / name).exists()
    assert [t.filename for t in store.trash()] == [name]
    assert store.history(name)[-1].source == "prune"
    assert runner.invoke(app, [*args, "restore", name]).exit_code == 0
    assert (store.root / name).exists()
    assert runner.invoke(app, [*args, "prune", "--level", "user"]).output == "nothing to prune\n"


def test_unused_notes_only_when_usage_is_known(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create("Old task"), create("Recent"), create("Never seen")])
    now = time.time()
    uses = {
        "project_knowledge_old-task.md": now - 60 * DAY,
        "project_knowledge_recent.md": now - 1 * DAY,
    }
    # No ledger: nothing is removed on a guess.
    assert prune(store, unused_days=45, last_use=lambda s: None) == []
    assert ledger_last_use(store) is None
    planned = prune(store, unused_days=45, dry_run=True, last_use=lambda s: uses)
    assert [p.filename for p in planned] == ["project_knowledge_old-task.md"]
    moved = prune(store, unused_days=45, last_use=lambda s: uses)
    assert [p.filename for p in moved] == ["project_knowledge_old-task.md"]
    assert sorted(e.filename for e in store.entries()) == [
        "project_knowledge_never-seen.md",
        "project_knowledge_recent.md",
    ]


def test_the_usage_ledger_gives_last_reads_and_writes(workspace: Path) -> None:
    from mdmem.store import ledger

    store = project_store(workspace)
    store.apply([create("Read long ago"), create("Read lately")])
    now = time.time()
    ledger.record(store.path, "read", now - 90 * DAY, n=["project_knowledge_read-long-ago.md"])
    ledger.record(store.path, "read", now - DAY, n=["project_knowledge_read-lately.md"])
    uses = ledger_last_use(store)
    assert uses is not None
    # A write counts as a use as well; the later of the two is what counts.
    ledger.record(store.path, "write", now - 80 * DAY, n=["project_knowledge_read-long-ago.md"])
    planned = prune(store, unused_days=45, dry_run=True, now=now)
    assert [p.filename for p in planned] == ["project_knowledge_read-long-ago.md"]
