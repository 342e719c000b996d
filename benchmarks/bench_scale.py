"""Benchmark how the store scales: every operation at 100 to 100,000 notes, against its floor.

Prints Markdown tables; ``docs/benchmarks.md`` quotes them. The same script
runs against an older checkout (``PYTHONPATH=<checkout>/src``) for before/after.

    python benchmarks/bench_scale.py                          # 100, 1,000, 10,000 notes
    python benchmarks/bench_scale.py --sizes 100000 --quick   # the 100,000 row, fewer rounds
    python benchmarks/bench_scale.py --quick                  # a smoke run

Stores are generated once (realistic notes: 0.5-2 KB, a quarter with Chinese
titles, written an hour in the past) and cached under ``--cache``; each code
version keeps its own derived state there (``--label``). Measured at each size,
interleaved round by round with its floor:

- single-op ``apply``: create, update, delete; floor: one durable note write
  (``mdmem.store.files.atomic_write``), and the fsyncs each operation made;
- a Manager turn with 3 creates and a zero-latency provider (``update_async``
  to its result), with its fsyncs;
- ``mdmem index`` and ``mdmem list`` as processes on a settled store, against
  ``python -c pass``; the settled check in process (``load_index``);
- the first ``mdmem index`` after a clone (no derived state), ``mdmem
  reindex``, a cold ``mdmem search`` that builds the recall index, ``mdmem
  doctor`` and ``mdmem stats``, as processes, against the floor of reading and
  parsing every note in a process; ``mdmem hook session-start`` after a hand
  edit (its block cache cold);
- peak memory (``ru_maxrss``) of each of those processes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

from _util import Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table

from mdmem import Manager, Store
from mdmem._kinds import Level, NoteType
from mdmem.store import files
from mdmem.store.note import Note, render

WORDS = [
    "build",
    "test",
    "deploy",
    "cache",
    "index",
    "schema",
    "migration",
    "token",
    "retry",
    "timeout",
    "queue",
    "worker",
    "config",
    "release",
    "branch",
    "review",
    "lint",
    "format",
    "coverage",
    "fixture",
    "mock",
    "server",
    "client",
    "latency",
    "budget",
    "memory",
    "store",
    "note",
    "prompt",
    "model",
    "provider",
    "batch",
    "journal",
    "lock",
]
CHINESE = (
    "构建测试部署缓存索引迁移重试超时队列配置发布分支审查格式覆盖服务客户延迟预算记忆存储笔记模型"
)
TYPES = list(NoteType)


def make_note(rng: random.Random, i: int, when: object) -> Note:
    """One realistic note: 0.5-2 KB of body, a quarter with a Chinese title."""
    if i % 4 == 0:
        title = "".join(rng.choice(CHINESE) for _ in range(rng.randint(4, 10))) + f" {i}"
    else:
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 6))).capitalize()
        title += f" {i}"
    size = rng.randint(500, 2000)
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    body = " ".join(words)
    note_type = TYPES[i % len(TYPES)]
    slug = f"n{i:06d}-" + "-".join(rng.choice(WORDS) for _ in range(2))
    return Note(
        filename=f"{note_type.value}_{slug}.md",
        type=note_type,
        title=title,
        summary=body[:80].rsplit(" ", 1)[0].capitalize() + ".",
        body=body,
        created=when,  # type: ignore[arg-type]
        updated=when,  # type: ignore[arg-type]
    )


def generate(cache: str, size: int) -> str:
    """The workspace of a store of ``size`` notes (made once, then reused)."""
    from datetime import datetime, timezone

    ws = os.path.join(cache, f"n{size}")
    root = os.path.join(ws, ".PseudoClaude", "memory")
    done = os.path.join(ws, ".generated")
    if os.path.exists(done):
        return ws
    shutil.rmtree(ws, ignore_errors=True)
    os.makedirs(os.path.join(ws, ".git"))
    os.makedirs(root)
    rng = random.Random(size)
    when = datetime(2026, 1, 1, tzinfo=timezone.utc)
    past = time.time() - 3600
    lines = []
    for i in range(size):
        note = make_note(rng, i, when)
        path = os.path.join(root, note.filename)
        files.atomic_write(path, render(note).encode("utf-8"), durable=False)
        os.utime(path, (past, past))
        if i % 10_000 == 0 and i:
            print(f"  generating {size}: {i}", file=sys.stderr, flush=True)
    # MEMORY.md as a clone brings it: committed beside the notes.
    from mdmem.store.note import index_line, parse

    for name in sorted(os.listdir(root)):
        with open(os.path.join(root, name), encoding="utf-8") as f:
            lines.append(index_line(parse(f.read(), name)))
    with open(os.path.join(root, "MEMORY.md"), "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))
    os.utime(os.path.join(root, "MEMORY.md"), (past, past))
    open(done, "w").close()
    return ws


#: A realistic short turn: what the related-notes lookup of the prompt searches with.
TURN = [
    {
        "role": "user",
        "content": "The integration tests need the database: run `docker compose up -d db` "
        "before `make integration`, and remember that money is integer cents.",
    },
    {
        "role": "assistant",
        "content": "Noted: the integration suite needs the db container first; amounts "
        "are stored as integer cents, never floats.",
    },
]


class Zero:
    """A provider that answers at once: three creates (with ``named``, each gives its file
    name, which skips the planner's duplicate search). Records the size of each prompt."""

    name = "zero"

    def __init__(self, named: bool = False) -> None:
        self.n = 0
        self.named = named
        self.last: object = None

    # Measured from the last request after the turns, not inside the timed provider call.
    @property
    def prompt_tokens(self) -> int:
        from mdmem.extract.turn import estimate_tokens

        request = self.last
        return estimate_tokens(getattr(request, "full_system", "") + getattr(request, "prompt", ""))

    @property
    def memory_bytes(self) -> int:
        return len(str(getattr(self.last, "memory", "")).encode("utf-8"))

    @property
    def related(self) -> int:
        return len(str(getattr(self.last, "related", "")).splitlines())

    def extract(self, request: object) -> str:
        self.n += 1
        self.last = request
        ops = []
        for k in range(3):
            op = {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Turn {self.n} fact {k}",
                "content": f"What turn {self.n} taught, number {k}.",
            }
            if self.named:
                op["filename"] = f"project_knowledge_zero-{os.getpid()}-{self.n}-{k}.md"
            ops.append(op)
        return json.dumps(ops)


_LAUNCHER = r"""
import json, os, subprocess, sys, time
for line in sys.stdin:
    job = json.loads(line)
    start = time.perf_counter()
    proc = subprocess.Popen(job["argv"], env=job["env"], stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    took = time.perf_counter() - start
    print(json.dumps([took, usage.ru_maxrss, os.waitstatus_to_exitcode(status)]), flush=True)
"""


class Launcher:
    """Starts the measured processes from a small process of its own.

    A child's ``ru_maxrss`` counts the memory of the process that forked it, so
    children are not forked from this one (which holds a large store in memory).
    """

    def __init__(self) -> None:
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _LAUNCHER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )

    def run(self, argv: list[str], env: dict[str, str]) -> tuple[float, int]:
        """Run a process to its end: (seconds, peak resident memory in KiB)."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps({"argv": argv, "env": env}) + "\n")
        self._proc.stdin.flush()
        took, rss, code = json.loads(self._proc.stdout.readline())
        if code != 0:
            raise RuntimeError(f"{argv} failed with {code}")
        return took, rss


LAUNCHER: Launcher | None = None


def child(argv: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Run a process to its end: (seconds, peak resident memory in KiB)."""
    assert LAUNCHER is not None
    return LAUNCHER.run(argv, env)


