"""The prompt hook answered in its own process and through the prompt server, with the floors.

    python benchmarks/bench_prompt_server.py --sizes 1000,10000,100000 --rounds 30 \
        --cache <cache> --label r12

Uses the stores ``bench_paths.py`` generated (project store N, user store N/10, with its
planted note) and a state folder of its own (``state-server-L``; the first run at a size
builds the search index there). Every round runs, in an order that rotates: ``python -c
pass``; a raw FTS5 query of a copy of the index in a fresh process; the hook as ``mdmem
install claude-code`` writes it (without ``-E``, so that ``PYTHONPATH`` picks this
checkout) with ``MDMEM_PROMPT_SERVER=off``; the same hook with the server on (started and
warmed before the rounds). Each hook is a new session; the prompts alternate between
ones that recall nothing and the one that recalls the planted note. It prints medians,
the ratios, whether both ways printed the same bytes for every prompt, and the server's
peak memory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time

from bench_paths import _FTS, PLANTED, PROMPTS, RECALL_PROMPT, installed_hook
from bench_scale import generate

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def _server_pid(state: str) -> int | None:
    folder = os.path.join(state, "prompt")
    for name in os.listdir(folder) if os.path.isdir(folder) else []:
        if name.startswith("prompt-v") and name.endswith(".lock"):
            with open(os.path.join(folder, name)) as f:
                text = f.read().strip()
            try:  # the lock's pid, if that process is still a prompt server (not a reused pid)
                with open(f"/proc/{text}/cmdline", "rb") as f:
                    if text.isdigit() and b"prompt_server_child" in f.read():
                        return int(text)
            except OSError:
                pass
    return None


def _peak_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def bench(size: int, args: argparse.Namespace) -> dict[str, object]:
    ws = generate(args.cache, size)
    user = os.path.join(
        generate(os.path.join(args.cache, "user"), max(size // 10, 1)), ".PseudoClaude", "memory"
    )
    state = os.path.join(args.cache, f"state-server-{args.label}")
    base = dict(
        os.environ,
        PYTHONPATH=HERE,
        MDMEM_WORKSPACE=ws,
        MDMEM_USER_DIR=user,
        MDMEM_SEMANTIC="off",
        MDMEM_STATE_DIR=state,
        MDMEM_PROMPT_SERVER_IDLE="600",
    )
    sys.path.insert(0, HERE)
    os.environ.update(MDMEM_STATE_DIR=state, MDMEM_USER_DIR=user)
    from mdmem import Level, Store
    from mdmem.recall.fts import Index

    store = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
    if not store.exists(PLANTED["filename"]):
        store.apply([PLANTED])
    hook = [*installed_hook(base), "hook", "user-prompt-submit"]
    on, off = dict(base, MDMEM_PROMPT_SERVER="on"), dict(base, MDMEM_PROMPT_SERVER="off")

    def run(argv: list[str], env: dict[str, str], stdin: str = "") -> tuple[float, bytes]:
        start = time.perf_counter()
        done = subprocess.run(argv, input=stdin.encode(), env=env, capture_output=True, check=True)
        return time.perf_counter() - start, done.stdout

    def payload(r: int, name: str, prompt: str) -> str:
        return json.dumps(
            {
                "session_id": f"srv-{r}-{name}-{time.time_ns()}",
                "cwd": ws,
                "prompt": prompt,
                "hook_event_name": "UserPromptSubmit",
                "transcript_path": os.path.join(ws, "t.jsonl"),
            }
        )

    print(f"  [{size}] settling, starting the server", file=sys.stderr, flush=True)
    for _ in range(3):
        run(hook, off, payload(0, "settle", PROMPTS[0]))
    old = _server_pid(state)
    if old is not None:
        os.kill(old, signal.SIGTERM)
        time.sleep(0.5)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(state, "prompt", "started"))
    run(hook, on, payload(0, "start", PROMPTS[0]))
    deadline = time.monotonic() + 60
    while _server_pid(state) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = _server_pid(state)
    assert pid is not None, "no prompt server started"
    for _ in range(3):
        run(hook, on, payload(0, "warm", PROMPTS[0]))
    floor_dir = tempfile.mkdtemp()
    fts_path = os.path.join(floor_dir, "recall-floor.sqlite")
    source, copy = sqlite3.connect(Index(store).path), sqlite3.connect(fts_path)
    with contextlib.closing(source), contextlib.closing(copy):
        source.backup(copy)
    names = ["pass", "fts", "off", "server"]
    times: dict[str, dict[str, list[float]]] = {k: {"settled": [], "recall": []} for k in names}
    same = True
    try:
        for r in range(args.rounds):
            kind = "recall" if r % 2 else "settled"
            prompt = RECALL_PROMPT if kind == "recall" else PROMPTS[(r // 2) % 4]
            printed = {}
            for name in names[r % 4 :] + names[: r % 4]:
                if name == "pass":
                    took, _ = run([sys.executable, "-c", "pass"], base)
                elif name == "fts":
                    took, _ = run([sys.executable, "-c", _FTS, fts_path, "deploy OR cache"], base)
                else:
                    env = on if name == "server" else off
                    took, printed[name] = run(hook, env, payload(r, name, prompt))
                times[name][kind].append(took)
            if not os.path.exists(f"/proc/{pid}"):
                raise SystemExit(f"the prompt server {pid} ended in round {r}")
            same = same and printed["off"] == printed["server"]
            if kind == "recall":
                assert b"janitor" in printed["server"], printed["server"]
        peak = _peak_mib(pid)
    finally:
        shutil.rmtree(floor_dir, ignore_errors=True)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    medians = {
        name: {kind: statistics.median(v) * 1000 for kind, v in by.items() if v}
        for name, by in times.items()
    }
    return {"size": size, "medians": medians, "same": same, "peak_mib": peak}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"))
    parser.add_argument("--label", default="default")
    args = parser.parse_args()
    import compileall

    compileall.compile_dir(HERE, quiet=1)  # PYTHONDONTWRITEBYTECODE would recompile per process
    results = [bench(int(s), args) for s in args.sizes.split(",")]
    print(
        "| notes | prompt | `python -c pass` | raw FTS5 query | hook, own process "
        "| hook, prompt server | server / pass | server / FTS5 |"
    )
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for res in results:
        m = res["medians"]
        for kind in ("settled", "recall"):
            p, f, o, s = (m[n][kind] for n in ("pass", "fts", "off", "server"))  # type: ignore[index]
            print(
                f"| {res['size']:,} | {kind} | {p:.1f} ms | {f:.1f} ms | {o:.1f} ms ({o / p:.2f}×) "
                f"| {s:.1f} ms | **{s / p:.2f}×** | {s / f:.2f}× |"
            )
    for res in results:
        print(
            f"{res['size']:,} notes: the same bytes for every prompt: {res['same']}; "
            f"the server's peak memory: {res['peak_mib']:.0f} MiB"
        )


if __name__ == "__main__":
    main()
