"""Benchmark the stale check after a commit, two checkouts side by side.

A copy of the project store of ``bench_scale.py`` (generated once into
``--cache``; the copy is edited, never the shared store) made a git repository
of ``--files`` code files, with every other note naming two of them in
backticks. Each round commits (one named file edited, a changelog appended:
the tree key moves), then, for this checkout and for ``--before`` (another
checkout's ``src``), each with a state folder of its own, the order
alternating, times in a fresh process ``stale.check`` after the commit and the
settled check right after it, counting the notes it reads (``store.read`` and
``store.read_text``),
beside ``python -c pass``. Once per checkout at the end: the first check with
no rows (a clone's first turn: every note read) and a plain parse of every
note (``store.read`` of each, the floor of a check that reads them all).

    python benchmarks/bench_stale_commit.py --cache <cache> --before <main>/src --notes 10000
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _util import Summary, fmt_ms, machine_rows, side_by_side, table
from bench_scale import generate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

# Run in the measured checkout: one case, its time, the notes it read, its peak memory.
_CHILD = """
import json, os, sys, time
from mdmem import Level, Store
from mdmem.store import _catalog_reads, stale
ws, case = sys.argv[1], sys.argv[2]
store = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
reads = [0]
real = store.read
def read(name):
    reads[0] += 1
    return real(name)
store.read = read
# Since round 7 the check reads a note's text (Store.read_text) and parses it itself;
# Store.read does not go through read_text, so no read is counted twice.
real_text = store.read_text
def read_text(name):
    reads[0] += 1
    return real_text(name)
store.read_text = read_text
if case == "cold":
    for name in (stale.ROWS, stale.CACHE):
        try:
            os.remove(os.path.join(store.state.path, name))
        except FileNotFoundError:
            pass
if case == "parse":
    for _ in store.iter_entries(limit=1):
        pass
    start = time.perf_counter()
    for name, _, _ in _catalog_reads.iter_listing(store.state):
        store.read(name)
    took, found = time.perf_counter() - start, 0
else:
    start = time.perf_counter()
    found = len(stale.check(store, ws))
    took = time.perf_counter() - start
# This process image's own high-water mark (VmHWM): ru_maxrss would also count the
# benchmark's memory, which Linux carries from the fork across exec.
with open("/proc/self/status") as f:
    rss = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:")) / 1024
print(json.dumps([took, reads[0], found, rss]))
"""


def _git(ws: str, *args: str) -> None:
    env = dict(
        os.environ,
        GIT_AUTHOR_NAME="B",
        GIT_AUTHOR_EMAIL="b@example.com",
        GIT_COMMITTER_NAME="B",
        GIT_COMMITTER_EMAIL="b@example.com",
    )
    subprocess.run(["git", "-C", ws, *args], env=env, check=True, capture_output=True)


def _prepare(ws: str, files: int) -> int:
    """Make ``ws`` a git repository of ``files`` code files, every other note naming two."""
    shutil.rmtree(os.path.join(ws, ".git"))
    _git(ws, "init", "-q", "-b", "main")
    for i in range(files):
        path = os.path.join(ws, "src", f"p{i % 100:02d}", f"m{i:05d}.py")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"def handle_{i:05d}():\n    pass\n")
    with open(os.path.join(ws, ".gitignore"), "w") as f:
        f.write(".PseudoClaude/\n")
    _git(ws, "add", "-A")
    _git(ws, "commit", "-q", "-m", "code")
    root = os.path.join(ws, ".PseudoClaude", "memory")
    named = 0
    for k, name in enumerate(sorted(n for n in os.listdir(root) if n != "MEMORY.md")):
        if k % 2:
            continue
        a, b = (f"src/p{j % 100:02d}/m{j:05d}.py" for j in (k % files, (k * 7 + 1) % files))
        with open(os.path.join(root, name), "a", encoding="utf-8") as f:
            f.write(f"\nSee `{a}` and `{b}`.\n")
        named += 1
    return named


def main() -> None:
    parser = side_by_side(__doc__, rounds=7)
    parser.add_argument("--files", type=int, default=2_000)
    parser.add_argument("--once", type=int, default=3, help="rounds of the first check and parse")
    parser.add_argument("--work", default=None, help="where the store is copied")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="mdmem-bench-stale-commit-", dir=args.work)
    ws = os.path.join(work, "ws")
    print(f"copying {args.notes:,} notes", file=sys.stderr, flush=True)
    shutil.copytree(generate(args.cache, args.notes), ws, symlinks=True)
    named = _prepare(ws, args.files)
    codes = {"before": os.path.abspath(args.before), "after": os.path.abspath(HERE)}

    def run(label: str, case: str) -> tuple[float, int, int, float]:
        env = dict(
            os.environ,
            PYTHONPATH=codes[label],
            MDMEM_WORKSPACE=ws,
            MDMEM_USER_DIR=os.path.join(work, "user"),
            MDMEM_STATE_DIR=os.path.join(work, f"state-{label}"),
            MDMEM_SEMANTIC="off",
        )
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, ws, case],
            env=env,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        took, reads, found, rss = json.loads(out.splitlines()[-1])
        return float(took), int(reads), int(found), float(rss)

    for label in codes:
        print(f"first check ({label})", file=sys.stderr, flush=True)
        run(label, "check")
        run(label, "check")
    samples: dict[str, list[float]] = {}
    reads: dict[str, set[int]] = {}
    peaks: dict[str, float] = {}
    stale_found: dict[str, set[int]] = {}

    def record(label: str, case: str, name: str) -> None:
        took, n, found, rss = run(label, case)
        key = f"{label}: {name}"
        samples.setdefault(key, []).append(took)
        reads.setdefault(key, set()).add(n)
        peaks[key] = max(peaks.get(key, 0.0), rss)
        if case != "parse":
            stale_found.setdefault(label, set()).add(found)

    passes: list[float] = []
    for r in range(args.rounds):
        target = os.path.join(ws, "src", f"p{r % 100:02d}", f"m{r:05d}.py")
        with open(target, "a") as f:
            f.write(f"# round {r}\n")
        with open(os.path.join(ws, "CHANGELOG"), "a") as f:
            f.write(f"round {r}\n")
        _git(ws, "add", "-A")
        _git(ws, "commit", "-q", "-m", f"round {r}")
        time.sleep(0.05)
        for label in list(codes) if r % 2 == 0 else list(codes)[::-1]:
            record(label, "check", "check after a commit")
            record(label, "check", "check, settled (right after)")
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        passes.append(time.perf_counter() - start)
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    for r in range(args.once):
        for label in list(codes) if r % 2 == 0 else list(codes)[::-1]:
            record(label, "cold", "first check, no rows (a clone)")
            record(label, "parse", "plain parse of every note (store.read)")
    rows = []
    for key, xs in samples.items():
        s = Summary.of(xs)
        n = "/".join(str(x) for x in sorted(reads[key]))
        rows.append([key, fmt_ms(s.median), fmt_ms(s.min), str(s.n), n, f"{peaks[key]:.0f}"])
    rows.append(["python -c pass (a process, for scale)", fmt_ms(Summary.of(passes).median)])
    rows[-1] += ["", str(len(passes)), "", ""]
    print(table(["machine", ""], machine_rows(work)))
    print()
    print(
        f"{args.notes:,} notes ({named:,} naming two paths), {args.files:,} files;"
        f" stale found: {sorted(stale_found['before'])} before, {sorted(stale_found['after'])}"
        " after\n"
    )
    head = ["case", "median ms", "min ms", "runs", "notes read", "peak MiB"]
    print(table(head, rows, [1, 2, 3, 4, 5]))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
