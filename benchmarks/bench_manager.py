"""Benchmark the Manager: ``update_async`` latency, a whole turn to disk, the extraction prompt.

Prints Markdown tables; ``docs/benchmarks.md`` quotes them. Every number is
compared with a baseline measured in the same run, with the cases interleaved
call by call or turn by turn, because the machines this runs on are shared
and noisy.

    python benchmarks/bench_manager.py                 # the full run (~1 minute)
    python benchmarks/bench_manager.py --quick         # a smoke run (~20 s)
    python benchmarks/bench_manager.py --calls 2000 --repeat 60

What is measured (every store in a fresh temporary directory, ``MDMEM_USER_DIR``
pointed at one too, no network: the fake API listens on 127.0.0.1):

1. ``Manager.update_async`` latency, p50 and p99 over ``--calls`` calls, for a
   realistic 50-message turn (user and assistant text, ``tool_use`` and
   ``tool_result`` blocks, some long), the durable journal write included. The
   provider blocks until released, so the worker sits idle and does not compete
   with the caller. Baseline, call by call in the same loop: one
   ``mdmem.store.files.atomic_write`` (durable, private) of the same number of bytes as
   the journal record. Then where the time goes: each step timed alone, and
   ``cProfile``.
2. A whole turn to disk with a zero-latency model: ``update_async`` then
   ``flush``, with an in-process provider that answers 3 creates at once, and
   with the real ``anthropic`` SDK against ``tests/fake_anthropic.py`` (plain
   and streaming); split into its parts. Baseline: plain atomic writes of the
   files such a turn leaves (its journal record, 3 notes, 2 ``MEMORY.md``).
3. The size of the extraction prompt (system + user message), in characters
   and in estimated tokens (``mdmem.extract.turn.estimate_tokens``), for a turn
   carrying 1 MB of tool output, by default and with ``include_tools=True``,
   with an empty store and with full indexes; an ordinary 10-message turn; and
   the worst case the limits allow.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import io
import json
import math
import os
import pstats
import shutil
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any

from _util import REPO, Summary, fmt_ms, fmt_ratio, interleaved, machine_rows, table

from mdmem import Level, Manager, Store
from mdmem.extract import prompt as prompt_
from mdmem.extract import turn as turn_
from mdmem.manager._journal import _dump as dump_turn
from mdmem.store import files
from mdmem.store.note import Note
from mdmem.store.paths import INDEX_NAME, slugify

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from _typeshed import HasFileno

    from mdmem.extract.providers.base import Answer, ExtractionRequest, Provider
    from mdmem.manager.manager import TurnResult

TARGET_P99_S = 0.002
TARGET_TOKENS = 8_000
PROFILE_TOP = 14
ONE_MB = 1_000_000
# Notes younger than this are "racy" to the catalog (see _catalog.RACY_NS) and
# re-read on every pass; between real turns (seconds apart) they age past it.
PAST_S = 60

# -- turns ------------------------------------------------------------------------------

_FILES = (
    "src/billing/invoice.py",
    "src/billing/tax.py",
    "tests/test_invoice.py",
    "src/api/handlers.py",
    "docs/architecture.md",
)
_SAY = (
    "Let me look at how invoices are totalled before changing anything.",
    "The rounding happens per line, which is where the cent goes missing.",
    "I'll run the focused tests first, then the whole suite.",
    "That failure is the new test; the fix in `tax.py` is next.",
    "The handler builds the response by hand; I'll reuse the serializer instead.",
    "Both call sites pass cents already, so the conversion can go.",
)
_CODE = (
    "def total(lines: list[Line]) -> Cents:\n"
    "    subtotal = sum(line.amount for line in lines)\n"
    "    return Cents(round(subtotal * (1 + TAX_RATE)))\n"
)


def _log(lines: int, tag: str) -> str:
    """A test or build log of ``lines`` lines (~80 characters each)."""
    return "\n".join(
        f"{tag} tests/test_invoice.py::test_case_{i:04d} PASSED [{i * 100 // max(lines, 1):3d}%]"
        f"  ({0.01 * (i % 17):.2f}s)"
        for i in range(lines)
    )


def _assistant(i: int) -> dict[str, Any]:
    """An assistant message: some text, then one tool call (every 4th an Edit of ~1.5 KB)."""
    text = _SAY[i % len(_SAY)]
    if i % 14 == 1:
        text += "\n\n" + "Here is the shape I have in mind:\n\n```python\n" + _CODE * 12 + "```"
    if i == 25:
        text += "\n\n用户说过金额一律用整数分表示，不要用浮点数；我按这个约定改。"
    path = _FILES[i % len(_FILES)]
    kind = i % 4
    if kind == 0:
        tool = {"name": "Bash", "input": {"command": f"pytest -q {path}", "timeout": 120000}}
    elif kind == 1:
        tool = {"name": "Read", "input": {"file_path": f"/work/shop/{path}"}}
    elif kind == 2:
        old, new = _CODE * 8, _CODE.replace("round(", "int(") * 9
        edit = {"file_path": f"/work/shop/{path}", "old_string": old, "new_string": new}
        tool = {"name": "Edit", "input": edit}
    else:
        tool = {"name": "Grep", "input": {"pattern": "Decimal|float\\(", "path": "src/"}}
    use = {"type": "tool_use", "id": f"toolu_{i:04d}", **tool}
    return {"role": "assistant", "content": [{"type": "text", "text": text}, use]}


def _tool_result(i: int) -> dict[str, Any]:
    """A user message carrying the result of the previous call (some are 6-12 KB)."""
    kind = i % 4
    content: object
    if kind == 0:
        content = _log(150, "PASSED")  # ~12 KB
    elif kind == 1:
        content = [{"type": "text", "text": _CODE * 40}]  # a file, ~6 KB
    elif kind == 2:
        content = "The file /work/shop/src/billing/tax.py has been updated."
    else:
        content = "\n".join(f"src/billing/tax.py:{n}: rate = float(row['rate'])" for n in range(30))
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": f"toolu_{i - 1:04d}",
        "content": content,
    }
    if i % 10 == 0:
        block["is_error"] = True
    return {"role": "user", "content": [block]}


def make_turn(n: int) -> list[dict[str, Any]]:
    """A realistic agent turn of ``n`` messages (n >= 2): a request, a tool loop, a summary."""
    request = (
        "Invoices are off by a cent on large orders. Find out why and fix it, with a test. "
        "From now on, always run `make check` before you say a change is done. "
        "(The staging token is ghp_16C7e42F292c6912E7710c838347Ae178B4a if you need the API.)"
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": request}]
    for i in range(1, n - 1):
        messages.append(_assistant(i) if i % 2 else _tool_result(i))
    summary = (
        "Done. Totals are now computed in integer cents (`Cents`) and rounded once per "
        "invoice instead of once per line, which is where the missing cent came from. "
        "I added `test_large_order_rounding` and ran `make check`: formatting, lint and all "
        "412 tests pass. Note for later: `tax.py` still reads rates as floats from the CSV; "
        "that is harmless today because rates have two decimals, but a third would break it."
    )
    messages.append({"role": "assistant", "content": [{"type": "text", "text": summary}]})
    return messages


def make_big_turn(long_messages: int = 0, chinese: bool = False) -> list[dict[str, Any]]:
    """A turn carrying one 1 MB tool result; ``long_messages`` long texts make the worst case."""
    log = _log(ONE_MB // 80 + 1, "PASSED")[:ONE_MB]
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "The nightly job failed; the log is in /var/log/nightly.log."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Let me read the whole log."},
                {
                    "type": "tool_use",
                    "id": "toolu_big",
                    "name": "Bash",
                    "input": {"command": "cat /var/log/nightly.log"},
                },
            ],
        },
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_big", "content": log}],
        },
    ]
    unit = "金额一律用整数分表示，发布前先跑完整回归测试。" if chinese else "Totals use cents. "
    for i in range(long_messages):
        role = "assistant" if i % 2 == 0 else "user"
        messages.append({"role": role, "content": unit * (6_000 // len(unit))})
    messages.append(
        {
            "role": "assistant",
            "content": "The job ran out of disk at 03:12; I raised the volume to 50 GB.",
        }
    )
    return messages


# -- providers --------------------------------------------------------------------------


class GatedProvider:
    """Blocks in ``extract`` until released, then answers ``[]``: the worker sits idle."""

    name = "gated"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def extract(self, request: ExtractionRequest) -> Answer:
        self.entered.set()
        self.release.wait(timeout=600)
        return []


class CreatesProvider:
    """Answers 3 creates at once (2 project, 1 user), new titles every turn."""

    name = "creates"

    def __init__(self) -> None:
        self.turns = 0

    def extract(self, request: ExtractionRequest) -> Answer:
        self.turns += 1
        return list(three_creates(self.turns))


class CapturingProvider:
    """Keeps the request it was given and answers ``[]``."""

    name = "capturing"

    def __init__(self) -> None:
        self.requests: list[ExtractionRequest] = []

    def extract(self, request: ExtractionRequest) -> Answer:
        self.requests.append(request)
        return []


def three_creates(n: int) -> list[object]:
    """The 3 operations of turn ``n``: realistic note sizes, unique titles."""
    body = (
        "Totals are computed in integer cents and rounded once per invoice, never per line. "
        "Per-line rounding lost a cent on large orders (issue #{n}).\n\n"
        "- `Cents` lives in `src/billing/money.py`\n- never use `float` for amounts\n"
    )
    return [
        {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": f"Invoice rounding rule {n}",
            "summary": "Round once per invoice, in integer cents.",
            "content": body.format(n=n),
        },
        {
            "action": "create",
            "level": "project",
            "type": "correction_feedback",
            "title": f"Run make check before done {n}",
            "summary": "The user asked for `make check` before calling a change done.",
            "content": "Always run `make check` (format, lint, tests) before saying a change "
            f"is done; the user corrected this in turn {n}.",
        },
        {
            "action": "create",
            "level": "user",
            "type": "user_preference",
            "title": f"Short summaries {n}",
            "summary": "Prefers a short summary with what was run.",
            "content": f"End a task with a short summary that says which checks ran ({n}).",
        },
    ]


# -- helpers ----------------------------------------------------------------------------


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0-100) of ``samples``."""
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q / 100 * len(ordered)) - 1))]


