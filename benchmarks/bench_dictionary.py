"""What CC-CEDICT (the ``dictionary`` extra) costs the per-prompt hook, against the glossary.

    python benchmarks/bench_dictionary.py              # 15 rounds, 2,000 notes
    python benchmarks/bench_dictionary.py --repeat 21 --notes 10000

A workspace of ``--notes`` generated notes (``bench_recall.py``'s generator),
indexed and settled; the dictionary's SQLite file is built first (its time is
the "first read" row). Then, round by round with ``python -c pass``, cold
``mdmem hook user-prompt-submit`` processes with a UserPromptSubmit payload as
Claude Code sends it, half with ``MDMEM_DICTIONARY=on`` and half ``off`` (the
glossary), alternating English and Chinese prompts. Medians.
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--notes", type=int, default=2000)
    args = parser.parse_args()
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
        dictionary.database()
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

        def prompt(setting: str) -> float:
            turn["n"] += 1
            text = PROMPTS[turn["n"] % len(PROMPTS)]
            payload = {"session_id": f"s{turn['n']}", "cwd": str(ws), "prompt": text}
            t0 = time.perf_counter()
            subprocess.run(
                hook,
                input=json.dumps(payload, ensure_ascii=False),
                env={**env, "MDMEM_DICTIONARY": setting},
                capture_output=True,
                check=True,
                text=True,
            )
            return time.perf_counter() - t0

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
