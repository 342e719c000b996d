"""A catalog locked whole for a moment (another connection's last close, a recovery of its
-shm) is waited out by a new connection: a write or a read does not fail on it."""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import pytest

from builders import create_op
from mdmem import Level, Store


def _first_note(root: Path) -> str:
    """A note written by another process (gone since: no connection of its is left),
    and the catalog's path."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom mdmem import Level, Store\n"
        "s = Store(sys.argv[1], Level.PROJECT)\n"
        "s.apply([{'action': 'create', 'level': 'project', 'type': 'project_knowledge',"
        " 'title': 'First', 'summary': 'The first.', 'content': 'The first note.'}])\n"
        "print(s.state.catalog)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def _locked_whole(path: str) -> sqlite3.Connection:
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("PRAGMA locking_mode=EXCLUSIVE")
    holder.execute("BEGIN EXCLUSIVE")  # locked whole, as SQLite is for those moments
    holder.execute("UPDATE meta SET value = value WHERE key = 'epoch'")
    return holder


def test_a_new_connection_waits_out_a_moments_lock_of_the_catalog(tmp_path: Path) -> None:
    holder = _locked_whole(_first_note(tmp_path / "mem"))
    released = threading.Event()

    def release() -> None:
        time.sleep(0.3)
        holder.execute("COMMIT")
        holder.close()
        released.set()

    threading.Thread(target=release, daemon=True).start()
    # A new process's store: its catalog connection opens while the lock is held.
    result = Store(tmp_path / "mem", Level.PROJECT).apply([create_op("Second")])
    assert released.is_set()
    assert [a.action for a in result.applied] == ["create"]
    assert {e.title for e in Store(tmp_path / "mem", Level.PROJECT).entries()} == {
        "First",
        "Second",
    }


def test_a_catalog_locked_past_the_wait_still_loses_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Held past OPEN_WAIT (never, by SQLite itself): the write is refused with an error
    that names the catalog, before anything is written."""
    from mdmem.store import _catalog

    monkeypatch.setattr(_catalog, "OPEN_WAIT", 0.05)
    holder = _locked_whole(_first_note(tmp_path / "mem"))
    try:
        late = Store(tmp_path / "mem", Level.PROJECT)
        with pytest.raises(Exception) as raised:
            late.apply([create_op("Second")])
        assert "catalog" in str(raised.value) and "locked" in str(raised.value)
    finally:
        holder.execute("COMMIT")
        holder.close()
    # Refused before anything was written: no note, no MEMORY.md line; the store as it was.
    root = tmp_path / "mem"
    assert sorted(p.name for p in root.glob("*.md")) == ["MEMORY.md", "project_knowledge_first.md"]
    assert "Second" not in (root / "MEMORY.md").read_text(encoding="utf-8")
    assert [e.title for e in Store(root, Level.PROJECT).entries()] == ["First"]
    Store(root, Level.PROJECT).apply([create_op("Second")])  # and writable again
