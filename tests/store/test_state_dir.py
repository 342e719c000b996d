"""A store's state folder has one owner: `store.state` works it out once and sees a re-clone."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from builders import create_op, delete_op
from mdmem import Level, NoteNotFound, Store
from mdmem.store import paths
from mdmem.store import state as state_module
from mdmem.store.state import StateDir


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every time a state folder's place is worked out (a realpath and a look at its anchor)."""
    seen: list[str] = []
    real = paths.locate_state

    def counting(root: str) -> tuple[str, str, str, bool]:
        seen.append(root)
        return real(root)

    monkeypatch.setattr(state_module, "locate_state", counting)
    return seen


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The monotonic clock StateDir reads, set by the test."""
    now = [1000.0]
    monkeypatch.setattr(state_module, "monotonic", lambda: now[0])
    return now


def clone(ws: Path) -> Path:
    """A workspace with its project store, as a fresh ``git clone`` leaves it."""
    (ws / ".git").mkdir(parents=True)
    (ws / ".PseudoClaude" / "memory").mkdir(parents=True)
    return ws / ".PseudoClaude" / "memory"


def test_a_store_works_out_where_its_state_is_once(
    tmp_path: Path, resolutions: list[str], clock: list[float]
) -> None:
    store = Store(clone(tmp_path / "ws"), Level.PROJECT)
    store.apply([create_op("First"), create_op("Second")])
    store.apply([delete_op("project_knowledge_first.md")])
    store.restore("project_knowledge_first.md")
    store.notes()
    store.load_index()
    assert resolutions == [str(store.root)]


def test_a_long_lived_store_sees_a_new_clone_at_its_path(
    tmp_path: Path, clock: list[float]
) -> None:
    ws = tmp_path / "ws"
    store = Store(clone(ws), Level.PROJECT)
    store.apply([create_op("Old secret")])
    store.apply([delete_op("project_knowledge_old-secret.md")])
    old = store.state.path
    assert any((Path(old) / "trash").iterdir())

    shutil.rmtree(ws)
    clone(ws)  # the same path, another folder
    assert store.state.path == old  # taken on trust for a second at most
    clock[0] += StateDir.RECHECK_SECONDS
    new = store.state.path
    assert new != old and paths.state_dir(str(store.root)) == new
    with pytest.raises(NoteNotFound):  # the new clone inherits no trash
        store.restore("project_knowledge_old-secret.md")
    assert any((Path(old) / "trash").iterdir())  # the old clone's trash, untouched


def test_state_dir_remembers_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    root = str(clone(ws))
    before = paths.state_dir(root)
    shutil.rmtree(ws)
    clone(ws)
    assert paths.state_dir(root) != before  # at once: no memo to wait out


def test_a_state_value_is_passed_on_as_it_is() -> None:
    state = StateDir("/somewhere/.PseudoClaude/memory")
    assert StateDir.of(state) is state
    assert StateDir.of("/somewhere/.PseudoClaude/memory") == state
