"""Several processes writing one store at once: nothing lost, nothing doubled, nothing left over."""

from __future__ import annotations

import random
import signal
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from conftest import PYTHON, python_env, state
from mdmem import Level, Store

WRITER = textwrap.dedent(
    """
    import sys
    from mdmem import Store, Level
    store = Store(sys.argv[1], Level.PROJECT, lock_timeout=60)
    worker = sys.argv[2]
    for i in range(int(sys.argv[3])):
        op = {"action": "create", "level": "project", "type": "project_knowledge",
              "title": f"Worker {worker} note {i}", "content": f"from {worker}: {i}"}
        result = store.apply([op])
        assert len(result.applied) == 1, result
    """
)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_four_processes_fifty_notes_each(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    procs = [
        subprocess.Popen([PYTHON, "-c", WRITER, str(root), str(w), "50"], env=python_env())
        for w in range(4)
    ]
    for proc in procs:
        assert proc.wait(timeout=170) == 0
    notes = sorted(p.name for p in root.glob("*.md") if p.name != "MEMORY.md")
    assert len(notes) == 200
    index = (root / "MEMORY.md").read_text().splitlines()
    assert len(index) == 200
    assert sorted(line.rsplit("(", 1)[1][:-1] for line in index) == notes
    assert list(root.glob(".*.tmp")) == [] and list(state(root).glob(".*.tmp")) == []
    store = Store(root, Level.PROJECT)
    assert store.reindex().changed is False
    bodies = {n.body for n in store.notes()}
    assert bodies == {f"from {w}: {i}" for w in range(4) for i in range(50)}


LOOPER = textwrap.dedent(
    """
    import os, sys
    from mdmem import Store, Level
    store = Store(sys.argv[1], Level.PROJECT, lock_timeout=60)
    i = 0
    while True:
        # Each body its own (2000 characters of random hex): "N 0 1 0" and "N 0 0 1" are the
        # same words, and with one body for all, dedupe rightly made the second an update of
        # the first, so a round that got past its first batch counted 3 notes, not 4 or 5.
        ops = [{"action": "create", "level": "project", "type": "project_knowledge",
                "title": f"N {sys.argv[2]} {i} {j}", "content": os.urandom(1000).hex()}
               for j in range(5)]
        old = f"project_knowledge_n-{sys.argv[2]}-{i - 1}-0.md"
        result = store.apply(ops + [{"action": "delete", "level": "project", "filename": old}])
        # Five new notes per batch, or the count below tests dedupe, not atomicity.
        assert [a.action for a in result.applied].count("create") == 5, result
        i += 1
    """
)


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_kill_dash_nine_at_random_moments_never_corrupts(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    rng = random.Random(1234)
    for round_ in range(12):
        proc = subprocess.Popen([PYTHON, "-c", LOOPER, str(root), str(round_)], env=python_env())
        time.sleep(0.35 + rng.random() * 0.4)
        # Still looping: a writer that failed (its assertion above) must fail the test.
        assert proc.poll() is None, f"round {round_}: the writer exited with {proc.returncode}"
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        store = Store(root, Level.PROJECT)
        store.apply([])  # the next writer finishes any interrupted batch
        index = store.load_index().splitlines()
        on_disk = sorted(p.name for p in root.glob("*.md") if p.name != "MEMORY.md")
        assert sorted(line.rsplit("(", 1)[1][:-1] for line in index) == on_disk
        assert store.problems() == []
        # Every batch is all-or-nothing: five notes per completed batch of a round.
        for r in range(round_ + 1):
            batches: dict[str, int] = {}
            for name in on_disk:
                parts = name.removeprefix("project_knowledge_n-").removesuffix(".md").split("-")
                if parts[0] == str(r):
                    batches[parts[1]] = batches.get(parts[1], 0) + 1
            assert all(count in (4, 5) for count in batches.values()), batches
