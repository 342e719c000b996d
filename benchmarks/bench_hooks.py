"""Benchmark the Claude Code hooks as Claude Code runs them: a new process each, stdin JSON.

SessionEnd hooks get about 1.5 s from Claude Code, so what matters is the wall
time of a whole ``mdmem hook session-end`` process (the extraction itself runs
later, in a detached worker). Each case runs in a fresh interpreter, round by
round with ``python -c pass`` interleaved, and the table gives medians.

    python benchmarks/bench_hooks.py              # 15 rounds (~30 s)
    python benchmarks/bench_hooks.py --repeat 30

The workspace holds the bundled example store; the transcript is the test
fixture ``interrupted.jsonl`` (16 lines). "nothing new" runs against a ledger
that already holds every message; "one new turn" appends a fresh user and
assistant line before each run, so the hook journals a turn and starts a
worker (offline provider).
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
import uuid

from _util import REPO, Summary, fmt_ms, interleaved, machine_rows, table

FIXTURE = os.path.join(REPO, "tests", "fixtures", "claude_code", "interrupted.jsonl")
EXAMPLE = os.path.join(REPO, ".PseudoClaude.example", "memory")


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    args = parser.parse_args(argv)
    base = tempfile.mkdtemp(prefix="mdmem-bench-hooks-")
    try:
        workspace = os.path.join(base, "ws")
        os.makedirs(os.path.join(workspace, ".git"))
        shutil.copytree(EXAMPLE, os.path.join(workspace, ".PseudoClaude", "memory"))
        transcript = os.path.join(base, "session.jsonl")
        shutil.copy(FIXTURE, transcript)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MDMEM_", "PYTHON"))}
        env.update(
            MDMEM_USER_DIR=os.path.join(base, "user"),
            MDMEM_STATE_DIR=os.path.join(base, "state"),
            MDMEM_PROVIDER="offline",
            CLAUDE_PROJECT_DIR=workspace,
        )
        py = sys.executable

        def hook(event: str, payload: dict[str, object]) -> float:
            data = json.dumps(payload)
            start = time.perf_counter()
            subprocess.run(
                [py, "-m", "mdmem", "hook", event],
                input=data,
                text=True,
                env=env,
                cwd=workspace,
                capture_output=True,
                check=True,
            )
            return time.perf_counter() - start

        common = {"session_id": "s", "transcript_path": transcript, "cwd": workspace}

        def floor() -> float:
            start = time.perf_counter()
            subprocess.run([py, "-c", "pass"], env=env, check=True)
            return time.perf_counter() - start

        def new_turn() -> float:
            with open(transcript, "a", encoding="utf-8") as f:
                for role in ("user", "assistant"):
                    line = {
                        "type": role,
                        "uuid": str(uuid.uuid4()),
                        "message": {"role": role, "content": f"Remember that {uuid.uuid4()}."},
                    }
                    f.write(json.dumps(line) + "\n")
            return hook("session-end", {**common, "reason": "other"})

        hook("stop", common)  # the ledger now holds every message of the fixture
        cases = {
            "`python -c pass` (floor)": floor,
            "`hook session-start`": lambda: hook("session-start", {"cwd": workspace}),
            "`hook stop`, nothing new": lambda: hook("stop", common),
            "`hook session-end`, one new turn": new_turn,
        }
        samples = interleaved(cases, args.repeat, label="hooks")
        rows = []
        for name, values in samples.items():
            s = Summary.of(values)
            rows.append([name, fmt_ms(s.median), fmt_ms(s.p90), fmt_ms(s.max)])
        print(table(["command", "median", "p90", "max"], rows, right=[1, 2, 3]))
        print()
        print(table(["machine", ""], machine_rows(base)))
    finally:
        time.sleep(1)  # let the last detached worker finish before the files go
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
