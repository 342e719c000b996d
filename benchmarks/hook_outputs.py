"""The per-prompt hook of two checkouts on the recall sets: the same bytes, query by query.

For each set (``../shared/data/recall-dev``, ``benchmarks/data/recall-calib``,
``benchmarks/data/recall-holdout``, or those named), its notes are written into a
project and a user store once; then, per query, a new session: ``hook
session-start``, then ``hook user-prompt-submit`` with the query, in fresh
processes of this checkout and of ``--before`` (another checkout's ``src``), each
with its own state folder. Prints, per set, how many outputs are the same bytes,
how many differ (the first few shown), and how many recalled anything.

    python benchmarks/hook_outputs.py --before <main>/src
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_recall import build_stores, load_set

HERE = Path(__file__).resolve().parent
SETS = [
    HERE.parent.parent / "shared" / "data" / "recall-dev",
    HERE / "data" / "recall-calib",
    HERE / "data" / "recall-holdout",
]


def _hook(event: str, payload: dict[str, object], env: dict[str, str]) -> str:
    argv = [sys.executable, "-m", "mdmem", "hook", event]
    done = subprocess.run(argv, input=json.dumps(payload), env=env, capture_output=True, text=True)
    return done.stdout


def compare(data: Path, before: str, show: int = 2) -> tuple[int, int, int]:
    """(same, different, recalled) over the set's queries."""
    notes, queries = load_set(data)
    base = Path(tempfile.mkdtemp(prefix="mdmem-hook-outputs-"))
    try:
        os.environ["MDMEM_STATE_DIR"] = str(base / "state-build")
        build_stores(notes, base)
        ws = base / "ws"
        envs = {
            name: dict(
                os.environ,
                PYTHONPATH=src,
                MDMEM_STATE_DIR=str(base / f"state-{name}"),
                MDMEM_WORKSPACE=str(ws),
                MDMEM_USER_DIR=str(base / "user"),
                MDMEM_SEMANTIC="off",
                MDMEM_WATCHER="off",
                MDMEM_DICTIONARY="off",
            )
            for name, src in (("after", str(HERE.parent / "src")), ("before", before))
        }
        same = different = recalled = 0
        for i, query in enumerate(queries):
            outs = {}
            for name, env in envs.items():
                start = {"session_id": f"q{i}", "cwd": str(ws), "source": "startup"}
                _hook("session-start", {**start, "hook_event_name": "SessionStart"}, env)
                prompt = {"session_id": f"q{i}", "cwd": str(ws), "prompt": str(query["query"])}
                outs[name] = _hook("user-prompt-submit", prompt, env)
            if outs["after"] == outs["before"]:
                same += 1
            else:
                different += 1
                if different <= show:
                    print(f"differs: {query['query']!r}", file=sys.stderr)
            recalled += bool(outs["after"].strip())
        return same, different, recalled
    finally:
        shutil.rmtree(base, ignore_errors=True)


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="the other checkout's src folder")
    parser.add_argument("sets", nargs="*", type=Path, help="recall sets (default: the three)")
    args = parser.parse_args()
    print("| set | queries | the same bytes | different | recalled a note |")
    print("|---|---|---|---|---|")
    for data in args.sets or SETS:
        same, different, recalled = compare(data, os.path.abspath(args.before))
        print(f"| {data.name} | {same + different} | {same} | {different} | {recalled} |")


if __name__ == "__main__":
    main()
