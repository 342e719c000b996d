"""Before/after, interleaved: `mdmem index` and `mdmem search` of two checkouts at 10,000 notes.

For a refactor that must not cost start-up time: each round runs ``python -c
pass``, then both commands with the BEFORE checkout's ``src`` and with the
AFTER one's, each in a fresh process, so load on the machine falls on both
alike; the table gives medians (and the range).

    git worktree add /tmp/before <commit>
    python benchmarks/bench_compare.py /tmp/before .             # 15 rounds
    python benchmarks/bench_compare.py /tmp/before . --rounds 30

The workspace holds ``--notes`` generated notes (settled by ``mdmem reindex``
and a first ``index``/``search`` with each checkout before the rounds).

``--rows`` times, instead, the store's own passes over every row, in a fresh
process of each checkout (each with its own copy of the notes and its own state
folder): the first load after the state folder is deleted (every note parsed),
``entries()`` on a settled store (every row decoded), and ``load_index()`` after
the directory's mtime moved (a stat pass over every row).

Both checkouts' ``src/`` are compiled first: with ``PYTHONDONTWRITEBYTECODE``
set, a checkout without ``__pycache__`` would compile every module on every run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = [
    "alpha",
    "beta",
    "gamma",
    "delta",
    "deploy",
    "build",
    "cache",
    "index",
    "store",
    "parser",
    "token",
    "budget",
    "lint",
]


def make_workspace(base: str, notes: int) -> str:
    ws = os.path.join(base, "ws")
    mem = os.path.join(ws, ".PseudoClaude", "memory")
    os.makedirs(mem)
    os.makedirs(os.path.join(ws, ".git"))
    for i in range(notes):
        title = f"{WORDS[i % 13]} {WORDS[(i // 13) % 13]} fact {i}"
        with open(os.path.join(mem, f"project_knowledge_note-{i}.md"), "w") as f:
            f.write(
                f"---\ntype: project_knowledge\ntitle: {title}\nsummary: About {title}.\n"
                "created: 2026-11-29T10:12:00+00:00\nupdated: 2026-11-29T10:12:00+00:00\n---\n"
                f"The {title} body, with {WORDS[i % 7]} details.\n"
            )
    return ws


ROWS_CHILD = """
import os, shutil, sys, time
from mdmem import Level, Store
root, what = sys.argv[1], sys.argv[2]
store = Store(root, Level.PROJECT)
if what == "first load":
    shutil.rmtree(store.state.path, ignore_errors=True)
    start = time.perf_counter(); store.load_index()
elif what == "entries()":
    store.load_index()
    start = time.perf_counter(); store.entries()
else:
    store.load_index()
    os.utime(root)  # the directory moved: the next read makes a stat pass over every row
    start = time.perf_counter(); store.load_index()
print(time.perf_counter() - start)
"""


def rows(srcs: dict[str, str], env: dict[str, str], base: str, args: argparse.Namespace) -> None:
    """``--rows``: the passes over every row, in process, alternating the checkouts."""
    import shutil

    ws = make_workspace(os.path.join(base, "notes"), args.notes)
    notes = os.path.join(ws, ".PseudoClaude", "memory")
    past = time.time() - 120
    for name in os.listdir(notes):
        os.utime(os.path.join(notes, name), (past, past))
    roots = {}
    for label in srcs:
        roots[label] = os.path.join(base, label, "memory")
        shutil.copytree(notes, roots[label])
    kinds = ("first load", "entries()", "stat pass")
    times: dict[tuple[str, str], list[float]] = {(k, lab): [] for k in kinds for lab in srcs}
    for round_ in range(args.rounds):
        order = list(srcs) if round_ % 2 == 0 else list(srcs)[::-1]
        for kind in kinds:
            for label in order:
                child = dict(
                    env,
                    PYTHONPATH=os.path.join(srcs[label], "src"),
                    MDMEM_STATE_DIR=os.path.join(base, f"state-{label}"),
                )
                out = subprocess.run(
                    [sys.executable, "-c", ROWS_CHILD, roots[label], kind],
                    env=child,
                    check=True,
                    capture_output=True,
                    text=True,
                ).stdout
                times[(kind, label)].append(float(out.split()[-1]))
    print(f"| in process ({args.notes:,} notes, {args.rounds} rounds) | median | range |")
    print("|---|---|---|")
    for (kind, label), values in times.items():
        median, lo, hi = (f(values) * 1000 for f in (statistics.median, min, max))
        print(f"| {label}: {kind} | {median:.1f} ms | {lo:.0f}–{hi:.0f} ms |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", help="checkout whose src/ is timed first")
    parser.add_argument("after", help="checkout whose src/ is timed second")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--rows", action="store_true", help="the passes over every row instead")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="mdmem-compare-")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MDMEM_", "XDG_"))}
    env.update(
        HOME=os.path.join(base, "home"),
        MDMEM_USER_DIR=os.path.join(base, "home", ".PseudoClaude", "memory"),
        MDMEM_STATE_DIR=os.path.join(base, "state"),
        MDMEM_EMBED="off",
    )
    py = sys.executable
    srcs = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for src in srcs.values():  # see the module docstring
        subprocess.run([py, "-m", "compileall", "-q", os.path.join(src, "src")], check=True)
    if args.rows:
        rows(srcs, env, base, args)
        return
    ws = make_workspace(base, args.notes)

    def run(cmd: list[str], src: str | None) -> float:
        child = dict(env, PYTHONPATH=os.path.join(src, "src")) if src else env
        start = time.perf_counter()
        subprocess.run(cmd, env=child, check=True, capture_output=True)
        return time.perf_counter() - start

    mdmem = [py, "-m", "mdmem", "--workspace", ws]
    run([*mdmem, "reindex"], srcs["after"])
    past = time.time() - 120  # settled: no note younger than the clock's doubt
    mem = os.path.join(ws, ".PseudoClaude", "memory")
    for name in os.listdir(mem):
        os.utime(os.path.join(mem, name), (past, past))
    cases: dict[str, tuple[list[str], str | None]] = {
        "floor: python -c pass": ([py, "-c", "pass"], None)
    }
    for label, src in srcs.items():
        cases[f"{label}: mdmem index"] = ([*mdmem, "index"], src)
        cases[f"{label}: mdmem search"] = ([*mdmem, "search", "deploy cache", "--json"], src)
    for cmd, src in cases.values():  # warm: derived state made, page cache filled
        run(cmd, src)
    times: dict[str, list[float]] = {k: [] for k in cases}
    for _ in range(args.rounds):
        for key, (cmd, src) in cases.items():
            times[key].append(run(cmd, src))
    print(f"| case ({args.notes:,} notes, {args.rounds} rounds) | median | range |")
    print("|---|---|---|")
    for key, values in times.items():
        lo, hi = min(values) * 1000, max(values) * 1000
        print(f"| {key} | {statistics.median(values) * 1000:.1f} ms | {lo:.0f}–{hi:.0f} ms |")


if __name__ == "__main__":
    main()
