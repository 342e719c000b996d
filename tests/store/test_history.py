"""History: every write path records versions; restore brings one back byte for byte."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import anyio
from mcp import Client
from typer.testing import CliRunner

from builders import create_op, project_store
from mdmem import Manager
from mdmem.cli import app
from mdmem.extract.providers.base import ExtractionRequest
from mdmem.integrations.anthropic import MemoryTool
from mdmem.integrations.mcp import build_server
from mdmem.store import history

NAME = "project_knowledge_build.md"


def create(title: str = "Build", content: str = "Run make.") -> dict[str, object]:
    return create_op(title, content)


def update(content: str, name: str = NAME) -> dict[str, str]:
    return {"action": "update", "level": "project", "filename": name, "content": content}


def test_every_change_keeps_the_previous_text_and_restores_byte_for_byte(
    workspace: Path,
) -> None:
    store = project_store(workspace)
    store.apply([create()], source="cli")
    first = (store.root / NAME).read_bytes()
    store.apply([update("Run make -j4.")], source="worker")
    second = (store.root / NAME).read_bytes()
    store.apply([{"action": "delete", "level": "project", "filename": NAME}], source="mcp")
    versions = store.history(NAME)
    assert [(v.version, v.source, v.action) for v in versions] == [
        (1, "cli", "write"),
        (2, "worker", "write"),
        (3, "mcp", "delete"),
    ]
    assert history.read_version(store.path, NAME, 1) == first
    # A deleted note comes back from its history, and the restore is a new version.
    assert store.restore_version(NAME, 1) == "create"
    assert (store.root / NAME).read_bytes() == first
    assert store.restore_version(NAME, 2) == "update"
    assert (store.root / NAME).read_bytes() == second
    assert [v.action for v in store.history(NAME)][-2:] == ["restore", "restore"]
    assert "Run make -j4." in store.load_index() or "Build" in store.load_index()


def test_a_hand_edit_is_noticed_and_the_text_before_it_kept(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create()])
    before = (store.root / NAME).read_bytes()
    time.sleep(0.01)
    edited = before.replace(b"Run make.", b"Run make by hand.")
    (store.root / NAME).write_bytes(edited)
    store.load_index()  # the catalog notices the new bytes
    versions = store.history(NAME)
    assert [v.source for v in versions] == ["api", "hand-edit"]
    assert history.read_version(store.path, NAME, 1) == before
    # An edit nobody noticed is recorded before mdmem overwrites it.
    (store.root / NAME).write_bytes(edited.replace(b"by hand", b"twice by hand"))
    os.utime(store.root / NAME, ns=(1, 1))
    store.apply([update("Run make at last.")])
    texts = [history.read_version(store.path, NAME, v.version) for v in store.history(NAME)]
    assert any(b"twice by hand" in t for t in texts)


def test_the_cli_lists_history_as_json_and_restores_a_version(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create()])
    first = (store.root / NAME).read_bytes()
    store.apply([update("Run make -j8.")])
    runner = CliRunner()
    args = ["--workspace", str(workspace)]
    out = runner.invoke(app, [*args, "history", NAME, "--json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output)
    assert [r["version"] for r in rows] == [1, 2]
    assert {"at", "source", "action"} <= set(rows[0])
    done = runner.invoke(app, [*args, "restore", NAME, "--version", str(rows[0]["version"])])
    assert done.exit_code == 0, done.output
    assert (store.root / NAME).read_bytes() == first
    assert store.history(NAME)[-1].source == "cli"
    # `mdmem rm` then `mdmem restore NAME` (the trash) still works as before.
    assert runner.invoke(app, [*args, "rm", NAME]).exit_code == 0
    assert runner.invoke(app, [*args, "restore", NAME]).exit_code == 0
    assert (store.root / NAME).read_bytes() == first
    missing = runner.invoke(app, [*args, "restore", NAME, "--version", "99"])
    assert missing.exit_code == 1


def test_memory_tool_mcp_and_worker_writes_are_recorded(workspace: Path, tmp_path: Path) -> None:
    user_dir = tmp_path / "user"
    tool = MemoryTool(workspace=workspace, user_dir=user_dir)
    tool.call(
        {
            "command": "create",
            "path": "/memories/project/notes.md",
            "file_text": "# Build\n\nUse make for builds.",
        }
    )
    store = project_store(workspace)
    [name] = [e.filename for e in store.entries()]
    tool.call({"command": "delete", "path": "/memories/project/notes.md"})
    assert [(v.source, v.action) for v in store.history(name)] == [
        ("memory-tool", "write"),
        ("memory-tool", "delete"),
    ]

    async def run() -> None:
        async with Client(build_server(str(workspace), str(user_dir))) as client:
            await client.call_tool(
                "memory_write",
                {**create("Through MCP", "Served over MCP."), "filename": "mcp-note.md"},
            )

    anyio.run(run)
    [written] = [e.filename for e in store.entries() if e.title == "Through MCP"]
    assert [v.source for v in store.history(written)] == ["mcp"]

    class Provider:
        name = "scripted"

        def extract(self, request: ExtractionRequest) -> object:
            return [create("From the worker", "Learnt in a turn.")]

    with Manager(workspace, user_dir=user_dir, provider=Provider()) as manager:
        manager.update_async([{"role": "user", "content": "hello"}])
        assert manager.flush(timeout=30)
    assert [v.source for v in store.history("project_knowledge_from-the-worker.md")] == ["worker"]


def test_history_is_bounded_but_keeps_the_newest(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create()])
    for i in range(history.MAX_VERSIONS + 5):
        store.apply([update(f"Run make, take {i}.")])
    versions = store.history(NAME)
    assert len(versions) == history.MAX_VERSIONS
    assert b"take 24" in history.read_version(store.path, NAME, versions[-1].version)
    # Old versions age out, but the newest few stay whatever their age.
    folder = Path(history._folder(store.path, NAME))
    for path in folder.glob("*.json"):
        data = json.loads(path.read_text())
        data["at"] = "2000-01-01T00:00:00+00:00"
        path.write_text(json.dumps(data))
    store.apply([update("Run make, finally.")])
    assert len(store.history(NAME)) == history.KEEP_NEWEST


def test_save_rename_and_an_interrupted_batch_are_recorded(workspace: Path) -> None:
    store = project_store(workspace)
    store.apply([create()])
    note = store.read(NAME)
    assert store.save(note.with_changes(body="Run make, saved."), source="cli") == "update"
    assert store.rename(NAME, "project_knowledge_make.md", source="memory-tool")
    versions = store.history("project_knowledge_make.md")
    assert [(v.source, v.action) for v in versions] == [("memory-tool", "rename")]
    assert [v.source for v in store.history(NAME)] == ["api", "cli"]
    # A batch finished after a crash records what it wrote.
    from mdmem.store import _txn

    plan = _txn.Plan(
        writes={"a.md": b"---\ntype: project_knowledge\ntitle: A\n---\nA.\n"},
        before={"a.md": None},
    )
    journal = Path(store.state.txn)
    journal.write_text(
        json.dumps(
            {"writes": {"a.md": plan.writes["a.md"].decode()}, "deletes": {}, "before": plan.before}
        )
    )
    _txn.recover(store.path, private=False)
    assert [v.source for v in store.history("a.md")] == ["recovery"]
