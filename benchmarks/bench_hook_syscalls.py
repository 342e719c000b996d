"""The per-prompt hook's system calls and page reads, as ``strace -c`` counts them.

Callgrind (``bench_hook_ir.py``) counts user-space instructions only; what a larger
store costs the hook beyond them is kernel time: the pages SQLite reads
(``pread64``, 4 KiB each) and the other system calls. This runs, for each store
size and each checkout, the prompt hook at a session's first prompt (``hook
session-start`` first, not counted, then ``hook user-prompt-submit`` with the
hook's JSON on stdin) under ``strace -f -c``, once per prompt of
``bench_paths.PROMPTS``, and checks that both checkouts print the same bytes.

    python benchmarks/bench_hook_syscalls.py --sizes 1000,10000,100000 --before <main>/src

Counts barely move between runs of a settled store (a few calls: its logs grow).
Each checkout has its own state folder under ``--cache``, settled by two searches
first (an existing one is used as it is). Stores as ``bench_paths.py`` makes them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

from _util import table
from bench_hook_ir import arguments
from bench_paths import PROMPTS
from bench_scale import generate


def syscalls(argv: list[str], env: dict[str, str], stdin: str) -> tuple[dict[str, int], bytes]:
    """System calls of a process and its children by name (and ``total``), and its output."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as report:
        done = subprocess.run(
            ["strace", "-f", "-c", "-o", report.name, *argv],
            input=stdin.encode(),
            env=env,
            capture_output=True,
            check=True,
        )
        counts: dict[str, int] = {}
        for line in report.read().splitlines():
            cells = line.split()
            if len(cells) >= 5 and cells[0][0].isdigit() and cells[3].isdigit():
                counts[cells[-1]] = int(cells[3])
    return counts, done.stdout


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    args = arguments(__doc__, "sys")
    if shutil.which("strace") is None:
        sys.exit("bench_hook_syscalls.py needs strace")
    checkouts = args.checkouts
    mdmem = [sys.executable, "-m", "mdmem"]
    base = {**os.environ, "MDMEM_SEMANTIC": "off"}
    rows = []
    for size in [int(s.replace("_", "")) for s in args.sizes.split(",")]:
        ws = generate(args.cache, size)
        user = generate(os.path.join(args.cache, "user"), max(size // 10, 1))
        outputs: dict[str, list[str]] = {}
        counted: dict[str, list[dict[str, int]]] = {}
        for name, src in checkouts.items():
            env = {
                **base,
                "PYTHONPATH": src,
                "MDMEM_WORKSPACE": ws,
                "MDMEM_USER_DIR": os.path.join(user, ".PseudoClaude", "memory"),
                "MDMEM_STATE_DIR": os.path.join(args.cache, f"state-{args.label}-{name}"),
            }
            for _ in range(2):  # settled: the index built, its key trusted
                subprocess.run(
                    [*mdmem, "search", "deploy cache"],
                    env=env,
                    check=True,
                    stdout=subprocess.DEVNULL,
                )
            for k, prompt in [(-1, PROMPTS[0]), *enumerate(PROMPTS)]:
                session = f"sys-{os.getpid()}-{size}-{name}-{k}"
                start = {"session_id": session, "cwd": ws, "source": "startup"}
                subprocess.run(
                    [*mdmem, "hook", "session-start"],
                    env=env,
                    check=True,
                    input=json.dumps(start).encode(),
                    stdout=subprocess.DEVNULL,
                )
                payload = {**start, "hook_event_name": "UserPromptSubmit", "prompt": prompt}
                counts, out = syscalls(
                    [*mdmem, "hook", "user-prompt-submit"], env, json.dumps(payload)
                )
                if k >= 0:  # the first round writes the hook's own modules' bytecode
                    counted.setdefault(name, []).append(counts)
                    outputs.setdefault(name, []).append(hashlib.sha256(out).hexdigest())
        same = len({tuple(v) for v in outputs.values()}) == 1
        for name, runs in counted.items():
            rows.append(
                [
                    f"{size:,}",
                    name,
                    " / ".join(f"{c.get('pread64', 0):,}" for c in runs),
                    " / ".join(f"{c.get('total', 0):,}" for c in runs),
                    "yes" if same else "NO",
                ]
            )
    print("### The prompt hook's system calls (strace -f -c), a session's first prompt\n")
    print(
        table(
            ["notes", "checkout", "pread64, each prompt", "all calls, each prompt", "same output"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