def new_workspace(base: str, name: str) -> tuple[str, str]:
    """A fresh workspace (with ``.git``) and a fresh user store directory."""
    folder = tempfile.mkdtemp(prefix=f"{name}-", dir=base)
    workspace = os.path.join(folder, "ws")
    os.makedirs(os.path.join(workspace, ".git"))
    return workspace, os.path.join(folder, "user")


def age_fresh(root: str, now: float) -> None:
    """Give files written in the last 30 s an mtime of a minute ago (turns are seconds apart)."""
    past = int((now - PAST_S) * 1e9)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return
    for entry in entries:
        if entry.name.endswith(".md") and entry.stat().st_mtime > now - 30:
            os.utime(entry.path, ns=(past, past))


def with_timer(parts: dict[str, float], key: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn``, adding the seconds of each call to ``parts[key]``."""

    def timed_call(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            parts[key] = parts.get(key, 0.0) + time.perf_counter() - start

    return timed_call


@contextlib.contextmanager
def count_syscalls() -> Iterator[dict[str, int]]:
    """Count ``os.fsync`` and ``os.replace`` calls in every thread while inside.

    An fsync is also counted under ``fsync by <caller>``: the function that
    called ``files.atomic_write`` or ``files.fsync_dir``.
    """
    counts = {"fsync": 0, "replace": 0}
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int | HasFileno) -> None:
        counts["fsync"] += 1
        frame = sys._getframe(1)
        if frame.f_code.co_name in ("atomic_write", "fsync_dir") and frame.f_back is not None:
            frame = frame.f_back
        module = os.path.splitext(os.path.basename(frame.f_code.co_filename))[0]
        key = f"fsync by {module}.{frame.f_code.co_name}"
        counts[key] = counts.get(key, 0) + 1
        real_fsync(fd)

    def replace(src: str, dst: str) -> None:
        counts["replace"] += 1
        real_replace(src, dst)

    os.fsync = fsync
    os.replace = replace  # type: ignore[assignment]
    try:
        yield counts
    finally:
        os.fsync, os.replace = real_fsync, real_replace


# -- 1. update_async latency ---------------------------------------------------------------


class Writer:
    """Durable private atomic writes of ``payload`` to new files in ``folder``: the baseline."""

    def __init__(self, folder: str, payload: bytes) -> None:
        files.ensure_dir(folder, private=True)
        self.folder, self.payload, self.count = folder, payload, 0

    def __call__(self, *, durable: bool = True) -> None:
        self.count += 1
        path = os.path.join(self.folder, f"{self.count}.json")
        files.atomic_write(path, self.payload, private=True, durable=durable)


def journal_bytes(manager: Manager, turn: list[dict[str, Any]]) -> bytes:
    """The bytes ``update_async(turn)`` writes to the journal (the id and time aside)."""
    record = manager._record(turn)
    if record is None:
        raise ValueError("a turn with no text")
    return dump_turn(record)


def accept(manager: Manager, turn: list[dict[str, Any]]) -> Callable[[], object]:
    """A call of ``manager.update_async(turn)``."""
    return lambda: manager.update_async(turn)


def bench_latency(base: str, calls: int, rounds: int) -> tuple[str, dict[str, float]]:
    """update_async latency against a durable atomic write of the same size, call by call."""
    turn50, big = make_turn(50), make_big_turn()
    configs: dict[str, tuple[list[dict[str, Any]], bool]] = {
        "update_async, 50-message turn": (turn50, False),
        "update_async, 50-message turn, include_tools=True": (turn50, True),
        "update_async, 1 MB tool output turn": (big, False),
    }
    baseline = "baseline: durable atomic_write (fsync) of the same bytes"
    per_round = math.ceil(calls / rounds)
    wall: dict[str, list[float]] = {baseline: [], **{k: [] for k in configs}}
    cpu: dict[str, list[float]] = {k: [] for k in wall}
    sizes: dict[str, int] = {}
    drain: list[float] = []

    for r in range(rounds):
        managers: dict[str, tuple[Manager, GatedProvider]] = {}
        for label, (turn, tools) in configs.items():
            workspace, user = new_workspace(base, "latency")
            gated = GatedProvider()
            manager = Manager(workspace, user_dir=user, provider=gated, include_tools=tools)
            manager.update_async(turn)  # untimed: starts the worker, which then blocks
            if not gated.entered.wait(30):
                raise RuntimeError("the worker never reached the provider")
            record = journal_bytes(manager, turn)
            sizes[label] = len(record)
            managers[label] = (manager, gated)
        payload = b"x" * sizes["update_async, 50-message turn"]
        sizes[baseline] = len(payload)
        write = Writer(os.path.join(tempfile.mkdtemp(dir=base), "turns"), payload)

        def clocked(label: str, fn: Callable[[], object]) -> Callable[[], float]:
            def case() -> float:
                c0, t0 = time.thread_time(), time.perf_counter()
                fn()
                t1, c1 = time.perf_counter(), time.thread_time()
                cpu[label].append(c1 - c0)
                return t1 - t0

            return case

        cases = {baseline: clocked(baseline, write)}
        for label, (manager, _) in managers.items():
            cases[label] = clocked(label, accept(manager, configs[label][0]))
        for _ in range(5):  # warm the paths and the page cache
            write()
        gc.collect()
        samples = interleaved(cases, per_round)
        for label, values in samples.items():
            wall[label].extend(values)
        print(
            f"  latency: round {r + 1}/{rounds}, {per_round} calls per case",
            file=sys.stderr,
            flush=True,
        )
        start = time.perf_counter()
        for manager, gated in managers.values():
            # Every accepted turn is on disk, in this owner's journal directory.
            journaled = len(os.listdir(manager._journal.mine))
            if journaled != per_round + 1:
                raise RuntimeError(f"{journaled} journaled turns, expected {per_round + 1}")
            gated.release.set()
        for manager, _ in managers.values():
            if not manager.close(timeout=300):
                raise RuntimeError("the worker did not drain")
        drain.append((time.perf_counter() - start) / (3 * (per_round + 1)))

    n = len(wall[baseline])
    b50, b99 = percentile(wall[baseline], 50), percentile(wall[baseline], 99)
    rows = []
    for label in wall:
        w = wall[label]
        p50, p99 = percentile(w, 50), percentile(w, 99)
        rows.append(
            [
                label,
                f"{len(w):,}",
                f"{sizes[label]:,}",
                fmt_ms(p50),
                fmt_ms(percentile(w, 90)),
                fmt_ms(p99),
                fmt_ms(max(w)),
                fmt_ms(percentile(cpu[label], 50)),
                fmt_ratio(p50 / b50),
                fmt_ratio(p99 / b99),
                fmt_ms(percentile([a - b for a, b in zip(w, wall[baseline], strict=True)], 50)),
            ]
        )
    out = [
        table(
            [
                "case",
                "calls",
                "JSON bytes",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
                "CPU p50 ms",
                "p50 vs baseline",
                "p99 vs baseline",
                "added ms",
            ],
            rows,
            right=range(1, 11),
        ),
        "",
        f"{n:,} calls per case in {rounds} rounds (a fresh Manager each), interleaved call by"
        ' call. "added ms": the median of the per-call differences with the baseline call'
        " next to it. CPU: this thread's CPU time (waiting in fsync is not in it)."
        " After each round the provider was released and the worker drained the queue:"
        f" {fmt_ms(Summary.of(drain).median)} ms per queued turn (answer `[]`).",
    ]
    main = wall["update_async, 50-message turn"]
    results = {
        "added": percentile([a - b for a, b in zip(main, wall[baseline], strict=True)], 50),
        "p50": percentile(main, 50),
        "p99": percentile(main, 99),
        "base_p50": b50,
        "base_p99": b99,
    }
    return "\n".join(out), results


def bench_parts(base: str, calls: int) -> str:
    """Each step of update_async timed alone, interleaved, against the whole call."""
    turn = make_turn(50)
    workspace, user = new_workspace(base, "parts")
    gated = GatedProvider()
    manager = Manager(workspace, user_dir=user, provider=gated)
    manager.update_async(turn)
    gated.entered.wait(30)
    limits, redact = manager.limits, manager._redactor.redact
    cut = turn_.from_messages(turn, limits)
    record = manager._record(turn)
    assert record is not None
    payload = dump_turn(record)
    writer = Writer(os.path.join(tempfile.mkdtemp(dir=base), "turns"), payload)

    def clock(fn: Callable[[], object]) -> Callable[[], float]:
        def case() -> float:
            start = time.perf_counter()
            fn()
            return time.perf_counter() - start

        return case

    steps: dict[str, Callable[[], float]] = {
        "update_async, whole call": clock(lambda: manager.update_async(turn)),
        "normalise: turn.from_messages (blocks to text, cut to size)": clock(
            lambda: turn_.from_messages(turn, limits)
        ),
        "redact: Redactor.redact of every kept text": clock(lambda: [redact(m.text) for m in cut]),
        "JSON: _journal._dump (compact) + encode of the record": clock(lambda: dump_turn(record)),
        "state-dir checks: ensure_state_dir + Journal.open": clock(manager._open_journal),
        "write, as update_async does: atomic_write, no fsync": clock(lambda: writer(durable=False)),
        "write, durable (fsync; the worker's job), for comparison": clock(writer),
    }
    samples = interleaved(steps, calls)
    whole = percentile(samples["update_async, whole call"], 50)
    rows = [
        [label, fmt_ms(percentile(v, 50)), f"{percentile(v, 50) / whole:.0%}"]
        for label, v in samples.items()
    ]

    # cProfile of the same calls (it inflates Python code against system calls).
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(min(calls, 300)):
        manager.update_async(turn)
    prof.disable()
    gated.release.set()
    manager.close(timeout=300)

    stats = pstats.Stats(prof)
    raw: dict[tuple[str, int, str], tuple[int, int, float, float, object]] = stats.stats  # type: ignore[attr-defined]

    def cum(file_end: str, func: str, *, own: bool = False) -> float:
        return sum(
            (v[2] if own else v[3])
            for (f, _, name), v in raw.items()
            if f.endswith(file_end) and (name == func or name.endswith(func))
        )

    total = cum("manager.py", "update_async")
    groups = [
        ("normalise (turn.from_messages)", cum("turn.py", "from_messages")),
        ("redact (Redactor.redact)", cum("privacy/_filter.py", "redact")),
        ("JSON (_journal._dump)", cum("_journal.py", "_dump")),
        (
            "state-dir checks (ensure_state_dir, Journal.open)",
            cum("_catalog.py", "ensure_state_dir") + cum("_journal.py", "open"),
        ),
        ("journal write (files.atomic_write)", cum("files.py", "atomic_write")),
        ("  of which os.fsync", cum("~", "posix.fsync>", own=True)),
        ("  of which os.open (O_CREAT of the temp file)", cum("~", "posix.open>", own=True)),
        ("  of which os.replace", cum("~", "posix.replace>", own=True)),
        ("  of which os.chmod", cum("~", "posix.chmod>", own=True)),
        ("  of which os.write", cum("~", "posix.write>", own=True)),
    ]
    prof_rows = [[name, f"{value / total:.0%}"] for name, value in groups]

    buf = io.StringIO()
    pstats.Stats(prof, stream=buf).strip_dirs().sort_stats("tottime").print_stats(PROFILE_TOP)
    lines = [line.rstrip() for line in buf.getvalue().splitlines()]
    first = next(i for i, line in enumerate(lines) if "function calls" in line)
    body = "\n".join(
        line
        for line in lines[first:]
        if line and "Ordered by" not in line and "List reduced" not in line
    )
    return "\n".join(
        [
            f"Each step alone, {calls:,} interleaved calls each (record: {len(payload):,} bytes):",
            "",
            table(["step", "median ms", "of the whole call"], rows, right=(1, 2)),
            "",
            f"cProfile of {min(calls, 300)} calls, cumulative time by step"
            " (cProfile inflates Python code; read shares):",
            "",
            table(["step", "share of update_async"], prof_rows, right=(1,)),
            "",
            f"Top {PROFILE_TOP} by own time:",
            "",
            f"```\n{body}\n```",
        ]
    )


# -- 2. a whole turn to disk -----------------------------------------------------------------


class TurnCase:
    """One Manager whose turns are timed end to end and split into parts."""

    def __init__(
        self, base: str, label: str, provider: Provider, *, age: bool, before: Callable[[], None]
    ) -> None:
        self.label = label
        self.age = age
        self.before = before
        self.workspace, user = new_workspace(base, "turn")
        self.manager = Manager(self.workspace, user_dir=user, provider=provider)
        self.turn = make_turn(50)
        self.parts: dict[str, float] = {}
        self.samples: dict[str, list[float]] = {}
        self.syscalls: dict[str, int] = {}
        m = self.manager
        # Instance attributes shadow the methods: the worker calls these wrappers.
        m._ask = with_timer(self.parts, "ask", m._ask)  # type: ignore[method-assign]
        for obj, name, key in (
            (provider, "extract", "provider call"),
            (m.project, "apply", "apply"),
            (m.user, "apply", "apply"),
            (m, "refresh_index", "index refresh"),
            (m._journal, "load", "journal (worker)"),
            (m._journal, "save", "journal (worker)"),
            (m._journal, "remove", "journal (worker)"),
        ):
            setattr(obj, name, with_timer(self.parts, key, getattr(obj, name)))

    def run_once(self) -> float:
        """One turn: update_async, then flush; returns the seconds, records the parts."""
        self.before()
        if self.age:
            now = time.time()
            age_fresh(self.manager.project.path, now)
            age_fresh(self.manager.user.path, now)
        self.parts.clear()
        gc.collect()
        start = time.perf_counter()
        future = self.manager.update_async(self.turn)
        accepted = time.perf_counter()
        if not self.manager.flush(timeout=120):
            raise RuntimeError(f"{self.label}: the turn did not reach disk")
        end = time.perf_counter()
        result: TurnResult = future.result(timeout=0)
        if len(result.project.applied) != 2 or len(result.user.applied) != 1:
            raise RuntimeError(f"{self.label}: unexpected result {result}")
        parts = dict(self.parts)
        parts["update_async"] = accepted - start
        parts["indexes + prompt"] = parts.pop("ask") - parts["provider call"]
        parts["other"] = (end - start) - sum(parts.values())
        parts["total"] = end - start
        for key, value in parts.items():
            self.samples.setdefault(key, []).append(value)
        return end - start

    def warm_up(self) -> None:
        """One untimed turn (first imports, the worker thread); count its fsyncs and renames."""
        with count_syscalls() as counts:
            self.run_once()
        self.syscalls = dict(counts)
        self.samples.clear()

    def close(self) -> None:
        self.manager.close(timeout=60)


def bench_turns(base: str, repeat: int) -> str:
    """update_async -> flush with a zero-latency model, in-process and through the SDK."""
    import anthropic

    from fake_anthropic import FakeAnthropic
    from mdmem.extract.providers.anthropic import TOOL_NAME, AnthropicProvider

    with FakeAnthropic(lifetime=600) as fake:
        counter = {"n": 0}

        def script() -> None:
            counter["n"] += 1
            ops = three_creates(10_000 + counter["n"])
            fake.enqueue(FakeAnthropic.tool_use(TOOL_NAME, {"operations": ops}))

        def client() -> anthropic.Anthropic:
            return anthropic.Anthropic(
                api_key="test-key", base_url=fake.url, max_retries=0, timeout=30
            )

        cases = [
            TurnCase(
                base,
                "(a) in-process provider, 3 creates",
                CreatesProvider(),
                age=True,
                before=lambda: None,
            ),
            TurnCase(
                base,
                "(a') the same, back to back (notes just written)",
                CreatesProvider(),
                age=False,
                before=lambda: None,
            ),
            TurnCase(
                base,
                "(b) anthropic SDK -> fake API, 3 creates",
                AnthropicProvider(client=client()),
                age=True,
                before=script,
            ),
            TurnCase(
                base,
                "(c) the same, streaming",
                AnthropicProvider(client=client(), stream=True),
                age=True,
                before=script,
            ),
        ]
        for case in cases:
            case.warm_up()

        # The baseline: the files one such turn leaves, written plainly and durably.
        first = cases[0].manager
        blobs = [journal_bytes(first, cases[0].turn)]
        for root in (first.project.path, first.user.path):
            for name in sorted(os.listdir(root)):
                if name.endswith(".md"):
                    with open(os.path.join(root, name), "rb") as f:
                        blobs.append(f.read())
        folder = tempfile.mkdtemp(dir=base)
        seq = iter(range(10**9))

        def baseline() -> float:
            k = next(seq)
            start = time.perf_counter()
            for i, data in enumerate(blobs):
                files.atomic_write(os.path.join(folder, f"{k}-{i}.md"), data)
            return time.perf_counter() - start

        label_base = f"baseline: {len(blobs)} plain atomic writes (journal, notes, 2 MEMORY.md)"
        funcs: dict[str, Callable[[], float]] = {label_base: baseline}
        funcs.update({c.label: c.run_once for c in cases})
        samples = interleaved(funcs, repeat, label="turns")
        if fake.pending:
            raise RuntimeError(f"{fake.pending} scripted replies unused")
        for case in cases:
            case.close()
        stores = [
            sum(1 for n in os.listdir(root) if n.endswith(".md") and n != INDEX_NAME)
            for root in (first.project.path, first.user.path)
        ]

    base_s = Summary.of(samples[label_base])
    rows = [
        [
            label_base,
            f"{base_s.n}",
            fmt_ms(base_s.median),
            fmt_ms(base_s.p90),
            "1.00x",
            "",
            "",
        ]
    ]
    for case in cases:
        s = Summary.of(samples[case.label])
        rows.append(
            [
                case.label,
                f"{s.n}",
                fmt_ms(s.median),
                fmt_ms(s.p90),
                fmt_ratio(s.median / base_s.median),
                str(case.syscalls.get("fsync", 0)),
                str(case.syscalls.get("replace", 0)),
            ]
        )
    keys = [
        "update_async",
        "indexes + prompt",
        "provider call",
        "apply",
        "index refresh",
        "journal (worker)",
        "other",
    ]
    part_rows = [
        [case.label, *[fmt_ms(Summary.of(case.samples[k]).median) for k in keys]] for case in cases
    ]
    return "\n".join(
        [
            table(
                ["case", "turns", "median ms", "p90 ms", "vs baseline", "fsyncs", "renames"],
                rows,
                right=range(1, 7),
            ),
            "",
            f"{repeat} interleaved rounds. Each Manager's stores grow by 2 project notes and 1"
            f" user note a turn: {stores[0]} and {stores[1]} notes at the end. Before each turn"
            f" but in (a'), notes written in the last 30 s are given an mtime {PAST_S} s ago, as"
            " if turns were seconds apart (a note as new as the catalog is hashed again, see"
            " `_catalog`). fsyncs and renames: counted in one untimed turn (all threads).",
            "",
            f"fsyncs in one turn of {cases[0].label[:3]}, by the function that asked for them: "
            + ", ".join(
                f"`{k.removeprefix('fsync by ')}` {v}"
                for k, v in sorted(cases[0].syscalls.items(), key=lambda kv: -kv[1])
                if k.startswith("fsync by ")
            )
            + ".",
            "",
            "Parts of a turn, median ms (medians do not add up to the median total):",
            "",
            table(["case", *keys], part_rows, right=range(1, len(keys) + 1)),
        ]
    )


# -- 3. the extraction prompt ------------------------------------------------------------


def fill_store(root: str, level: Level, n: int) -> None:
    """``n`` notes in one batch, titles and summaries like real ones (one in eight Chinese)."""
    from bench_store import make_notes

    notes: list[Note] = make_notes(n)
    ops = [
        {
            "action": "create",
            "level": level.value,
            "type": note.type.value,
            "title": note.title,
            "summary": note.summary,
            "content": note.body,
            "slug": slugify(note.title),
        }
        for note in notes
    ]
    Store(root, level).apply(ops)


def bench_prompt(base: str) -> tuple[str, list[tuple[str, int]]]:
    """The extraction prompt's size for several turns and stores."""
    empty = new_workspace(base, "prompt-empty")
    full = new_workspace(base, "prompt-full")
    both = new_workspace(base, "prompt-both")
    for workspace, _ in (full, both):
        fill_store(os.path.join(workspace, ".PseudoClaude", "memory"), Level.PROJECT, 250)
    fill_store(both[1], Level.USER, 120)

    ten, big = make_turn(10), make_big_turn()
    raw_big = len(json.dumps(big, ensure_ascii=False))
    cases: list[tuple[str, str, tuple[str, str], list[dict[str, Any]], bool]] = [
        ("10-message turn", "empty", empty, ten, False),
        ("1 MB tool output, default", "empty", empty, big, False),
        ("1 MB tool output, include_tools=True", "empty", empty, big, True),
        ("10-message turn", "project: 250 notes", full, ten, False),
        ("1 MB tool output, default", "project: 250 notes", full, big, False),
        ("1 MB tool output, include_tools=True", "project: 250 notes", full, big, True),
        ("1 MB tool output, include_tools=True", "250 project + 120 user", both, big, True),
        (
            "worst case: + 12 English messages of 6,000 chars",
            "250 project + 120 user",
            both,
            make_big_turn(12),
            True,
        ),
        (
            "worst case: + 12 Chinese messages of 6,000 chars",
            "250 project + 120 user",
            both,
            make_big_turn(12, chinese=True),
            True,
        ),
    ]
    rows = []
    verdicts: list[tuple[str, int]] = []
    for label, store, (workspace, user), turn, tools in cases:
        provider = CapturingProvider()
        with Manager(workspace, user_dir=user, provider=provider, include_tools=tools) as m:
            m.update_async(turn)
            m.flush(timeout=60)
        [request] = provider.requests
        start = request.prompt.index("<turn>")
        end = request.prompt.index("</turn>") + len("</turn>")
        turn_text = request.prompt[start:end]
        # The memory the session sees (a system block), then the date and related notes.
        indexes = request.memory + request.prompt[:start]
        tokens = turn_.estimate_tokens(request.full_system) + turn_.estimate_tokens(request.prompt)
        rows.append(
            [
                label,
                store,
                f"{len(request.system):,}",
                f"{len(indexes):,}",
                f"{len(turn_text):,}",
                f"{len(request.full_system) + len(request.prompt):,}",
                f"{tokens:,}",
                f"{turn_.estimate_tokens(turn_text):,}",
            ]
        )
        if "worst" not in label:
            verdicts.append((f"{label}, {store}", tokens))
    out = table(
        [
            "turn",
            "stores",
            "system chars",
            "memory + date + related chars",
            "turn chars",
            "total chars",
            "est. tokens",
            "of which turn",
        ],
        rows,
        right=range(2, 8),
    )
    note = (
        f"The 1 MB turn is {raw_big:,} characters of JSON"
        f" (~{turn_.estimate_tokens(json.dumps(big, ensure_ascii=False)):,} estimated tokens)"
        f" before mdmem cuts it. Limits: {turn_.TurnLimits()} ;"
        f" the whole prompt within {prompt_.PROMPT_TOKENS:,} estimated tokens; the memory"
        f" the session sees at most {prompt_.INDEX_BYTES:,} bytes and the related notes"
        f" {prompt_.RELATED_BYTES:,}, both giving way to a long turn (related first,"
        f" down to {prompt_.MIN_RELATED_BYTES:,} and {prompt_.MIN_INDEX_BYTES:,} bytes)."
    )
    return f"{out}\n\n{note}", verdicts


# -- the report -----------------------------------------------------------------------------


def verdict(value: float, limit: float) -> str:
    """'met' or by how much it was missed."""
    if value < limit:
        return "met"
    return f"**missed** ({fmt_ratio(value / limit)} the target)"


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its Markdown report."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument(
        "--calls", type=int, help="update_async calls per case (default 1000; --quick 500)"
    )
    parser.add_argument(
        "--repeat", type=int, help="whole turns per case, interleaved (default 40; --quick 8)"
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: fewer calls and turns")
    parser.add_argument("--tmpdir", help="where the temporary stores go (default: the system's)")
    args = parser.parse_args(argv)
    calls = args.calls or (500 if args.quick else 1000)
    repeat = args.repeat or (8 if args.quick else 40)
    rounds = 2 if args.quick else 4

    sys.path.insert(0, os.path.join(REPO, "tests"))  # fake_anthropic
    for name in list(os.environ):
        if name.startswith(("MDMEM_", "ANTHROPIC_")):
            del os.environ[name]
    hosts = [h for h in os.environ.get("NO_PROXY", "").split(",") if h]
    os.environ["NO_PROXY"] = ",".join([*hosts, "127.0.0.1", "localhost"])
    base = tempfile.mkdtemp(prefix="mdmem-bench-", dir=args.tmpdir)
    os.environ["MDMEM_USER_DIR"] = os.path.join(base, "home-user-store")
    started = time.perf_counter()
    try:
        print("## bench_manager\n")
        print(f"`{' '.join(['python', 'benchmarks/bench_manager.py', *sys.argv[1:]])}`\n")
        print(table(["machine", ""], machine_rows(base)))

        print(f"\n### 1. `update_async` latency: {calls:,} calls per case\n")
        latency_table, lat = bench_latency(base, calls, rounds)
        print(latency_table)
        print("\n#### Where the time of `update_async` goes (50-message turn)\n")
        print(bench_parts(base, min(calls, 500)))

        print(f"\n### 2. A whole turn to disk, zero-latency model, {repeat} interleaved rounds\n")
        print(bench_turns(base, repeat))

        print("\n### 3. The extraction prompt (system + user message)\n")
        prompt_table, sizes = bench_prompt(base)
        print(prompt_table)

        print("\n### Targets\n")
        rows = [
            [
                "`update_async` p99, 50-message turn, journal included",
                f"{fmt_ms(lat['p99'])} ms (p50 {fmt_ms(lat['p50'])}; baseline write p99"
                f" {fmt_ms(lat['base_p99'])}, p50 {fmt_ms(lat['base_p50'])})",
                f"< {fmt_ms(TARGET_P99_S)} ms",
                verdict(lat["p99"], TARGET_P99_S),
            ],
            [
                "the same durable write alone (the baseline), p99",
                f"{fmt_ms(lat['base_p99'])} ms",
                f"< {fmt_ms(TARGET_P99_S)} ms",
                verdict(lat["base_p99"], TARGET_P99_S),
            ],
            [
                "what `update_async` adds to that write (median of per-call differences)",
                f"{fmt_ms(lat['added'])} ms",
                "",
                "",
            ],
        ]
        for label, tokens in sizes:
            if "1 MB" in label:
                rows.append(
                    [
                        f"prompt tokens: {label}",
                        f"{tokens:,}",
                        f"< {TARGET_TOKENS:,}",
                        verdict(tokens, TARGET_TOKENS),
                    ]
                )
        print(table(["target", "measured", "limit", "verdict"], rows))
        print(f"\n(whole run: {time.perf_counter() - started:.0f} s)")
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
