"""Benchmark the cold-process start of the CLI: ``mdmem index`` against ``python -c pass``.

A coding-agent hook runs ``mdmem index`` at every session start, so what
matters is the wall time of a whole new process. Each command runs in a fresh
interpreter, round by round with the floor (``python -c pass``) and the other
commands interleaved, and the table gives medians over all rounds.

    python benchmarks/bench_startup.py              # 30 rounds (~70 s)
    python benchmarks/bench_startup.py --repeat 50

The store is the bundled example (``.PseudoClaude.example/memory``), copied
into a temporary workspace as ``.PseudoClaude/memory``, with an empty
temporary user store (``MDMEM_USER_DIR``); both are settled (derived state
present and fingerprinted) before timing, as they are at a session start.
Then ``-X importtime`` shows which modules the start-up spends its time on.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from _util import REPO, Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table

from mdmem.store import _catalog
from mdmem.store.paths import STATE_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

TARGET_RATIO = 3.0
EXAMPLE = os.path.join(REPO, ".PseudoClaude.example", "memory")
PAST_S = 60


@dataclass(frozen=True)
class Command:
    """One command line to time."""

    label: str
    argv: list[str]


def console_script() -> str | None:
    """The installed ``mdmem`` console script next to this interpreter, else on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mdmem")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    return shutil.which("mdmem")


def make_workspace(base: str) -> tuple[str, str, str]:
    """A workspace holding a copy of the example store, and an empty user store."""
    workspace = os.path.join(base, "workspace")
    store = os.path.join(workspace, ".PseudoClaude", "memory")
    shutil.copytree(EXAMPLE, store, ignore=shutil.ignore_patterns(STATE_DIR))
    user = os.path.join(base, "user")
    os.mkdir(user, 0o700)
    return workspace, store, user


def settle(stores: list[str], run: Callable[[], object]) -> None:
    """Bring both stores to the state of a session start: derived state fingerprinted."""
    run()  # creates .mdmem/ (and rewrites MEMORY.md if it was not canonical)
    past = time.time() - PAST_S
    for root in stores:
        for name in os.listdir(root):
            path = os.path.join(root, name)
            if not name.startswith(".") and os.path.isfile(path):
                os.utime(path, (past, past))
    run()
    for root in stores:
        if (
            getattr(_catalog.read_fingerprint(root), "full", None)
            != _catalog.Scan(root).fingerprint()
        ):
            raise RuntimeError(f"{root} did not settle")


