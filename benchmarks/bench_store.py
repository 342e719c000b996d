"""Benchmark the note store: creates through ``Store.apply``, ``load_index()``, ``reindex()``.

Prints Markdown tables; ``docs/benchmarks.md`` quotes them. Every number is
compared with a baseline measured in the same run, with the cases interleaved
round by round, because the machines this runs on are shared and noisy.

    python benchmarks/bench_store.py                   # the full run (~2 minutes)
    python benchmarks/bench_store.py --quick           # a smoke run (~20 s)
    python benchmarks/bench_store.py --profile         # cProfile instead of timings (~15 s)

What is measured (each store in its own fresh temporary directory):

- creates: N notes written through ``Store.apply``, as one batch of N
  operations and as N calls of one operation, against plain atomic writes of
  the very same bytes (``mdmem.store.note.render`` + ``mdmem.store.files.atomic_write``);
- ``load_index()`` at each size: cold (no ``.mdmem/`` derived state, every note
  parsed), warm (settled derived state: the fingerprint path, a stat pass and
  no YAML), warm without the fingerprint (the catalog path), and warm after a
  note was edited by hand; ``entries()``; one ``apply`` of an update; against
  the floor, ``os.scandir`` + ``stat`` of the same files;
- ``reindex()`` at each size;
- a cold and a warm load of the largest store in a fresh process, imports included.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from _util import (
    Summary,
    fmt_ms,
    fmt_ratio,
    interleaved,
    machine_rows,
    paired_ratios,
    table,
    timed,
)

from mdmem._kinds import Level, NoteType
from mdmem.store import _catalog
from mdmem.store.files import atomic_write
from mdmem.store.note import Note, index_line, render
from mdmem.store.paths import INDEX_NAME, slugify, state_dir
from mdmem.store.state import FINGERPRINT
from mdmem.store.store import Store

if TYPE_CHECKING:
    from collections.abc import Callable

# Every note is created "now" = this moment, so apply and the baseline write the same bytes.
FIXED = datetime(2026, 11, 29, 10, 12, tzinfo=timezone.utc)
# Notes are given an mtime this far in the past: see BenchStore.settle.
PAST_S = 60
TARGET_APPLY_RATIO = 2.0
TARGET_WARM_S = 0.030
TARGET_REINDEX_S = 3.0
TARGET_SIZE = 10_000
PROFILE_TOP = 15

_TOPICS = (
    "Run the integration tests before tagging",
    "Prefer table-driven tests for parsers",
    "API pagination uses opaque cursors",
    "Money is stored as integer cents",
    "Release branches are cut on Mondays",
    "The staging database is reset nightly",
    "Use structured logging with request ids",
    "Feature flags live in the config service",
)
_ZH_TOPICS = ("回复时使用中文", "发布流程需要两人审批", "数据库迁移先在预发环境执行")
_SENTENCES = (
    "The build runs `make check` which formats, lints and tests the whole tree.",
    "CI does not gate tags, so a broken release is only caught by people.",
    "Keep fixtures small and name each case after the behaviour it pins.",
    "The service returns 429 with a Retry-After header when a client is too fast.",
    "Amounts are integers in the smallest unit; never use floats for money.",
    "Migrations must be reversible and must not lock a large table for long.",
    "Errors are wrapped once at the boundary and logged once, with context.",
    "The team reviews every change to the public API in the weekly meeting.",
)
_ZH_SENTENCES = (
    "每次发布前先在预发环境完整跑一遍回归测试。",
    "回答用户问题时优先使用简体中文，代码注释保持英文。",
    "迁移脚本必须可以回滚，并且不能长时间锁表。",
)


def make_notes(n: int) -> list[Note]:
    """``n`` realistic notes (~0.6 KB each, all four types, one in eight in Chinese)."""
    types = list(NoteType)
    notes = []
    for i in range(n):
        note_type = types[i % len(types)]
        if i % 8 == 7:
            title = f"{_ZH_TOPICS[i % len(_ZH_TOPICS)]} {i}"
            sentences = [_ZH_SENTENCES[(i + k) % len(_ZH_SENTENCES)] for k in range(4)]
        else:
            title = f"{_TOPICS[i % len(_TOPICS)]} ({i})"
            sentences = [_SENTENCES[(i + k) % len(_SENTENCES)] for k in range(5)]
        body = (
            " ".join(sentences[:3])
            + "\n\n"
            + "\n".join(f"- {s}" for s in sentences[3:])
            + f"\n\nSeen in session {i}."
        )
        notes.append(
            Note(
                filename=f"{note_type.value}_{slugify(title)}.md",
                type=note_type,
                title=title,
                summary=sentences[0],
                body=body,
                created=FIXED,
                updated=FIXED,
            )
        )
    return notes


def create_op(note: Note) -> dict[str, str]:
    """The operation that makes ``Store.apply`` create ``note``."""
    return {
        "action": "create",
        "level": "project",
        "type": note.type.value,
        "title": note.title,
        "summary": note.summary,
        "content": note.body,
    }


def set_past(path: str, seconds: float = PAST_S) -> None:
    """Give a file an mtime ``seconds`` ago."""
    past = time.time() - seconds
    os.utime(path, (past, past))


# -- creates through apply ---------------------------------------------------------


def bench_apply(
    base: str, notes: list[Note], repeat: int, single_rounds: int
) -> tuple[str, dict[str, Summary]]:
    """Time N creates: plain atomic writes vs ``Store.apply`` (one batch; N single calls).

    The N single calls are slow (every call refreshes the whole catalog), so
    they run only in the first ``single_rounds`` rounds.
    """
    ops = [create_op(note) for note in notes]
    blobs = [(note.filename, render(note).encode("utf-8")) for note in notes]

    # Once, untimed: apply must write exactly the bytes the baseline writes.
    check = tempfile.mkdtemp(dir=base)
    result = Store(check, Level.PROJECT).apply(ops, now=FIXED)
    if result.rejected or [a.filename for a in result.applied] != [n for n, _ in blobs]:
        raise RuntimeError(f"apply did not create the expected notes: {result.rejected[:3]}")
    for name, data in blobs:
        with open(os.path.join(check, name), "rb") as f:
            if f.read() != data:
                raise RuntimeError(f"apply wrote different bytes for {name}")
    shutil.rmtree(check)

    # CPU time of this process, beside the wall time: fsync latency on a shared
    # disk swings with other processes' writes, CPU time shows the work itself.
    cpu: dict[str, list[float]] = {}

    def in_fresh_dir(key: str, work: Callable[[str], None]) -> Callable[[], float]:
        def case() -> float:
            folder = tempfile.mkdtemp(dir=base)
            try:
                started = time.process_time()
                seconds = timed(lambda: work(folder))
                cpu.setdefault(key, []).append(time.process_time() - started)
                return seconds
            finally:
                shutil.rmtree(folder)

        return case

    def writes(folder: str) -> None:
        for name, data in blobs:
            atomic_write(os.path.join(folder, name), data)

    def render_writes(folder: str) -> None:
        for note in notes:
            atomic_write(os.path.join(folder, note.filename), render(note).encode("utf-8"))

    def batch(folder: str) -> None:
        Store(folder, Level.PROJECT).apply(ops, now=FIXED)

    def singles(folder: str) -> None:
        store = Store(folder, Level.PROJECT)
        for op in ops:
            store.apply([op], now=FIXED)

    n = len(notes)
    names = {
        "writes": f"baseline: {n:,} x atomic_write of the rendered bytes",
        "render": f"{n:,} x (render + atomic_write)",
        "batch": f"Store.apply: one batch of {n:,} creates",
        "singles": f"Store.apply: {n:,} calls of 1 create",
    }
    samples = interleaved(
        {
            "writes": in_fresh_dir("writes", writes),
            "render": in_fresh_dir("render", render_writes),
            "batch": in_fresh_dir("batch", batch),
            "singles": in_fresh_dir("singles", singles),
        },
        repeat,
        label="creates",
        rounds={"singles": single_rounds},
    )
    rows = []
    for key, title in names.items():
        s = Summary.of(samples[key])
        ratio = paired_ratios(samples[key], samples["writes"])
        c = Summary.of(cpu[key])
        cpu_ratio = paired_ratios(cpu[key], cpu["writes"])
        rows.append(
            [
                title,
                str(s.n),
                fmt_ms(s.median),
                fmt_ms(s.min),
                fmt_ms(s.max),
                f"{s.median / n * 1000:.2f}",
                "1.00x"
                if key == "writes"
                else f"{fmt_ratio(ratio.median)} ({fmt_ratio(ratio.min)}-{fmt_ratio(ratio.max)})",
                fmt_ms(c.median),
                fmt_ratio(cpu_ratio.median),
            ]
        )
    text = table(
        [
            "case",
            "runs",
            "median ms",
            "min ms",
            "max ms",
            "ms / note",
            "vs baseline (range)",
            "CPU ms",
            "CPU vs baseline",
        ],
        rows,
        right=range(1, 9),
    )
    ratios = {
        key: paired_ratios(samples[key], samples["writes"])
        for key in ("render", "batch", "singles")
    }
    return text, ratios


# -- load_index and reindex --------------------------------------------------------


class BenchStore:
    """A store of ``n`` notes written directly, as if written a while ago."""

    def __init__(self, root: str, notes: list[Note]) -> None:
        self.root = root
        self.notes = {note.filename: note for note in notes}
        self.original = dict(self.notes)
        self.lines = {note.filename: index_line(note) for note in notes}
        self.touched: set[str] = set()
        self.edits = 0
        self.updates = 0
        for note in notes:
            atomic_write(
                os.path.join(root, note.filename), render(note).encode("utf-8"), durable=False
            )
        atomic_write(os.path.join(root, INDEX_NAME), self.expected().encode("utf-8"))
        # The catalog does not trust a stat younger than 2 s (RACY_NS, as git's
        # index does), and writes no fingerprint while any note is that fresh:
        # a store built a moment ago would never look warm. A real store's notes
        # were written earlier, so give them an mtime in the past.
        for name in (*self.notes, INDEX_NAME):
            set_past(os.path.join(root, name))
        ordered = sorted(self.notes)
        self.body_victim = ordered[len(ordered) // 3]
        self.update_victim = ordered[len(ordered) // 2]
        self.summary_victim = ordered[(2 * len(ordered)) // 3]

    def store(self) -> Store:
        """A new Store object, as a new process would make."""
        return Store(self.root, Level.PROJECT)

    def expected(self) -> str:
        """What MEMORY.md must say."""
        return "".join(self.lines[name] + "\n" for name in sorted(self.lines))

    def check(self, text: str) -> None:
        """Fail loudly if a load returned anything but the right index."""
        if text != self.expected():
            raise RuntimeError(f"{self.root}: load_index() returned a wrong index")

    def settled(self) -> bool:
        """Whether the fingerprint is present and matches the directory."""
        return (
            getattr(_catalog.read_fingerprint(self.root), "full", None)
            == _catalog.Scan(self.root).fingerprint()
        )

    def settle(self) -> None:
        """Bring the store to the warm state: derived state present and fingerprinted."""
        if self.settled():
            return
        for name in (*self.touched, INDEX_NAME):
            set_past(os.path.join(self.root, name))
        self.touched.clear()
        # Setting an mtime into the past moves the ctime to now, which no call can
        # set back: a note whose ctime shares the catalog's clock tick needs one more load.
        for _ in range(3):
            self.check(self.store().load_index())
            if self.settled():
                break
            time.sleep(0.01)
        if not self.settled():
            raise RuntimeError(f"{self.root}: the store did not settle")

    def drop_state(self) -> None:
        """Remove all derived state: the next load parses every note."""
        shutil.rmtree(state_dir(self.root), ignore_errors=True)

    def edit(self, name: str, *, summary: bool) -> None:
        """Rewrite one note by hand, as an editor would, a while ago (its mtime in the past)."""
        self.edits += 1
        orig = self.original[name]
        if summary:
            note = orig.with_changes(summary=f"{orig.summary} (edited {self.edits})")
        else:
            note = orig.with_changes(body=f"{orig.body}\n\nEdited by hand ({self.edits}).")
        path = os.path.join(self.root, name)
        atomic_write(path, render(note).encode("utf-8"), durable=False)
        set_past(path, PAST_S / 2)
        self.notes[name] = note
        self.lines[name] = index_line(note)
        self.touched.add(name)


def floor_scan(root: str) -> int:
    """``os.scandir`` + ``stat`` of every entry: the least a stat pass can cost."""
    count = 0
    with os.scandir(root) as it:
        for entry in it:
            entry.stat(follow_symlinks=False)
            count += 1
    return count


LOAD_CASES = {
    "floor": "floor: os.scandir + stat",
    "warm": "warm: fingerprint path",
    "catalog": "warm, fingerprint absent: catalog path",
    "body": "warm, 1 note's body edited by hand",
    "summary": "warm, 1 note's summary edited (MEMORY.md rewritten)",
    "entries": "warm: entries() (what `mdmem list` calls)",
    "update": "warm: Store.apply of 1 update (a worker's turn)",
    "cold": "cold: no .mdmem/ (every note parsed)",
    "reindex": "reindex()",
}


def load_cases(bs: BenchStore, size: int) -> dict[str, Callable[[], float]]:
    """One callable per row of LOAD_CASES: untimed preparation, then the timed call."""

    def floor() -> float:
        count = 0

        def scan() -> None:
            nonlocal count
            count = floor_scan(bs.root)

        seconds = timed(scan)
        if count < size + 1:
            raise RuntimeError("the floor scan missed files")
        return seconds

    def load(prepare: Callable[[], None]) -> Callable[[], float]:
        def case() -> float:
            prepare()
            store = bs.store()
            text = ""

            def run() -> None:
                nonlocal text
                text = store.load_index()

            seconds = timed(run)
            bs.check(text)
            return seconds

        return case

    def drop_fingerprint() -> None:
        bs.settle()
        os.unlink(os.path.join(state_dir(bs.root), FINGERPRINT))

    def edit_body() -> None:
        bs.settle()
        bs.edit(bs.body_victim, summary=False)

    def edit_summary() -> None:
        bs.settle()
        bs.edit(bs.summary_victim, summary=True)

    def entries() -> float:
        bs.settle()
        store = bs.store()
        got: list[object] = []
        seconds = timed(lambda: got.extend(store.entries()))
        if len(got) != size:
            raise RuntimeError("entries() missed notes")
        return seconds

    def update() -> float:
        bs.settle()
        bs.updates += 1
        name = bs.update_victim
        op = {
            "action": "update",
            "level": "project",
            "filename": name,
            "content": f"{bs.original[name].body}\n\nUpdated by the worker ({bs.updates}).",
        }
        store = bs.store()
        results = []
        seconds = timed(lambda: results.append(store.apply([op])))
        if [a.action for a in results[0].applied] != ["update"]:
            raise RuntimeError(f"the update was not applied: {results[0]}")
        bs.touched.add(name)  # the body changed, its index line did not
        return seconds

    def reindex() -> float:
        bs.settle()
        store = bs.store()
        reports = []
        seconds = timed(lambda: reports.append(store.reindex()))
        if reports[0].notes != size or reports[0].problems:
            raise RuntimeError(f"reindex() found {reports[0]}")
        return seconds

    return {
        "floor": floor,
        "warm": load(bs.settle),
        "catalog": load(drop_fingerprint),
        "body": load(edit_body),
        "summary": load(edit_summary),
        "entries": entries,
        "update": update,
        "cold": load(bs.drop_state),
        "reindex": reindex,
    }


def bench_load(
    base: str, notes: list[Note], sizes: list[int], repeat: int
) -> tuple[str, dict[tuple[int, str], Summary], dict[int, BenchStore]]:
    """Time every LOAD_CASES row at every size."""
    rows = []
    results: dict[tuple[int, str], Summary] = {}
    stores: dict[int, BenchStore] = {}
    for size in sizes:
        started = time.perf_counter()
        bs = BenchStore(tempfile.mkdtemp(dir=base), notes[:size])
        print(
            f"  built a store of {size:,} notes in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
            flush=True,
        )
        stores[size] = bs
        samples = interleaved(load_cases(bs, size), repeat, label=f"load {size:,}")
        floor = Summary.of(samples["floor"])
        for key, title in LOAD_CASES.items():
            s = Summary.of(samples[key])
            results[size, key] = s
            rows.append(
                [
                    f"{size:,}",
                    title,
                    fmt_ms(s.median),
                    fmt_ms(s.p90),
                    fmt_ms(s.min),
                    fmt_ms(s.max),
                    fmt_ratio(s.median / floor.median),
                ]
            )
    text = table(
        ["notes", "case", "median ms", "p90 ms", "min ms", "max ms", "vs floor"],
        rows,
        right=(0, 2, 3, 4, 5, 6),
    )
    return text, results, stores


# -- a fresh process ---------------------------------------------------------------

_CHILD = """\
import sys, time
t0 = time.perf_counter()
from mdmem._kinds import Level
from mdmem.store.store import Store
t1 = time.perf_counter()
text = Store(sys.argv[1], Level.PROJECT).load_index()
t2 = time.perf_counter()
print(t1 - t0, t2 - t1, len(text))
"""


def bench_process(bs: BenchStore, repeat: int) -> str:
    """Cold and warm ``load_index()`` in a fresh interpreter, against ``python -c pass``."""
    inner: dict[str, list[tuple[float, float]]] = {"cold": [], "warm": []}

    def run(argv: list[str]) -> tuple[float, str]:
        start = time.perf_counter()
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        return time.perf_counter() - start, out.stdout

    def floor() -> float:
        return run([sys.executable, "-c", "pass"])[0]

    def child(kind: str, prepare: Callable[[], None]) -> Callable[[], float]:
        def case() -> float:
            prepare()
            seconds, out = run([sys.executable, "-c", _CHILD, bs.root])
            imports, load, length = out.split()
            if int(length) != len(bs.expected()):
                raise RuntimeError("the child process read a wrong index")
            inner[kind].append((float(imports), float(load)))
            return seconds

        return case

    samples = interleaved(
        {
            "floor": floor,
            "cold": child("cold", bs.drop_state),
            "warm": child("warm", bs.settle),
        },
        repeat,
        label="fresh process",
    )
    bs.settle()
    rows = [["`python -c pass`", fmt_ms(Summary.of(samples["floor"]).median), "", ""]]
    for kind in ("cold", "warm"):
        rows.append(
            [
                f"{kind} `load_index()`, {len(bs.notes):,} notes",
                fmt_ms(Summary.of(samples[kind]).median),
                fmt_ms(Summary.of([i for i, _ in inner[kind]]).median),
                fmt_ms(Summary.of([x for _, x in inner[kind]]).median),
            ]
        )
    return table(
        ["fresh process", "wall median ms", "import Store ms", "load_index() ms"],
        rows,
        right=(1, 2, 3),
    )


# -- profiles ----------------------------------------------------------------------


def _profiled(title: str, prepare: Callable[[], object], work: Callable[[], object]) -> str:
    prepare()
    prof = cProfile.Profile()
    prof.enable()
    work()
    prof.disable()
    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("cumulative").print_stats(PROFILE_TOP)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    start = next(i for i, line in enumerate(lines) if "function calls" in line)
    body = "\n".join(
        line
        for line in lines[start:]
        if line and "Ordered by" not in line and "List reduced" not in line
    )
    return f"#### {title}\n\n```\n{body}\n```"


def profile(base: str, bs: BenchStore, notes: list[Note], creates: int) -> str:
    """cProfile (by cumulative time) of the loads of the largest store, and of creates."""
    size = f"{len(bs.notes):,} notes"

    def drop_fingerprint() -> None:
        bs.settle()
        os.unlink(os.path.join(state_dir(bs.root), FINGERPRINT))

    out = [
        _profiled(f"cold load_index(), {size}", bs.drop_state, lambda: bs.store().load_index()),
        _profiled(f"warm load_index(), {size}", bs.settle, lambda: bs.store().load_index()),
        _profiled(
            f"warm load_index() without the fingerprint (catalog path), {size}",
            drop_fingerprint,
            lambda: bs.store().load_index(),
        ),
    ]
    bs.settle()
    ops = [create_op(note) for note in notes[:creates]]
    folder = tempfile.mkdtemp(dir=base)
    out.append(
        _profiled(
            f"Store.apply: one batch of {creates:,} creates",
            lambda: None,
            lambda: Store(folder, Level.PROJECT).apply(ops, now=FIXED),
        )
    )
    # 100 single calls into a store already holding creates // 2 notes: the
    # middle of the N-single-calls case.
    half = creates // 2
    folder = tempfile.mkdtemp(dir=base)
    store = Store(folder, Level.PROJECT)
    out.append(
        _profiled(
            f"Store.apply: 100 calls of 1 create, into a store of {half:,} notes",
            lambda: store.apply(ops[:half], now=FIXED),
            lambda: [store.apply([op], now=FIXED) for op in ops[half : half + 100]],
        )
    )
    return "\n\n".join(out)


# -- the report --------------------------------------------------------------------


def verdict(value: float, limit: float) -> str:
    """'met' or by how much it was missed."""
    if value <= limit:
        return "met"
    return f"**missed** ({fmt_ratio(value / limit)} the target)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its Markdown report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sizes", help="store sizes for load_index/reindex (default 100,1000,10000)"
    )
    parser.add_argument("--repeat", type=int, help="rounds of every case (default 5; --quick 3)")
    parser.add_argument("--creates", type=int, help="notes created through apply (default 1000)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: smaller and fewer")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="instead of the timings, cProfile loads of the largest store and the creates",
    )
    parser.add_argument("--no-process", action="store_true", help="skip the fresh-process loads")
    parser.add_argument("--tmpdir", help="where the temporary stores go (default: the system's)")
    args = parser.parse_args(argv)
    default_sizes = "100,1000" if args.quick else "100,1000,10000"
    sizes = sorted({int(s.replace("_", "")) for s in (args.sizes or default_sizes).split(",")})
    repeat = args.repeat or (3 if args.quick else 5)
    creates = args.creates or (300 if args.quick else 1000)
    single_rounds = min(repeat, 2)

    base = tempfile.mkdtemp(prefix="mdmem-bench-", dir=args.tmpdir)
    try:
        print("## bench_store\n")
        print(f"`{' '.join(['python', 'benchmarks/bench_store.py', *sys.argv[1:]])}`\n")
        print(table(["machine", ""], machine_rows(base)))
        notes = make_notes(max([*sizes, creates]))

        # Import everything a cold load and an apply need, so in-process
        # timings are of the work, not of first imports (the fresh-process
        # table below shows those).
        warmup = BenchStore(tempfile.mkdtemp(dir=base), notes[:10])
        warmup.drop_state()
        warmup.check(warmup.store().load_index())
        Store(tempfile.mkdtemp(dir=base), Level.PROJECT).apply([create_op(notes[0])], now=FIXED)

        if args.profile:
            largest = BenchStore(tempfile.mkdtemp(dir=base), notes[: sizes[-1]])
            print(f"\n### cProfile (top {PROFILE_TOP} by cumulative time)\n")
            print(profile(base, largest, notes, creates))
            return 0

        print(
            f"\n### {creates:,} creates, {repeat} interleaved rounds"
            f" ({single_rounds} for the single calls), each in a fresh directory\n"
        )
        apply_table, ratios = bench_apply(base, notes[:creates], repeat, single_rounds)
        print(apply_table)

        print(
            "\n### A store of N notes: load_index(), entries(), apply(), reindex();"
            f" {repeat} interleaved rounds per size\n"
        )
        load_table, results, stores = bench_load(base, notes, sizes, repeat)
        print(load_table)

        largest = stores[sizes[-1]]
        if not args.no_process:
            print(f"\n### A fresh process, {repeat} interleaved rounds\n")
            print(bench_process(largest, repeat))

        print("\n### Targets\n")
        rows = []
        for key, form in (("batch", "one batch"), ("singles", "single-op calls")):
            r = ratios[key]
            rows.append(
                [
                    f"creates through apply ({form}) / plain atomic writes",
                    f"{fmt_ratio(r.median)} (range {fmt_ratio(r.min)}-{fmt_ratio(r.max)})",
                    f"<= {fmt_ratio(TARGET_APPLY_RATIO)}",
                    verdict(r.median, TARGET_APPLY_RATIO),
                ]
            )
        if TARGET_SIZE in sizes:
            warm = results[TARGET_SIZE, "warm"]
            floor = results[TARGET_SIZE, "floor"]
            rows.append(
                [
                    f"warm load_index(), {TARGET_SIZE:,} notes",
                    f"{fmt_ms(warm.median)} ms (p90 {fmt_ms(warm.p90)};"
                    f" the stat floor alone: {fmt_ms(floor.median)} ms)",
                    f"< {fmt_ms(TARGET_WARM_S)} ms",
                    verdict(warm.median, TARGET_WARM_S),
                ]
            )
            ri = results[TARGET_SIZE, "reindex"]
            rows.append(
                [
                    f"reindex(), {TARGET_SIZE:,} notes",
                    f"{fmt_ms(ri.median)} ms (p90 {fmt_ms(ri.p90)})",
                    f"< {fmt_ms(TARGET_REINDEX_S)} ms",
                    verdict(ri.median, TARGET_REINDEX_S),
                ]
            )
        print(table(["target", "measured (median)", "limit", "verdict"], rows))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
