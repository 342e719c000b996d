"""The per-prompt hook in instructions, not milliseconds: callgrind counts, deterministic.

On a shared machine a 60 ms process's wall time moves by half from one run to
the next; the number of instructions it executes (user space, as
``valgrind --tool=callgrind`` counts them) does not. This runs, for each store
size and each checkout, the prompt hook as Claude Code does at a session's first
prompt (``hook session-start`` first, not counted, then ``hook
user-prompt-submit`` with the hook's JSON on stdin, through the command its
settings name, as each checkout's install writes it) under callgrind, once per
prompt of ``bench_paths.PROMPTS``, beside the floors counted the same way
(``python -c pass``; a raw FTS5 query of the recall index in a fresh process),
and checks that both checkouts print the same bytes.

    python benchmarks/bench_hook_ir.py                         # 1,000 and 10,000 notes
    python benchmarks/bench_hook_ir.py --sizes 1000,10000,100000 --before <main>/src --label ir

Instructions leave out the kernel (system calls, page faults) and the process's
start: a ratio of instructions is higher than the ratio of wall times it stands
for. Stores as ``bench_paths.py`` makes them (``--cache``).
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from _util import table
from bench_paths import _FTS, PROMPTS, installed_hook
from bench_scale import generate


def instructions(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[int, bytes]:
    """Instructions callgrind counts for a process, and its output."""
    with tempfile.TemporaryDirectory() as tmp:
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/out",
                *argv,
            ],
            input=stdin.encode(),
            env=env,
            capture_output=True,
            check=True,
        )
    for line in done.stderr.decode(errors="replace").splitlines():
        if "Collected :" in line:
            return int(line.split()[-1]), done.stdout
    raise RuntimeError(f"no count for {argv}")


def arguments(doc: str, label: str) -> argparse.Namespace:
    """The options of a count of the hook (``--sizes``, ``--before``, ``--cache``, ``--label``),
    and ``checkouts``: the src folder of each checkout to count."""
    parser = argparse.ArgumentParser(description=doc.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--before", help="another checkout's src folder, counted the same way")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_paths.py)",
    )
    parser.add_argument(
        "--label", default=label, help="names the state folders (<label>-<checkout>)"
    )
    args = parser.parse_args()
    # This checkout ("after") and the other one ("before"), by their src folders.
    here = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    args.checkouts = {"after": here, **({"before": args.before} if args.before else {})}
    return args


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    args = arguments(__doc__, "ir")
    if shutil.which("valgrind") is None:
        sys.exit("bench_hook_ir.py needs valgrind")
    checkouts = args.checkouts
    py = sys.executable
    base = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    base["MDMEM_SEMANTIC"] = "off"
    rows = []
    for size in [int(s.replace("_", "")) for s in args.sizes.split(",")]:
        ws = generate(args.cache, size)
        user = os.path.join(
            generate(os.path.join(args.cache, "user"), max(size // 10, 1)),
            ".PseudoClaude",
            "memory",
        )
        counts: dict[str, list[int]] = {}
        outputs: dict[str, list[str]] = {}
        floors: dict[str, int] = {}
        for name, src in checkouts.items():
            env = {
                **base,
                "PYTHONPATH": src,
                "MDMEM_WORKSPACE": ws,
                "MDMEM_USER_DIR": user,
                "MDMEM_STATE_DIR": os.path.join(args.cache, f"state-{args.label}-{name}"),
            }
            mdmem = [py, "-m", "mdmem"]
            # The hook as Claude Code runs it: the command its settings name, as this
            # checkout's `mdmem install claude-code` writes it (less -E, for PYTHONPATH).
            hook = installed_hook(env)
            for _ in range(2):  # settled: the index built, its key trusted, bytecode written
                subprocess.run(
                    [*mdmem, "search", "deploy cache"],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            if name == "after":
                floors["pass"] = instructions([py, "-c", "pass"], env)[0]
                index = glob.glob(
                    os.path.join(env["MDMEM_STATE_DIR"], "stores", f"n{size}-*", "recall.sqlite")
                )[0]
                floors["fts"] = instructions([py, "-c", _FTS, index, "deploy OR cache"], env)[0]
            # A first, uncounted round writes the hook's own modules' bytecode.
            for k, prompt in [(-1, PROMPTS[0]), *enumerate(PROMPTS)]:
                session = f"ir-{os.getpid()}-{size}-{name}-{k}"
                start = {
                    "session_id": session,
                    "cwd": ws,
                    "hook_event_name": "SessionStart",
                    "source": "startup",
                }
                subprocess.run(
                    [*mdmem, "hook", "session-start"],
                    input=json.dumps(start).encode(),
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
                payload = {
                    "session_id": session,
                    "cwd": ws,
                    "hook_event_name": "UserPromptSubmit",
                    "prompt": prompt,
                }
                n, out = instructions(
                    [*hook, "hook", "user-prompt-submit"], env, json.dumps(payload)
                )
                if k >= 0:
                    counts.setdefault(name, []).append(n)
                    outputs.setdefault(name, []).append(hashlib.sha256(out).hexdigest()[:12])
        same = len({tuple(v) for v in outputs.values()}) == 1
        for name, values in counts.items():
            med = statistics.median(values)
            rows.append(
                [
                    f"{size:,}",
                    name,
                    " / ".join(f"{v / 1e6:.0f}" for v in values),
                    f"{med / 1e6:.0f} M",
                    f"{med / floors['pass']:.2f}x",
                    f"{med / floors['fts']:.2f}x",
                    "yes" if same else "NO",
                ]
            )
        rows.append(
            [
                f"{size:,}",
                "floors",
                f"pass {floors['pass'] / 1e6:.0f} M, FTS5 query {floors['fts'] / 1e6:.0f} M",
                "",
                "",
                "",
                "",
            ]
        )
    print("### The prompt hook in instructions (callgrind), a session's first prompt\n")
    print(
        table(
            ["notes", "checkout", "each prompt (M)", "median", "÷ pass", "÷ FTS5", "same output"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
