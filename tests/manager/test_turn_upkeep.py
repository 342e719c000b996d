"""Derived state after mdmem's own writes: what a turn leaves equals what a rebuild gives.

A Manager turn writes notes, then brings the recall index and the prompt
block up to date. Whatever shortcut that upkeep takes, the recall index must
equal one rebuilt from the notes, the block must equal one computed afresh,
and a note created or edited by hand between two mdmem writes must still be
seen (never hidden by the upkeep of the write that followed it).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from builders import add_note, cold_search, forget_open_indexes, index_dump
from mdmem import Level, Manager, Note, NoteType, Store
from mdmem.extract.providers.base import ExtractionRequest
from mdmem.recall.fts import Index
from mdmem.store import files
from mdmem.store.block import prompt_block
from mdmem.store.note import render

TURN = [
    {"role": "user", "content": "The integration tests need the database container first."},
    {"role": "assistant", "content": "Noted: run the db container before the integration suite."},
]


def write(root: Path, name: str, title: str, body: str) -> None:
    root.mkdir(parents=True, exist_ok=True)
    note = Note(name, NoteType.PROJECT_KNOWLEDGE, title, "", body, None, None)
    files.atomic_write(str(root / name), render(note).encode("utf-8"), durable=False)


class ThreeCreates:
    """A provider that answers at once with three creates per turn."""

    name = "three-creates"

    def __init__(self) -> None:
        self.turns = 0

    def extract(self, request: ExtractionRequest) -> object:
        self.turns += 1
        return [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Turn {self.turns} fact {k} about the quokka",
                "content": f"What turn {self.turns} taught about the quokka, number {k}.",
            }
            for k in range(3)
        ]


@pytest.fixture
def root(workspace: Path) -> Path:
    store = workspace / ".PseudoClaude" / "memory"
    for i in range(30):
        write(store, f"project_knowledge_seed-{i}.md", f"Seed {i}", f"Seed detail {i}.")
    return store


def create(store: Store, title: str) -> None:
    add_note(store, title, f"{title}, noted.")


def rebuilt(store: Store) -> list[tuple[object, ...]]:
    fresh = Index(store, path=":memory:")
    fresh.rebuild()
    return index_dump(fresh)


def kept(root: Path) -> list[tuple[object, ...]]:
    """The on-disk recall index, brought up to date as a new process would."""
    forget_open_indexes()
    index = Index(Store(root, Level.PROJECT))
    index.sync()
    try:
        return index_dump(index)
    finally:
        index.close()


def cold(root: Path, query: str) -> list[str]:
    return [h.filename for h in cold_search(root, query)]


def test_after_turns_the_recall_index_and_the_block_equal_fresh_ones(
    workspace: Path, root: Path
) -> None:
    provider = ThreeCreates()
    with Manager(workspace, provider=provider) as manager:
        for _ in range(3):
            result = manager.update_async(TURN).result(60)
            assert result.project.applied
        block = manager.index
        store, user = manager.project, manager.user
    fresh_project = Store(store.path, Level.PROJECT)
    fresh_user = Store(user.path, Level.USER)
    assert block == prompt_block(fresh_project, fresh_user)
    assert kept(root) == rebuilt(fresh_project)
    on_disk = sorted(p.name for p in root.glob("*quokka*.md"))
    assert len(on_disk) >= 3  # a later turn may merge into an earlier turn's note
    assert [n[0] for n in kept(root) if "quokka" in str(n[0])] == on_disk


def test_a_search_after_a_write_lists_the_store_once(root: Path, listings: list[str]) -> None:
    store = Store(root, Level.PROJECT)
    cold(root, "seed")
    create(store, "Wombat care")
    listings.clear()
    assert any("wombat" in name for name in cold(root, "wombat care"))
    assert listings.count(str(root)) <= 1  # none when the change log vouches for the write
    assert kept(root) == rebuilt(Store(root, Level.PROJECT))


def test_hand_changes_between_two_writes_are_seen(root: Path) -> None:
    store = Store(root, Level.PROJECT)
    cold(root, "seed")
    create(store, "Numbat habits")
    cold(root, "numbat")
    # By hand, between two mdmem writes: a new note, and a note edited in place.
    write(root, "project_knowledge_by-hand.md", "Platypus venom", "Only the males have spurs.")
    seed = root / "project_knowledge_seed-3.md"
    seed.write_text(seed.read_text(encoding="utf-8").replace("Seed detail 3", "Echidna spines"))
    time.sleep(0.01)
    create(store, "Bilby burrows")
    assert cold(root, "platypus venom") == ["project_knowledge_by-hand.md"]
    assert cold(root, "echidna spines") == ["project_knowledge_seed-3.md"]
    assert any("bilby" in name for name in cold(root, "bilby burrows"))
    fresh = Store(root, Level.PROJECT)
    assert kept(root) == rebuilt(fresh)
    block = prompt_block(fresh, None)
    assert "project_knowledge_by-hand.md" in block
    assert block == prompt_block(Store(root, Level.PROJECT), None)
