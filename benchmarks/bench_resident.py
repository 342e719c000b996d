"""Cold ``mdmem recall`` with the semantic extra: the resident embedder against a model load.

A generated store (``bench_scale.py``'s, ``--notes`` notes, cached under
``--cache``), every note embedded first. Then, interleaved round by round
(medians; ratios paired per round):

- the floor, ``python -c pass``;
- ``mdmem recall QUERY --lexical``: words only, the bar (≤ 3× it, issue 23 item 5);
- ``mdmem recall QUERY`` with ``MDMEM_EMBEDDER=in-process``: the model loaded by
  the command, as every version before the resident embedder did;
- ``mdmem recall QUERY`` with the resident embedder running;
- ``mdmem recall QUERY`` right after the resident embedder was killed (its dead
  socket file left behind): the command starts a new one and waits for it
  (the first query of a day, ``--first-rounds`` rounds);
- ``mdmem hook user-prompt-submit`` (the query as the prompt, a new session each
  time) with ``MDMEM_SEMANTIC=off`` and with the resident embedder running (it
  then matches by meaning too);
- with ``--before <checkout>/src``, that checkout's ``mdmem recall QUERY`` and
  ``--lexical`` in the same rounds.

Every command is ``python -m mdmem`` in a fresh process, in the workspace.

    python benchmarks/bench_resident.py                       # 1,000 notes, 9 rounds
    python benchmarks/bench_resident.py --before /tmp/main/src --rounds 9
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

from _util import Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, paired_ratios, table
from bench_scale import generate

QUERY = "why does the cache index time out in review?"


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--notes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--first-rounds", type=int, default=3)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench"))
    parser.add_argument("--before", help="another checkout's src folder, run in the same rounds")
    args = parser.parse_args()

    ws = generate(args.cache, args.notes)
    tmp = tempfile.mkdtemp(prefix="mdmem-resident-")
    env = dict(os.environ)
    for name in list(env):
        if name.startswith(("MDMEM_", "PYTHONPATH")):
            del env[name]
    env.update(
        MDMEM_STATE_DIR=os.path.join(tmp, "state"),
        MDMEM_USER_DIR=os.path.join(tmp, "user"),
        HOME=os.path.join(tmp, "home"),
        MDMEM_EMBED="off",  # every note has its vector: no background embedder mid-run
    )
    os.makedirs(env["HOME"])
    os.environ.update(env)
    for name in list(os.environ):
        if name.startswith("MDMEM_") and name not in env:
            del os.environ[name]

    import compileall

    import mdmem
    from mdmem import Level, Store
    from mdmem.recall import embedder, resident

    # Bytecode as an installed package has it, for both checkouts (PYTHONDONTWRITEBYTECODE
    # would make every process compile what changed since the last install).
    compileall.compile_dir(os.path.dirname(mdmem.__file__), quiet=1)
    if args.before:
        compileall.compile_dir(os.path.join(args.before, "mdmem"), quiet=1)

    project = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
    print(f"embedding {args.notes} notes ...", file=sys.stderr, flush=True)
    report = embedder.embed(project)
    assert report.with_vectors == report.notes, report

    py = sys.executable
    mdmem = [py, "-m", "mdmem", "recall", QUERY]
    hook = [py, "-m", "mdmem", "hook", "user-prompt-submit"]

    sessions = iter(range(10**9))

    def run(argv: list[str], extra: dict[str, str] | None = None) -> float:
        stdin = None
        if argv[3:5] == ["hook", "user-prompt-submit"]:  # a new session each time: nothing seen
            payload = {"session_id": f"bench-{next(sessions)}", "cwd": ws, "prompt": QUERY}
            stdin = json.dumps(payload).encode()
        started = time.perf_counter()
        proc = subprocess.run(
            argv, cwd=ws, env={**env, **(extra or {})}, capture_output=True, input=stdin
        )
        took = time.perf_counter() - started
        if proc.returncode != 0:
            raise SystemExit(f"{argv[3:]} failed: {proc.stderr.decode()[-400:]}")
        return took

    def server() -> int | None:
        """The resident embedder's pid (its socket's peer credentials), or None."""
        path = resident.socket_path(embedder_model())
        with socket.socket(socket.AF_UNIX) as s:
            try:
                fd = os.open(resident.folder(), os.O_RDONLY | os.O_DIRECTORY)
            except OSError:
                return None
            try:
                s.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
            except OSError:
                return None
            finally:
                os.close(fd)
            pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        return int(pid)

    def resident_warm() -> float:
        if not resident.ready(embedder_model(), timeout=60):
            run(mdmem)  # starts it
        return run(mdmem)

    def hook_warm() -> float:
        if not resident.ready(embedder_model(), timeout=60):
            run(mdmem)  # starts it
        return run(hook)

    def resident_first() -> float:
        pid = server()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)  # its socket file stays: a dead server's
            while os.path.exists(f"/proc/{pid}") and not _zombie(pid):
                time.sleep(0.01)
        return run(mdmem)

    cases = {
        "python -c pass": lambda: run([py, "-c", "pass"]),
        "recall --lexical": lambda: run([*mdmem, "--lexical"]),
        "recall, model loaded in-process": lambda: run(mdmem, {"MDMEM_EMBEDDER": "in-process"}),
        "recall, resident embedder running": resident_warm,
        "recall, resident embedder started by it": resident_first,
        "prompt hook, MDMEM_SEMANTIC=off": lambda: run(hook, {"MDMEM_SEMANTIC": "off"}),
        "prompt hook, resident embedder running": hook_warm,
    }
    if args.before:
        old = {"PYTHONPATH": os.path.abspath(args.before)}
        cases["before: recall --lexical"] = lambda: run([*mdmem, "--lexical"], old)
        cases["before: recall (semantic)"] = lambda: run(mdmem, old)
    samples = interleaved(
        cases,
        args.rounds,
        label="resident",
        rounds={"recall, resident embedder started by it": args.first_rounds},
    )
    lexical = samples["recall --lexical"]
    floor = samples["python -c pass"]
    rows = []
    for name, times in samples.items():
        rows.append(
            [
                name,
                str(len(times)),
                fmt_ms(Summary.of(times).median),
                fmt_ratio(paired_ratios(times, floor).median),
                fmt_ratio(paired_ratios(times, lexical).median),
            ]
        )
    print(f"\n{args.notes} notes, every one embedded; query {QUERY!r}\n")
    print(
        table(
            ["command", "runs", "median (ms)", "÷ python -c pass", "÷ recall --lexical"],
            rows,
            right=(1, 2, 3, 4),
        )
    )
    print()
    print(table(["machine", ""], machine_rows(tmp)))
    pid = server()
    if pid is not None:
        os.kill(pid, signal.SIGTERM)


def embedder_model() -> str:
    from mdmem.recall.semantic import MODEL_ID

    return MODEL_ID


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


if __name__ == "__main__":
    main()