class Fsyncs:
    """Counts os.fsync calls while active."""

    def __init__(self) -> None:
        self.count = 0
        self._real = os.fsync

    def __enter__(self) -> Fsyncs:
        def counting(fd: int) -> None:
            self.count += 1
            self._real(fd)

        os.fsync = counting  # type: ignore[assignment]
        return self

    def __exit__(self, *exc: object) -> None:
        os.fsync = self._real  # type: ignore[assignment]


def settle(store: Store) -> None:
    """Read until the derived state is settled (no note as new as its record)."""
    for _ in range(4):
        store.load_index()
        time.sleep(0.02)
    store.load_index()


def bench_size(size: int, args: argparse.Namespace, env: dict[str, str]) -> dict[str, object]:
    ws = generate(args.cache, size)
    root = os.path.join(ws, ".PseudoClaude", "memory")
    user = os.path.join(args.cache, f"user-{args.label}")
    os.environ["MDMEM_USER_DIR"] = user
    # Lexical recall only: the semantic extra's model load is measured in bench_recall.py.
    env = {**env, "MDMEM_USER_DIR": user, "MDMEM_WORKSPACE": ws, "MDMEM_SEMANTIC": "off"}
    store = Store(root, Level.PROJECT)
    print(f"  [{size}] settling", file=sys.stderr, flush=True)
    settle(store)
    repeat = args.repeat
    names = sorted(n for n in os.listdir(root) if n != "MEMORY.md")
    rng = random.Random(1)
    data = render(make_note(rng, 999_999, None)).encode("utf-8")
    fsyncs: dict[str, int] = {}
    counter = [0]

    # The floor's file is written beside the store, not in it: a file created in the
    # store's directory would make the next write list the directory (see name_taken).
    floor_dir = os.path.join(ws, "floor")
    os.makedirs(floor_dir, exist_ok=True)

    def floor() -> float:
        path = os.path.join(floor_dir, "probe.md")
        start = time.perf_counter()
        files.atomic_write(path, data)
        took = time.perf_counter() - start
        os.unlink(path)
        return took

    created: list[str] = []

    def op(kind: str) -> float:
        counter[0] += 1
        if kind == "create":
            ops = [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": f"Bench create {counter[0]} {time.time_ns()}",
                    "content": "A fact worth keeping. " * 30,
                }
            ]
        elif kind == "create-alike":
            # A title of the store's own words: dedupe has many near titles to compare.
            words = " ".join(rng.choice(WORDS) for _ in range(4)).capitalize()
            ops = [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": f"{words} {counter[0]}",
                    "content": f"Alike {time.time_ns()}: nothing the store says yet. " * 10,
                }
            ]
        elif kind == "update":
            ops = [
                {
                    "action": "update",
                    "level": "project",
                    "filename": names[counter[0] % len(names)],
                    "content": f"Updated body {counter[0]}, {time.time_ns()}. " * 30,
                }
            ]
        else:
            if not created:
                op("create")
            ops = [{"action": "delete", "level": "project", "filename": created.pop()}]
        with Fsyncs() as f:
            start = time.perf_counter()
            result = store.apply(ops)
            took = time.perf_counter() - start
        fsyncs[kind] = f.count
        if result.rejected:
            raise RuntimeError(f"{kind} rejected: {result.rejected[0].reason}")
        if kind.startswith("create"):
            created.extend(a.filename for a in result.applied if a.action == "create")
        return took

    print(f"  [{size}] single ops", file=sys.stderr, flush=True)
    samples = interleaved(
        {
            "floor": floor,
            "create": lambda: op("create"),
            "create-alike": lambda: op("create-alike"),
            "update": lambda: op("update"),
            "delete": lambda: op("delete"),
        },
        repeat,
    )
    for name in created:
        store.apply([{"action": "delete", "level": "project", "filename": name}])
    if args.writes_only:
        return {"samples": samples, "fsyncs": fsyncs}

    # A Manager turn: 3 creates, zero-latency provider, update_async to its result.
    print(f"  [{size}] turns", file=sys.stderr, flush=True)

    def turns(provider: Zero) -> tuple[list[float], int]:
        times: list[float] = []
        count = 0
        with Manager(ws, user_dir=user, provider=provider, resume=False) as mgr:
            # Untimed: the first turn builds the search index the related-notes lookup
            # uses (once per store, like the catalog), and the stale-marks cache.
            warm = mgr.update_async(TURN).result()
            store.apply(
                [
                    {"action": "delete", "level": "project", "filename": a.filename}
                    for a in warm.project.applied
                ]
            )
            for _ in range(repeat):
                with Fsyncs() as f:
                    start = time.perf_counter()
                    result = mgr.update_async(TURN).result()
                    times.append(time.perf_counter() - start)
                count = f.count
                store.apply(
                    [
                        {"action": "delete", "level": "project", "filename": a.filename}
                        for a in result.project.applied
                    ]
                )
        return times, count

    zero = Zero()
    turn_times, turn_fsyncs = turns(zero)
    named_times, _ = turns(Zero(named=True))
    prompt_size = (zero.prompt_tokens, zero.memory_bytes, zero.related)
    if args.only_turns:
        return {
            "turn": turn_times,
            "turn_named": named_times,
            "turn_fsyncs": turn_fsyncs,
            "prompt": prompt_size,
        }

    settle(store)
    print(f"  [{size}] processes", file=sys.stderr, flush=True)
    py = sys.executable
    memory: dict[str, int] = {}

    def proc(name: str, argv: list[str]) -> float:
        took, rss = child(argv, env)
        memory[name] = max(memory.get(name, 0), rss)
        return took

    procs = interleaved(
        {
            "pass": lambda: proc("python -c pass", [py, "-c", "pass"]),
            "index": lambda: proc("mdmem index", [py, "-m", "mdmem", "index"]),
            "list": lambda: proc("mdmem list", [py, "-m", "mdmem", "list", "--level", "project"]),
        },
        repeat,
        rounds={"list": max(2, repeat // 3)},
    )
    settled = interleaved({"settled": lambda: _timed(store.load_index)}, repeat)

    # After a clone: the notes and MEMORY.md, no derived state.
    from mdmem.store.paths import state_dir

    def clone_load() -> float:
        shutil.rmtree(state_dir(root), ignore_errors=True)
        # The block cache is kept with the user store: a real clone misses it (its
        # directory is new), so it goes too.
        for name in os.listdir(state_dir(user)) if os.path.isdir(state_dir(user)) else ():
            if name.startswith("block-"):
                os.unlink(os.path.join(state_dir(user), name))
        return proc("first mdmem index after a clone", [py, "-m", "mdmem", "index"])

    def reindex() -> float:
        return proc("mdmem reindex", [py, "-m", "mdmem", "reindex", "--level", "project"])

    def search_cold() -> float:
        # The first search after a clone builds the recall index from every note.
        from mdmem.recall.fts import FILE

        for suffix in ("", "-wal", "-shm", "-journal"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(state_dir(root), FILE + suffix))
        argv = [py, "-m", "mdmem", "search", "cache retry", "--level", "project"]
        return proc("cold mdmem search (recall index built)", argv)

    def parse_floor() -> float:
        # The floor of a first load: read and parse every note, in a process.
        return proc("floor: parse every note", [py, "-c", _PARSE_ALL, root])

    slow_rounds = 1 if size >= 100_000 else max(1, min(3, repeat))
    slow = interleaved(
        {
            "parse": parse_floor,
            "clone": clone_load,
            "reindex": reindex,
            "search": search_cold,
            "doctor": lambda: proc("mdmem doctor", [py, "-m", "mdmem", "doctor"]),
            "stats": lambda: proc("mdmem stats", [py, "-m", "mdmem", "stats"]),
        },
        slow_rounds,
    )
    settle(store)
    # The session-start hook on a store just changed (its block cache is cold).
    hook = interleaved(
        {"hook": lambda: _hook(proc, py, root, names, store)},
        max(2, repeat // 3) if size < 100_000 else 2,
    )
    settle(store)
    return {
        "samples": samples,
        "fsyncs": fsyncs,
        "turn": turn_times,
        "turn_named": named_times,
        "turn_fsyncs": turn_fsyncs,
        "prompt": prompt_size,
        "procs": procs,
        "settled": settled["settled"],
        "slow": slow,
        "hook": hook["hook"],
        "memory": memory,
    }


_PARSE_ALL = """
import os, sys
from mdmem.store.note import index_line, parse
root = sys.argv[1]
for name in os.listdir(root):
    if name.endswith(".md") and name != "MEMORY.md":
        with open(os.path.join(root, name), "rb") as f:
            index_line(parse(f.read().decode("utf-8"), name))
"""


def _hook(proc: object, py: str, root: str, names: list[str], store: Store) -> float:
    # A hand edit of one note: the block must be computed again, over the whole store.
    path = os.path.join(root, names[0])
    with open(path, "a", encoding="utf-8") as f:
        f.write(" ")
    took = proc(
        "mdmem hook session-start (block cache cold)", [py, "-m", "mdmem", "hook", "session-start"]
    )  # type: ignore[operator]
    assert isinstance(took, float)
    return took


def _timed(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--sizes", default="100,1000,10000", help="comma-separated note counts")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--repeat", type=int, default=None, help="rounds per case")
    parser.add_argument(
        "--cache",
        default=os.path.join(tempfile.gettempdir(), "mdmem-bench-scale"),
        help="where generated stores are kept between runs",
    )
    parser.add_argument("--label", default="current", help="names this code version's state")
    parser.add_argument(
        "--writes-only", action="store_true", help="only the single-op writes and their floor"
    )
    parser.add_argument(
        "--only-turns", action="store_true", help="only the Manager turns (and their prompt)"
    )
    args = parser.parse_args()
    args.repeat = args.repeat or (5 if args.quick else 15)
    sizes = [int(s.replace("_", "")) for s in args.sizes.split(",")]
    os.makedirs(args.cache, exist_ok=True)
    state = os.path.join(args.cache, f"state-{args.label}")
    os.environ["MDMEM_STATE_DIR"] = state
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p and os.path.isdir(p))

    # Bytecode as an installed package has it (PYTHONDONTWRITEBYTECODE would make every
    # measured process compile mdmem from source).
    import compileall

    import mdmem

    compileall.compile_dir(os.path.dirname(mdmem.__file__), quiet=1)
    global LAUNCHER
    LAUNCHER = Launcher()
    results = {size: bench_size(size, args, env) for size in sizes}

    def med(xs: list[float]) -> str:
        return fmt_ms(Summary.of(xs).median)

    rows = []
    for size, r in results.items():
        if "prompt" not in r:
            continue  # --writes-only
        tokens, memory_bytes, related = r["prompt"]  # type: ignore[misc]
        rows.append(
            [
                f"{size:,}",
                f"{med(r['turn'])} ({r['turn_fsyncs']})",  # type: ignore[arg-type]
                med(r["turn_named"]),  # type: ignore[arg-type]
                f"{tokens:,}",
                f"{memory_bytes:,}",
                str(related),
            ]
        )
    if rows:
        print("### Manager turns (median ms) and the extraction prompt they send\n")
        print(
            table(
                [
                    "notes",
                    "turn, 3 creates (fsyncs)",
                    "turn, 3 named creates (no dedupe)",
                    "prompt, est. tokens",
                    "memory part, bytes",
                    "related notes",
                ],
                rows,
                right=range(6),  # type: ignore[arg-type]
            )
        )
    if args.only_turns:
        return
    print(
        "\n### Writes (in process, median ms)\n" if rows else "### Writes (in process, median ms)\n"
    )
    rows = []
    for size, r in results.items():
        s = r["samples"]  # type: ignore[index]
        f = r["fsyncs"]  # type: ignore[index]
        floor_ms = Summary.of(s["floor"]).median
        cells = {
            kind: f"{fmt_ms(m)} ({fmt_ratio(m / floor_ms)}, {f.get(kind, 0)})"
            for kind in ("create", "create-alike", "update", "delete")
            for m in [Summary.of(s[kind]).median]
        }

        turn = r.get("turn")  # type: ignore[attr-defined]
        rows.append(
            [
                f"{size:,}",
                med(s["floor"]),
                cells["create"],
                cells["create-alike"],
                cells["update"],
                cells["delete"],
                f"{med(turn)} ({r['turn_fsyncs']})" if turn else "—",  # type: ignore[index]
            ]
        )
    print(
        table(
            [
                "notes",
                "floor: durable note write",
                "create (× floor, fsyncs)",
                "create, a title of the store's words",
                "update",
                "delete",
                "Manager turn, 3 creates (fsyncs)",
            ],
            rows,
            right=range(7),  # type: ignore[arg-type]
        )
    )
    if args.writes_only:
        print(f"\nrounds: {args.repeat}\n")
        print(table(["machine", ""], machine_rows(args.cache)))
        return
    print("\n### Reads (processes on a settled store, median ms)\n")
    rows = []
    for size, r in results.items():
        p = r["procs"]  # type: ignore[index]
        floor = Summary.of(p["pass"]).median
        idx = Summary.of(p["index"]).median
        rows.append(
            [
                f"{size:,}",
                fmt_ms(floor),
                f"{fmt_ms(idx)} ({fmt_ratio(idx / floor)})",
                med(p["list"]),
                med(r["settled"]),  # type: ignore[arg-type]
                med(r["slow"]["clone"]),  # type: ignore[index]
                med(r["slow"]["reindex"]),  # type: ignore[index]
            ]
        )
    print(
        table(
            [
                "notes",
                "`python -c pass`",
                "`mdmem index` (× floor)",
                "`mdmem list`",
                "settled `load_index()` in process",
                "first `mdmem index` after a clone",
                "`mdmem reindex`",
            ],
            rows,
            right=range(7),  # type: ignore[arg-type]
        )
    )
    print("\n### Whole-store commands (processes, median ms)\n")
    rows = []
    for size, r in results.items():
        slow = r["slow"]  # type: ignore[index]
        parse = Summary.of(slow["parse"]).median
        rows.append(
            [
                f"{size:,}",
                fmt_ms(parse),
                *(
                    f"{fmt_ms(Summary.of(slow[k]).median)}"
                    f" ({fmt_ratio(Summary.of(slow[k]).median / parse)})"
                    for k in ("clone", "reindex", "search", "doctor", "stats")
                ),
                med(r["hook"]),  # type: ignore[arg-type]
            ]
        )
    print(
        table(
            [
                "notes",
                "floor: parse every note",
                "first `mdmem index` after a clone (× floor)",
                "`mdmem reindex`",
                "cold `mdmem search`, recall index built",
                "`mdmem doctor`",
                "`mdmem stats`",
                "`mdmem hook session-start`, block cache cold",
            ],
            rows,
            right=range(8),  # type: ignore[arg-type]
        )
    )
    print("\n### Peak memory of each process (MiB, ru_maxrss; target ≤ 100 at 100,000)\n")
    kinds = [
        "python -c pass",
        "floor: parse every note",
        "mdmem index",
        "mdmem list",
        "first mdmem index after a clone",
        "mdmem reindex",
        "cold mdmem search (recall index built)",
        "mdmem doctor",
        "mdmem stats",
        "mdmem hook session-start (block cache cold)",
    ]
    rows = [
        [f"{size:,}", *(f"{r['memory'].get(k, 0) / 1024:.0f}" for k in kinds)]  # type: ignore[union-attr]
        for size, r in results.items()
    ]
    print(table(["notes", *kinds], rows, right=range(len(kinds) + 1)))  # type: ignore[arg-type]
    print(
        f"\nrounds: {args.repeat} (whole-store commands: up to 3; 1 at 100,000)"
        f"; load average at the end: {os.getloadavg()[0]:.1f}\n"
    )
    print(table(["machine", ""], machine_rows(args.cache)))


if __name__ == "__main__":
    main()
