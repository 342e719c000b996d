"""A settled Manager turn's system calls, counted by strace, for two checkouts.

The turn is ``bench_paths``' (a zero-latency model creating three notes, one a
correction, in both stores; the user store N/10), the third of a session, each
2.2 s after the last as a user's turns are. ``strace -f`` records the stats, the
directory reads and the syncs of the whole process; only those between two marker
``stat`` calls around that one turn are counted. Prints a Markdown table.

``--watcher``: with the user's watcher running, as on Linux by default (it is started
before strace, outside the traced process, and stopped after), so its answers are
the turn's, and its own calls are not counted.

    python benchmarks/bench_turn_syscalls.py --before <checkout> --sizes 1000,4000 [--watcher]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections import Counter

from _util import REPO, table
from bench_scale import generate

HERE = os.path.dirname(os.path.abspath(__file__))
CALLS = ("newfstatat", "statx", "lstat", "stat", "getdents64", "fsync", "fdatasync")

_CHILD = r"""
import os, sys, time
ws, user, here = sys.argv[1:4]
sys.path.insert(0, here)
from bench_paths import Correcting, TURN
from mdmem import Manager

def mark(name):
    try:
        os.stat(f"/nonexistent-mdmem-bench-{name}")
    except OSError:
        pass

time.sleep(3)  # the copies' ctimes older than the first full check, as a used store's
with Manager(ws, user_dir=user, provider=Correcting(), resume=False) as mgr:
    for i in range(3):
        time.sleep(2.2)
        if i == 2:
            mark("start")
        result = mgr.update_async(TURN).result()
        if i == 2:
            mark("end")
        for st, part in ((mgr.project, result.project), (mgr.user, result.user)):
            gone = [{"action": "delete", "level": st.level.value, "filename": a.filename}
                    for a in part.applied]
            if gone:
                st.apply(gone)
"""


# Starts the watcher over both stores and waits until it vouches for them.
_START_WATCHER = r"""
import sys, time
from mdmem.store import watcher
roots = sys.argv[1:]
assert watcher.start(roots), "no watcher could be started"
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    answers = watcher.ask([(root, time.time_ns()) for root in roots], timeout=5)
    if not isinstance(answers, str) and all(a.kind != watcher.UNKNOWN for a in answers):
        sys.exit(0)
    time.sleep(0.05)
sys.exit("the watcher did not answer")
"""


def _stop_watcher(env: dict[str, str]) -> None:
    lock = os.path.join(env["MDMEM_STATE_DIR"], "watcher", "watch-v1.lock")
    try:
        with open(lock, encoding="utf-8") as f:
            os.kill(int(f.read().strip()), signal.SIGTERM)
    except (OSError, ValueError):
        pass


def count(checkout: str, ws: str, user: str, scratch: str, watched: bool) -> Counter[str]:
    """The calls of :data:`CALLS` the one turn made, by name."""
    trace = os.path.join(scratch, "trace.txt")
    env = {
        **os.environ,
        "PYTHONPATH": os.path.join(checkout, "src"),
        "MDMEM_STATE_DIR": os.path.join(scratch, "state"),
        "HOME": scratch,
        "MDMEM_PROMPT_SERVER": "off",
        "MDMEM_WATCH": "off",
        "MDMEM_WATCHER": "on" if watched else "off",
        "MDMEM_WATCHER_IDLE": "120",
        "MDMEM_SEMANTIC": "off",
    }
    if watched:
        roots = [os.path.join(ws, ".PseudoClaude", "memory"), user]
        subprocess.run([sys.executable, "-c", _START_WATCHER, *roots], env=env, check=True)
    argv = ["strace", "-f", "-o", trace, "-e", f"trace={','.join(CALLS)}"]
    argv += [sys.executable, "-c", _CHILD, ws, user, HERE]
    try:
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
    finally:
        if watched:
            _stop_watcher(env)
    found: Counter[str] = Counter()
    inside = False
    with open(trace, encoding="utf-8", errors="replace") as f:
        for line in f:
            if "mdmem-bench-start" in line:
                inside = True
            elif "mdmem-bench-end" in line:
                inside = False
            elif inside:
                words = line.split(None, 1)
                name = words[1].split("(", 1)[0] if len(words) > 1 else ""
                if name in CALLS:
                    found[name] += 1
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="the other checkout")
    parser.add_argument("--after", default=REPO, help="default: this one")
    parser.add_argument("--sizes", default="1000,4000")
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench"))
    parser.add_argument("--watcher", action="store_true", help="with the user's watcher running")
    args = parser.parse_args()
    if shutil.which("strace") is None:
        sys.exit("strace is not installed")
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        ws = generate(args.cache, size)
        users = generate(os.path.join(args.cache, "user"), max(size // 10, 1))
        for label, checkout in (("before", args.before), ("after", args.after)):
            with tempfile.TemporaryDirectory(prefix="bench-turn-syscalls-") as scratch:
                copy, user = os.path.join(scratch, "ws"), os.path.join(scratch, "user")
                subprocess.run(["cp", "-a", ws, copy], check=True)
                source = os.path.join(users, ".PseudoClaude", "memory")
                subprocess.run(["cp", "-a", source, user], check=True)
                found = count(os.path.abspath(checkout), copy, user, scratch, args.watcher)
            stats = sum(found[c] for c in ("newfstatat", "statx", "lstat", "stat"))
            syncs = found["fsync"] + found["fdatasync"]
            rows.append([f"{size:,}", label, str(stats), str(found["getdents64"]), str(syncs)])
    headers = ["notes", "checkout", "stat calls", "getdents64", "fsync + fdatasync"]
    print(table(headers, rows, right=range(2, 5)))
    watcher = "the user's watcher running" if args.watcher else "no watcher"
    print(f"\none settled turn with a correction, both stores, {watcher}, strace -f")


if __name__ == "__main__":
    main()
