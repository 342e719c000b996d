"""Damaged and hostile input to the store's write path: swapped files, huge files, bad bytes.

Each test is the attack or the damaged input itself (real files, FIFOs, sparse
files, subprocesses under a memory limit) and fails on the code before its fix.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import TURN, Scripted, create_op
from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.store import _txn, history

pytestmark = pytest.mark.timeout(60)

NOTE = "---\ntype: project_knowledge\ntitle: Deploy\nsummary: How.\n---\nRun make deploy.\n"


@pytest.fixture
def store(tmp_path: Path) -> Store:
    root = tmp_path / "ws" / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    (tmp_path / "ws" / ".git").mkdir()
    return Store(root, Level.PROJECT)


def _versions_text(store: Store, name: str) -> str:
    folder = state(store.root) / history.HISTORY_DIR / name
    if not folder.is_dir():
        return ""
    return "".join(p.read_text(errors="replace") for p in sorted(folder.iterdir()))


# -- history reads the file it is about to replace with the store's safe reader -----------


def test_history_never_follows_a_symlink_swapped_in_for_a_note(
    store: Store, tmp_path: Path
) -> None:
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("the contents of a file outside the store\n")
    (store.root / "deploy.md").symlink_to(outside)
    plan = _txn.Plan(writes={"deploy.md": NOTE.encode()}, before={"deploy.md": "?"})
    _txn.commit(store.path, plan, private=False)
    assert "outside the store" not in _versions_text(store, "deploy.md")
    assert outside.read_text() == "the contents of a file outside the store\n"
    assert (store.root / "deploy.md").read_text() == NOTE  # the link is replaced, not followed


def test_history_never_waits_on_a_fifo_swapped_in_for_a_note(store: Store) -> None:
    os.mkfifo(store.root / "deploy.md")
    code = (
        "import sys\n"
        "from mdmem.store import _txn\n"
        "plan = _txn.Plan(writes={'deploy.md': sys.argv[2].encode()}, before={'deploy.md': '?'})\n"
        "_txn.commit(sys.argv[1], plan, private=False)\n"
    )
    # A plain open() of a FIFO blocks until a writer comes: the child would hang.
    done = subprocess.run(
        [PYTHON, "-c", code, store.path, NOTE],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert done.returncode == 0, done.stderr
    assert (store.root / "deploy.md").read_text() == NOTE


# -- deleting a huge file never reads it into memory ----------------------------------------

HUGE_DELETE = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (700 * 2**20, 700 * 2**20))
from mdmem import Level, Store
store = Store(sys.argv[1], Level.PROJECT)
result = store.apply([{"action": "delete", "level": "project", "filename": "big.md"}])
print([a.filename for a in result.applied], [r.reason for r in result.rejected])
"""


