"""Benchmark the whole-store commands and plain writes at 1,000, 10,000 and 100,000 notes.

Issue 23, items 6 and 7. The project store holds N notes and the user store
N/10, generated once as ``bench_scale.py`` makes them (``--cache``, shared).
At each size, interleaved round by round with the floors (``python -c pass``;
one durable write: a temporary file, ``fsync``, ``rename``):

- ``mdmem doctor`` and ``mdmem stats`` as processes (the store settled by an
  ``mdmem index`` and a search first, as a session leaves it);
- ``mdmem add --title T TEXT`` as a process (the typer-free fast path);
- in process, a single-op create whose title is numbered ("Note number N",
  "ADR N", "Migration 00NN") into a store full of such titles, against one
  durable write; and how many existing notes its dedupe compared it with.

Then, into a fresh store, ``mdmem import notes`` of 10,000 notes with numbered
titles (``--import-notes`` to change the count) as one process, timed whole.

    python benchmarks/bench_whole.py --cache DIR            # 1k and 10k
    python benchmarks/bench_whole.py --cache DIR --large    # and 100k
    python benchmarks/bench_whole.py --cache DIR --large --only-stats-add --before <main>/src

Run it against another checkout with ``PYTHONPATH=<checkout>/src`` and its own
``--label`` for a before/after, or give ``--before <checkout>/src``: ``stats`` and
``add`` of that checkout then run in the same rounds, beside this one's (compile
it first: ``python -m compileall -q <checkout>/src``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

from _util import Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table
from bench_paths import Launcher, durable_write
from bench_scale import generate

from mdmem import Store
from mdmem._kinds import Level

_WORDS = ["deploy", "cache", "worker", "queue", "retry", "budget", "lint", "server", "release"]


def numbered(i: int, rng: random.Random) -> tuple[str, str]:
    """A numbered title and a body, as an import from an ADR log or a migration list has."""
    title = (f"Note number {i}", f"ADR {i}", f"Migration {i:04d}")[i % 3]
    body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(30, 120)))
    return title, f"{title}: {body}."


def bench_size(size: int, args: argparse.Namespace, run: Launcher) -> dict[str, list[float]]:
    ws = generate(args.cache, size)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    user = os.path.join(
        generate(os.path.join(args.cache, "user"), max(size // 10, 1)), ".PseudoClaude", "memory"
    )
    env = {**os.environ, "MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    os.environ.update({"MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"})
    py = sys.executable
    mdmem = [py, "-m", "mdmem"]
    print(f"  [{size}] settling", file=sys.stderr, flush=True)
    settle = (["index"], ["search", "deploy cache"], ["stats"], ["doctor"])
    for argv in settle[:3] if args.only_stats_add else settle:
        run.run([*mdmem, *argv], env, check=False)  # doctor's first run fills its caches
    time.sleep(1.1)
    run.run([*mdmem, "index"], env)
    store = Store(root, Level.PROJECT)
    floor_dir = tempfile.mkdtemp(dir=os.path.dirname(root))
    rng = random.Random(size)
    counter = {"n": 0}
    added: list[str] = []

    def add(env: dict[str, str] = env) -> float:
        counter["n"] += 1
        title = f"Added {counter['n']}"
        took, out = run.run([*mdmem, "add", "--title", title, "By the bench."], env)
        added.extend(out.split())
        return took

    before: dict[str, Callable[[], float]] = {}
    if args.before:  # the other checkout's stats and add, in the same rounds
        old = {**env, "PYTHONPATH": os.path.abspath(args.before)}
        before["stats-before"] = lambda: run.run([*mdmem, "stats"], old)[0]
        before["add-before"] = lambda: add(old)

    def create() -> float:
        # Titles past the generated ones' numbers: each is new, each names its own number.
        counter["n"] += 1
        title, body = numbered(10 * size + counter["n"], rng)
        op = {"action": "create", "level": "project", "type": "project_knowledge"}
        start = time.perf_counter()
        result = store.apply([{**op, "title": title, "content": body}])
        took = time.perf_counter() - start
        added.extend(a.filename for a in result.applied)
        return took

    print(f"  [{size}] rounds", file=sys.stderr, flush=True)
    cases: dict[str, Callable[[], float]] = {
        "pass": lambda: run.run([py, "-c", "pass"], env)[0],
        "durable": lambda: durable_write(floor_dir, b"x" * 1200),
        "doctor": lambda: run.run([*mdmem, "doctor"], env, check=False)[0],
        "stats": lambda: run.run([*mdmem, "stats"], env)[0],
        "add": add,
        "create": create,
        **before,
    }
    if args.only_stats_add:
        del cases["doctor"], cases["create"], cases["durable"]
    samples = interleaved(cases, args.repeat, label=f"{size}")
    compared = 0 if args.only_stats_add else _compared(store, rng, size)
    if added:
        store.apply([{"action": "delete", "level": "project", "filename": n} for n in added])
    shutil.rmtree(floor_dir, ignore_errors=True)
    return {**samples, "compared": [float(compared)]}


def _compared(store: Store, rng: random.Random, size: int) -> int:
    """How many existing notes one numbered create's dedupe compared it with."""
    from mdmem.store import dedupe

    seen: list[int] = []
    real = dedupe.find_duplicate

    def counting(title, summary, body, candidates, read, threshold=dedupe.THRESHOLD):  # type: ignore[no-untyped-def]
        candidates = list(candidates)
        seen.append(len(candidates))
        return real(title, summary, body, candidates, read, threshold)

    from mdmem.store import _planner

    _planner.find_duplicate = counting  # type: ignore[assignment]
    try:
        title, body = numbered(20 * size + 7, rng)
        op = {"action": "create", "level": "project", "type": "project_knowledge"}
        result = store.apply([{**op, "title": title, "content": body}])
        assert result.applied, result.rejected
        store.apply(
            [
                {"action": "delete", "level": "project", "filename": a.filename}
                for a in result.applied
            ]
        )
    finally:
        _planner.find_duplicate = real  # type: ignore[assignment]
    return seen[0] if seen else 0


