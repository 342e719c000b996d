"""Benchmark a handover hook on a long session: a 50,000-line transcript, one new turn.

Every Stop, PreCompact and SessionEnd hook hands over what the transcript
gained since the last one. Without a cursor it parses the whole transcript (up
to its last 32 MiB) every time and checks each message against the ledger;
with the cursor (``claude_code.Cursors``) it reads only the appended lines.
Both run here, round by round, interleaved, in this process (``hand_over``
without starting a worker): "no cursor" deletes the saved cursor before the
run, which is what every hook did before.

    python benchmarks/bench_long_transcript.py              # 7 rounds
    python benchmarks/bench_long_transcript.py --lines 100000 --repeat 5

The transcript is generated: user and assistant messages with tool calls and
tool results of ~1 KB each, and progress lines, as a long Claude Code session
writes them; every message was handed over once before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import uuid

from _util import Summary, fmt_ms, interleaved, machine_rows, table, timed


def _line(kind: str, content: object, message_id: str | None = None) -> str:
    message: dict[str, object] = {"role": kind, "content": content}
    if message_id:
        message["id"] = message_id
    return json.dumps({"type": kind, "uuid": str(uuid.uuid4()), "message": message}) + "\n"


def _turn(n: int) -> str:
    result = f"line {n} of the tool's output " * 40
    return "".join(
        [
            _line("user", f"Turn {n}: please look at module_{n}.py and fix the failing test."),
            _line(
                "assistant",
                [{"type": "tool_use", "id": f"t{n}", "name": "Read", "input": {"path": f"m{n}"}}],
                f"m{n}",
            ),
            _line("user", [{"type": "tool_result", "tool_use_id": f"t{n}", "content": result}]),
            json.dumps({"type": "progress", "data": {"step": n}}) + "\n",
            _line("assistant", [{"type": "text", "text": f"Fixed module_{n}.py."}], f"n{n}"),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lines", type=int, default=50_000)
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()

    base = tempfile.mkdtemp(prefix="mdmem-bench-transcript-")
    os.environ["HOME"] = os.path.join(base, "home")
    os.environ["XDG_STATE_HOME"] = os.path.join(base, "state")
    os.environ["MDMEM_USER_DIR"] = os.path.join(base, "home", "user")
    from mdmem.integrations import claude_code
    from mdmem.store.paths import state_dir

    ws = os.path.join(base, "ws")
    os.makedirs(os.path.join(ws, ".git"))
    transcript = os.path.join(base, "session.jsonl")
    with open(transcript, "w", encoding="utf-8") as f:
        for n in range(args.lines // 5):
            f.write(_turn(n))
    payload = {"session_id": "s", "transcript_path": transcript, "cwd": ws}
    claude_code.hand_over(payload, spawn=False)  # the session so far, handed over once
    cursors = os.path.join(
        state_dir(os.path.join(ws, ".PseudoClaude", "memory")), claude_code.CURSORS_NAME
    )
    counter = [args.lines]

    def case(keep_cursor: bool) -> float:
        counter[0] += 5
        with open(transcript, "a", encoding="utf-8") as f:
            f.write(_turn(counter[0]))
        if not keep_cursor and os.path.exists(cursors):
            os.unlink(cursors)
        return timed(lambda: claude_code.hand_over(payload, spawn=False))

    samples = interleaved(
        {"no cursor (every hook before)": lambda: case(False), "cursor": lambda: case(True)},
        args.repeat,
        label="handover",
    )
    size = os.path.getsize(transcript)
    print(f"transcript: {args.lines:,}+ lines, {size / 1e6:.1f} MB; one new turn per run\n")
    rows = []
    for name, times in samples.items():
        s = Summary.of(times)
        rows.append([name, str(s.n), fmt_ms(s.median), fmt_ms(s.p90)])
    print(table(["handover of one new turn", "runs", "median ms", "p90 ms"], rows, right=(1, 2, 3)))
    print()
    print(table(["machine", ""], machine_rows(base)))
    sys.stdout.flush()
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