def test_deleting_a_3_gb_note_never_reads_it_into_memory(store: Store) -> None:
    big = store.root / "big.md"
    with open(big, "wb") as f:
        f.truncate(3 * 2**30)  # sparse: no disk used
    done = subprocess.run(
        [PYTHON, "-c", HUGE_DELETE, store.path],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=40,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "['big.md']" in done.stdout
    assert not big.exists()
    trashed = [p for p in (state(store.root) / _txn.TRASH_DIR).iterdir()]
    assert [p.stat().st_size for p in trashed] == [3 * 2**30]  # in the trash, whole
    assert json.dumps(store.trash()[0].filename) == '"big.md"'


# -- a lone surrogate drops its own operation only -------------------------------------------

SURROGATE_ANSWER = (
    '[{"action": "create", "level": "project", "type": "project_knowledge",'
    ' "title": "Good one", "content": "Kept."},'
    ' {"action": "create", "level": "project", "type": "project_knowledge",'
    ' "title": "Bad one", "content": "x\\ud800y"},'
    ' {"action": "create", "level": "user", "type": "user_preference",'
    ' "title": "Also good", "content": "Kept too."}]'
)


def test_a_lone_surrogate_in_one_operation_drops_that_operation_only(store: Store) -> None:
    result = store.apply(
        [
            {"action": "create", "level": "project", "type": "project_knowledge",
             "title": "Fine", "content": "ok"},
            {"action": "create", "level": "project", "type": "project_knowledge",
             "title": "Broken \ud800", "content": "x\ud800y"},
        ]
    )  # fmt: skip
    assert [a.filename for a in result.applied] == ["project_knowledge_fine.md"]
    assert len(result.rejected) == 1 and "Unicode" in result.rejected[0].reason


def test_a_lone_surrogate_in_the_models_json_drops_that_operation_only(tmp_path: Path) -> None:
    from mdmem import Manager

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    provider = Scripted(SURROGATE_ANSWER)
    with Manager(ws, provider=provider) as manager:
        future = manager.update_async(TURN)
        assert manager.flush(timeout=30)
        result = future.result()
    assert [a.filename for a in result.project.applied] == ["project_knowledge_good-one.md"]
    assert [a.filename for a in result.user.applied] == ["user_preference_also-good.md"]
    assert [r.reason for r in result.rejected] == ["not valid Unicode (a lone surrogate)"]
    turns = state(ws / ".PseudoClaude" / "memory") / "turns"
    assert not [p for p in turns.rglob("*.json") if "failed" in p.parts]


# -- a damaged usage ledger, an odd budget value -------------------------------------------

DAMAGED_SUMMARIES = [
    b"[[[[",
    b'{"version": 1, "folded": "x", "days": {}, "turns": [], "notes": {}}',
    b'{"version": 1, "folded": 0, "days": {"2026-12-01": "zz"}, "turns": [], "notes": {}}',
    b'{"version": 1, "folded": 0, "days": {}, "turns": [1, 2], "notes": {}}',
    b'{"version": 1, "folded": 0, "days": {}, "turns": [], "notes": {"a.md": 5}}',
    b"\xff\xfe not json",
]
DAMAGED_EVENTS = [
    b'{"t": 1e300, "k": "call"}\n',
    b'{"t": 1, "k": "call", "in": 1e400}\n',
    b'{"t": 1, "k": "read", "n": [["x"]]}\n',
    b'{"t": -1e20, "k": "skip"}\n',
    b'{"t": 5, "k": "call", "turn": {"a": 1}, "in": 7}\n',
]


def _cli(ws: Path, *args: str) -> tuple[int, str]:
    from typer.testing import CliRunner

    from mdmem.cli import app

    result = CliRunner().invoke(app, ["--workspace", str(ws), *args], prog_name="mdmem")
    if result.exception is not None:
        assert isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, result.stdout + result.stderr


@pytest.mark.parametrize("summary", DAMAGED_SUMMARIES)
def test_a_damaged_ledger_summary_is_moved_aside_by_stats_doctor_and_turns(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    summary: bytes,
) -> None:
    from mdmem.store import ledger

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    user = os.environ["MDMEM_USER_DIR"]
    folder = Path(ledger.folder(user))
    folder.mkdir(parents=True)
    (folder / "summary.json").write_bytes(summary)
    (folder / "events.jsonl").write_bytes(b"".join(DAMAGED_EVENTS))
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", "100000")
    code, out = _cli(ws, "stats")
    assert code == 0, out
    [line] = [r.getMessage() for r in caplog.records if "usage ledger" in r.getMessage()]
    assert "damaged" in line and "moved aside" in line
    [aside] = [p for p in folder.iterdir() if ".damaged-" in p.name]
    assert aside.read_bytes() == summary  # kept for a person, not lost
    code, out = _cli(ws, "doctor")
    assert "Traceback" not in out
    assert len([r for r in caplog.records if "usage ledger" in r.getMessage()]) == 1  # once
    days = ledger.load(user)["days"]  # the damaged events were skipped, the good ones kept
    assert days == {"1970-01-01": {"calls": 2, "in": 7, "out": 0, "cr": 0, "cw": 0}}

    from mdmem import Manager

    (folder / "summary.json").write_bytes(summary)
    with Manager(ws, provider=Scripted([create_op("Budgeted")])) as manager:
        future = manager.update_async(TURN)
        assert manager.flush(timeout=30)
        assert [a.filename for a in future.result().project.applied] == [
            "project_knowledge_budgeted.md"
        ]


ODD_BUDGETS = ["abc", "-5", "1e99", "²", "1e999", "inf", "nan", "0x10", "１２"]


@pytest.mark.parametrize("value", ODD_BUDGETS)
def test_an_odd_budget_value_is_refused_in_one_line_and_no_budget_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, value: str
) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    monkeypatch.setenv("MDMEM_DAILY_TOKENS", value)
    code, out = _cli(ws, "stats")
    assert code == 0, out
    assert "Traceback" not in out
    [line] = [r.getMessage() for r in caplog.records if "MDMEM_DAILY_TOKENS=" in r.getMessage()]
    assert "not a number of tokens" in line and "\n" not in line
    assert "(no daily budget)" in out
    caplog.clear()
    code, out = _cli(ws, "doctor")
    assert "Traceback" not in out
    assert any("not a number of tokens" in r.getMessage() for r in caplog.records)


