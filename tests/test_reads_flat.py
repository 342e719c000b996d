"""Reads never write durably: 0 fsync/fdatasync for index, search, recall and the read hooks.

Counted with ``strace -f -c`` on real processes (SQLite's own syncs included), right after a
write through mdmem and again once settled.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import python_env

pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")


def _syncs(argv: list[str], env: dict[str, str], out: Path, stdin: str = "") -> int:
    """fsync + fdatasync calls of a process and its children."""
    subprocess.run(
        ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(out), *argv],
        env=env,
        input=stdin,
        text=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=120,
    )
    total = 0
    for line in out.read_text().splitlines():
        cells = line.split()
        if cells and cells[-1] in ("fsync", "fdatasync"):
            total += int(cells[3])
    return total


def test_a_read_after_a_write_makes_no_sync_call(workspace: Path, tmp_path: Path) -> None:
    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
    )
    mdmem = [sys.executable, "-m", "mdmem"]

    def run(*args: str) -> None:
        subprocess.run([*mdmem, *args], env=env, check=True, capture_output=True, timeout=120)

    run("init")
    for k in range(3):
        run("add", "--title", f"Deploy cache {k}", f"The deploy cache number {k} lasts a day.")
    run("add", "--level", "user", "--title", "Short answers", "The user likes short answers.")
    run("search", "deploy cache")  # builds the recall index
    hook = json.dumps(
        {
            "session_id": "s1",
            "transcript_path": str(tmp_path / "t.jsonl"),
            "cwd": str(workspace),
            "hook_event_name": "UserPromptSubmit",
            "prompt": "how long does the deploy cache last?",
        }
    )
    reads = {
        "index": ([*mdmem, "index"], ""),
        "search": ([*mdmem, "search", "deploy cache"], ""),
        "recall": ([*mdmem, "recall", "deploy cache"], ""),
        "hook user-prompt-submit": ([*mdmem, "hook", "user-prompt-submit"], hook),
        "hook session-start": ([*mdmem, "hook", "session-start"], ""),
    }
    counts = {}
    for k, (name, (argv, stdin)) in enumerate(reads.items()):
        run("add", "--title", f"Written before {name}", f"A write, then the read number {k}.")
        after = _syncs(argv, env, tmp_path / "strace.txt", stdin)
        settled = _syncs(argv, env, tmp_path / "strace.txt", stdin)
        counts[name] = (after, settled)
    assert counts == {name: (0, 0) for name in reads}


def test_doctor_with_nothing_to_fix_leaves_the_state_as_it_was(
    workspace: Path, tmp_path: Path
) -> None:
    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
    )
    mdmem = [sys.executable, "-m", "mdmem"]
    subprocess.run([*mdmem, "init"], env=env, check=True, capture_output=True, timeout=120)
    subprocess.run(
        [*mdmem, "add", "--title", "Build", "Run `make build` in `src/`."],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )

    def snapshot() -> dict[str, tuple[int, int, int]]:
        out = {}
        for p in sorted((tmp_path / "state").rglob("*")):
            # stale.rows (the per-note cache of the stale check) is still streamed anew.
            if p.is_file() and p.name != "stale.rows":
                st = p.stat()
                out[str(p)] = (st.st_mtime_ns, st.st_ino, st.st_size)
        return out

    for _ in range(2):  # the first settles what a first run derives
        subprocess.run([*mdmem, "doctor"], env=env, capture_output=True, timeout=120)
    before = snapshot()
    subprocess.run([*mdmem, "doctor"], env=env, capture_output=True, timeout=120)
    assert snapshot() == before


_SERVER_ARGV = (
    "import json, sys; from mdmem import _spawn; "
    "print(json.dumps(_spawn.argv(sys.argv[1], entry=sys.argv[2])))"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the prompt server: Linux")
def test_a_prompt_the_prompt_server_answers_after_a_write_makes_no_sync_call(
    workspace: Path, tmp_path: Path
) -> None:
    """The hook's own process and the server that answered it, both under strace."""
    import os
    import time

    from mdmem.integrations import prompt_server

    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_SEMANTIC="off",
        MDMEM_PROMPT_SERVER="on",
        MDMEM_PROMPT_SERVER_IDLE="3",
        MDMEM_PROMPT_SERVER_WAIT="10",  # a loaded machine: relayed all the same
    )
    mdmem = [sys.executable, "-m", "mdmem"]

    def run(*args: str) -> None:
        subprocess.run([*mdmem, *args], env=env, check=True, capture_output=True, timeout=120)

    run("init")
    run("add", "--title", "Deploy cache", "The deploy cache lasts a day.")
    run("search", "deploy cache")  # builds the recall index
    folder = prompt_server.folder()
    os.makedirs(folder, mode=0o700)
    # The server as a hook starts it: with the import path a hook's process has.
    made = subprocess.run(
        [sys.executable, "-c", _SERVER_ARGV, folder, prompt_server.ENTRY],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    argv = json.loads(made.stdout)
    traced = tmp_path / "server.strace"
    server = subprocess.Popen(
        ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", str(traced), *argv],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not list(Path(folder).glob("prompt-v*.sock")) and time.monotonic() < deadline:
            time.sleep(0.05)
        hook = {"cwd": str(workspace), "prompt": "how long does the deploy cache last?"}
        relayed = []
        for k in range(3):
            run("add", "--title", f"Written before prompt {k}", f"A write, then prompt {k}.")
            stdin = json.dumps({**hook, "session_id": f"s{k}"})
            assert (
                _syncs([*mdmem, "hook", "user-prompt-submit"], env, tmp_path / "h.txt", stdin) == 0
            )
            probe = subprocess.run(
                [sys.executable, "-X", "importtime", "-m", "mdmem", "hook", "user-prompt-submit"],
                input=json.dumps({**hook, "session_id": f"p{k}"}),
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            relayed.append("mdmem.recall.engine" not in probe.stderr and "deploy" in probe.stdout)
        assert all(relayed), relayed
        server.wait(timeout=60)  # idle after 3 s: strace writes its count when it ends
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    total = sum(
        int(cells[3])
        for cells in (line.split() for line in traced.read_text().splitlines())
        if cells and cells[-1] in ("fsync", "fdatasync")
    )
    assert total == 0
