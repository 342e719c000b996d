"""Benchmark the first reads after a clone, two checkouts side by side.

A clone brings the notes and none of mdmem's state (the catalog, the search
index, the staleness rows live in a per-user folder). The store of
``bench_scale.py`` (generated once into ``--cache``) is read by, in a fresh
state folder each time and in fresh processes, the order alternating between
this checkout and ``--before`` (another checkout's ``src``):

- the first ``mdmem index`` (the catalog built from every note);
- the first ``mdmem search`` (the catalog and the search index built);
- the first staleness check (``stale.check``, every note read; in process,
  the catalog already built, untimed);

with each process's peak memory (``ru_maxrss`` of a child of a small launcher,
not of this process), beside ``python -c pass``.

    python benchmarks/bench_first_load.py --cache <cache> --before <main>/src --notes 10000
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile

from _util import Summary, fmt_ms, machine_rows, side_by_side, table
from bench_scale import Launcher, generate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

_STALE = """
import os, sys, time
from mdmem import Level, Store
from mdmem.store import stale
ws = sys.argv[1]
store = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
for _ in store.iter_entries(limit=1):
    pass
for name in (stale.ROWS, stale.CACHE):
    try:
        os.remove(os.path.join(store.state.path, name))
    except FileNotFoundError:
        pass
start = time.perf_counter()
stale.check(store, ws)
print(time.perf_counter() - start)
"""


def main() -> None:
    parser = side_by_side(__doc__, rounds=3)
    args = parser.parse_args()
    ws = generate(args.cache, args.notes)
    user = os.path.join(tempfile.mkdtemp(prefix="mdmem-bench-first-user-"), "memory")
    launcher = Launcher()
    base = dict(os.environ, MDMEM_WORKSPACE=ws, MDMEM_USER_DIR=user, MDMEM_SEMANTIC="off")
    base.update(MDMEM_WATCHER="off", MDMEM_EMBED="off")
    checkouts = {"before": os.path.abspath(args.before), "after": os.path.abspath(HERE)}
    py = sys.executable
    cases = {
        "first `mdmem index`": [py, "-m", "mdmem", "index"],
        "first `mdmem search`": [py, "-m", "mdmem", "search", "deploy cache"],
    }
    times: dict[tuple[str, str], list[float]] = {}
    peaks: dict[tuple[str, str], list[float]] = {}
    floor: list[float] = []
    stale_times: dict[str, list[float]] = {name: [] for name in checkouts}
    for r in range(args.rounds):
        order = list(checkouts.items())
        if r % 2:
            order.reverse()
        for name, src in order:
            for case, argv in cases.items():
                state = tempfile.mkdtemp(prefix="mdmem-bench-first-state-")
                env = dict(base, PYTHONPATH=src, MDMEM_STATE_DIR=state)
                took, rss = launcher.run(argv, env)
                times.setdefault((name, case), []).append(took)
                peaks.setdefault((name, case), []).append(rss / 1024)
                if case == "first `mdmem search`":
                    done = subprocess.run(
                        [py, "-c", _STALE, ws], env=env, capture_output=True, text=True, check=True
                    )
                    stale_times[name].append(float(done.stdout.strip()))
                shutil.rmtree(state, ignore_errors=True)
            floor.append(launcher.run([py, "-c", "pass"], base)[0])
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    shutil.rmtree(os.path.dirname(user), ignore_errors=True)
    rows = []
    for case in cases:
        for name in checkouts:
            s = Summary.of(times[(name, case)])
            rows.append(
                [
                    f"{name}: {case}",
                    fmt_ms(s.median),
                    fmt_ms(s.min),
                    str(s.n),
                    f"{max(peaks[(name, case)]):.1f}",
                ]
            )
    for name in checkouts:
        s = Summary.of(stale_times[name])
        median, low = fmt_ms(s.median), fmt_ms(s.min)
        rows.append([f"{name}: first staleness check", median, low, str(s.n), ""])
    rows.append(["`python -c pass`", fmt_ms(Summary.of(floor).median), "", str(len(floor)), ""])
    print(table(["machine", ""], machine_rows(ws)))
    print()
    print(f"{args.notes:,} notes, a fresh state folder each run\n")
    print(table(["case", "median ms", "min ms", "runs", "peak MiB"], rows))


if __name__ == "__main__":
    main()
