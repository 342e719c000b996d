"""A single create and a single delete, two checkouts side by side, against one durable write.

Issue 23 asks for a single create and delete at most 2x one durable write at 100,000
notes. Each checkout gets its own copy of the generated store (``bench_scale``'s, cached
under ``--cache``) and its own state folder, settled first; then, round by round and
checkout by checkout, one long-lived process per checkout times:

- one durable write (a temporary file, ``fsync``, ``rename``, ``fsync`` of the folder:
  ``bench_paths``' floor), then a create through ``Store.apply``, then its delete;

and afterwards, as a user runs them, ``mdmem add --title T TEXT`` and ``mdmem rm NAME``
as processes beside ``python -c pass``. Medians; the ratios are paired per round.

    python benchmarks/bench_write.py --before <checkout> --sizes 1000,10000,100000 --cache <cache>
    python benchmarks/bench_write.py --before <checkout> --rounds 21 --sizes 100000
    python benchmarks/bench_write.py --layouts --sizes 100000 --before .   # MEMORY.md alone

``--after-edit`` times instead, in each round, six creates right after an editor's save
of one note (a new file renamed over it: the folder moves, as after a pull), each
checkout's process settled first: the first create lists the folder for its name check;
the ones after it show whether the rows were trusted again. The creates are deleted after.

    python benchmarks/bench_write.py --after-edit --before <checkout> --sizes 100000 --rounds 5

``--turns`` times instead, in each round, a Manager turn as ``bench_paths`` makes it (a
zero-latency model creating three notes, one a correction, in both stores; the user
store N/10) against four durable writes just before it, each turn more than two seconds
after the last, as a user's turns are; with the turn's CPU time (the worker process's,
``time.process_time``: what a busy disk does not blur):

    python benchmarks/bench_write.py --turns --before <checkout> --sizes 1000,4000
    python benchmarks/bench_write.py --turns --after-clone --before <checkout> --sizes 1000

``--after-clone`` gives every note a new ctime just before the first full check, as a
clone or checkout does: for the ten minutes to the next full check, each in-place sweep
compares every note (below ``SWEEP_MAX`` notes, with no watcher).

``--layouts`` times only the write of one line into MEMORY.md, on a copy of it: as mdmem
does it (a new file swapped in), shifting the bytes after the line in place, appending.

``--before`` is another checkout (``git worktree add`` or ``git archive | tar -x``); the
current one is ``--after`` (default: this checkout). Both ``src/`` are compiled first
(``PYTHONDONTWRITEBYTECODE`` is set on some machines).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from _util import fmt_ms, fmt_ratio, table
from bench_scale import generate

HERE = os.path.dirname(os.path.abspath(__file__))

WORKER = r"""
import json, os, sys, time
from mdmem import Store
from mdmem._kinds import Level

root, floor_dir = sys.argv[1], sys.argv[2]
store = Store(root, Level.PROJECT)
name = "project_knowledge_bench-write-op.md"
create = {"action": "create", "level": "project", "type": "project_knowledge",
          "filename": name, "title": "Bench write op", "content": "One op."}
delete = {"action": "delete", "level": "project", "filename": name}
# Settled as a user's store is: a first pass, a second once the clock moved past it.
store.load_index(); time.sleep(1.1); store.load_index()
store.apply([create]); store.apply([delete])