@given(st.text(max_size=30))
def test_budget_from_env_never_raises(monkeypatch: pytest.MonkeyPatch, raw: str) -> None:
    from mdmem.manager.manager import MAX_BUDGET, budget_from_env

    if "\0" in raw:
        return
    monkeypatch.setenv("MDMEM_TURN_TOKENS", raw)
    value = budget_from_env("MDMEM_TURN_TOKENS")
    assert value is None or 0 < value <= MAX_BUDGET


PEOPLES_BUDGETS = [("2_000_000", 2_000_000), ("1,500", 1500), ("2e6", 2_000_000), ("0", None)]


@pytest.mark.parametrize(("raw", "want"), PEOPLES_BUDGETS)
def test_budget_values_people_write_are_taken(
    monkeypatch: pytest.MonkeyPatch, raw: str, want: int | None
) -> None:
    from mdmem.manager.manager import budget_from_env

    monkeypatch.setenv("MDMEM_TURN_TOKENS", raw)
    assert budget_from_env("MDMEM_TURN_TOKENS") == want


# -- a damaged catalog, damaged turn files ---------------------------------------------------


def _damage(path: Path, how: str) -> None:
    if how == "truncated":
        data = path.read_bytes()
        path.write_bytes(data[: max(len(data) // 3, 200)])
    else:
        path.write_bytes(b"garbage, not SQLite\n" * 50)
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["truncated", "garbage"])
def test_a_damaged_catalog_is_rebuilt_by_index_and_add_and_reported_by_doctor(
    tmp_path: Path, how: str
) -> None:
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    for n in range(30):
        assert _cli(ws, "add", "--title", f"Fact {n}", f"Fact number {n}.")[0] == 0
    catalog = state(ws / ".PseudoClaude" / "memory") / "catalog.sqlite"
    _damage(catalog, how)
    code, out = _cli(ws, "index")
    assert code == 0 and "Fact 29" in out, out
    _damage(catalog, how)
    code, out = _cli(ws, "add", "--title", "After", "Written after the damage.")
    assert code == 0, out
    assert (ws / ".PseudoClaude" / "memory" / "project_knowledge_after.md").exists()

    _damage(catalog, how)
    code, out = _cli(ws, "doctor")
    assert code != 0 and "Traceback" not in out
    assert "catalog is damaged" in out and "--fix" in out
    _damage(catalog, how)  # (the checks after that one read the store, which rebuilt it)
    code, out = _cli(ws, "doctor", "--fix")
    assert "rebuilt the catalog" in out, out
    code, out = _cli(ws, "doctor")
    assert "catalog is damaged" not in out, out
    assert "Fact 0" in _cli(ws, "index")[1]


DAMAGED_TURNS = [b"{not json", b"[1, 2, 3]", b'{"messages": []}', b"[" * 100_000, b"\xff\xfe"]


def test_damaged_turn_files_are_set_aside_once_never_retried(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from mdmem import Manager

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    assert _cli(ws, "add", "--title", "Seed", "A note.")[0] == 0
    turns = state(ws / ".PseudoClaude" / "memory") / "turns"
    (turns / "pending").mkdir(parents=True)
    for n, data in enumerate(DAMAGED_TURNS):
        (turns / "pending" / f"{n:020d}-0000000{n}.json").write_bytes(data)
    provider = Scripted()  # no answer: a model call would fail the test
    with Manager(ws, provider=provider) as manager:
        assert manager.flush(timeout=30)
    assert provider.requests == []
    damaged = sorted(p.name for p in (turns / "damaged").iterdir())
    assert len(damaged) == len(DAMAGED_TURNS)
    assert sorted((turns / "damaged" / n).read_bytes() for n in damaged) == sorted(DAMAGED_TURNS)
    lines = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(lines) == len(DAMAGED_TURNS) and all("\n" not in line for line in lines)

    caplog.clear()
    with Manager(ws, provider=provider) as manager:  # a second worker finds nothing to retry
        assert manager.flush(timeout=30)
    assert not [r for r in caplog.records if "damaged" in r.getMessage()]
    _, out = _cli(ws, "doctor", "--fix")
    assert "Traceback" not in out and "set aside" in out
    assert len(list((turns / "damaged").iterdir())) == len(DAMAGED_TURNS)  # still kept


# -- a create never overwrites a file made a moment before -----------------------------------

RIVAL = """
import os, random, sys, time
root = sys.argv[1]
random.seed(7)
made = []
for line in sys.stdin:
    n = int(line)
    time.sleep(random.uniform(0, 0.004))  # somewhere inside the other process's create
    path = os.path.join(root, f"project_knowledge_race-{n}.md")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        continue
    os.write(fd, f"---\\ntype: project_knowledge\\ntitle: Theirs {n}\\n---\\nrival {n}\\n".encode())
    os.close(fd)
    made.append(n)
print(" ".join(map(str, made)))
"""


def test_a_create_racing_another_process_never_overwrites_and_loses_nothing(
    store: Store,
) -> None:
    rounds = 150
    rival = subprocess.Popen(
        [PYTHON, "-c", RIVAL, store.path],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=python_env(),
    )
    assert rival.stdin is not None
    results = []
    first = []  # rounds where the name is taken just before the create starts
    for n in range(rounds):
        if n % 15 == 0:
            # Whether the rival's random sleep ever lands inside a create depends on the
            # machine's scheduling; these rounds make sure some names are taken all the same.
            name = store.root / f"project_knowledge_race-{n}.md"
            name.write_text(f"---\ntype: project_knowledge\ntitle: Theirs {n}\n---\nrival {n}\n")
            first.append(n)
        else:
            rival.stdin.write(f"{n}\n")
            rival.stdin.flush()
        op = {"action": "create", "level": "project", "type": "project_knowledge"}
        results.append(store.apply([{**op, "title": f"Race {n}", "content": f"ours {n}"}]))
    out, _ = rival.communicate(timeout=30)
    made = first + [int(x) for x in out.split()]
    assert made  # the rival did win some names
    overwritten = [
        n
        for n in made
        if b"rival" not in (store.root / f"project_knowledge_race-{n}.md").read_bytes()
    ]
    assert overwritten == []
    texts = [p.read_text() for p in store.root.glob("project_knowledge_race-*.md")]
    lost = [n for n in range(rounds) if not any(t.endswith(f"ours {n}\n") for t in texts)]
    assert lost == []
    assert all(not r.rejected for r in results)
