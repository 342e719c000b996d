"""Benchmark the Claude Code hooks as Claude Code runs them: a new process each, stdin JSON.

SessionEnd hooks get about 1.5 s from Claude Code, so what matters is the wall
time of a whole ``mdmem hook session-end`` process (the extraction itself runs
later, in a detached worker). Each case runs in a fresh interpreter, round by
round with ``python -c pass`` interleaved, and the table gives medians.

    python benchmarks/bench_hooks.py              # 15 rounds (~1 minute)
    python benchmarks/bench_hooks.py --repeat 30
    python benchmarks/bench_hooks.py --notes 0    # without the 10,000-note store

The workspace holds the bundled example store; the transcript is the test
fixture ``interrupted.jsonl`` (16 lines). "nothing new" runs against a ledger
that already holds every message; "one new turn" appends a fresh user and
assistant line before each run, so the hook journals a turn and starts a
worker (offline provider).

``hook user-prompt-submit`` runs against a second workspace of ``--notes``
generated notes (default 10,000; ``bench_recall.py``'s generator, settled and
indexed before the rounds), with a UserPromptSubmit payload as Claude Code
sends it and a new prompt each round that names a note the session has not
seen: "in a session" after that session's SessionStart hook ran, "first
prompt" in a session SessionStart did not record.
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
from collections.abc import Callable
from pathlib import Path

from _util import REPO, Summary, fmt_ms, interleaved, machine_rows, table

FIXTURE = os.path.join(REPO, "tests", "fixtures", "claude_code", "interrupted.jsonl")
EXAMPLE = os.path.join(REPO, ".PseudoClaude.example", "memory")


def _prompt_cases(base: str, env: dict[str, str], notes: int) -> dict[str, Callable[[], float]]:
    """The UserPromptSubmit cases, on a workspace of ``notes`` generated notes."""
    from bench_recall import generated, write_store

    big = os.path.join(base, "big")
    os.makedirs(os.path.join(big, ".git"))
    saved = {k: os.environ.get(k) for k in ("MDMEM_STATE_DIR", "MDMEM_USER_DIR")}
    os.environ.update(MDMEM_STATE_DIR=env["MDMEM_STATE_DIR"], MDMEM_USER_DIR=env["MDMEM_USER_DIR"])
    try:
        items, probes = generated(notes)
        write_store(items, Path(big) / ".PseudoClaude" / "memory")
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    big_env = {**env, "CLAUDE_PROJECT_DIR": big, "MDMEM_SEMANTIC": "off"}
    py = sys.executable
    state = {"round": 0, "first": 0}

    def run(event: str, payload: dict[str, object]) -> float:
        start = time.perf_counter()
        subprocess.run(
            [py, "-m", "mdmem", "hook", event],
            input=json.dumps(payload),
            text=True,
            env=big_env,
            cwd=big,
            capture_output=True,
            check=True,
        )
        return time.perf_counter() - start

    def prompt(session: str) -> dict[str, object]:
        state["round"] += 1
        query = probes[state["round"] % len(probes)][0]
        return {
            "session_id": session,
            "transcript_path": os.path.join(base, "big-session.jsonl"),
            "cwd": big,
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": f"Where is {query} configured, and what does it do?",
        }

    def first() -> float:
        state["first"] += 1
        return run("user-prompt-submit", prompt(f"first-{state['first']}"))

    # Indexed and settled, as a store is after its first search; SessionStart ran.
    run("session-start", {"session_id": "big", "cwd": big, "source": "startup"})
    run("user-prompt-submit", prompt("warm-up"))
    label = f"{notes:,} notes"
    return {
        f"`hook user-prompt-submit`, {label}, in a session": lambda: run(
            "user-prompt-submit", prompt("big")
        ),
        f"`hook user-prompt-submit`, {label}, first prompt": first,
    }


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its Markdown report."""
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=15, help="rounds (default 15)")
    parser.add_argument(
        "--notes", type=int, default=10_000, help="notes of the prompt hook's store (0: skip)"
    )
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

        def hook(event: str, payload: dict[str, object], **extra: str) -> float:
            data = json.dumps(payload)
            start = time.perf_counter()
            subprocess.run(
                [py, "-m", "mdmem", "hook", event],
                input=data,
                text=True,
                env={**env, **extra},
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
        subprocess.run(
            [py, "-m", "mdmem", "pause", "paused-session"], env=env, check=True, capture_output=True
        )
        cases = {
            "`python -c pass` (floor)": floor,
            "`hook session-start`": lambda: hook("session-start", {"cwd": workspace}),
            "`hook session-start`, `MDMEM_DISABLE=1`": lambda: hook(
                "session-start", {"cwd": workspace}, MDMEM_DISABLE="1"
            ),
            "`hook session-start`, a paused session": lambda: hook(
                "session-start", {"cwd": workspace, "session_id": "paused-session"}
            ),
            "`hook stop`, nothing new": lambda: hook("stop", common),
            "`hook session-end`, one new turn": new_turn,
        }
        if args.notes:
            cases.update(_prompt_cases(base, env, args.notes))
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
