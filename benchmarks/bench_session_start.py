"""Benchmark the usage ledger's cost on the session-start hook: with and without the record.

``mdmem hook session-start`` runs at every session start and now appends one
line per store to the usage ledger (which notes were injected). This times the
whole cold process, interleaved round by round:

* ``python -c pass`` (the floor);
* the hook as Claude Code runs it (``python -m mdmem hook session-start``);
* the same fast path with the ledger record, and with it replaced by a no-op
  (so the difference is the ledger's cost alone);
* the fast path with the block's footer (the provider that extracts, and what it
  spent today) replaced by a fixed line: the footer's cost alone;

on the bundled example store (settled first), and gives medians.

    python benchmarks/bench_session_start.py              # 30 rounds
    python benchmarks/bench_session_start.py --repeat 60
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

from _util import REPO, Summary, fmt_ms, interleaved, machine_rows, paired_ratios, table

EXAMPLE = os.path.join(REPO, ".PseudoClaude.example", "memory")
FAST = (
    "import sys\n"
    "{patch}"
    "from mdmem.cli._fastpath import try_fast\n"
    "sys.exit(try_fast(['hook', 'session-start']))\n"
)
NO_LEDGER = "import mdmem.store.ledger as l; l.record_block = lambda *a, **k: None\n"
# The block's footer (which provider extracts, what it spent today) replaced by a fixed line.
NO_FOOTER = (
    "import mdmem.integrations.claude_code as c; c.extraction_line = lambda *a, **k: '_x_'\n"
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30)
    args = parser.parse_args(argv)
    py = sys.executable
    with tempfile.TemporaryDirectory() as base:
        ws = os.path.join(base, "ws")
        os.makedirs(os.path.join(ws, ".git"))
        shutil.copytree(EXAMPLE, os.path.join(ws, ".PseudoClaude", "memory"))
        env = dict(os.environ)
        env.update(
            PYTHONPATH=os.path.join(REPO, "src"),
            HOME=os.path.join(base, "home"),
            MDMEM_USER_DIR=os.path.join(base, "user"),
            MDMEM_STATE_DIR=os.path.join(base, "state"),
        )
        env.pop("MDMEM_NESTED", None)
        payload = json.dumps({"cwd": ws}).encode()
        cases = {
            "`python -c pass`": [py, "-c", "pass"],
            "`python -m mdmem hook session-start`": [py, "-m", "mdmem", "hook", "session-start"],
            "fast path, ledger record": [py, "-c", FAST.format(patch="")],
            "fast path, record replaced by a no-op": [py, "-c", FAST.format(patch=NO_LEDGER)],
            "fast path, footer replaced by a fixed line": [
                py,
                "-c",
                FAST.format(patch=NO_FOOTER),
            ],
        }
        for argv_ in cases.values():  # warm up, settle the store, check it works
            for _ in range(3):
                subprocess.run(
                    argv_, input=payload, env=env, cwd=ws, capture_output=True, check=True
                )
        out = subprocess.run(
            cases["`python -m mdmem hook session-start`"],
            input=payload,
            env=env,
            cwd=ws,
            capture_output=True,
            check=True,
        ).stdout
        assert b"additionalContext" in out and b"Project Memory" in out, out

        def timer(argv_: list[str]):  # type: ignore[no-untyped-def]
            def case() -> float:
                start = time.perf_counter()
                subprocess.run(
                    argv_, input=payload, env=env, cwd=ws, stdout=subprocess.DEVNULL, check=True
                )
                return time.perf_counter() - start

            return case

        samples = interleaved(
            {label: timer(a) for label, a in cases.items()}, args.repeat, label="session-start"
        )
        events = os.path.join(base, "state")
        size = sum(
            os.path.getsize(os.path.join(root, name))
            for root, _, names in os.walk(events)
            for name in names
            if "usage" in root
        )
        print("## bench_session_start\n")
        print(f"`{' '.join(['python', 'benchmarks/bench_session_start.py', *sys.argv[1:]])}`\n")
        print(table(["machine", ""], machine_rows(base)))
        print(f"\n### Cold processes, {args.repeat} interleaved rounds (example store)\n")
        rows = []
        for label in cases:
            s = Summary.of(samples[label])
            rows.append([label, fmt_ms(s.median), fmt_ms(s.p90), fmt_ms(s.min), fmt_ms(s.max)])
        print(
            table(["command", "median ms", "p90 ms", "min ms", "max ms"], rows, right=(1, 2, 3, 4))
        )
        ratio = paired_ratios(
            samples["fast path, ledger record"], samples["fast path, record replaced by a no-op"]
        )
        print(
            f"\nWith the ledger record / without, paired per round: median {ratio.median:.3f}x "
            f"(min {ratio.min:.3f}x, p90 {ratio.p90:.3f}x). Ledger files after the run: "
            f"{size:,} bytes."
        )
        footer = paired_ratios(
            samples["fast path, ledger record"],
            samples["fast path, footer replaced by a fixed line"],
        )
        print(
            f"With the provider footer / with a fixed line, paired per round: median "
            f"{footer.median:.3f}x (min {footer.min:.3f}x, p90 {footer.p90:.3f}x)."
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
