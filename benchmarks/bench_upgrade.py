"""Benchmark the first create after an upgrade: the catalog's dedupe keys not built yet.

A catalog of a new format (format 10 added the dedupe keys) has no keys; before,
the first create built every note's keys inside its write (seconds at 100,000
notes). Now a large store's keys are built by a background process, a step a
transaction, and a create meanwhile compares with what is keyed through the keys
and with the rest by the full comparison's title test. Measured as the user feels
it, ``mdmem add --title T TEXT`` as a process, against ``python -c pass``:

- the first add after the keys are dropped (as an upgraded catalog has them);
- the add right after it (the background build under way, this checkout);
- how long the background build took to finish (this checkout).

Each round drops the keys again on a private copy of the generated stores
(``bench_scale.py``'s, ``--cache``), this checkout and ``--before <checkout>/src``
in the same rounds. Usage::

    python benchmarks/bench_upgrade.py --cache <cache> --sizes 10000,100000 --before <main>/src
"""

from __future__ import annotations

import argparse
import os
import shutil
import sqlite3
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _util import Summary, fmt_ms, fmt_ratio, machine_rows, table
from bench_paths import Launcher
from bench_scale import generate

from mdmem import Store
from mdmem._kinds import Level
from mdmem.store import _dedupe_keys
from mdmem.store.cedict import _busy


def _drop_keys(catalog: str) -> None:
    """The catalog as an upgrade leaves it: rows, no dedupe keys."""
    con = sqlite3.connect(catalog)
    with con:
        _dedupe_keys.clear(con)
    con.close()


def _built(catalog: str) -> bool:
    con = sqlite3.connect(catalog)
    try:
        return _dedupe_keys.built_upto(con) is None
    finally:
        con.close()


def _builder_running(state: str) -> bool:
    return _busy(os.path.join(state, "dedupe.lock"))


def _wait(catalog: str, state: str) -> None:
    """Until the keys are built and no builder runs."""
    start = time.perf_counter()
    while _builder_running(state) or not _built(catalog):
        time.sleep(0.05)
        if time.perf_counter() - start > 600:
            raise RuntimeError("the background build did not finish")


def bench_size(size: int, args: argparse.Namespace, run: Launcher) -> dict[str, list[float]]:
    src = generate(args.cache, size)
    ws = os.path.join(args.work, f"n{size}")
    if not os.path.isdir(ws):
        print(f"  [{size}] copying the store", file=sys.stderr, flush=True)
        shutil.copytree(src, ws, symlinks=True)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    user = os.path.join(args.work, "user-empty")
    os.makedirs(user, exist_ok=True)
    env = {**os.environ, "MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"}
    env["MDMEM_WATCHER"] = "off"  # no watcher left running by the bench
    py = sys.executable
    here = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    envs = {"after": {**env, "PYTHONPATH": here}}
    if args.before:
        envs["before"] = {**env, "PYTHONPATH": os.path.abspath(args.before)}
    mdmem = [py, "-m", "mdmem"]
    print(f"  [{size}] settling", file=sys.stderr, flush=True)
    run.run([*mdmem, "index"], envs["after"])
    store = Store(root, Level.PROJECT)
    catalog, state = store.state.catalog, store.state.path
    _wait(catalog, state)  # the first load started a build: let it end before the rounds
    out: dict[str, list[float]] = {"pass": []}
    counter = {"n": 0}

    def add(which: str) -> tuple[float, str]:
        counter["n"] += 1
        argv = [*mdmem, "add", "--title", f"Upgrade round {counter['n']}", "After an upgrade."]
        return run.run(argv, envs[which], name=f"add-{which}")

    for r in range(args.repeat):
        for which in envs:
            out.setdefault(which, [])
            _drop_keys(catalog)
            out["pass"].append(run.run([py, "-c", "pass"], env)[0])
            took, name = add(which)
            out[which].append(took)
            if which == "after":
                start = time.perf_counter()
                took2, name2 = add(which)
                out.setdefault("after-second", []).append(took2)
                _wait(catalog, state)
                out.setdefault("build", []).append(time.perf_counter() - start)
                name = f"{name} {name2}"
            for filename in name.split():
                run.run([*mdmem, "rm", filename], envs["after"], check=False)
            print(f"  [{size}] round {r + 1}/{args.repeat} {which}", file=sys.stderr, flush=True)
    assert _built(catalog)
    peaks = {k: float(max(v)) for k, v in run.peaks.items()}
    run.peaks.clear()
    return {**out, **{f"peak {k}": [v] for k, v in peaks.items()}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="10000", help="comma-separated note counts")
    parser.add_argument("--repeat", type=int, default=3, help="rounds per case")
    parser.add_argument("--cache", required=True, help="the generated stores (bench_scale's)")
    parser.add_argument("--before", help="another checkout's src: its first add beside")
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    args.work = tempfile.mkdtemp(prefix="upgrade-", dir=args.cache)
    os.environ["MDMEM_STATE_DIR"] = os.path.join(args.work, "state")
    run = Launcher()
    try:
        results = {size: bench_size(size, args, run) for size in sizes}
    finally:
        shutil.rmtree(args.work, ignore_errors=True)

    def med(xs: list[float]) -> float:
        return Summary.of(xs).median

    rows = []
    for key, label in (
        ("after", "first `mdmem add` after the keys are dropped"),
        ("after-second", "the add right after it (build under way)"),
        ("before", "first `mdmem add`, `--before`"),
    ):
        if key not in results[sizes[0]]:
            continue
        cells = []
        for s in sizes:
            m, p = med(results[s][key]), med(results[s]["pass"])
            cells.append(f"{fmt_ms(m)} ms ({fmt_ratio(m / p)})")
        rows.append([label, *cells])
    rows.append(
        ["the background build, to the end", *[f"{med(results[s]['build']):.1f} s" for s in sizes]]
    )
    rows.append(
        ["floor: `python -c pass`", *[f"{fmt_ms(med(results[s]['pass']))} ms" for s in sizes]]
    )
    print(table(["path", *[f"{s:,} notes" for s in sizes]], rows))
    peaks = sorted({k for s in sizes for k in results[s] if k.startswith("peak ")})
    print("\nPeak memory (MiB, ru_maxrss, the largest run):\n")
    peak_rows = [
        [k[5:], *[f"{results[s].get(k, [0.0])[0] / 1024:.1f}" for s in sizes]] for k in peaks
    ]
    print(table(["process", *[f"{s:,} notes" for s in sizes]], peak_rows))
    print()
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
