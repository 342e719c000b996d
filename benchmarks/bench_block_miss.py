"""Benchmark a prompt-block cache miss after an editor-style rename, two checkouts side by side.

A copy of the project store of ``bench_scale.py`` (generated once into
``--cache``; the copy is edited, never the shared store) and its user store;
each round renames a note over itself with a changed title (an editor's save:
the folder moves, MEMORY.md's line changes), then times ``mdmem index`` (the
miss) and the ``mdmem index`` right after it (is the store settled again?),
for this checkout and for ``--before`` (another checkout's ``src``), each with
a state folder of its own, the order alternating, beside ``python -c pass``;
with each miss's peak memory (``ru_maxrss``; the processes are started by
``bench_scale``'s small launcher, so no child counts this one's memory).

    python benchmarks/bench_block_miss.py --cache <cache> --before <main>/src --notes 10000
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

from _util import Summary, fmt_ms, side_by_side, table
from bench_scale import Launcher, generate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def main() -> None:
    parser = side_by_side(__doc__, rounds=7)
    parser.add_argument("--work", default=None, help="where the stores are copied")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="mdmem-bench-block-miss-", dir=args.work)
    ws = os.path.join(work, "ws")
    print(f"copying {args.notes:,} notes", file=sys.stderr, flush=True)
    shutil.copytree(generate(args.cache, args.notes), ws, symlinks=True)
    user_source = generate(os.path.join(args.cache, "user"), max(args.notes // 10, 1))
    user = os.path.join(work, "user")
    shutil.copytree(os.path.join(user_source, ".PseudoClaude", "memory"), user, symlinks=True)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    codes = {"before": os.path.abspath(args.before), "after": os.path.abspath(HERE)}
    import compileall

    for src in codes.values():
        compileall.compile_dir(src, quiet=1)

    def run(argv: list[str], label: str) -> float:
        env = dict(
            os.environ,
            PYTHONPATH=codes[label],
            MDMEM_WORKSPACE=ws,
            MDMEM_USER_DIR=user,
            MDMEM_STATE_DIR=os.path.join(work, f"state-{label}"),
            MDMEM_SEMANTIC="off",
        )
        took, rss = launcher.run(argv, env)
        peaks[label] = rss / 1024
        return took

    launcher = Launcher()
    peaks: dict[str, float] = {}
    miss_peaks: dict[str, list[float]] = {}
    index = [sys.executable, "-m", "mdmem", "index"]
    for label in codes:
        print(f"first index ({label})", file=sys.stderr, flush=True)
        for _ in range(3):
            run(index, label)
            time.sleep(1.1)
    names = sorted(n for n in os.listdir(root) if n.startswith("project_knowledge_n"))
    samples: dict[str, list[float]] = {"pass": []}
    k = 0
    for r in range(args.rounds):
        order = list(codes) if r % 2 == 0 else list(codes)[::-1]
        for label in order:
            k += 1
            path = os.path.join(root, names[(k * 7919) % len(names)])
            with open(path, "rb") as f:
                data = f.read()
            head, sep, rest = data.partition(b"\ntitle: ")
            title, nl, tail = rest.partition(b"\n")
            title = title[:-5] if title.endswith(b" edit") else title + b" edit"
            with open(path + ".swp", "wb") as f:
                f.write(head + sep + title + nl + tail)
            os.replace(path + ".swp", path)
            time.sleep(1.1)  # older than the clock: the next pass may call it settled
            samples.setdefault(f"{label}/miss", []).append(run(index, label))
            miss_peaks.setdefault(label, []).append(peaks[label])
            samples.setdefault(f"{label}/next", []).append(run(index, label))
            time.sleep(1.1)
            run(index, label)
            samples["pass"].append(run([sys.executable, "-c", "pass"], label))
        print(f"round {r + 1}/{args.rounds}", file=sys.stderr, flush=True)
    floor = Summary.of(samples["pass"]).median
    rows = []
    for name, xs in samples.items():
        med = Summary.of(xs).median
        label, _, case = name.partition("/")
        peak = f"{max(miss_peaks[label]):.1f} MiB" if case == "miss" else ""
        rows.append([name, f"{fmt_ms(med)} ms", f"{med / floor:.1f}×", peak])
    print(f"### `mdmem index` after an editor-style rename, {args.notes:,} notes (median)\n")
    print(table(["case", "time", "÷ python -c pass", "peak memory (largest)"], rows))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