def durable():
    path = os.path.join(floor_dir, "floor.md"); tmp = path + ".tmp"
    start = time.perf_counter()
    with open(tmp, "wb") as f:
        f.write(b"x" * 1200); f.flush(); os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(floor_dir, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    return time.perf_counter() - start

def op(which):
    start = time.perf_counter()
    result = store.apply([which])
    took = time.perf_counter() - start
    assert result.applied, result
    return took

def after_edit():
    store.load_index()
    saved = sorted(n for n in os.listdir(root) if n.startswith("project_knowledge_"))[0]
    tmp = os.path.join(root, ".editor-save.tmp")
    with open(os.path.join(root, saved), "rb") as f, open(tmp, "wb") as out:
        out.write(f.read() + b"\nSaved in an editor.\n")
    os.replace(tmp, os.path.join(root, saved))
    took, made = [], []
    for i in range(6):
        op_i = {**create, "filename": f"project_knowledge_bench-after-edit-{i}.md"}
        took.append(op(op_i))
        made.append({"action": "delete", "level": "project", "filename": op_i["filename"]})
    store.apply(made)
    return took

_manager = []

def turn():
    # A turn a user's prompt later: more than a warm process's two seconds of trust
    # (recall.fts.SWEEP_AGAIN) after the last, as turns are; then four durable writes.
    if not _manager:
        if os.environ.get("BENCH_AFTER_CLONE"):
            # As a clone or checkout leaves them: every note's ctime new, moments before
            # the first full check, so the in-place sweep compares every note for minutes.
            for name in os.listdir(root):
                path = os.path.join(root, name)
                os.chmod(path, os.stat(path).st_mode)
        sys.path.insert(0, sys.argv[3])
        from bench_paths import Correcting
        from mdmem import Manager
        _manager.append(Manager(os.environ["MDMEM_WORKSPACE"],
                                user_dir=os.environ["MDMEM_USER_DIR"],
                                provider=Correcting(), resume=False))
        turn()  # untimed: builds what the first turn of a session builds
    from bench_paths import TURN
    mgr = _manager[0]
    time.sleep(2.2)
    floor = sum(durable() for _ in range(4))
    start, cpu = time.perf_counter(), time.process_time()
    result = mgr.update_async(TURN).result()
    took, cpu = time.perf_counter() - start, time.process_time() - cpu
    for st, part in ((mgr.project, result.project), (mgr.user, result.user)):
        gone = [{"action": "delete", "level": st.level.value, "filename": a.filename}
                for a in part.applied]
        if gone:
            st.apply(gone)
    return [floor, took, cpu]

print("ready", flush=True)
for line in sys.stdin:
    if line.strip() == "edit":
        print(json.dumps(after_edit()), flush=True)
        continue
    if line.strip() == "turn":
        print(json.dumps(turn()), flush=True)
        continue
    if line.strip() != "round":
        break
    print(json.dumps([durable(), op(create), op(delete)]), flush=True)
"""


def _compile(checkout: str) -> None:
    subprocess.run([sys.executable, "-m", "compileall", "-q", os.path.join(checkout, "src")])


class Side:
    """One checkout: its copy of the store, its state folder, its worker process."""

    def __init__(
        self,
        label: str,
        checkout: str,
        ws: str,
        scratch: str,
        user: str | None = None,
        after_clone: bool = False,
    ) -> None:
        self.label = label
        self.ws = os.path.join(scratch, label, "ws")
        os.makedirs(os.path.dirname(self.ws))
        # cp -a keeps the generated notes' old times (a fresh mtime would make every
        # note's stat unproven for a while); tens of seconds at 100,000 notes.
        subprocess.run(["cp", "-a", ws, self.ws], check=True)
        self.root = os.path.join(self.ws, ".PseudoClaude", "memory")
        floor = os.path.join(scratch, label, "floor")
        os.makedirs(floor)
        self.env = {
            **os.environ,
            "PYTHONPATH": os.path.join(checkout, "src"),
            "MDMEM_STATE_DIR": os.path.join(scratch, label, "state"),
            "MDMEM_WORKSPACE": self.ws,
            "MDMEM_USER_DIR": os.path.join(scratch, label, "user"),
            "MDMEM_SEMANTIC": "off",
            "MDMEM_EMBED": "off",
            "MDMEM_WATCH": "off",
        }
        if after_clone:
            self.env["BENCH_AFTER_CLONE"] = "1"
        if user is not None:
            subprocess.run(["cp", "-a", user, self.env["MDMEM_USER_DIR"]], check=True)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, self.root, floor, HERE],
            env=self.env,
            cwd=self.ws,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.samples: dict[str, list[float]] = {
            k: [] for k in ("durable", "create", "delete", "pass", "add", "rm")
        }

    def ready(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if line != "ready":
            raise RuntimeError(f"{self.label}: the worker did not start")

    def round(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        durable, create, delete = json.loads(self.proc.stdout.readline())
        for key, value in (("durable", durable), ("create", create), ("delete", delete)):
            self.samples[key].append(value)

    def edit(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("edit\n")
        self.proc.stdin.flush()
        first, *later = json.loads(self.proc.stdout.readline())
        self.samples.setdefault("first", []).append(first)
        self.samples.setdefault("later", []).extend(later)

    def turn(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("turn\n")
        self.proc.stdin.flush()
        floor, took, cpu = json.loads(self.proc.stdout.readline())
        self.samples.setdefault("floor4", []).append(floor)
        self.samples.setdefault("turn", []).append(took)
        self.samples.setdefault("cpu", []).append(cpu)

    def stop(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def run(self, argv: list[str]) -> float:
        start = time.perf_counter()
        subprocess.run(argv, env=self.env, cwd=self.ws, check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - start

    def processes(self, number: int) -> None:
        py = sys.executable
        self.samples["pass"].append(self.run([py, "-c", "pass"]))
        title = f"Bench write added {number}"
        self.samples["add"].append(self.run([py, "-m", "mdmem", "add", "--title", title, "Added."]))
        added = f"project_knowledge_bench-write-added-{number}.md"
        self.samples["rm"].append(self.run([py, "-m", "mdmem", "rm", added]))


def _alternate(sides: list[Side], rounds: int, step: str) -> None:
    """Run ``step`` of each side ``rounds`` times, their order flipped each round; stop them."""
    for n in range(rounds):
        for side in sides if n % 2 == 0 else sides[::-1]:
            getattr(side, step)()
    for side in sides:
        side.stop()


def _after_edit(sides: list[Side], size: int, rounds: int) -> list[list[str]]:
    _alternate(sides, rounds, "edit")
    return [
        [
            f"{size:,}",
            side.label,
            fmt_ms(statistics.median(side.samples["first"])),
            fmt_ms(statistics.median(side.samples["later"])),
        ]
        for side in sides
    ]


def _turns(sides: list[Side], size: int, rounds: int) -> list[list[str]]:
    _alternate(sides, rounds, "turn")
    return [
        [
            f"{size:,}",
            side.label,
            fmt_ms(statistics.median(side.samples["floor4"])),
            fmt_ms(statistics.median(side.samples["turn"])),
            fmt_ratio(ratio(side.samples["turn"], side.samples["floor4"])),
            fmt_ms(statistics.median(side.samples["cpu"])),
        ]
        for side in sides
    ]


def ratio(num: list[float], den: list[float]) -> float:
    return statistics.median(a / b for a, b in zip(num, den, strict=True))


def layouts(ws: str, rounds: int) -> list[list[str]]:
    """What one line written into a MEMORY.md of this size costs, done three ways, on a copy:
    as mdmem does it (``_index_file.splice``: a new file, the bytes before and after the line
    copied inside the kernel, the names exchanged), by shifting the bytes after it in place,
    and by appending it (which only a file in another order than by name could do)."""
    from mdmem.store import _index_file

    with open(os.path.join(ws, ".PseudoClaude", "memory", "MEMORY.md"), "rb") as f:
        data = f.read()
    scratch = tempfile.mkdtemp(prefix="bench-write-layouts-")
    path = os.path.join(scratch, "MEMORY.md")
    size = len(data)
    out = []
    try:
        for share in (0.0, 0.25, 0.5):
            pos = data.find(b"\n", int(size * share)) + 1 if share else 0
            # A name that sorts just before the line at ``pos``: "x-b.md" < "x.md".
            after = _index_file.name_of(data[pos : data.find(b"\n", pos)]).decode()
            name = after.removesuffix(".md") + "-b.md"
            text = f"- [project_knowledge] Bench write op — One op. ({name})"
            line = (text + "\n").encode()
            times: dict[str, list[float]] = {k: [] for k in ("in", "out", "shift", "back", "app")}
            with open(path, "wb") as f:
                f.write(data)
            for _ in range(rounds):
                start = time.perf_counter()
                _index_file.splice(path, {name: text}, private=False)
                times["in"].append(time.perf_counter() - start)
                start = time.perf_counter()
                _index_file.splice(path, {name: None}, private=False)
                times["out"].append(time.perf_counter() - start)
                # The same line in place: everything after it moved on by its length, and back.
                fd = os.open(path, os.O_RDWR)
                start = time.perf_counter()
                end = size
                while end > pos:
                    low = max(pos, end - (1 << 20))
                    os.pwrite(fd, os.pread(fd, end - low, low), low + len(line))
                    end = low
                os.pwrite(fd, line, pos)
                times["shift"].append(time.perf_counter() - start)
                start = time.perf_counter()
                at = pos + len(line)
                while at < size + len(line):
                    chunk = os.pread(fd, min(1 << 20, size + len(line) - at), at)
                    os.pwrite(fd, chunk, at - len(line))
                    at += len(chunk)
                os.ftruncate(fd, size)
                times["back"].append(time.perf_counter() - start)
                os.close(fd)
                start = time.perf_counter()
                fd = os.open(path, os.O_WRONLY | os.O_APPEND)
                os.write(fd, line)
                os.close(fd)
                times["app"].append(time.perf_counter() - start)
                fd = os.open(path, os.O_RDWR)
                os.ftruncate(fd, size)
                os.close(fd)
            med = {k: fmt_ms(statistics.median(v)) for k, v in times.items()}
            row = [f"{size / 1e6:.1f} MB", f"{share:.0%}"]
            out.append(row + [med[k] for k in ("in", "out", "shift", "back", "app")])
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--before", required=True, help="the other checkout")
    parser.add_argument("--after", default=os.path.dirname(HERE), help="default: this one")
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--processes", type=int, default=7, help="rounds of add / rm")
    parser.add_argument("--cache", default=os.path.join(tempfile.gettempdir(), "mdmem-bench"))
    parser.add_argument(
        "--layouts", action="store_true", help="only MEMORY.md's write done three ways"
    )
    parser.add_argument(
        "--after-edit", action="store_true", help="only six creates after an editor's save"
    )
    parser.add_argument(
        "--turns", action="store_true", help="only a Manager turn with a correction"
    )
    parser.add_argument(
        "--after-clone", action="store_true", help="with --turns: every note's ctime new"
    )
    args = parser.parse_args()
    if args.layouts:
        found = []
        for size in (int(s) for s in args.sizes.split(",")):
            found += layouts(generate(args.cache, size), args.rounds)
        headers = [
            "MEMORY.md",
            "line at",
            "mdmem: line in",
            "mdmem: line out",
            "in place: in",
            "in place: out",
            "append",
        ]
        print(table(headers, found, right=range(2, 7)))
        print(f"\nmedians of {args.rounds} rounds, ms")
        return
    checkouts = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    for checkout in checkouts.values():
        _compile(checkout)
    rows = []
    for size in (int(s) for s in args.sizes.split(",")):
        ws = generate(args.cache, size)
        scratch = tempfile.mkdtemp(prefix=f"bench-write-{size}-")
        try:
            print(f"  [{size}] copying and settling", file=sys.stderr, flush=True)
            user = None
            if args.turns:
                user = os.path.join(
                    generate(os.path.join(args.cache, "user"), max(size // 10, 1)),
                    ".PseudoClaude",
                    "memory",
                )
            sides = [
                Side(label, path, ws, scratch, user, args.after_clone)
                for label, path in checkouts.items()
            ]
            for side in sides:
                side.ready()
            # The copies leave hundreds of MB dirty: written back now, not during the rounds
            # (where every fsync, the floor's too, would wait for them).
            os.sync()
            time.sleep(2)
            if args.after_edit:
                rows += _after_edit(sides, size, args.rounds)
                continue
            if args.turns:
                rows += _turns(sides, size, args.rounds)
                continue
            _alternate(sides, args.rounds, "round")
            for n in range(args.processes):
                for side in sides if n % 2 == 0 else sides[::-1]:
                    side.processes(n)
            for side in sides:
                s = side.samples
                med = {k: statistics.median(v) for k, v in s.items()}
                rows.append(
                    [
                        f"{size:,}",
                        side.label,
                        fmt_ms(med["durable"]),
                        fmt_ms(med["create"]),
                        fmt_ms(med["delete"]),
                        fmt_ratio(ratio(s["create"], s["durable"])),
                        fmt_ratio(ratio(s["delete"], s["durable"])),
                        f"{fmt_ms(med['add'])} ({fmt_ratio(ratio(s['add'], s['pass']))})",
                        f"{fmt_ms(med['rm'])} ({fmt_ratio(ratio(s['rm'], s['pass']))})",
                        fmt_ms(med["pass"]),
                    ]
                )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    if args.turns:
        headers = [
            "notes",
            "checkout",
            "four durable writes",
            "turn",
            "turn ÷ four durable",
            "turn, CPU",
        ]
        print(table(headers, rows, right=range(2, 6)))
        print(f"\nmedians of {args.rounds} rounds, ms (ratios paired per round)")
        return
    if args.after_edit:
        headers = ["notes", "checkout", "first create after the save", "the five after it"]
        print(table(headers, rows, right=range(2, 4)))
        print(f"\nmedians of {args.rounds} rounds, ms")
        return
    headers = [
        "notes",
        "checkout",
        "durable write",
        "create",
        "delete",
        "create ÷ durable",
        "delete ÷ durable",
        "`mdmem add` (÷ pass)",
        "`mdmem rm` (÷ pass)",
        "`python -c pass`",
    ]
    print(table(headers, rows, right=range(2, 10)))
    print(f"\nmedians of {args.rounds} rounds (writes) and {args.processes} (processes), ms")


if __name__ == "__main__":
    main()