def bench_import(count: int, args: argparse.Namespace, run: Launcher) -> dict[str, list[float]]:
    """``mdmem import notes`` of ``count`` numbered notes into a fresh store, timed whole;
    then single numbered creates into that store, against one durable write, and how many
    notes one such create's dedupe compared it with."""
    folder = tempfile.mkdtemp(prefix="import-", dir=args.cache)
    ws = os.path.join(folder, "ws")
    os.makedirs(os.path.join(ws, ".git"))
    source = os.path.join(folder, "notes.jsonl")
    rng = random.Random(count)
    with open(source, "w", encoding="utf-8") as f:
        for i in range(count):
            title, body = numbered(i, rng)
            f.write(json.dumps({"title": title, "content": body}) + "\n")
    state = os.path.join(folder, "st")
    env = {**os.environ, "MDMEM_SEMANTIC": "off", "MDMEM_STATE_DIR": state}
    env["MDMEM_USER_DIR"] = os.path.join(folder, "user")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))
    print(f"  importing {count} notes", file=sys.stderr, flush=True)
    took, out = run.run(
        [sys.executable, "-m", "mdmem", "--workspace", ws, "import", "notes", source], env
    )
    print(f"  {out.strip()}", file=sys.stderr)
    os.environ["MDMEM_STATE_DIR"], before = state, os.environ["MDMEM_STATE_DIR"]
    try:
        store = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
        n = {"i": count}

        def create() -> float:
            n["i"] += 1
            title, body = numbered(n["i"], rng)
            op = {"action": "create", "level": "project", "type": "project_knowledge"}
            start = time.perf_counter()
            result = store.apply([{**op, "title": title, "content": body}])
            took = time.perf_counter() - start
            assert result.applied, result.rejected
            return took

        floor_dir = tempfile.mkdtemp(dir=folder)
        samples = interleaved(
            {"create": create, "durable": lambda: durable_write(floor_dir, b"x" * 1200)},
            args.repeat,
            label="numbered creates",
        )
        compared = _compared(store, rng, count)
    finally:
        os.environ["MDMEM_STATE_DIR"] = before
    shutil.rmtree(folder, ignore_errors=True)
    return {**samples, "import": [took], "compared": [float(compared)]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--large", action="store_true", help="also 100,000 notes")
    parser.add_argument("--repeat", type=int, default=7, help="rounds per case")
    parser.add_argument("--import-notes", type=int, default=10_000, help="notes imported")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    parser.add_argument("--label", default="current", help="names this code version's state")
    parser.add_argument("--before", help="another checkout's src: its stats and add beside")
    parser.add_argument(
        "--only-stats-add", action="store_true", help="no doctor, create or import rounds"
    )
    args = parser.parse_args()
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    if args.large and 100_000 not in sizes:
        sizes.append(100_000)
    os.makedirs(args.cache, exist_ok=True)
    os.environ["MDMEM_STATE_DIR"] = os.path.join(args.cache, f"state-whole-{args.label}")
    run = Launcher()
    results = {size: bench_size(size, args, run) for size in sizes}
    imported = (
        bench_import(args.import_notes, args, run)
        if args.import_notes and not args.only_stats_add
        else None
    )

    def med(xs: list[float]) -> float:
        return Summary.of(xs).median

    rows = []
    for label, key, floor in (
        ("mdmem doctor", "doctor", "pass"),
        ("mdmem stats", "stats", "pass"),
        ("mdmem stats, `--before` checkout", "stats-before", "pass"),
        ("mdmem add (a process)", "add", "pass"),
        ("mdmem add, `--before` checkout", "add-before", "pass"),
        ("single-op create, numbered title (in process)", "create", "durable"),
    ):
        if key not in results[sizes[0]] or floor not in results[sizes[0]]:
            continue
        row = [label, {"pass": "`python -c pass`", "durable": "one durable write"}[floor]]
        for size in sizes:
            t, f = med(results[size][key]), med(results[size][floor])
            row.append(f"{fmt_ms(t)} ms ({fmt_ratio(t / f)})")
        rows.append(row)
    for name, label in (("pass", "`python -c pass`"), ("durable", "one durable write")):
        if name not in results[sizes[0]]:
            continue
        cells = [f"{fmt_ms(med(results[s][name]))} ms" for s in sizes]
        rows.append([f"floor: {label}", "", *cells])
    print("### Whole-store commands and plain writes (median, ratio to the floor)\n")
    print(table(["path", "floor", *[f"{s:,} notes" for s in sizes]], rows))
    if imported is not None:
        t, f = med(imported["create"]), med(imported["durable"])
        print(
            f"\n`mdmem import notes` of {args.import_notes:,} notes with numbered titles into a"
            f" fresh store: {imported['import'][0]:.1f} s. Then, into that store, a single-op"
            f" create with a numbered title: {fmt_ms(t)} ms ({fmt_ratio(t / f)} one durable"
            f" write, {fmt_ms(f)} ms); its dedupe compared it with"
            f" {int(imported['compared'][0])} notes."
        )
    print("\n### Machine\n")
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