def importtime(argv: list[str], env: dict[str, str], cwd: str, runs: int) -> list[list[str]]:
    """``-X importtime`` of ``argv``: median cumulative and self time per module, slowest first."""
    cumulative: dict[str, list[int]] = {}
    own: dict[str, list[int]] = {}
    parent: dict[str, str] = {}
    for _ in range(runs):
        out = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:]],
            env=env,
            cwd=cwd,
            capture_output=True,
            text=True,
            check=True,
        )
        stack: list[tuple[int, str]] = []  # children are printed before their parent
        for line in out.stderr.splitlines():
            if not line.startswith("import time:") or "cumulative" in line:
                continue
            self_us, cum_us, name = line[len("import time:") :].split("|")
            depth = (len(name) - len(name.lstrip())) // 2
            module = name.strip()
            while stack and stack[-1][0] > depth:
                parent.setdefault(stack.pop()[1], module)
            stack.append((depth, module))
            cumulative.setdefault(module, []).append(int(cum_us))
            own.setdefault(module, []).append(int(self_us))
    ranked = sorted(cumulative, key=lambda m: Summary.of(cumulative[m]).median, reverse=True)
    return [
        [
            f"`{m}`",
            fmt_ms(Summary.of(cumulative[m]).median / 1e6),
            fmt_ms(Summary.of(own[m]).median / 1e6),
            f"`{parent[m]}`" if m in parent else "(top level)",
        ]
        for m in ranked
    ]


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="rounds (default 30)")
    parser.add_argument(
        "--importtime-runs", type=int, default=9, help="-X importtime runs (default 9)"
    )
    parser.add_argument("--tmpdir", help="where the temporary workspace goes")
    args = parser.parse_args(argv)

    base = tempfile.mkdtemp(prefix="mdmem-bench-", dir=args.tmpdir)
    try:
        workspace, store, user = make_workspace(base)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MDMEM_", "PYTHON"))}
        env["MDMEM_USER_DIR"] = user
        py = sys.executable
        ws = ["--workspace", workspace]
        floor_cmd = Command("`python -c pass` (floor)", [py, "-c", "pass"])
        index_cmd = Command(
            "`python -m mdmem --workspace W index`", [py, "-m", "mdmem", *ws, "index"]
        )
        list_cmd = Command("`python -m mdmem --workspace W list`", [py, "-m", "mdmem", *ws, "list"])
        index_cmds = [index_cmd]
        script = console_script()
        if script is not None:
            index_cmds.append(
                Command("`mdmem --workspace W index` (console script)", [script, *ws, "index"])
            )
        commands = [
            floor_cmd,
            *index_cmds,
            list_cmd,
            Command('`python -c "import anthropic"`', [py, "-c", "import anthropic"]),
        ]

        def output(cmd: Command) -> str:
            return subprocess.run(
                cmd.argv, env=env, cwd=base, capture_output=True, text=True, check=True
            ).stdout

        settle([store, user], lambda: output(index_cmd))
        notes = sum(1 for line in output(index_cmd).splitlines() if line.startswith("- ["))
        for cmd in commands:  # warm the OS caches and check every command works
            out = output(cmd)
            if "index" in cmd.argv and "## Project Memory" not in out:
                raise RuntimeError(f"{cmd.label} printed no index: {out!r}")
        settle([store, user], lambda: output(index_cmd))

        def timer(cmd: Command) -> Callable[[], float]:
            def case() -> float:
                start = time.perf_counter()
                subprocess.run(cmd.argv, env=env, cwd=base, stdout=subprocess.DEVNULL, check=True)
                return time.perf_counter() - start

            return case

        samples = interleaved(
            {cmd.label: timer(cmd) for cmd in commands}, args.repeat, label="startup"
        )
        settle([store, user], lambda: output(index_cmd))  # still warm: nothing wrote behind us

        print("## bench_startup\n")
        print(f"`{' '.join(['python', 'benchmarks/bench_startup.py', *sys.argv[1:]])}`\n")
        print(table(["machine", ""], machine_rows(base)))
        print(
            f"\n### Cold processes, {args.repeat} interleaved rounds"
            f" (example store: {notes} notes; empty user store)\n"
        )
        floor = Summary.of(samples[floor_cmd.label])
        rows = []
        for cmd in commands:
            s = Summary.of(samples[cmd.label])
            rows.append(
                [
                    cmd.label,
                    fmt_ms(s.median),
                    fmt_ms(s.p90),
                    fmt_ms(s.min),
                    fmt_ms(s.max),
                    fmt_ratio(s.median / floor.median),
                ]
            )
        print(
            table(
                ["command", "median ms", "p90 ms", "min ms", "max ms", "vs floor"],
                rows,
                right=range(1, 6),
            )
        )

        print("\n### Target\n")
        rows = []
        for cmd in index_cmds:
            ratio = Summary.of(samples[cmd.label]).median / floor.median
            verdict = (
                "met"
                if ratio <= TARGET_RATIO
                else f"**missed** ({fmt_ratio(ratio / TARGET_RATIO)} the target)"
            )
            rows.append(
                [
                    cmd.label,
                    f"{fmt_ratio(ratio)} ({fmt_ms(Summary.of(samples[cmd.label]).median)} ms"
                    f" / {fmt_ms(floor.median)} ms)",
                    f"<= {fmt_ratio(TARGET_RATIO)}",
                    verdict,
                ]
            )
        print(table(["target: cold `mdmem index`", "vs floor", "limit", "verdict"], rows))

        runs = args.importtime_runs
        for cmd, top in ((index_cmd, 15), (list_cmd, 10)):
            print(
                f"\n### `-X importtime` of {cmd.label}: top {top} by cumulative time"
                f" (median of {runs} runs)\n"
            )
            rows = importtime(cmd.argv, env, base, runs)[:top]
            print(
                table(
                    ["module", "cumulative ms", "self ms", "imported by"],
                    rows,
                    right=(1, 2),
                )
            )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
