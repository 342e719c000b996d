"""The prompt hook of two checkouts, interleaved round by round with ``python -c pass``.

    python benchmarks/bench_hook_ab.py --before <checkout>/src --notes 10000
    python benchmarks/bench_hook_ab.py --before <checkout>/src --notes 100000 --rounds 40 \
        --cache <cache> --label r11b --prompt "when does the janitor vacuum the broker queues?"

Uses the stores ``bench_paths.py`` generated (project store N, user store N/10) and
each checkout's own state folder from that script's runs (``state-paths-before`` /
``-after``, or with ``--label L`` the ones ``bench_paths.py --label L --before`` made:
``state-paths-L-before`` / ``state-paths-L``). Each hook is a new session (no
SessionStart record), run as ``mdmem install`` writes it but without ``-E``, so that
``PYTHONPATH`` picks the checkout; the order of the three alternates every round. It
says whether both checkouts printed the same bytes for every prompt.
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

from bench_paths import installed_hook

PROMPTS = [
    "how do we deploy the release branch?",
    "why does the cache index time out in review?",
    "what is the retry budget of the queue worker?",
]


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="the other checkout's src folder")
    parser.add_argument("--notes", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"))
    parser.add_argument("--label", help="the state folders of bench_paths.py --label")
    parser.add_argument("--prompt", action="append", help="the prompt (repeat for more)")
    args = parser.parse_args()
    prompts = args.prompt or PROMPTS
    state = {
        "before": f"state-paths-{args.label}-before" if args.label else "state-paths-before",
        "after": f"state-paths-{args.label}" if args.label else "state-paths-after",
    }
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
    ws = os.path.join(args.cache, f"n{args.notes}")
    user = os.path.join(args.cache, "user", f"n{args.notes // 10}", ".PseudoClaude", "memory")
    base = dict(os.environ, MDMEM_WORKSPACE=ws, MDMEM_SEMANTIC="off", MDMEM_USER_DIR=user)
    envs = {
        "before": dict(
            base,
            PYTHONPATH=args.before,
            MDMEM_STATE_DIR=os.path.join(args.cache, state["before"]),
        ),
        "after": dict(
            base, PYTHONPATH=here, MDMEM_STATE_DIR=os.path.join(args.cache, state["after"])
        ),
    }
    # Both checkouts byte-compiled first (as bench_paths.py does): where PYTHONDONTWRITEBYTECODE
    # is set, a module edited since its .pyc would be compiled again by every process.
    import compileall

    for src in (args.before, here):
        compileall.compile_dir(src, quiet=1)
    # Each checkout's hook as its own `mdmem install claude-code` writes it, without -E.
    hooks = {name: installed_hook(env) for name, env in envs.items()}
    names = ["pass", *envs]
    out: dict[str, list[float]] = {k: [] for k in names}
    printed: dict[str, list[bytes]] = {k: [] for k in envs}
    for r in range(args.rounds):
        for name in names[r % 3 :] + names[: r % 3]:
            if name == "pass":
                argv, stdin, env = [sys.executable, "-c", "pass"], "", base
            else:
                payload = {
                    "session_id": f"ab-{r}-{name}-{time.time_ns()}",
                    "cwd": ws,
                    "prompt": prompts[r % len(prompts)],
                    "hook_event_name": "UserPromptSubmit",
                    "transcript_path": os.path.join(ws, "t.jsonl"),
                }
                argv = [*hooks[name], "hook", "user-prompt-submit"]
                stdin, env = json.dumps(payload), envs[name]
            start = time.perf_counter()
            done = subprocess.run(
                argv, input=stdin.encode(), env=env, stdout=subprocess.PIPE, check=True
            )
            out[name].append(time.perf_counter() - start)
            if name in printed:
                printed[name].append(done.stdout)
    medians = {k: statistics.median(v) for k, v in out.items()}
    for name, m in medians.items():
        print(f"{name}: {m * 1000:.1f} ms ({m / medians['pass']:.2f}x python -c pass)")
    print("the same bytes for every prompt:", printed["before"] == printed["after"])


if __name__ == "__main__":
    main()
