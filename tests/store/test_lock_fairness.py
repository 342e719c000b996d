"""The store's write lock is taken in turn: a person's command gets it behind a busy writer.

Real processes: writers loop batches under the lock (let go, take it again at
once), as a worker or an API loop does; a foreground `mdmem add` must still get
the lock within a modest timeout, every time. No timing is asserted: only that
nobody times out. (The numbers are in benchmarks/bench_lock_fairness.py.)
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.errors import LockTimeout
from mdmem.store import _queue

pytestmark = pytest.mark.timeout(90)

WRITER = """
import os, sys, time
from mdmem import Level, Store
store = Store(sys.argv[1], Level.PROJECT)
n = 0
print("writing", flush=True)
while not os.path.exists(sys.argv[2]):
    with store.lock():  # one batch: a write and some work, then let go and come back
        store.apply([{"action": "create", "level": "project", "type": "project_knowledge",
                      "title": f"Batch {os.getpid()} {n}", "content": f"batch {n}"}])
        time.sleep(0.02)
    n += 1
print(n)
"""


def test_a_person_gets_the_lock_between_a_busy_writers_batches(workspace: Path) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    stop = workspace / "stop"
    env = python_env(MDMEM_LOCK_TIMEOUT="5")
    writers = [
        subprocess.Popen(
            [PYTHON, "-c", WRITER, str(root), str(stop)],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(2)
    ]
    try:
        for writer in writers:
            assert writer.stdout is not None and writer.stdout.readline() == "writing\n"
        for n in range(3):
            done = subprocess.run(
                [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "add",
                 "--title", f"Person {n}", "Typed by a person."],
                capture_output=True, text=True, env=env, timeout=60,
            )  # fmt: skip
            assert done.returncode == 0, done.stderr
            assert "locked by another process" not in done.stderr
    finally:
        stop.touch()
        counts = [int(w.communicate(timeout=30)[0].split()[-1]) for w in writers]
    assert all(count > 0 for count in counts)  # the writers went on writing meanwhile
    assert [p.name for p in sorted(root.glob("*person-*.md"))] == [
        f"project_knowledge_person-{n}.md" for n in range(3)
    ]
    assert _queue.waiting(str(state(root) / "lock")) == 0  # every ticket was given back


KILLED_WAITER = """
import sys
from mdmem import Level, Store
from mdmem.store import _queue
store = Store(sys.argv[1], Level.PROJECT)
print("waiting", flush=True)
with store.lock(timeout=60):
    pass
"""


def test_a_waiter_killed_in_the_queue_never_blocks_it(workspace: Path) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    store = Store(root, Level.PROJECT)
    with store.lock():
        waiter = subprocess.Popen(
            [PYTHON, "-c", KILLED_WAITER, str(root)], stdout=subprocess.PIPE, text=True,
            env=python_env(),
        )  # fmt: skip
        assert waiter.stdout is not None and waiter.stdout.readline() == "waiting\n"
        lock_file = str(state(root) / "lock")
        while _queue.waiting(lock_file) == 0:  # it took its ticket
            os.sched_yield()
        waiter.kill()
        waiter.communicate(timeout=10)
    assert _queue.waiting(lock_file) == 1  # a dead ticket, left behind
    other = Store(root, Level.PROJECT, lock_timeout=5)
    with other.lock():  # the dead ticket is seen as dead and removed
        pass
    assert _queue.waiting(lock_file) == 0


def test_a_timeout_in_the_queue_gives_the_ticket_back(workspace: Path) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    holder = subprocess.Popen(
        [PYTHON, "-c", "import sys, time\nfrom mdmem import Level, Store\n"
         "s = Store(sys.argv[1], Level.PROJECT)\nwith s.lock():\n"
         "    print('held', flush=True)\n    time.sleep(30)\n", str(root)],
        stdout=subprocess.PIPE, text=True, env=python_env(),
    )  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        store = Store(root, Level.PROJECT)
        with pytest.raises(LockTimeout), store.lock(timeout=0.2):
            pass
        assert _queue.waiting(str(state(root) / "lock")) == 0
    finally:
        holder.kill()
        holder.communicate(timeout=10)
