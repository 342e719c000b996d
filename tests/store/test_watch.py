"""Hand edits seen by long-lived processes through a watch (the ``watch`` extra), and by the
CLI after a ``git checkout``: real processes, real files, a real inotify watch."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import TextContent

from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.store import watch

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
]


def _notes(root: Path, count: int, word: str = "release") -> None:
    store = Store(root, Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "filename": f"project_knowledge_{word}-step-{i:02d}.md",
                "title": f"{word.capitalize()} step {i:02d}",
                "content": f"Step {i:02d} of the {word} runbook.",
            }
            for i in range(count)
        ]
    )
    past = time.time() - 120
    for p in root.glob("*.md"):
        os.utime(p, (past, past))


# -- the watch itself, in this process -----------------------------------------------


def test_the_watch_names_what_changed_after_a_point(tmp_path: Path) -> None:
    root = tmp_path / "store"
    root.mkdir()
    (root / "a.md").write_text("one")
    try:
        assert watch.start([str(root)]) == [str(root)]
        point, names = watch.since(str(root), None)
        assert point is not None and names is None  # a first call vouches for nothing yet
        assert watch.since(str(root), point)[1] == set()

        with open(root / "a.md", "r+") as f:  # in place, then at once the question
            f.write("two")
        (root / ".b.md.swp").write_text("x")
        os.replace(root / ".b.md.swp", root / "b.md")
        point2, names = watch.since(str(root), point)
        assert names is not None and {"a.md", "b.md"} <= names
        assert watch.since(str(root), point2)[1] == set()

        # The folder replaced (a checkout that removed and made it again): the watch of the
        # old one is void, every point with it, and the new folder is watched.
        shutil.rmtree(root)
        root.mkdir()
        again, names = watch.since(str(root), point2)
        assert names is None and again is not None and again[0] != point2[0]
        (root / "c.md").write_text("three")
        assert watch.since(str(root), again)[1] == {"c.md"}
    finally:
        watch.stop()
    assert not watch.active(str(root))
    assert watch.since(str(root), None) == (None, None)


def test_a_burst_larger_than_the_watch_vouches_for_is_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(watch, "MAX_NAMES", 5)
    root = tmp_path / "store"
    root.mkdir()
    try:
        watch.start([str(root)])
        point, _ = watch.since(str(root), None)
        for i in range(6):
            (root / f"n{i}.md").write_text("x")
        fresh, names = watch.since(str(root), point)
        assert names is None and fresh is not None and fresh[0] != point[0]  # type: ignore[index]
    finally:
        watch.stop()


def test_nothing_is_watched_when_it_is_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(watch.ENV, "off")
    assert watch.start([str(tmp_path)]) == []
    assert watch.since(str(tmp_path), None) == (None, None)


# -- a watched MCP server, a store above SWEEP_MAX -----------------------------------


def _search(workspace: Path, env: dict[str, str], edits: list[tuple[str, object]]) -> list[str]:
    """Start ``mdmem mcp``, settle, then for each (kind, arg) edit the store by hand and
    ask memory_search for the new word: the file names found, one entry per edit."""
    root = workspace / ".PseudoClaude" / "memory"
    params = StdioServerParameters(
        command=PYTHON,
        args=["-m", "mdmem", "mcp"],
        env=env,
        cwd=str(workspace),
    )
    found: list[str] = []

    async def run() -> None:
        with (workspace.parent / "server.log").open("w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()

                async def ask(word: str) -> list[str]:
                    result = await session.call_tool("memory_search", {"query": word})
                    text = "\n".join(b.text for b in result.content if isinstance(b, TextContent))
                    return [r["filename"] for r in json.loads(text)["results"]]

                for _ in range(3):  # settled: the index trusts what it recorded
                    await ask("release runbook")
                    await anyio.sleep(0.3)
                for kind, word in edits:
                    if kind == "in place":
                        path = root / "project_knowledge_release-step-05.md"
                        data = path.read_bytes()
                        edited = data.replace(b"Release step 05", f"{word} stp 05".encode())
                        assert len(edited) == len(data)
                        st = path.stat()
                        with open(path, "r+b") as f:  # same inode, same size, folder untouched
                            f.write(edited)
                        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # old mtime back
                    else:  # an editor's save: a temporary file renamed over the note
                        path = root / "project_knowledge_release-step-07.md"
                        tmp = root / ".project_knowledge_release-step-07.md.swp"
                        tmp.write_bytes(path.read_bytes().replace(b"Release", f"{word}".encode()))
                        os.replace(tmp, path)
                    found.append(",".join(await ask(str(word).lower())))

    anyio.run(run)
    return found


@pytest.fixture
def large(workspace: Path, tmp_path: Path) -> dict[str, str]:
    """A store of 12 notes made to count as large (SWEEP_MAX 4): no ctime sweep."""
    _notes(workspace / ".PseudoClaude" / "memory", 12)
    return python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_USER_DIR=str(tmp_path / "user"),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
        MDMEM_SWEEP_MAX="4",
    )


def test_a_watched_server_sees_an_in_place_edit_and_a_rename_above_sweep_max(
    workspace: Path, large: dict[str, str]
) -> None:
    found = _search(workspace, large, [("in place", "Zeppelin"), ("rename", "Glider")])
    assert found == ["project_knowledge_release-step-05.md", "project_knowledge_release-step-07.md"]
    # The watch's marker folder is in the store's state, and the markers are gone.
    folders = list(Path(large["MDMEM_STATE_DIR"]).rglob(watch.FOLDER))
    assert len(folders) == 1 and not list(folders[0].iterdir())  # the user store is not made


def test_without_the_watch_an_in_place_edit_above_sweep_max_waits(
    workspace: Path, large: dict[str, str]
) -> None:
    # The documented limit the watch lifts: the rename moves the folder (always seen), the
    # in-place edit does not (seen when a query returns the note, or at the next full check).
    env = {**large, watch.ENV: "off"}
    found = _search(workspace, env, [("in place", "Zeppelin"), ("rename", "Glider")])
    assert found == ["", "project_knowledge_release-step-07.md"]


def test_the_next_block_of_a_large_store_shows_edits_in_place(
    workspace: Path, tmp_path: Path
) -> None:
    # 450 notes: the block (the MCP server's memory_index) is ranked from the catalog, with
    # no stat pass, while the catalog is current. An in-place edit moves no key.
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 400)
    # Ranked after every project note: never among the block's best 200 candidates.
    Store(root, Level.PROJECT).apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "reference_material",
                "filename": f"reference_material_manual-page-{i:02d}.md",
                "title": f"Manual page {i:02d}",
                "content": f"Page {i:02d} of the manual.",
            }
            for i in range(50)
        ]
    )
    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_USER_DIR=str(tmp_path / "user"),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
    )

    def blocks_after(watched: bool, edits: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Settle a server; then edit notes in place, one at a time, each followed by a block:
        ("shown", word) retitles a note the block shows, ("hidden", word) makes a note it
        does not show a correction. (the note's number, the block) for each."""
        params = StdioServerParameters(
            command=PYTHON,
            args=["-m", "mdmem", "mcp"],
            env={**env, watch.ENV: "on" if watched else "off"},
            cwd=str(workspace),
        )
        out: list[tuple[str, str]] = []

        async def steps(session: ClientSession) -> None:
            async def block() -> str:
                result = await session.call_tool("memory_index", {})
                return "\n".join(b.text for b in result.content if isinstance(b, TextContent))

            for _ in range(3):  # settled
                first = await block()
                await anyio.sleep(0.3)
            for kind, word in edits:
                if kind == "shown":
                    number = next(f"{i:02d}" for i in range(400) if f"step-{i:02d}.md)" in first)
                    path = root / f"project_knowledge_release-step-{number}.md"
                    old, new = (b"title: ", f"title: {word} ".encode())
                else:  # a reference note becomes a correction, which the block puts first
                    number = next(f"{i:02d}" for i in range(50) if f"page-{i:02d}.md)" not in first)
                    path = root / f"reference_material_manual-page-{number}.md"
                    old = b"type: reference_material\ntitle: "
                    new = f"type: correction_feedback\ntitle: {word} ".encode()
                data = path.read_bytes()
                with open(path, "r+b") as f:  # in place: the same file, the folder unmoved
                    f.write(data.replace(old, new, 1))
                out.append((number, await block()))

        async def run() -> None:
            with open(os.devnull, "w") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    await steps(session)

        anyio.run(run)
        return out

    # Not watched: a note the block does not show waits for the next stat pass (the
    # documented limit), but a line it shows is checked against its note (one stat each)
    # and is never stale; that check's stat pass then finds the other one too.
    (n, hidden), (m, shown) = blocks_after(False, [("hidden", "Quokka"), ("shown", "Quokka")])
    assert "Quokka" not in hidden
    assert f"Quokka Manual page {n}" in shown and f"Quokka Release step {m}" in shown
    # Watched: the note it did not show is seen at once, and ranks first as a correction.
    ((n, block),) = blocks_after(True, [("hidden", "Wombat")])
    assert f"- [correction_feedback] Wombat Manual page {n} " in block
    ((n, block),) = blocks_after(True, [("shown", "Koala")])
    line = next(x for x in block.splitlines() if x.endswith(f"release-step-{n}.md)"))
    assert line.startswith("- [project_knowledge] Koala ")


