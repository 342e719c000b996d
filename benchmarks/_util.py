"""Shared helpers for the benchmark scripts: timing, summaries, Markdown tables, machine facts.

The machines these run on are shared and noisy, so every script measures its
baseline in the same run, interleaves the cases round by round (rotating the
order, so no case always runs first or last), and reports medians with the
spread, never a single run.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

__all__ = [
    "REPO",
    "Summary",
    "fmt_ms",
    "fmt_ratio",
    "interleaved",
    "machine_rows",
    "paired_ratios",
    "table",
    "timed",
]

_STARTED = time.perf_counter()
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@dataclass(frozen=True)
class Summary:
    """Order statistics of a list of timings, in seconds."""

    n: int
    median: float
    p90: float
    min: float
    max: float

    @classmethod
    def of(cls, samples: Sequence[float]) -> Summary:
        """Summarise ``samples`` (at least one)."""
        ordered = sorted(samples)
        n = len(ordered)
        mid = n // 2
        median = ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        # Nearest-rank p90: with few samples it is simply one of the slowest runs.
        p90 = ordered[min(n - 1, max(0, -(-9 * n // 10) - 1))]
        return cls(n, median, p90, ordered[0], ordered[-1])


def timed(fn: Callable[[], object]) -> float:
    """Seconds taken by ``fn()``, measured with ``time.perf_counter`` after a garbage collection."""
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleaved(
    cases: Mapping[str, Callable[[], float]],
    repeat: int,
    *,
    label: str = "",
    rounds: Mapping[str, int] | None = None,
) -> dict[str, list[float]]:
    """Run every case ``repeat`` times, round by round, rotating the order each round.

    A case does its own (untimed) preparation and returns the seconds of its
    timed part, so preparation never counts and every case sees the same noise.
    ``rounds`` limits a slow case to the first few rounds, so its i-th sample
    still pairs with the i-th sample of the others.
    """
    names = list(cases)
    limits = rounds or {}
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(repeat):
        k = r % len(names)
        for name in names[k:] + names[:k]:
            if r < limits.get(name, repeat):
                samples[name].append(cases[name]())
        if label:
            print(
                f"  [{time.perf_counter() - _STARTED:6.1f} s] {label}: round {r + 1}/{repeat}",
                file=sys.stderr,
                flush=True,
            )
    return samples


def paired_ratios(num: Sequence[float], den: Sequence[float]) -> Summary:
    """Per-round ratios ``num[i] / den[i]`` of two interleaved cases, summarised.

    Pairing the runs of one round cancels much of the machine's slow drift.
    """
    return Summary.of([a / b for a, b in zip(num, den, strict=False)])


def fmt_ms(seconds: float) -> str:
    """Milliseconds with about three significant digits."""
    ms = seconds * 1000
    if ms >= 100:
        return f"{ms:,.0f}"
    if ms >= 10:
        return f"{ms:.1f}"
    if ms >= 1:
        return f"{ms:.2f}"
    return f"{ms:.3f}"


def fmt_ratio(ratio: float) -> str:
    """A ratio such as ``1.42x``."""
    return f"{ratio:.2f}x"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Sequence[int] = ()) -> str:
    """A Markdown table; columns whose index is in ``right`` are right-aligned."""
    cells = [list(headers), *[list(row) for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        parts = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        return "| " + " | ".join(parts) + " |"

    rule = [
        "-" * (widths[i] - 1) + ":" if i in right else "-" * widths[i] for i in range(len(headers))
    ]
    return "\n".join([line(headers), line(rule), *[line(row) for row in rows]])


def _filesystem(path: str) -> str:
    """The file-system type that holds ``path`` (best effort, Linux only)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            mounts = [line.split() for line in f]
    except OSError:
        return "unknown"
    real = os.path.realpath(path)
    best, kind = "", "unknown"
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1]
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def _libyaml() -> str:
    try:
        import yaml
    except ImportError:
        return "no (PyYAML missing)"
    return "yes (CSafeLoader)" if getattr(yaml, "__with_libyaml__", False) else "no (pure Python)"


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", REPO, "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
            check=True,
        )
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return out.stdout.strip() or "unknown"


def machine_rows(tmp: str) -> list[list[str]]:
    """Facts about this machine and run, as rows of a two-column table."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count() or 0
    try:
        load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        load = "unknown"
    return [
        ["CPUs (usable / total)", f"{usable} / {os.cpu_count()}"],
        ["Python", f"{platform.python_implementation()} {platform.python_version()}"],
        ["platform", platform.platform(terse=True)],
        ["libyaml", _libyaml()],
        ["temp dir (file system)", f"{tmp} ({_filesystem(tmp)})"],
        ["load average at start (1/5/15 min)", load],
        ["mdmem commit", _commit()],
    ]


def side_by_side(doc: str, *, rounds: int) -> argparse.ArgumentParser:
    """The arguments of a benchmark of two checkouts on a generated store: ``--notes``,
    ``--rounds``, ``--before`` (the other checkout's ``src``) and ``--cache``."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--before", required=True, help="the other checkout's src folder")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    return parser
