"""The usage ledger: events add up, folding loses nothing, and its size stays bounded."""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from conftest import state
from mdmem import Manager, Operation
from mdmem.cli import app
from mdmem.integrations.claude_code import session_start
from mdmem.store import ledger

DAY = 86_400.0
T0 = 1_796_083_200.0  # 2026-12-01T00:00:00Z


@pytest.fixture
def root(tmp_path: Path) -> str:
    path = tmp_path / "store"
    path.mkdir()
    return str(path)


def test_events_add_up(root: str) -> None:
    ledger.record(root, "inject", T0, n=["a.md", "b.md"], via="session-start")
    ledger.record(root, "read", T0 + 5, n=["a.md"], via="cli")
    ledger.record(root, "write", T0 + 6, n=["a.md"], via="worker")
    ledger.record(root, "call", T0 + 7, turn="t1", **{"in": 10, "out": 2, "cr": 100, "cw": 0})
    ledger.record(root, "call", T0 + DAY, turn="t2", **{"in": 1, "out": 1, "cr": 0, "cw": 50})
    ledger.record(root, "skip", T0 + 8, turn="t3")
    summary = ledger.load(root)
    notes = summary["notes"]
    assert notes["a.md"]["inject"] == 1 and notes["a.md"]["read"] == 1  # type: ignore[index]
    assert notes["a.md"]["last_write"] == T0 + 6  # type: ignore[index]
    assert notes["b.md"] == {"inject": 1, "last_inject": T0, "first": T0}  # type: ignore[index]
    days = summary["days"]
    assert days["2026-12-01"] == {"in": 10, "out": 2, "cr": 100, "cw": 0, "calls": 1, "skip": 1}  # type: ignore[index]
    assert ledger.tokens_on(root, "2026-12-01") == 112
    assert ledger.tokens_on(root, "2026-12-02") == 52
    assert ledger.compact(root)
    after = ledger.load(root)
    assert after.pop("folded") == 1 and summary.pop("folded") == 0
    assert after == summary  # folding changes nothing but the files
    assert not os.path.exists(os.path.join(ledger.folder(root), "events.jsonl"))
    assert oct(os.stat(ledger.folder(root)).st_mode & 0o777) == "0o700"


def test_a_damaged_line_is_skipped(root: str) -> None:
    ledger.record(root, "read", T0, n=["a.md"])
    with open(os.path.join(ledger.folder(root), "events.jsonl"), "a") as f:
        f.write('{"t": "x", "k"\n\x00garbage\n')
    ledger.record(root, "read", T0 + 1, n=["a.md"])
    assert ledger.load(root)["notes"]["a.md"]["read"] == 2  # type: ignore[index]


def test_a_fold_interrupted_by_a_crash_counts_each_event_once(root: str) -> None:
    for i in range(3):
        ledger.record(root, "read", T0 + i, n=["a.md"])
    ledger.compact(root)
    base = ledger.folder(root)
    # A crash after the rename, before the summary was written: the file is folded later.
    ledger.record(root, "read", T0 + 10, n=["a.md"])
    os.rename(os.path.join(base, "events.jsonl"), os.path.join(base, "events.2.jsonl"))
    # A crash after the summary was written, before the unlink: an old file, already counted.
    with open(os.path.join(base, "events.1.jsonl"), "w") as f:
        f.write(json.dumps({"t": T0, "k": "read", "n": ["a.md"]}) + "\n")
    assert ledger.load(root)["notes"]["a.md"]["read"] == 4  # type: ignore[index]
    ledger.compact(root)
    assert ledger.load(root)["notes"]["a.md"]["read"] == 4  # type: ignore[index]
    assert sorted(os.listdir(base)) == ["ledger.lock", "summary.json"]