def test_the_server_and_its_watch_stop_when_the_client_leaves(
    workspace: Path, large: dict[str, str]
) -> None:
    proc = subprocess.Popen(
        [PYTHON, "-m", "mdmem", "mcp"],
        env=large,
        cwd=str(workspace),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    state = Path(large["MDMEM_STATE_DIR"])
    deadline = time.monotonic() + 30
    while not list(state.rglob(watch.FOLDER)) and time.monotonic() < deadline:  # it watches
        time.sleep(0.05)
    assert list(state.rglob(watch.FOLDER))
    assert proc.stdin is not None
    proc.stdin.close()  # the client leaves: no thread of the watch keeps the process
    assert proc.wait(timeout=30) == 0


# -- the CLI after a git checkout (no watch) -----------------------------------------


def test_a_checkout_of_another_branch_is_seen_by_the_next_index_and_search(
    workspace: Path, tmp_path: Path
) -> None:
    shutil.rmtree(workspace / ".git")
    env = python_env(
        MDMEM_WORKSPACE=str(workspace),
        MDMEM_USER_DIR=str(tmp_path / "user"),
        MDMEM_STATE_DIR=str(tmp_path / "state"),
        MDMEM_SEMANTIC="off",
        MDMEM_SWEEP_MAX="4",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_SYSTEM=os.devnull,
    )

    def run(*argv: str) -> str:
        done = subprocess.run(
            argv, cwd=workspace, env=env, capture_output=True, text=True, timeout=60, check=True
        )
        return done.stdout

    def mdmem(*args: str) -> str:
        return run(PYTHON, "-m", "mdmem", *args)

    git = ("git", "-c", "user.name=t", "-c", "user.email=t@example.invalid")
    run(*git, "init", "-q", "-b", "main")
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    run(*git, "add", "-A")
    run(*git, "commit", "-qm", "notes")
    run(*git, "checkout", "-qb", "other")
    for i in (2, 3):  # changed on the branch, same size
        p = root / f"project_knowledge_release-step-{i:02d}.md"
        p.write_bytes(p.read_bytes().replace(b"Release step", b"Harpoon stp"))
    (root / "project_knowledge_release-step-04.md").unlink()
    run(*git, "add", "-A")
    run(*git, "commit", "-qm", "other")
    run(*git, "checkout", "-q", "main")
    past = time.time() - 120
    for p in root.glob("*.md"):
        os.utime(p, (past, past))
    for _ in range(3):  # settled on main
        mdmem("index")
        mdmem("search", "release")
        time.sleep(0.3)
    assert "Harpoon" not in mdmem("index")

    run(*git, "checkout", "-q", "other")
    block = mdmem("index")
    assert "Harpoon stp 02" in block and "Harpoon stp 03" in block
    assert "step-04" not in block
    hits = json.loads(mdmem("search", "harpoon", "--json"))
    assert sorted(h["filename"] for h in hits) == [
        "project_knowledge_release-step-02.md",
        "project_knowledge_release-step-03.md",
    ]
    hits = json.loads(mdmem("search", "release step 04", "--json"))
    assert "project_knowledge_release-step-04.md" not in [h["filename"] for h in hits]
