"""The prompt hook of two checkouts, interleaved round by round with ``python -c pass``.

    python benchmarks/bench_hook_ab.py --before <checkout>/src --notes 10000

Uses the stores ``bench_paths.py`` generated (project store N, user store N/10) and
each checkout's own state folder from that script's runs (``--label before`` / ``after``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PROMPTS = [
    "how do we deploy the release branch?",
    "why does the cache index time out in review?",
    "what is the retry budget of the queue worker?",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="the other checkout's src folder")
    parser.add_argument("--notes", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"))
    args = parser.parse_args()
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    ws = os.path.join(args.cache, f"n{args.notes}")
    user = os.path.join(args.cache, "user", f"n{args.notes // 10}", ".PseudoClaude", "memory")
    base = dict(os.environ, MDMEM_WORKSPACE=ws, MDMEM_SEMANTIC="off", MDMEM_USER_DIR=user)
    envs = {
        "before": dict(
            base,
            PYTHONPATH=args.before,
            MDMEM_STATE_DIR=os.path.join(args.cache, "state-paths-before"),
        ),
        "after": dict(
            base, PYTHONPATH=here, MDMEM_STATE_DIR=os.path.join(args.cache, "state-paths-after")
        ),
    }
    names = ["pass", *envs]
    out: dict[str, list[float]] = {k: [] for k in names}
    for r in range(args.rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            if name == "pass":
                argv, stdin, env = [sys.executable, "-c", "pass"], "", base
            else:
                payload = {
                    "session_id": f"ab-{r}",
                    "cwd": ws,
                    "prompt": PROMPTS[r % 3],
                    "hook_event_name": "UserPromptSubmit",
                    "transcript_path": os.path.join(ws, "t.jsonl"),
                }
                argv = [sys.executable, "-m", "mdmem", "hook", "user-prompt-submit"]
                stdin, env = json.dumps(payload), envs[name]
            start = time.perf_counter()
            subprocess.run(
                argv, input=stdin.encode(), env=env, stdout=subprocess.DEVNULL, check=True
            )
            out[name].append(time.perf_counter() - start)
    medians = {k: statistics.median(v) for k, v in out.items()}
    for name, m in medians.items():
        print(f"{name}: {m * 1000:.0f} ms ({m / medians['pass']:.1f}x python -c pass)")


if __name__ == "__main__":
    main()
