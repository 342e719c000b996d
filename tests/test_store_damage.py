"""Damaged and hostile input to the store's write path: swapped files, huge files, bad bytes.

Each test is the attack or the damaged input itself (real files, FIFOs, sparse
files, subprocesses under a memory limit) and fails on the code before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.store import _txn, history

pytestmark = pytest.mark.timeout(60)

NOTE = "---\ntype: project_knowledge\ntitle: Deploy\nsummary: How.\n---\nRun make deploy.\n"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    root = tmp_path / "ws" / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    (tmp_path / "ws" / ".git").mkdir()
    return Store(root, Level.PROJECT)


def _versions_text(store: Store, name: str) -> str:
    folder = state(store.root) / history.HISTORY_DIR / name
    if not folder.is_dir():
        return ""
    return "".join(p.read_text(errors="replace") for p in sorted(folder.iterdir()))


# -- history reads the file it is about to replace with the store's safe reader -----------


def test_history_never_follows_a_symlink_swapped_in_for_a_note(
    store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("the contents of a file outside the store\n")
    (store.root / "deploy.md").symlink_to(outside)
    plan = _txn.Plan(writes={"deploy.md": NOTE.encode()}, before={"deploy.md": "?"})
    _txn.commit(store.path, plan, private=False)
    assert "outside the store" not in _versions_text(store, "deploy.md")
    assert outside.read_text() == "the contents of a file outside the store\n"
    assert (store.root / "deploy.md").read_text() == NOTE  # the link is replaced, not followed


def test_history_never_waits_on_a_fifo_swapped_in_for_a_note(store: Store) -> None:
    os.mkfifo(store.root / "deploy.md")
    code = (
        "import sys\n"
        "from mdmem.store import _txn\n"
        "plan = _txn.Plan(writes={'deploy.md': sys.argv[2].encode()}, before={'deploy.md': '?'})\n"
        "_txn.commit(sys.argv[1], plan, private=False)\n"
    )
    # A plain open() of a FIFO blocks until a writer comes: the child would hang.
    done = subprocess.run(
        [PYTHON, "-c", code, store.path, NOTE],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert (store.root / "deploy.md").read_text() == NOTE


# -- deleting a huge file never reads it into memory ----------------------------------------

HUGE_DELETE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (700 * 2**20, 700 * 2**20))
from mdmem import Level, Store
store = Store(sys.argv[1], Level.PROJECT)
result = store.apply([{"action": "delete", "level": "project", "filename": "big.md"}])
print([a.filename for a in result.applied], [r.reason for r in result.rejected])
"""


def test_deleting_a_3_gb_note_never_reads_it_into_memory(store: Store) -> None:
    big = store.root / "big.md"
    with open(big, "wb") as f:
        f.truncate(3 * 2**30)  # sparse: no disk used
    done = subprocess.run(
        [PYTHON, "-c", HUGE_DELETE, store.path],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "['big.md']" in done.stdout
    assert not big.exists()
    trashed = [p for p in (state(store.root) / _txn.TRASH_DIR).iterdir()]
    assert [p.stat().st_size for p in trashed] == [3 * 2**30]  # in the trash, whole
    assert json.dumps(store.trash()[0].filename) == '"big.md"'


# -- a lone surrogate drops its own operation only -------------------------------------------

SURROGATE_ANSWER = (
    '[{"action": "create", "level": "project", "type": "project_knowledge",'
    ' "title": "Good one", "content": "Kept."},'
    ' {"action": "create", "level": "project", "type": "project_knowledge",'
    ' "title": "Bad one", "content": "x\\ud800y"},'
    ' {"action": "create", "level": "user", "type": "user_preference",'
    ' "title": "Also good", "content": "Kept too."}]'
)


def test_a_lone_surrogate_in_one_operation_drops_that_operation_only(store: Store) -> None:
    result = store.apply(
        [
            {"action": "create", "level": "project", "type": "project_knowledge",
             "title": "Fine", "content": "ok"},
            {"action": "create", "level": "project", "type": "project_knowledge",
             "title": "Broken \ud800", "content": "x\ud800y"},
        ]
    )  # fmt: skip
    assert [a.filename for a in result.applied] == ["project_knowledge_fine.md"]
    assert len(result.rejected) == 1 and "Unicode" in result.rejected[0].reason


def test_a_lone_surrogate_in_the_models_json_drops_that_operation_only(tmp_path: Path) -> None:
    from mdmem import Manager
    from test_manager import TURN, ScriptedProvider

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    provider = ScriptedProvider(SURROGATE_ANSWER)
    with Manager(ws, provider=provider) as manager:
        future = manager.update_async(TURN)
        assert manager.flush(timeout=30)
        result = future.result()
    assert [a.filename for a in result.project.applied] == ["project_knowledge_good-one.md"]
    assert [a.filename for a in result.user.applied] == ["user_preference_also-good.md"]
    assert [r.reason for r in result.rejected] == ["not valid Unicode (a lone surrogate)"]
    turns = state(ws / ".PseudoClaude" / "memory") / "turns"
    assert not [p for p in turns.rglob("*.json") if "failed" in p.parts]
