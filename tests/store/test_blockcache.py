"""The prompt-block cache: served again only while what the block shows is unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from builders import add_note
from conftest import state
from mdmem import Level, Store
from mdmem.store import blockcache
from mdmem.store.index import cached_block
from mdmem.store.workspace import resolve

NOTE = "---\ntype: {type}\ntitle: {title}\nsummary: {summary}\n---\nbody\n"


def create(store: Store, title: str, type: str = "project_knowledge", **extra: str) -> str:
    return add_note(store, title, "b", type=type, summary=f"About {title}.", **extra)


@pytest.fixture
def stores(workspace: Path) -> tuple[Store, Store]:
    project = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    user = Store(Path(os.environ["MDMEM_USER_DIR"]), Level.USER)
    for i in range(3):
        create(project, f"Build step {i}")
    create(user, "Answer tersely", type="user_preference")
    return project, user


def block_of(workspace: Path) -> str:
    """The block ``mdmem index`` prints: the one entry point, through the cache."""
    _, project, user = resolve(str(workspace), None)
    return cached_block(project, user)


def settle(workspace: Path) -> str:
    """Run `mdmem index` until its block is served from the cache; return it."""
    blocks = {block_of(workspace) for _ in range(3)}
    assert len(blocks) == 1
    return blocks.pop()


def served_from_cache(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    def boom(*a: object, **k: object) -> str:
        raise AssertionError("the cached block must be served without reading the stores")

    with monkeypatch.context() as m:
        m.setattr("mdmem.store.index.prompt_block", boom)  # what the cache would compute
        return block_of(workspace)


def test_a_settled_workspace_is_served_from_the_cache(
    workspace: Path, stores: tuple[Store, Store], monkeypatch: pytest.MonkeyPatch
) -> None:
    block = settle(workspace)
    assert "Build step 2" in block and "Answer tersely" in block
    assert served_from_cache(workspace, monkeypatch) == block
    assert list(state(stores[0].root).glob("block-*.json"))


def test_a_write_invalidates_it(workspace: Path, stores: tuple[Store, Store]) -> None:
    settle(workspace)
    create(stores[1], "Use metric units", type="user_preference")
    assert "Use metric units" in block_of(workspace)


@pytest.mark.parametrize("change", ["delete", "rename", "same-size-in-place"])
def test_hand_edits_invalidate_it(
    workspace: Path, stores: tuple[Store, Store], change: str
) -> None:
    project = stores[0]
    settle(workspace)
    note = next(p for p in project.root.glob("*.md") if "step-1" in p.name)
    if change == "delete":
        note.unlink()
        assert "Build step 1" not in block_of(workspace)
    elif change == "rename":
        note.rename(note.with_name("project_knowledge_renamed.md"))
        assert "(project_knowledge_renamed.md)" in block_of(workspace)
    else:
        st = note.stat()
        text = note.read_text().replace("Build step 1", "Build STEP 1")
        with open(note, "r+", encoding="utf-8") as f:  # in place: the directory is unchanged
            f.write(text)
        os.utime(note, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert "Build STEP 1" in block_of(workspace)


def test_an_expiry_that_comes_invalidates_it(workspace: Path, stores: tuple[Store, Store]) -> None:
    import time
    from datetime import datetime, timedelta, timezone

    project = stores[0]
    soon = datetime.now(timezone.utc) + timedelta(seconds=120)
    create(project, "Migration in progress", expires=soon.isoformat(timespec="seconds"))
    assert "Migration in progress" in settle(workspace)
    calls: list[int] = []

    def compute() -> str:
        calls.append(1)
        return "block"

    roots = (str(project.root), str(stores[1].root))
    now = time.time()
    for _ in range(3):
        blockcache.cached("t", *roots, compute, now=now)
    assert len(calls) == 1  # computed once, then served
    blockcache.cached("t", *roots, compute, now=now + 60)
    assert len(calls) == 1  # before the expiry: still served
    blockcache.cached("t", *roots, compute, now=now + 180)
    assert len(calls) == 2  # the note's expiry came: computed again
    blockcache.cached("t", *roots, compute, now=now + 180 + 3601)
    assert len(calls) == 3  # and never older than an hour


def test_a_damaged_cache_is_a_miss(workspace: Path, stores: tuple[Store, Store]) -> None:
    block = settle(workspace)
    for path in state(stores[0].root).glob("block-*.json"):
        path.write_bytes(b"\xff{not json")
    assert block_of(workspace) == block