def test_concurrent_appends_while_folding_lose_nothing(
    root: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ledger, "COMPACT_BYTES", 2_000)  # fold very often

    def work(worker: int) -> None:
        for i in range(400):
            ledger.record(root, "read", T0 + i, n=[f"n{worker}.md"])

    threads = [threading.Thread(target=work, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    notes = ledger.load(root)["notes"]
    assert [notes[f"n{w}.md"]["read"] for w in range(4)] == [400] * 4  # type: ignore[index]


def test_bounded_over_100000_events(root: str) -> None:
    expected_recent = 0
    batch: list[tuple[str, float | None, dict[str, object]]] = []
    for i in range(100_000):
        t = T0 + (i // 200) * DAY  # 500 days, 200 events a day
        if i % 4 == 0:
            batch.append(("call", t, {"turn": f"t{i}", "in": 3, "out": 1, "cr": 0, "cw": 0}))
            if i // 200 >= 500 - ledger.KEEP_DAYS:
                expected_recent += 4
        else:
            batch.append(("inject", t, {"n": [f"note-{i % 5_000}.md"], "via": "session-start"}))
        if len(batch) == 20:  # a few appends in one write, to keep the test fast
            ledger.record_many(root, batch)
            batch = []
    base = ledger.folder(root)
    size = sum(os.path.getsize(os.path.join(base, n)) for n in os.listdir(base))
    assert os.path.getsize(os.path.join(base, "events.jsonl")) <= ledger.COMPACT_BYTES + 200
    assert size < 800_000, size
    summary = ledger.load(root)
    assert len(summary["days"]) == ledger.KEEP_DAYS  # type: ignore[arg-type]
    assert len(summary["turns"]) == ledger.KEEP_TURNS  # type: ignore[arg-type]
    assert len(summary["notes"]) == ledger.KEEP_NOTES  # type: ignore[arg-type]
    days = summary["days"]
    assert isinstance(days, dict)
    assert sum(d["in"] + d["out"] for d in days.values()) == expected_recent


def test_names_in_block() -> None:
    block = (
        "## Project Memory\n- [project_knowledge] Build — x (project_knowledge_build.md)\n"
        "## User Memory\n- [user_preference] Chinese — y (user_preference_chinese.md)\n"
        "(3 more lines not shown)\n"
    )
    assert ledger.names_in_block(block) == {
        "project": ["project_knowledge_build.md"],
        "user": ["user_preference_chinese.md"],
    }


def test_session_start_show_and_worker_are_recorded_and_stats_shows_them(
    workspace: Path,
) -> None:
    with Manager(workspace) as manager:
        manager.project.apply(
            [Operation("create", "project", "project_knowledge", title="Build", content="make")]
        )
        manager.user.apply(
            [Operation("create", "user", "user_preference", title="Terse", content="Be terse.")]
        )
        manager.update_async(
            [{"role": "user", "content": "Remember that the API listens on port 8080."}]
        ).result(timeout=30)
        manager.update_async([{"role": "user", "content": "ok thanks"}]).result(timeout=30)
    session_start({"cwd": str(workspace)}, None, None)
    runner = CliRunner()
    shown = runner.invoke(
        app, ["--workspace", str(workspace), "show", "project_knowledge_build.md"]
    )
    assert shown.exit_code == 0, shown.output
    result = runner.invoke(app, ["--workspace", str(workspace), "stats", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["notes"]["project"]["total"] == 2
    assert data["notes"]["user"] == {"total": 1, "by_type": {"user_preference": 1}}
    assert data["prompt_block"]["tokens"] > 10
    assert data["turns_skipped"] == 1
    rows = {r["filename"]: r for r in data["usage"]}
    build = rows["project_knowledge_build.md"]
    assert (build["injected"], build["read"], build["written"]) == (1, 1, 0)
    assert build["last_read"] is not None
    assert rows["user_preference_terse.md"]["injected"] == 1
    written = [r for r in data["usage"] if r["written"]]
    assert (
        len(written) == 1
        and "8080"
        in (Path(workspace) / ".PseudoClaude/memory" / written[0]["filename"]).read_text()
    )
    assert data["most_used"][0]["filename"] == "project_knowledge_build.md"
    text = runner.invoke(app, ["--workspace", str(workspace), "stats"])
    assert text.exit_code == 0 and "turns skipped" in text.output
    assert (state(workspace / ".PseudoClaude" / "memory") / "usage").is_dir()


def test_mcp_reads_and_writes_and_memory_tool_views_are_recorded(workspace: Path) -> None:
    import anyio
    from mcp import Client

    from mdmem.integrations.anthropic import MemoryTool
    from mdmem.integrations.mcp import build_server

    user_dir = os.environ["MDMEM_USER_DIR"]

    async def run() -> None:
        async with Client(build_server(str(workspace), user_dir)) as client:
            written = {"level": "project", "type": "project_knowledge", "title": "Tests"}
            await client.call_tool("memory_write", {**written, "content": "make test"})
            await client.call_tool(
                "memory_read", {"level": "project", "filename": "project_knowledge_tests.md"}
            )

    anyio.run(run)
    tool = MemoryTool(workspace=workspace, user_dir=user_dir)
    tool.call({"command": "view", "path": "/memories/project/project_knowledge_tests.md"})
    tool.call({"command": "view", "path": "/memories/project"})  # a listing reads no note
    notes = ledger.load(str(workspace / ".PseudoClaude" / "memory"))["notes"]
    entry = notes["project_knowledge_tests.md"]  # type: ignore[index]
    assert (entry["write"], entry["read"]) == (1, 2)
    # The memory tool's writes count too: a str_replace, then a create.
    tool.call(
        {
            "command": "str_replace",
            "path": "/memories/project/project_knowledge_tests.md",
            "old_str": "make test",
            "new_str": "make check",
        }
    )
    tool.call(
        {
            "command": "create",
            "path": "/memories/project/build_notes.md",
            "file_text": "Run make check before pushing.\n",
        }
    )
    notes = ledger.load(str(workspace / ".PseudoClaude" / "memory"))["notes"]
    assert notes["project_knowledge_tests.md"]["write"] == 2  # type: ignore[index]
    assert notes["build_notes.md"]["write"] == 1  # type: ignore[index]


def test_cli_add_and_edit_are_recorded_as_writes(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = CliRunner()
    ws = ["--workspace", str(workspace)]
    added = runner.invoke(app, [*ws, "add", "--title", "Build", "Run make test."])
    assert added.exit_code == 0, added.output
    name = added.stdout.strip().splitlines()[-1]
    editor = tmp_path / "editor.py"
    editor.write_text(
        "import sys\np = sys.argv[1]\nt = open(p).read().replace('make test', 'make check')\n"
        "open(p, 'w').write(t)\n"
    )
    monkeypatch.setenv("VISUAL", f"{sys.executable} {editor}")
    edited = runner.invoke(app, [*ws, "edit", name])
    assert edited.exit_code == 0, edited.output
    notes = ledger.load(str(workspace / ".PseudoClaude" / "memory"))["notes"]
    assert isinstance(notes, dict) and notes[name]["write"] == 2
