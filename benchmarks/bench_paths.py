"""Benchmark the paths a user walks, each against its floor, at 1,000 and 10,000 notes.

The project store holds N notes and the user store N/10 (both generated once,
as ``bench_scale.py`` makes them, and cached under ``--cache``). Measured at
each size, interleaved round by round with the floors (``python -c pass``; one
durable write: a temporary file, ``fsync``, ``rename``; a raw FTS5 query of
the recall index in a fresh process):

- ``mdmem hook user-prompt-submit`` as a process, with a hook's JSON on stdin, at a
  session's first prompt as Claude Code runs it (``hook session-start`` first, not
  timed; the command its settings name, as each checkout's ``mdmem install claude-code``
  writes it, ``mdmem._spawn.hook_command``, less its ``-E``), and
  also as ``python -m mdmem``, without a SessionStart record, and after a turn wrote a
  note (a create with the worker's provenance line and its ledger line, untimed, 0.3 s
  before; with ``--before``, that checkout's hook too); every other case sees a
  settled store (each write is followed, untimed, by a ``search`` and an ``index``);
- ``mdmem index``, ``search``, ``recall``, ``doctor``, ``stats`` and ``mdmem add``
  as processes;
- in process: a single-op create and delete, and a Manager turn that writes 3
  creates (one in the user store, one a ``correction_feedback``) after a user's
  correction, with a zero-latency provider;
- an in-place, same-size hand edit of a note, then the next ``mdmem search``:
  its time, and whether it found the edited word;
- fsync + fdatasync calls, as ``strace -f -c -e trace=fsync,fdatasync`` counts
  them (real system calls: SQLite's are included), of each read command right
  after a write through mdmem, and again once settled.

    python benchmarks/bench_paths.py                 # 1,000 and 10,000 notes
    python benchmarks/bench_paths.py --quick         # fewer rounds
    python benchmarks/bench_paths.py --large         # 100,000 notes (long)
    python benchmarks/bench_paths.py --sizes 1000,10000,100000 --repeat 7   # all three
    python benchmarks/bench_paths.py --sizes 100000 --hooks-only --repeat 7  # the hook alone
    python benchmarks/bench_paths.py --hooks-only --before <main>/src   # and main's, interleaved

Each command's peak resident set (``wait4``'s ``ru_maxrss``) is reported too.

Run it against another checkout with ``PYTHONPATH=<checkout>/src`` and its own
``--label`` for a before/after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from _util import Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table
from bench_scale import generate

from mdmem import Manager, Store
from mdmem._kinds import Level
from mdmem.store import ledger

PROMPTS = [
    "how do we deploy the release branch?",
    "why does the cache index time out in review?",
    "what is the retry budget of the queue worker?",
    "which lint and format config does the server use?",
    "构建 缓存 的 配置 在哪里?",
]

#: A turn in which the user corrects what the assistant said.
TURN = [
    {"role": "user", "content": "How long is the deploy cache kept?"},
    {
        "role": "assistant",
        "content": "The deploy cache is kept for a week and the release branch clears it.",
    },
    {
        "role": "user",
        "content": "No, it's a day, not a week: the worker clears the deploy cache nightly.",
    },
]


#: The note a turn's worker writes before the next prompt (``hook-after-write``).
TURN_NOTE = {
    "action": "create",
    "level": "project",
    "type": "project_knowledge",
    "content": "The worker clears the deploy cache nightly; the release branch keeps it.",
}

#: The provenance line the worker writes into every note (manager/provenance.py).
TURN_SOURCE = (
    "turn 20261201093300123456-1a2b3c4d · anthropic/claude-haiku-4-5 · 2026-12-01T09:33Z"
    " · git 2d611e2 · session 3f2a9c1e-5b7d-4e8f-9a0b-1c2d3e4f5a6b"
)

#: A note with words of its own, planted in each generated store (whose notes share one
#: vocabulary, so the other prompts recall nothing), and a prompt that recalls it: the
#: hook's path that makes and renders hits.
PLANTED = {
    "action": "create",
    "level": "project",
    "type": "project_knowledge",
    "filename": "project_knowledge_bench-paths-janitor.md",
    "title": "Janitor vacuums the broker queues",
    "content": "The janitor job vacuums the broker's queues nightly at 02:00 (make vacuum).",
}
RECALL_PROMPT = "when does the janitor vacuum the broker queues?"

#: The same turn without a correction: the user only adds a fact.
PLAIN_TURN = [
    *TURN[:2],
    {"role": "user", "content": "Good. And the worker clears the deploy cache nightly."},
]


class Correcting:
    """A provider that answers at once with 3 creates: a project note, a user note and
    a correction_feedback note (``correction=False``: a project_knowledge one instead)."""

    name = "zero"

    def __init__(self, correction: bool = True) -> None:
        self.n = 0
        self.correction = correction

    def extract(self, request: object) -> str:
        self.n += 1
        tag = f"{os.getpid()}-{self.n}"
        ops = [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Deploy cache lifetime {tag}",
                "content": "The worker clears the deploy cache nightly.",
            },
            {
                "action": "create",
                "level": "user",
                "type": "user_preference",
                "title": f"Answers about caches {tag}",
                "content": "Check the worker's schedule before saying how long a cache lives.",
            },
            {
                "action": "create",
                "level": "project",
                "type": "correction_feedback" if self.correction else "project_knowledge",
                "title": f"Deploy cache is a day {tag}",
                "content": "The deploy cache is kept a day, not a week.",
            },
        ]
        return json.dumps(ops)


_LAUNCHER = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    start = time.perf_counter()
    proc = subprocess.Popen(job["argv"], env=job["env"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    proc.stdin.write(job.get("stdin", "").encode())  # small: never fills the pipe
    proc.stdin.close()
    out = proc.stdout.read()
    # wait4, not wait: the child's own peak resident set (ru_maxrss, KiB on Linux).
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    cpu = usage.ru_utime + usage.ru_stime
    print(json.dumps([took, code, out.decode(errors="replace")[-20000:], usage.ru_maxrss, cpu]),
          flush=True)
"""


