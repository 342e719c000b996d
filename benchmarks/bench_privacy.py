"""Benchmark the privacy filter: redaction of short and long texts, and a long turn.

Prints a Markdown table; ``docs/benchmarks.md`` quotes it.

    python benchmarks/bench_privacy.py             # the full run (~15 s)
    python benchmarks/bench_privacy.py --quick     # a smoke run

What is measured, each the median of ``--repeat`` runs:

1. ``Redactor.redact`` over the 51 short messages of an ordinary turn, and over
   100 titles, file names and types such as a create redacts (no secret's literal
   in them: one pass over the rules' needles, no rule run);
2. ``Redactor.redact`` over 1 MB of prose with numbers (ports, versions), 1 MB
   of random printable text, and 1 MB of CJK text: the cost of every rule
   scanning the whole text (linear);
3. ``turn.from_messages(..., redactor=...)`` of a turn carrying 1 MB of tool
   output and a 1 MB assistant message: redaction first, then the cut, yet only
   a window around each cut is scanned, so the cost does not grow with the size.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time
from collections.abc import Callable

from mdmem.extract.turn import TurnLimits, from_messages
from mdmem.privacy import Redactor


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    repeat = 3 if args.quick else args.repeat
    rng = random.Random(1)
    redactor = Redactor()
    short = [
        "Please make the tests faster.",
        "I'll look at the test setup in conftest.py and the CI config.",
        "Done: the suite now runs in parallel with `pytest -n 4` on port 8080 (v1.2.3).",
    ] * 17
    fields = [
        "Deploy the release branch",
        "deploy-release.md",
        "feedback",
        "Use make ship after review; the CI runs on push.",
        "The staging database lives on db2 and is backed up nightly at 02:00.",
    ] * 20
    line = "Done: the suite now runs in parallel with pytest -n 4 on port 8080, version 1.2.3. "
    prose = (line * (1_000_000 // len(line) + 1))[:1_000_000]
    printable = string.ascii_letters + string.digits + "  \n.,:=-_/"
    noise = "".join(rng.choice(printable) for _ in range(1_000_000))
    cjk = ("测试命令是 pytest，端口 8080，版本 1.2.3。" * 40_000)[:333_000]  # ~1 MB of UTF-8
    turn = [
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "t", "content": "ok 8080\n" * 125_000}
            ],
        },
        {"role": "assistant", "content": line * 12_000},
    ]
    rows = [
        (
            "redact: 51 short messages of a turn",
            median_ms(lambda: [redactor.redact(s) for s in short], repeat * 20),
        ),
        (
            "redact: 100 titles, file names and types",
            median_ms(lambda: [redactor.redact(s) for s in fields], repeat * 20),
        ),
        ("redact: 1 MB of prose with numbers", median_ms(lambda: redactor.redact(prose), repeat)),
        (
            "redact: 1 MB of random printable text",
            median_ms(lambda: redactor.redact(noise), repeat),
        ),
        ("redact: 1 MB of CJK text (UTF-8)", median_ms(lambda: redactor.redact(cjk), repeat)),
        (
            "from_messages with redaction: 2 MB turn, include_tools=True",
            median_ms(
                lambda: from_messages(turn, TurnLimits(include_tools=True), redactor=redactor),
                repeat,
            ),
        ),
    ]
    width = max(len(name) for name, _ in rows)
    print(f"| {'case':<{width}} | median ms |")
    print(f"| {'-' * width} | --------: |")
    for name, ms in rows:
        print(f"| {name:<{width}} | {ms:9.2f} |")


if __name__ == "__main__":
    main()
