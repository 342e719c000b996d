"""The write lock taken without filelock and filelock's own lock exclude each other (issue 23).

A write lock nobody holds or waits for is one ``flock`` on the lock file
(``store/locks.py``'s ``_flock``), as filelock's ``UnixFileLock`` takes it, so
that ``mdmem add`` need not import filelock. Real processes, real flocks: a
process holding the lock through ``filelock.FileLock`` keeps a plain ``mdmem
add`` out (it waits, times out, writes nothing), and a process holding it the
direct way keeps filelock out; one thread's direct hold keeps another thread
out, and is re-entrant in its own.
"""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.errors import LockTimeout
from mdmem.store import _queue

pytestmark = pytest.mark.timeout(90)

#: Holds the lock file through filelock itself until stdin closes.
FILELOCK_HOLDER = """
import sys
from filelock import FileLock
lock = FileLock(sys.argv[1], mode=0o600)
lock.acquire(timeout=10)
print("held", flush=True)
sys.stdin.read()
lock.release()
"""

#: Holds the store's write lock as mdmem takes it, until stdin closes.
STORE_HOLDER = """
import sys
from mdmem import Level, Store
store = Store(sys.argv[1], Level.PROJECT)
with store.lock():
    print("held", "filelock" in sys.modules, flush=True)
    sys.stdin.read()
"""

#: Tries the lock file through filelock: prints whether it got it.
FILELOCK_TRY = """
import sys
from filelock import FileLock, Timeout
lock = FileLock(sys.argv[1], mode=0o600)
try:
    lock.acquire(timeout=0.3)
except Timeout:
    print("busy")
else:
    print("got it")
    lock.release()
"""


def _holder(code: str, arg: Path) -> subprocess.Popen[str]:
    proc = subprocess.Popen(
        [PYTHON, "-c", code, str(arg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("held")
    return proc


def _add(ws: Path, title: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), "add", "--title", title, "A note."],
        capture_output=True,
        text=True,
        env=python_env(MDMEM_SEMANTIC="off", **env),
        timeout=60,
    )


def _filelock_try(root: Path) -> str:
    tried = subprocess.run(
        [PYTHON, "-c", FILELOCK_TRY, str(state(root) / "lock")],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert tried.returncode == 0, tried.stderr
    return tried.stdout


@pytest.fixture
def root(workspace: Path) -> Path:
    root = workspace / ".PseudoClaude" / "memory"
    Store(root, Level.PROJECT).apply(
        [{"action": "create", "level": "project", "type": "project_knowledge", "title": "First",
          "content": "The first note."}]
    )  # fmt: skip
    return root


def test_filelocks_hold_keeps_a_plain_add_out(workspace: Path, root: Path) -> None:
    holder = _holder(FILELOCK_HOLDER, state(root) / "lock")
    try:
        done = _add(workspace, "Kept out", MDMEM_LOCK_TIMEOUT="0.3")
        assert done.returncode == 1 and "locked by another process" in done.stderr
        assert not (root / "project_knowledge_kept-out.md").exists()
    finally:
        holder.communicate("", timeout=30)
    done = _add(workspace, "Let in")  # released: the add takes it at once
    assert done.returncode == 0, done.stderr
    assert (root / "project_knowledge_let-in.md").is_file()
    assert _queue.waiting(str(state(root) / "lock")) == 0


def test_a_direct_hold_keeps_filelock_and_other_writers_out(root: Path) -> None:
    holder = subprocess.Popen(
        [PYTHON, "-c", STORE_HOLDER, str(root)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline() == "held False\n"  # taken without importing filelock
        assert _filelock_try(root) == "busy\n"
        with pytest.raises(LockTimeout), Store(root, Level.PROJECT).lock(timeout=0.3):
            pass
    finally:
        holder.communicate("", timeout=30)
    assert _filelock_try(root) == "got it\n"


def test_a_direct_hold_is_reentrant_and_keeps_another_thread_out(root: Path) -> None:
    store = Store(root, Level.PROJECT)
    outcome: list[str] = []

    def other_thread() -> None:
        try:
            with Store(root, Level.PROJECT).lock(timeout=0.3):
                outcome.append("got it")
        except LockTimeout:
            outcome.append("busy")

    def try_from_another_thread() -> None:
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join(timeout=30)

    with store.lock():
        with store.lock():  # one more level in the same thread
            try_from_another_thread()
        try_from_another_thread()  # the outer level holds it still
        assert _filelock_try(root) == "busy\n"  # the lock file itself, not only the folder's
    try_from_another_thread()  # every level let go: free
    assert outcome == ["busy", "busy", "got it"]


def test_a_contended_lock_still_goes_through_filelock_and_the_queue(
    workspace: Path, root: Path
) -> None:
    holder = _holder(STORE_HOLDER, root)
    try:
        waiter = subprocess.Popen(
            [PYTHON, "-c", "import sys\nfrom mdmem import Level, Store\n"
             "s = Store(sys.argv[1], Level.PROJECT, lock_timeout=30)\n"
             "with s.lock():\n    print('filelock' in sys.modules)\n", str(root)],
            stdout=subprocess.PIPE, text=True, env=python_env(),
        )  # fmt: skip
        lock_file = str(state(root) / "lock")
        while _queue.waiting(lock_file) == 0:  # it queued behind the holder
            assert waiter.poll() is None
    finally:
        holder.communicate("", timeout=30)
    out, _ = waiter.communicate(timeout=60)
    assert out == "True\n" and waiter.returncode == 0
    assert _queue.waiting(lock_file) == 0