class Launcher:
    """Starts the measured processes from a small process of its own (not forked from
    this one, which holds stores in memory)."""

    def __init__(self) -> None:
        #: The peak resident set (KiB) of each command's processes, by the name given to run().
        self.peaks: dict[str, list[int]] = {}
        #: The CPU time (user + system, seconds) of each, likewise: on a loaded machine it
        #: moves less than the wall time, which waits for the other processes' turns.
        self.cpu: dict[str, list[float]] = {}
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(
        self,
        argv: list[str],
        env: dict[str, str],
        stdin: str = "",
        check: bool = True,
        name: str | None = None,
    ) -> tuple[float, str]:
        """Run a process to its end: (seconds, its output); its peak memory goes to
        ``peaks[name]``."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"argv": argv, "env": env, "stdin": stdin}) + "\n")
        self._proc.stdin.flush()
        took, code, out, peak, cpu = json.loads(self._proc.stdout.readline())
        if check and code != 0:
            raise RuntimeError(f"{argv} failed with {code}")
        if name is not None:
            self.peaks.setdefault(name, []).append(int(peak))
            self.cpu.setdefault(name, []).append(float(cpu))
        return float(took), str(out)


def durable_write(directory: str, data: bytes) -> float:
    """The floor of a write: a temporary file, fsync, rename (and fsync of the directory)."""
    path = os.path.join(directory, "floor.md")
    start = time.perf_counter()
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start


_FTS = (
    "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]);"
    ' db.execute("SELECT rowid FROM fts WHERE fts MATCH ? LIMIT 8", (sys.argv[2],)).fetchall()'
)


def syncs(argv: list[str], env: dict[str, str], stdin: str = "") -> int:
    """fsync + fdatasync calls of a process and its children, as strace counts them."""
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as out:
        subprocess.run(
            ["strace", "-f", "-c", "-e", "trace=fsync,fdatasync", "-o", out.name, *argv],
            env=env,
            input=stdin.encode(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            check=True,
        )
        total = 0
        for line in out.read().splitlines():
            cells = line.split()
            if cells and cells[-1] in ("fsync", "fdatasync"):
                total += int(cells[3])
        return total


def installed_hook(env: dict[str, str]) -> list[str]:
    """The prompt hook's command as the checkout on ``env``'s PYTHONPATH installs it.

    What ``mdmem install claude-code`` writes (``mdmem._spawn.hook_command``), without
    its ``-E``, so that PYTHONPATH still picks the checkout.
    """
    import shlex

    done = subprocess.run(
        [sys.executable, "-c", "from mdmem._spawn import hook_command; print(hook_command())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return [word for word in shlex.split(done.stdout.strip()) if word != "-E"]


def bench_size(size: int, args: argparse.Namespace, env: dict[str, str], run: Launcher) -> dict:
    run.peaks.clear()
    run.cpu = {}  # a new one: the last size's stays in its results
    ws = generate(args.cache, size)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    user = os.path.join(
        generate(os.path.join(args.cache, "user"), max(size // 10, 1)), ".PseudoClaude", "memory"
    )
    env = {**env, "MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"}
    os.environ.update({"MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"})
    store = Store(root, Level.PROJECT)
    ustore = Store(user, Level.USER)
    py = sys.executable
    mdmem = [py, "-m", "mdmem"]
    if not os.path.exists(os.path.join(root, PLANTED["filename"])):
        store.apply([PLANTED])  # removed at the end
    print(f"  [{size}] settling", file=sys.stderr, flush=True)
    for _ in range(2):
        run.run([*mdmem, "search", "deploy cache"], env)
    time.sleep(1.1)
    run.run([*mdmem, "search", "deploy cache"], env)
    from mdmem.recall.fts import Index

    floor_dir = tempfile.mkdtemp(dir=os.path.dirname(root))
    # The FTS5 floor queries a copy of the recall index: closing the last connection to
    # the index itself checkpoints its WAL and deletes it, which the hook run next (the
    # `hook` case, every round) paid for by making it again.
    import sqlite3

    fts_path = os.path.join(floor_dir, "recall-floor.sqlite")
    source, copy = sqlite3.connect(Index(store).path), sqlite3.connect(fts_path)
    with contextlib.closing(source), contextlib.closing(copy):
        source.backup(copy)
    data = b"x" * 1200
    rounds = {"pass": 0}
    # Whether each prompt meant to recall the planted note did (its hits were made).
    recalled: dict[str, list[bool]] = {"hook-recall": [], "hook-recall-before": []}
    hook_json = json.dumps(
        {
            "session_id": "bench-paths",
            "transcript_path": os.path.join(ws, "transcript.jsonl"),
            "cwd": ws,
            "permission_mode": "default",
            "hook_event_name": "UserPromptSubmit",
            "prompt": PROMPTS[0],
        }
    )

    def proc(argv: list[str], stdin: str = "", name: str | None = None) -> float:
        # doctor exits 1 when it reports a problem (the generated notes are old: stale).
        label = name or (argv[argv.index("mdmem") + 1] if "mdmem" in argv else None)
        return run.run(argv, env, stdin, check=argv[-1] != "doctor", name=label)[0]

    def prompt() -> str:
        rounds["pass"] += 1
        return PROMPTS[rounds["pass"] % len(PROMPTS)]

    # The hook as Claude Code runs it: the command its settings name, as each checkout's
    # `mdmem install claude-code` writes it (mdmem._spawn.hook_command).
    installed = installed_hook(env)

    # --before: that checkout's hook in the same rounds, with a state folder of its own.
    before = args.before_env
    before_installed = installed
    if before is not None:
        before = {**before, "MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"}
        before_installed = installed_hook(before)

    def settle() -> None:
        # After a write (untimed): the next reader catches up with it (the search index by
        # the change log, the block cache), so only a case meant to see a write pays for one
        # whatever the order of a round (before, the case after `mdmem add` paid for it).
        for where in (env, before) if before is not None else (env,):
            run.run([*mdmem, "search", "deploy cache"], where)
            run.run([*mdmem, "index"], where)

    def hook(
        started: bool = True,
        command: list[str] = installed,
        wrote: bool = False,
        other: bool = False,
        recall: bool = False,
    ) -> float:
        payload = json.loads(hook_json)
        payload["prompt"] = RECALL_PROMPT if recall else prompt()
        payload["session_id"] = f"bench-{os.getpid()}-{size}-{rounds['pass']}"
        if started:
            # The first prompt of a session as Claude Code runs it: SessionStart first
            # (untimed), which records what its block listed.
            start = {**payload, "hook_event_name": "SessionStart", "source": "startup"}
            del start["prompt"]
            run.run([*mdmem, "hook", "session-start"], before if other else env, json.dumps(start))
        written = None
        if wrote:
            # A turn's worker wrote a note (and the ledger line it records) since the last
            # prompt: what the next prompt finds after most turns. As the worker writes it,
            # with its provenance line. A moment later, as a person types (a process
            # started right after an fsync waits for the journal).
            done = store.apply(
                [{**TURN_NOTE, "title": f"Bench turn note {rounds['pass']}"}],
                source="worker",
                provenance=TURN_SOURCE,
            )
            written = done.applied[0].filename
            ledger.record(root, "write", n=[written], via="worker")
            time.sleep(0.3)
        if other:
            assert before is not None
            name = "hook-before" if started else "hook-unstarted-before"
            name = "hook-recall-before" if recall else name
            name = "hook-after-write-before" if wrote else name
            argv = [*(before_installed if command is installed else command), "hook"]
            argv.append("user-prompt-submit")
            took, out = run.run(argv, before, json.dumps(payload), name=name)
            if recall:
                recalled[name].append(PLANTED["filename"] in out)
            if written is not None:
                store.apply([{"action": "delete", "level": "project", "filename": written}])
                settle()
            return took
        argv = [*command, "hook", "user-prompt-submit"]
        name = ("hook" if command is installed else "hook-m") if started else "hook-unstarted"
        name = "hook-after-write" if wrote else "hook-recall" if recall else name
        took, out = run.run(argv, env, json.dumps(payload), name=name)
        if recall:
            recalled[name].append(PLANTED["filename"] in out)
        if written is not None:
            store.apply([{"action": "delete", "level": "project", "filename": written}])
            settle()
        return took

    # `mdmem add` as a person types it: the console script pip installs beside this
    # interpreter (it imports `re` and mdmem.__main__; `python -m` also runs runpy).
    script = shutil.which("mdmem", path=os.path.dirname(sys.executable))

    def add(command: list[str] | None = None, name: str = "add") -> float:
        argv = [*(command or mdmem), "add", "--title", f"Added {rounds['pass']}"]
        took = proc([*argv, "Added by the bench."], name=name)
        rounds["pass"] += 1
        settle()
        return took

    def op(kind: str) -> float:
        name = "project_knowledge_bench-paths-op.md"
        create = {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "filename": name,
            "title": "Bench paths op",
            "content": "One op.",
        }
        if kind == "delete":
            store.apply([create])
            start = time.perf_counter()
            store.apply([{"action": "delete", "level": "project", "filename": name}])
            return time.perf_counter() - start
        start = time.perf_counter()
        store.apply([create])
        took = time.perf_counter() - start
        store.apply([{"action": "delete", "level": "project", "filename": name}])
        return took

    print(f"  [{size}] processes", file=sys.stderr, flush=True)
    repeat = args.repeat
    # In-process durable writes in a group of their own: a process started right after an
    # fsync waits for the file system's journal (measured: +47 ms for the prompt hook, whose
    # own small writes wait for the commit), which would charge whichever case came next.
    writes = (
        {}
        if args.edits_only or args.hooks_only
        else interleaved(
            {
                "durable": lambda: durable_write(floor_dir, data),
                "create": lambda: op("create"),
                "delete": lambda: op("delete"),
            },
            repeat,
            label=f"{size} writes",
        )
    )
    settle()  # after the writes above
    hooks_only = {"pass", "fts", "hook", "hook-m", "hook-after-write", "hook-unstarted"}
    hooks_only.add("hook-recall")
    if before is not None:
        settle()
        hooks_only |= {"hook-before", "hook-unstarted-before", "hook-recall-before"}
        hooks_only.add("hook-after-write-before")
    samples = (
        {}
        if args.edits_only
        else interleaved(
            {
                name: case
                for name, case in {
                    "pass": lambda: proc([py, "-c", "pass"], name="pass"),
                    "fts": lambda: proc([py, "-c", _FTS, fts_path, "deploy OR cache"], name="fts"),
                    "hook": hook,
                    "hook-m": lambda: hook(command=mdmem),
                    "hook-after-write": lambda: hook(wrote=True),
                    "hook-unstarted": lambda: hook(started=False),
                    "hook-recall": lambda: hook(recall=True),
                    **(
                        {
                            "hook-before": lambda: hook(other=True),
                            "hook-unstarted-before": lambda: hook(started=False, other=True),
                            "hook-recall-before": lambda: hook(other=True, recall=True),
                            "hook-after-write-before": lambda: hook(wrote=True, other=True),
                        }
                        if before is not None
                        else {}
                    ),
                    "index": lambda: proc([*mdmem, "index"]),
                    "search": lambda: proc([*mdmem, "search", prompt()]),
                    "recall": lambda: proc([*mdmem, "recall", prompt()]),
                    "add": lambda: add([script] if script else None),
                    "add-m": lambda: add(name="add-m"),
                    "stats": lambda: proc([*mdmem, "stats"]),
                    "doctor": lambda: proc([*mdmem, "doctor"]),
                }.items()
                if name in hooks_only or not args.hooks_only
            },
            repeat,
            rounds={"doctor": max(2, repeat // 3), "stats": max(2, repeat // 3)},
            label=f"{size} processes",
        )
    )
    # Remove what `mdmem add` wrote, and the planted note.
    added = [n for n in os.listdir(root) if n.startswith("project_knowledge_added-")]
    added.append(PLANTED["filename"])
    if added:
        store.apply([{"action": "delete", "level": "project", "filename": n} for n in added])

    if args.hooks_only:
        shutil.rmtree(floor_dir, ignore_errors=True)
        return {
            **samples,
            "peaks": {k: max(v) for k, v in run.peaks.items()},
            "cpu": run.cpu,
            "recalled": recalled,
        }
    print(f"  [{size}] turns", file=sys.stderr, flush=True)
    turn_times: dict[str, list[float]] = {"turn": [], "turn-plain": []}
    plain = Manager(ws, user_dir=user, provider=Correcting(correction=False), resume=False)
    with Manager(ws, user_dir=user, provider=Correcting(), resume=False) as mgr, plain:

        def turn(manager: Manager = mgr, messages: list[dict[str, str]] = TURN) -> float:
            start = time.perf_counter()
            result = manager.update_async(messages).result()
            took = time.perf_counter() - start
            for st, applied in ((store, result.project.applied), (ustore, result.user.applied)):
                if applied:
                    st.apply(
                        [
                            {"action": "delete", "level": st.level.value, "filename": a.filename}
                            for a in applied
                        ]
                    )
            return took

        if not args.edits_only:
            turn()  # untimed: builds what the first turn of a session builds
            turn(plain, PLAIN_TURN)
            turn_times = interleaved(
                {"turn": turn, "turn-plain": lambda: turn(plain, PLAIN_TURN)},
                max(3, repeat // 2),
            )

    # An in-place, same-size hand edit, then the next search: its time and whether it saw it.
    print(f"  [{size}] hand edits", file=sys.stderr, flush=True)
    names = sorted(n for n in os.listdir(root) if n.startswith("project_knowledge_n"))
    seen = 0
    edit_times: list[float] = []
    edits = max(3, repeat // 3)
    for k in range(edits):
        path = os.path.join(root, names[k * 7])
        with open(path, encoding="utf-8") as f:
            text = f.read()
        word = f"zq{k:03d}xw"  # as long as "review"... kept to the same byte size below
        body_at = text.index("\n---\n") + 5 if "\n---\n" in text else len(text) // 2
        new = text[:body_at] + word + " " + text[body_at + len(word) + 1 :]
        assert len(new.encode()) == len(text.encode())
        with open(path, "r+", encoding="utf-8") as f:  # in place: same inode, same size
            f.write(new)
        took, out = run.run([*mdmem, "search", word, "--json"], env, name="search-after-edit")
        edit_times.append(took)
        seen += names[k * 7] in out
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)

    counts: dict[str, tuple[int, int]] = {}
    if shutil.which("strace") and not args.edits_only:
        print(f"  [{size}] syscalls", file=sys.stderr, flush=True)
        reads = {
            "index": ([*mdmem, "index"], ""),
            "search": ([*mdmem, "search", "deploy cache"], ""),
            "recall": ([*mdmem, "recall", "deploy cache"], ""),
            "hook user-prompt-submit": ([*mdmem, "hook", "user-prompt-submit"], hook_json),
            "hook session-start": ([*mdmem, "hook", "session-start"], ""),
        }
        for name, (argv, stdin) in reads.items():
            op("create")  # a write through mdmem, then the read
            after = syncs(argv, env, stdin)
            settled = syncs(argv, env, stdin)
            counts[name] = (after, settled)
    shutil.rmtree(floor_dir, ignore_errors=True)
    return {
        **writes,
        **samples,
        "peaks": {k: max(v) for k, v in run.peaks.items()},
        "cpu": run.cpu,
        **turn_times,
        "edit": edit_times,
        "seen": (seen, edits),
        "recalled": recalled,
        "syncs": counts,
    }


def main() -> None:
    # The prompt hook in its own process, as every round before measured it
    # (bench_prompt_server.py times the prompt server).
    os.environ.setdefault("MDMEM_PROMPT_SERVER", "off")
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="1000,10000", help="comma-separated note counts")
    parser.add_argument("--large", action="store_true", help="100,000 notes, fewer rounds")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per case")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs (shared with bench_scale.py)",
    )
    parser.add_argument("--label", default="current", help="names this code version's state")
    parser.add_argument(
        "--edits-only", action="store_true", help="only whether in-place hand edits are seen"
    )
    parser.add_argument(
        "--hooks-only", action="store_true", help="only the prompt hook's cases and their floors"
    )
    parser.add_argument(
        "--before", help="another checkout's src folder: its prompt hook in the same rounds"
    )
    args = parser.parse_args()
    if args.large:
        args.sizes = "100000"
    args.repeat = args.repeat or (3 if args.large else 5 if args.quick else 11)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    os.makedirs(args.cache, exist_ok=True)
    os.environ["MDMEM_STATE_DIR"] = os.path.join(args.cache, f"state-paths-{args.label}")
    import compileall

    import mdmem

    env = dict(os.environ)
    # The folder of this checkout's mdmem alone, as --before's is its own: the whole of
    # this process's path (the benchmarks folder first, the standard library twice) made
    # every top-level import of the measured processes look in five more folders.
    env["PYTHONPATH"] = os.path.dirname(os.path.dirname(os.path.abspath(mdmem.__file__)))

    compileall.compile_dir(os.path.dirname(mdmem.__file__), quiet=1)
    args.before_env = None
    if args.before:
        compileall.compile_dir(args.before, quiet=1)
        state = os.path.join(args.cache, f"state-paths-{args.label}-before")
        args.before_env = {**env, "PYTHONPATH": args.before, "MDMEM_STATE_DIR": state}
    run = Launcher()
    results = {size: bench_size(size, args, env, run) for size in sizes}

    def med(xs: list[float]) -> float:
        return Summary.of(xs).median

    if args.edits_only:
        for size, r in results.items():
            seen, edits = r["seen"]
            print(f"{size:,} notes: {seen} of {edits} in-place edits found by the next search")
        return
    rows = []
    paths = [
        ("hook user-prompt-submit", "hook", "pass"),
        ("hook user-prompt-submit", "hook", "fts"),
        ("hook user-prompt-submit, as `python -m mdmem`", "hook-m", "pass"),
        ("hook user-prompt-submit, no SessionStart record", "hook-unstarted", "pass"),
        ("hook user-prompt-submit, after a turn wrote a note", "hook-after-write", "pass"),
        ("hook user-prompt-submit, a prompt that recalls a note", "hook-recall", "pass"),
        ("mdmem index", "index", "pass"),
        ("mdmem search", "search", "pass"),
        ("mdmem recall", "recall", "pass"),
        ("mdmem add (the console script)", "add", "pass"),
        ("mdmem add, as `python -m mdmem`", "add-m", "pass"),
        ("mdmem stats", "stats", "pass"),
        ("mdmem doctor", "doctor", "pass"),
        ("single-op create", "create", "durable"),
        ("single-op delete", "delete", "durable"),
        ("turn: 3 creates, a correction, both stores", "turn", "durable"),
        ("the same turn without a correction", "turn-plain", "durable"),
        ("search after an in-place hand edit", "edit", "pass"),
    ]
    floors = {"pass": "`python -c pass`", "fts": "raw FTS5 query", "durable": "one durable write"}
    if args.before:
        at = [p[1] for p in paths].index("hook-m")
        paths[at:at] = [
            ("hook user-prompt-submit, the --before checkout", "hook-before", "pass"),
            ("hook user-prompt-submit, the --before checkout", "hook-before", "fts"),
            ("… no SessionStart record, the --before checkout", "hook-unstarted-before", "pass"),
            ("… a prompt that recalls a note, the --before checkout", "hook-recall-before", "pass"),
            (
                "… after a turn wrote a note, the --before checkout",
                "hook-after-write-before",
                "pass",
            ),
        ]
    if args.hooks_only:
        paths = [p for p in paths if p[1].startswith("hook")]
    for label, key, floor in paths:
        row = [label, floors[floor]]
        for size in sizes:
            r = results[size]
            t, f = med(r[key]), med(r[floor])
            row.append(f"{fmt_ms(t)} ms ({fmt_ratio(t / f)})")
        rows.append(row)
    rows.append(
        [
            "prompts that recalled the planted note",
            "every one",
            *[
                f"{sum(results[s]['recalled']['hook-recall'])} of "
                f"{len(results[s]['recalled']['hook-recall'])}"
                for s in sizes
            ],
        ]
    )
    if not args.hooks_only:
        rows.append(
            [
                "in-place hand edit found by the next search",
                "every one",
                *[f"{results[s]['seen'][0]} of {results[s]['seen'][1]}" for s in sizes],
            ]
        )
    for name in ("pass", "fts") if args.hooks_only else ("pass", "fts", "durable"):
        rows.append(
            [f"floor: {floors[name]}", "", *[f"{fmt_ms(med(results[s][name]))} ms" for s in sizes]]
        )
    print("### The paths a user walks (median, and its ratio to the floor)\n")
    print(table(["path", "floor", *[f"{s:,} notes" for s in sizes]], rows))
    sync_rows = []
    for name in results[sizes[0]].get("syncs", {}):
        sync_rows.append([name, *["{} / {}".format(*results[s]["syncs"][name]) for s in sizes]])
    if sync_rows:
        print("\n### fsync + fdatasync per read (strace -f -c): right after a write / settled\n")
        print(table(["read", *[f"{s:,} notes" for s in sizes]], sync_rows))
    commands = sorted({k for s in sizes for k in results[s]["peaks"]})
    peak_rows = [
        [name, *[f"{results[s]['peaks'].get(name, 0) / 1024:.1f}" for s in sizes]]
        for name in commands
    ]
    cpu_rows = []
    for label, key, floor in paths:
        if floor != "pass" or not all(key in results[s]["cpu"] for s in sizes):
            continue
        row = [label]
        for size in sizes:
            cpu = results[size]["cpu"]
            t, f = med(cpu[key]), med(cpu["pass"])
            row.append(f"{fmt_ms(t)} ms ({fmt_ratio(t / f)})")
        cpu_rows.append(row)
    for name in ("pass", "fts"):
        floor_cpu = [f"{fmt_ms(med(results[s]['cpu'][name]))} ms" for s in sizes]
        cpu_rows.append([f"floor: {floors[name]}", *floor_cpu])
    print("\n### CPU time (user + system) of each process, median, and its ratio to the floor's\n")
    print(table(["path", *[f"{s:,} notes" for s in sizes]], cpu_rows))
    print("\n### Peak memory of each command's process (MiB, ru_maxrss, the largest run)\n")
    print(table(["command", *[f"{s:,} notes" for s in sizes]], peak_rows))
    print("\n### Machine\n")
    print(table(["", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
