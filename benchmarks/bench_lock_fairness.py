"""Benchmark who gets a store's write lock when 9 processes want it at once.

The mix of issue 21 (item 7): for ``--seconds`` each, 9 processes write to one
project store as hard as they can:

- 3 ``api`` loops: ``Store.apply`` of a batch of 3 creates, back to back (a
  worker or a script on the Python API);
- 2 ``add`` loops: the ``mdmem add`` command (the CLI's code, in-process, so
  the numbers are the lock's and not interpreter start-up);
- 2 ``memory-tool`` loops: the Anthropic memory tool's ``create``;
- 2 ``hook`` loops: the store lock as the Stop hook takes it (hold, hand over, let go).

Every process counts its successes and ``LockTimeout``\\ s and times each
operation (median and worst wait). The same mix runs twice in the same run,
interleaved by round: ``filelock`` alone (the lock as it was: each waiter
polls) and with the queue (``mdmem.store._queue``: first come, first served).

    python benchmarks/bench_lock_fairness.py               # 2 rounds x 20 s per mode
    python benchmarks/bench_lock_fairness.py --seconds 60 --rounds 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

from _util import REPO, machine_rows, table

KINDS = {"api": 3, "add": 2, "memory-tool": 2, "hook": 2}

CHILD = r"""
import json, os, sys, time
kind, workspace, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if mode == "filelock":  # the lock as it was: no queue, every waiter polls
    from mdmem.store import _queue
    _queue.acquire = lambda lock, timeout, busy: lock.acquire(timeout=timeout)
from mdmem import Level, Store
from mdmem.errors import LockTimeout
root = os.path.join(workspace, ".PseudoClaude", "memory")
store = Store(root, Level.PROJECT)
pid, n, ok, timeouts, times, errors = os.getpid(), 0, 0, 0, [], []
if kind == "memory-tool":
    from mdmem.integrations.anthropic import MemoryTool
    tool = MemoryTool(workspace=workspace, user_dir=os.environ["MDMEM_USER_DIR"])
if kind == "add":
    from mdmem.cli import app
op = {"action": "create", "level": "project", "type": "project_knowledge"}
print("ready", flush=True)
until = float(sys.stdin.readline())  # every process starts at once, imports done
while time.time() < until:
    n += 1
    start = time.perf_counter()
    try:
        if kind == "api":
            store.apply([{**op, "title": f"api {pid} {n} {i}", "content": "x"} for i in range(3)])
        elif kind == "add":
            try:
                app(["--workspace", workspace, "add", "--title", f"add {pid} {n}", "typed"],
                    standalone_mode=False)
            except SystemExit as exit:
                if exit.code:  # the CLI's one line for a LockTimeout, then its exit code
                    raise LockTimeout(root, 10) from None
        elif kind == "memory-tool":
            tool.call({"command": "create", "file_text": "from the tool",
                       "path": f"/memories/project/project_knowledge_mt-{pid}-{n}.md"})
        else:
            with store.lock():
                time.sleep(0.005)  # read the ledger, journal the turn
        ok += 1
    except LockTimeout:
        timeouts += 1
    except Exception as exc:  # anything else is counted, and the first one kept to show
        if "locked by another process" in str(exc):
            timeouts += 1
        else:
            errors.append(f"{type(exc).__name__}: {exc}"[:200])
    times.append(time.perf_counter() - start)
print(json.dumps({"kind": kind, "ok": ok, "timeouts": timeouts, "times": times,
                  "errors": errors[:1], "failed": len(errors)}))
"""


def run(mode: str, seconds: float, base: str) -> list[dict[str, object]]:
    workspace = tempfile.mkdtemp(prefix=f"fair-{mode}-", dir=base)
    os.makedirs(os.path.join(workspace, ".git"))
    env = dict(os.environ, PYTHONPATH=os.path.join(REPO, "src"), MDMEM_LOCK_TIMEOUT="10")
    env["MDMEM_USER_DIR"] = os.path.join(workspace, "user")
    env["MDMEM_STATE_DIR"] = os.path.join(workspace, "state")
    env["MDMEM_QUIET"] = "1"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, kind, workspace, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            text=True,
        )
        for kind, count in KINDS.items()
        for _ in range(count)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline() == "ready\n"
    until = time.time() + seconds
    for child in children:
        assert child.stdin is not None
        child.stdin.write(f"{until}\n")
        child.stdin.flush()
    # The last line: `mdmem add` prints each new file name before it.
    out = [json.loads(child.communicate()[0].strip().splitlines()[-1]) for child in children]
    shutil.rmtree(workspace, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="mdmem-bench-fair-")
    totals: dict[tuple[str, str], dict[str, list[float] | int]] = defaultdict(
        lambda: {"ok": 0, "timeouts": 0, "times": []}
    )
    try:
        for r in range(args.rounds):
            modes = ["filelock", "queue"] if r % 2 == 0 else ["queue", "filelock"]
            for mode in modes:
                for result in run(mode, args.seconds, base):
                    entry = totals[(mode, str(result["kind"]))]
                    entry["ok"] += result["ok"]  # type: ignore[operator]
                    entry["timeouts"] += result["timeouts"]  # type: ignore[operator]
                    entry["times"] += result["times"]  # type: ignore[operator]
                    entry["failed"] = int(entry.get("failed", 0)) + int(result["failed"])  # type: ignore[arg-type, call-overload]
                    for error in result["errors"]:  # type: ignore[attr-defined]
                        print(f"{mode} {result['kind']}: {error}", file=sys.stderr)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    rows = []
    for mode in ("filelock", "queue"):
        for kind in KINDS:
            entry = totals[(mode, kind)]
            times = sorted(entry["times"])  # type: ignore[arg-type]
            median = times[len(times) // 2] if times else 0.0
            rows.append(
                [
                    mode,
                    f"{kind} x{KINDS[kind]}",
                    str(entry["ok"]),
                    str(entry["timeouts"]),
                    str(entry.get("failed", 0)),
                    f"{median * 1000:.0f} ms",
                    f"{(times[-1] if times else 0.0):.2f} s",
                ]
            )
    print(
        f"{sum(KINDS.values())} processes, {args.rounds} round(s) x {args.seconds:g} s per mode, "
        "MDMEM_LOCK_TIMEOUT=10\n"
    )
    print(
        table(
            ["lock", "kind", "done", "LockTimeouts", "other errors", "median op", "worst op"], rows
        )
    )
    print()
    print(table(["machine", ""], machine_rows(tempfile.gettempdir())))


if __name__ == "__main__":
    main()
