"""The note count SQLite keeps in the search index equals counting the notes, always.

``Index.count()`` reads a tally that triggers on ``notes`` keep (``recall/tally.py``):
the per-prompt hook no longer walks every note's name. It must equal
``count(*)`` after anything that changes the index: mdmem's writes and hand edits
(the state machine of ``test_fts.py`` checks it after every step), a rebuild, a bulk
build, an index made before the tally (upgraded in place), a writer that knows nothing
of the tally (an older mdmem), and a process killed with SIGKILL in the middle of a sync.
"""

from __future__ import annotations

import signal
import subprocess
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import index_dump
from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.recall.fts import Index


def _tally(index: Index) -> int:
    db = index._connect()
    (kept,) = db.execute("SELECT n FROM tally WHERE what = 'notes'").fetchone()
    assert kept == db.execute("SELECT count(*) FROM notes").fetchone()[0]
    index._count = None
    assert index.count() == kept
    return int(kept)


def _write_notes(store: Store, count: int, start: int = 0, word: str = "deploy") -> None:
    store.root.mkdir(parents=True, exist_ok=True)
    for i in range(start, start + count):
        (store.root / f"project_knowledge_n{i:04d}.md").write_text(
            f"---\ntype: project_knowledge\ntitle: Note {i} {word}\n---\n{word} body {i}\n",
            encoding="utf-8",
        )


def test_a_rebuild_and_a_bulk_build_keep_the_tally(tmp_path: Path) -> None:
    store = Store(tmp_path / "memory", Level.PROJECT)
    _write_notes(store, 300)  # above _BULK: the chunked first build
    index = Index(store)
    assert index.sync() == 300
    assert _tally(index) == 300
    for name in ("project_knowledge_n0001.md", "project_knowledge_n0002.md"):
        (store.root / name).unlink()
    _write_notes(store, 290, start=300)  # again above _BULK: the bulk path with removals
    index.sync(full=True)
    assert _tally(index) == 588
    assert index.rebuild() == 588
    assert _tally(index) == 588
    for path in store.root.glob("*.md"):
        if path.name != "MEMORY.md":
            path.unlink()
    index.sync(full=True)
    assert _tally(index) == 0
    index.close()


def _drop_tally(path: str) -> None:
    """Make ``path`` what an index of this schema looked like before the tally."""
    from mdmem._sqlite import sqlite3

    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TRIGGER notes_added")
    db.execute("DROP TRIGGER notes_dropped")
    db.execute("DROP TABLE tally")
    db.close()


def test_an_index_made_before_the_tally_gets_it_in_place(tmp_path: Path) -> None:
    store = Store(tmp_path / "memory", Level.PROJECT)
    _write_notes(store, 12)
    index = Index(store)
    index.sync()
    index.close()
    _drop_tally(index.path)
    _write_notes(store, 3, start=12)  # changed while the index had no tally
    again = Index(store)
    assert again.count() == 12  # counted once, as the triggers are made: not rebuilt
    assert index_dump(again) != []
    again.sync(full=True)
    assert _tally(again) == 15
    again.close()


@settings(max_examples=40, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["insert", "delete", "delete-all", "update"]), st.integers(0, 6)),
        max_size=12,
    )
)
def test_a_writer_that_knows_nothing_of_the_tally_keeps_it_right(
    steps: list[tuple[str, int]],
) -> None:
    """An older mdmem of this schema writes ``notes`` with plain SQL: the triggers count it."""
    import tempfile

    store = Store(Path(tempfile.mkdtemp()) / "memory", Level.PROJECT)
    index = Index(store, path=":memory:")
    db = index._connect()
    columns = "name, sha, type, title, summary, body, updated, expires, supersedes, terms"
    try:
        for op, n in steps:
            db.execute("BEGIN")
            if op == "insert":
                db.execute(
                    f"INSERT OR IGNORE INTO notes({columns})"
                    " VALUES (?, 's', 'project_knowledge', 't', '', 'b', NULL, NULL, '[]', 'b t')",
                    (f"project_knowledge_n{n}.md",),
                )
            elif op == "delete":
                db.execute("DELETE FROM notes WHERE name = ?", (f"project_knowledge_n{n}.md",))
            elif op == "delete-all":
                db.execute("DELETE FROM notes")  # what an older rebuild runs
            else:
                db.execute("UPDATE notes SET sha = 'other' WHERE name LIKE ?", (f"%n{n}.md",))
            db.execute("ROLLBACK" if n == 6 else "COMMIT")
            _tally(index)
    finally:
        index.close()


# A child that syncs the store and kills itself (SIGKILL: no cleanup, no rollback of its
# own) at the ``stop``-th statement that inserts a note, inside the sync's transaction.
_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from mdmem import Level, Store
    from mdmem.recall.fts import Index

    root, stop = sys.argv[1], int(sys.argv[2])
    index = Index(Store(root, Level.PROJECT))
    db = index._connect()
    seen = [0]

    def trace(statement):
        if statement.startswith("INSERT INTO notes"):
            seen[0] += 1
            if seen[0] == stop:
                os.kill(os.getpid(), signal.SIGKILL)

    db.set_trace_callback(trace)
    index.sync()
    print("finished", flush=True)
    """
)


@pytest.mark.parametrize(
    ("first", "changed", "stop"),
    [
        (0, 300, 1),  # the first (bulk) build: killed at its first chunk
        (0, 600, 2),  # ... after a chunk went in, inside the same transaction
        (40, 12, 5),  # an incremental sync: one note at a time, killed at the fifth
    ],
)
def test_a_sync_killed_midway_leaves_the_tally_right(
    tmp_path: Path, first: int, changed: int, stop: int
) -> None:
    store = Store(tmp_path / "memory", Level.PROJECT)
    if first:
        _write_notes(store, first)
        index = Index(store)
        index.sync()
        index.close()
        for i in range(0, first, 7):  # some gone, some new, some edited
            (store.root / f"project_knowledge_n{i:04d}.md").unlink()
        _write_notes(store, changed // 2, start=first)
        _write_notes(store, changed // 2, start=1, word="release")
    else:
        _write_notes(store, changed)
    child = subprocess.run(
        [PYTHON, "-c", _KILLED, str(store.root), str(stop)],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert "finished" not in child.stdout
    after = Index(store)
    _tally(after)  # whatever the kill left, the tally is the notes' count
    after.sync()
    fresh = Index(store, path=":memory:")
    fresh.rebuild()
    assert index_dump(after) == index_dump(fresh)
    assert _tally(after) == _tally(fresh) == len(index_dump(fresh))
    after.close()
    fresh.close()
