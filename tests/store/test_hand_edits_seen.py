"""Hand edits are seen at once: an in-place same-size edit and an editor-style rename are
found by the next search and shown by the next block (cold processes, a settled store)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from conftest import python_env


def test_in_place_edit_and_rename_are_found_and_shown_at_once(
    workspace: Path, tmp_path: Path
) -> None:
    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
    )

    def mdmem(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "mdmem", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        return done.stdout

    mdmem("init")
    for i in range(12):
        mdmem("add", "--title", f"Release step {i:02d}", f"Step {i:02d} of the release runbook.")
    root = workspace / ".PseudoClaude" / "memory"
    past = time.time() - 120
    for p in root.glob("*.md"):
        os.utime(p, (past, past))
    for _ in range(3):  # settled: the derived state trusts what it recorded
        mdmem("search", "release")
        mdmem("hook", "session-start")
        time.sleep(0.3)

    path = root / "project_knowledge_release-step-05.md"
    data = path.read_bytes()
    inode, directory = path.stat().st_ino, root.stat().st_mtime_ns
    edited = data.replace(b"Release step 05", b"Zeppelin stp 05")
    assert len(edited) == len(data)
    with open(path, "r+b") as f:  # in place: same inode, same size, directory untouched
        f.write(edited)
    os.utime(path, (past, past))  # even with its old mtime back (ctime still moves)
    assert path.stat().st_ino == inode and root.stat().st_mtime_ns == directory

    hits = json.loads(mdmem("search", "zeppelin", "--json"))
    assert [h["filename"] for h in hits] == [path.name]
    assert "Zeppelin stp 05" in mdmem("hook", "session-start")

    # An editor's save: write a temporary file, rename it over the note.
    tmp = root / ".project_knowledge_release-step-07.md.swp"
    tmp.write_bytes(
        (root / "project_knowledge_release-step-07.md").read_bytes().replace(b"Release", b"Glider!")
    )
    os.replace(tmp, root / "project_knowledge_release-step-07.md")
    hits = json.loads(mdmem("search", "glider", "--json"))
    assert [h["filename"] for h in hits] == ["project_knowledge_release-step-07.md"]
    assert "Glider! step 07" in mdmem("hook", "session-start")
