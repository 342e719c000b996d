"""The cost of recording a session: the Stop hook's handover over a 50,000-line transcript.

    python benchmarks/bench_sessions.py [--runs 5]

Each run starts from an empty state folder (the whole transcript is new), so
it is the worst case: every line parsed, every tool call looked at, one record
written. Each run is a fresh process doing what ``mdmem hook stop`` does, but
without starting the detached worker (which would load the machine for the next
run). Prints the median wall time and the peak memory of that process, and for
comparison ``python -c pass`` and the same handover over an empty transcript.
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

# The process's own peak (VmHWM), on its last line of stderr: ``ru_maxrss`` of a child
# counts the memory of the process that forked it (Linux carries the high-water mark
# across ``exec``), and RUSAGE_CHILDREN is the largest of every child so far.
_PEAK = [
    "try:",
    "    with open('/proc/self/status') as f:",
    "        hwm = next(l.split()[1] for l in f if l.startswith('VmHWM:'))",
    "    print('VmHWM', hwm, file=sys.stderr)",
    "except OSError:",
    "    pass",
]

HANDOVER = (
    "import json, sys\n"
    "from mdmem.integrations.claude_code import hand_over\n"
    "hand_over(json.load(sys.stdin), spawn=False)\n" + "\n".join(_PEAK)
)


def transcript(path: str, cwd: str, lines: int) -> None:
    with open(path, "w") as f:
        n = 0

        def put(kind: str, message: dict[str, object]) -> None:
            nonlocal n
            n += 1
            f.write(json.dumps({"type": kind, "uuid": f"u{n}", "sessionId": "bench",
                                "timestamp": "2026-12-01T10:00:00Z", "gitBranch": "main",
                                "cwd": cwd, "message": message}) + "\n")  # fmt: skip

        put("user", {"role": "user", "content": "Refactor the billing service."})
        while n < lines:
            put(
                "assistant",
                {
                    "id": f"m{n}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"t{n}",
                            "name": "Edit",
                            "input": {
                                "file_path": f"{cwd}/src/mod_{n % 900}.py",
                                "old_string": "a" * 200,
                            },
                        }
                    ],
                },
            )
            put(
                "user",
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": f"t{n}", "content": "ok " * 100}
                    ],
                },
            )
            put(
                "assistant",
                {
                    "id": f"m{n}",
                    "role": "assistant",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": f"b{n}",
                            "name": "Bash",
                            "input": {"command": f"pytest tests/test_mod_{n % 700}.py"},
                        }
                    ],
                },
            )
            put("assistant", {"id": f"x{n}", "role": "assistant", "content": [
                {"type": "text", "text": "1 passed."}]})  # fmt: skip


def run(args: list[str], stdin: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, the process's own peak memory in MiB; 0 where it cannot say)."""
    start = time.perf_counter()
    done = subprocess.run(args, input=stdin.encode(), env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    last = (done.stderr.decode(errors="replace").strip().splitlines() or [""])[-1].split()
    return wall, int(last[1]) / 1024 if len(last) == 2 and last[0] == "VmHWM" else 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--lines", type=int, default=50_000)
    runs = parser.parse_args().runs
    lines = parser.parse_args().lines
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        ws = os.path.join(tmp, "ws")
        os.makedirs(os.path.join(ws, ".git"))
        big = os.path.join(tmp, "big.jsonl")
        empty = os.path.join(tmp, "empty.jsonl")
        transcript(big, ws, lines)
        open(empty, "w").close()
        results: dict[str, list[float]] = {"python -c pass": [], "empty": [], "50k": []}
        peak = 0.0
        for i in range(runs):
            env = {**os.environ, "CLAUDE_PROJECT_DIR": ws, "MDMEM_PROVIDER": "offline",
                   "MDMEM_STATE_DIR": os.path.join(tmp, f"state-{i}"), "HOME": tmp,
                   "MDMEM_USER_DIR": os.path.join(tmp, "user")}  # fmt: skip
            hook = [sys.executable, "-c", HANDOVER]
            for name, path in (("empty", empty), ("50k", big)):
                payload = json.dumps({"session_id": f"s{i}", "transcript_path": path, "cwd": ws,
                                      "hook_event_name": "Stop"})  # fmt: skip
                wall, rss = run(hook, payload, env)
                results[name].append(wall)
                if name == "50k":
                    peak = max(peak, rss)
            results["python -c pass"].append(run([sys.executable, "-c", "pass"], "", env)[0])
        print(f"{lines}-line transcript ({os.path.getsize(big) / 1e6:.1f} MB), {runs} runs")
        for name, times in results.items():
            print(f"  {name:<16} median {statistics.median(times) * 1000:8.1f} ms")
        print(f"  peak memory of a hook process (its VmHWM): {peak:.1f} MiB")


if __name__ == "__main__":
    main()
