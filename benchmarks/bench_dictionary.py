"""What CC-CEDICT (the ``dictionary`` extra) costs the per-prompt hook, against the glossary.

    python benchmarks/bench_dictionary.py              # 15 rounds, 2,000 notes
    python benchmarks/bench_dictionary.py --repeat 21 --notes 10000
    python benchmarks/bench_dictionary.py --first 5 [--python OTHER_VENV/bin/python]

A workspace of ``--notes`` generated notes (``bench_recall.py``'s generator),
indexed and settled; the dictionary's SQLite file is built first (its time is
the "first read" row). Then, round by round with ``python -c pass``, cold
``mdmem hook user-prompt-submit`` processes with a UserPromptSubmit payload as
Claude Code sends it, half with ``MDMEM_DICTIONARY=on`` and half ``off`` (the
glossary), alternating English and Chinese prompts, and a fourth with the
extra installed but its file not built yet (moved aside for that process): the
hook uses the glossary and builds nothing (asserted). Medians.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _util import REPO, Summary, fmt_ms, interleaved, table

sys.path.insert(0, os.path.join(REPO, "src"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

PROMPTS = [
    "where is the deploy configuration and how do we run it",
    "部署配置在哪里，怎么运行",
    "which database migration broke the tests",
    "数据库迁移导致测试失败了吗",
]


def first_prompt(python: str, rounds: int) -> None:
    """The first prompt hook of a new user: a fresh state folder, no dictionary file yet.

    ``python`` may be another checkout's interpreter (its venv with the extra), for the
    same case before this change, when the hook built the file itself.
    """
    took = []
    for _ in range(rounds):
        with tempfile.TemporaryDirectory() as base:
            ws = os.path.join(base, "ws")
            os.makedirs(os.path.join(ws, ".git"))
            env = {k: v for k, v in os.environ.items() if not k.startswith(("MDMEM_", "PYTHON"))}
            env.update(
                MDMEM_STATE_DIR=os.path.join(base, "state"),
                MDMEM_USER_DIR=os.path.join(base, "user"),
                MDMEM_EMBED="off",
                MDMEM_SEMANTIC="off",
            )
            add = ["add", "--type", "project_knowledge", "--title", "Deploy", "make release"]
            for args in (add, ["index"]):
                run = [python, "-m", "mdmem", "--workspace", ws, *args]
                subprocess.run(run, env=env, check=True, capture_output=True)
            payload = json.dumps({"session_id": "s", "cwd": ws, "prompt": PROMPTS[1]})
            t0 = time.perf_counter()
            subprocess.run(
                [python, "-m", "mdmem", "hook", "user-prompt-submit"],
                input=payload,
                env=env,
                check=True,
                capture_output=True,
                text=True,
            )
            took.append(time.perf_counter() - t0)
    s = Summary.of(took)
    print(f"first prompt hook, no dictionary file yet ({python}, load {os.getloadavg()[0]:.1f})")
    print(f"median {fmt_ms(s.median)} ms, p90 {fmt_ms(s.p90)} ms, n {s.n}")


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--notes", type=int, default=2000)
    parser.add_argument(
        "--first", type=int, default=0, help="only time N first prompt hooks of a new user"
    )
    parser.add_argument(
        "--python", default=sys.executable, help="with --first: the interpreter that runs mdmem"
    )
    args = parser.parse_args()
    if args.first:
        first_prompt(args.python, args.first)
        return
    from bench_recall import generated, write_store

    from mdmem.recall import dictionary

    if not dictionary.available():
        sys.exit("the dictionary extra is not installed: pip install '.[dictionary]'")
    with tempfile.TemporaryDirectory() as base:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MDMEM_", "PYTHON"))}
        env.update(
            MDMEM_USER_DIR=os.path.join(base, "user"),
            MDMEM_STATE_DIR=os.path.join(base, "state"),
            MDMEM_SEMANTIC="off",
            MDMEM_EMBED="off",
        )
        os.environ.update(env)
        ws = Path(base) / "ws"
        (ws / ".git").mkdir(parents=True)
        notes, _ = generated(args.notes)
        write_store(notes, ws / ".PseudoClaude" / "memory")
        started = time.perf_counter()
        dictionary.build()
        first = time.perf_counter() - started
        py = sys.executable
        hook = [py, "-m", "mdmem", "hook", "user-prompt-submit"]
        subprocess.run(
            [py, "-m", "mdmem", "hook", "session-start"],
            input=json.dumps({"session_id": "b", "cwd": str(ws), "source": "startup"}),
            env=env,
            capture_output=True,
            check=True,
            text=True,
        )
        turn = {"n": 0}

        folder = os.path.join(env["MDMEM_STATE_DIR"], "dictionary")

        def prompt(setting: str, missing: bool = False) -> float:
            turn["n"] += 1
            text = PROMPTS[turn["n"] % len(PROMPTS)]
            payload = {"session_id": f"s{turn['n']}", "cwd": str(ws), "prompt": text}
            if missing:  # installed, its file not built yet: the hook must not build it
                os.rename(folder, folder + ".away")
            t0 = time.perf_counter()
            subprocess.run(
                hook,
                input=json.dumps(payload, ensure_ascii=False),
                env={**env, "MDMEM_DICTIONARY": setting},
                capture_output=True,
                check=True,
                text=True,
            )
            took = time.perf_counter() - t0
            if missing:
                assert not os.path.exists(folder), "the prompt hook built the dictionary"
                os.rename(folder + ".away", folder)
            return took

        def floor() -> float:
            t0 = time.perf_counter()
            subprocess.run([py, "-c", "pass"], env=env, check=True)
            return time.perf_counter() - t0

        for setting in ("on", "off"):  # bytecode written, index settled
            prompt(setting)
        samples = interleaved(
            {
                "`python -c pass`": floor,
                "hook, glossary (`MDMEM_DICTIONARY=off`)": lambda: prompt("off"),
                "hook, CC-CEDICT (`MDMEM_DICTIONARY=on`)": lambda: prompt("on"),
                "hook, CC-CEDICT installed, its file not built yet": lambda: prompt("on", True),
            },
            args.repeat,
            label="dictionary",
        )
    print(f"\n{args.notes:,} notes, {args.repeat} rounds, load {os.getloadavg()[0]:.1f}\n")
    rows = [["first read of CC-CEDICT into the state folder", fmt_ms(first), "", ""]]
    for name, values in samples.items():
        s = Summary.of(values)
        rows.append([name, fmt_ms(s.median), fmt_ms(s.p90), str(s.n)])
    print(table(["case", "median", "p90", "n"], rows, right=[1, 2, 3]))


if __name__ == "__main__":
    main()
