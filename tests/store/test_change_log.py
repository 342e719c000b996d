"""The store's change log: derived state catches up after mdmem's own writes by name.

Every pass that changes the catalog's rows (a write, or a read that noticed a
hand edit) logs the names it changed and the store's key (directory and
MEMORY.md stats) before and after. The recall index and the prompt block,
once in step, follow the log instead of listing the store; anything the log
does not account for (a file created, deleted or renamed behind mdmem's back,
a rebuilt catalog, a log pruned past them) sends them back to a full check.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import cold_search, forget_open_indexes
from builders import create_op as create
from conftest import state
from mdmem import Level, Note, NoteType, Store
from mdmem.recall.fts import Index, freshness_key
from mdmem.store import _catalog, marks
from mdmem.store.note import render
from mdmem.store.state import CATALOG


def hand_write(root: Path, name: str, title: str, body: str) -> None:
    note = Note(name, NoteType.PROJECT_KNOWLEDGE, title, "", body, None, None)
    (root / name).write_text(render(note), encoding="utf-8")


def found(store: Store, query: str) -> list[str]:
    """A search as a new process makes it (no cached index): the file names it finds."""
    return [h.filename for h in cold_search(store.root, query)]


def settled(store: Store) -> Index:
    """Search until the recall index is in step by a full check (key and log recorded)."""
    for _ in range(100):
        found(store, "anything")
        index = Index(Store(store.root, Level.PROJECT))
        if index._trusted(freshness_key(str(store.root))) and index._meta("log"):
            return index
        time.sleep(0.02)
    raise AssertionError("the store never settled")


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "mem", Level.PROJECT)
    s.apply([create(f"Background fact {i}") for i in range(12)])
    return s


def test_a_write_is_logged_with_its_names_and_keys(store: Store) -> None:
    cat = _catalog.Catalog(str(store.root), private=True)
    epoch, seq = cat.position()
    key = _catalog.store_key(str(store.root))
    store.apply([create("Zeppelin deploys")])
    after = store.changes_since((epoch, seq), key)
    assert after is not None
    position, now_key, names = after
    assert names == {"project_knowledge_zeppelin-deploys.md"}
    assert now_key == _catalog.store_key(str(store.root)) != key
    assert position[1] > seq
    # From the key it ended at, nothing more.
    assert store.changes_since(position, now_key) == (position, now_key, set())
    # From a key the log does not start at: it cannot say.
    assert store.changes_since((epoch, seq), now_key) is None


def test_recall_follows_mdmem_writes_without_listing(store: Store, listings: list[str]) -> None:
    settled(store)
    listings.clear()
    store.apply([create("Zeppelin deploys", "Ship the build by zeppelin.")])
    assert found(store, "zeppelin") == ["project_knowledge_zeppelin-deploys.md"]
    store.apply(
        [
            {
                "action": "delete",
                "level": "project",
                "filename": "project_knowledge_zeppelin-deploys.md",
            }
        ]
    )
    assert found(store, "zeppelin") == []
    store.apply([create("Airship deploys", "The zeppelin retired; airships now.")])
    assert found(store, "airships") == ["project_knowledge_airship-deploys.md"]
    assert listings == []  # caught up by the log's names alone, every time


def test_a_hand_edit_a_read_noticed_reaches_recall_through_the_log(
    store: Store, listings: list[str]
) -> None:
    settled(store)
    name = "project_knowledge_background-fact-3.md"
    path = store.root / name
    text = path.read_text(encoding="utf-8")
    time.sleep(0.011)
    path.write_text(text + "The quokka knows.\n", encoding="utf-8")
    store.load_index()  # a full read: notices the edit, logs the name
    listings.clear()
    assert found(store, "quokka") == [name]
    assert listings == []


@pytest.mark.parametrize("behind", ["create", "delete", "rename"])
def test_a_change_behind_mdmems_back_sends_recall_back_to_a_full_check(
    store: Store, listings: list[str], behind: str
) -> None:
    settled(store)
    store.apply([create("Logged write")])  # the log holds this one
    # A clock tick later: within the tick of mdmem's write, on a kernel before 6.13, a
    # change behind its back may keep the directory's stat (docs/concepts/index.md).
    time.sleep(0.011)
    root = store.root
    if behind == "create":
        hand_write(root, "project_knowledge_hand.md", "Hand made", "The narwhal was here.")
        query, expect = "narwhal", ["project_knowledge_hand.md"]
    elif behind == "delete":
        (root / "project_knowledge_background-fact-5.md").unlink()
        query, expect = "background fact 5", []
    else:
        os.rename(root / "project_knowledge_logged-write.md", root / "project_knowledge_moved.md")
        query, expect = "logged write", ["project_knowledge_moved.md"]
    listings.clear()
    hits = found(store, query)
    assert hits[: len(expect)] == expect and all(
        h != "project_knowledge_background-fact-5.md" for h in hits
    )
    assert listings  # the log did not account for it: the store was listed


def test_a_rebuilt_catalog_is_another_log(store: Store, listings: list[str]) -> None:
    settled(store)
    (Path(state(store.root)) / CATALOG).unlink()
    for suffix in ("-wal", "-shm"):
        (Path(state(store.root)) / (CATALOG + suffix)).unlink(missing_ok=True)
    store.apply([create("After the rebuild", "The okapi arrived.")])
    listings.clear()
    assert found(store, "okapi") == ["project_knowledge_after-the-rebuild.md"]
    assert listings  # another epoch: the old place in the log means nothing


def test_a_pruned_log_sends_a_reader_back_to_a_full_check(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = _catalog.Catalog(str(store.root), private=True)
    position = cat.position()
    key = _catalog.store_key(str(store.root))
    monkeypatch.setattr(_catalog, "LOG_KEEP", 3)
    for i in range(70):  # past a pruning (every 64 entries)
        store.apply([create(f"Churn {i}")])
    assert store.changes_since(position, key) is None
    recent = cat.position()
    store.apply([create("One more")])
    after = store.changes_since(recent, _catalog.store_key(str(store.root)))
    assert after is None  # the key moved since `recent` was taken with the older key
    now = _catalog.store_key(str(store.root))
    assert store.changes_since(cat.position(), now) is not None


def test_a_pass_that_lists_too_many_names_says_catch_up_in_full(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    cat = _catalog.Catalog(str(store.root), private=True)
    position = cat.position()
    key = _catalog.store_key(str(store.root))
    monkeypatch.setattr(_catalog, "LOG_NAMES", 2)
    store.apply([create(f"Batch {i}") for i in range(3)])
    assert store.changes_since(position, key) is None


def test_the_block_of_a_large_store_follows_writes_without_a_stat_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.store.block import prompt_block

    root = tmp_path / "mem"
    root.mkdir()
    for i in range(450):  # more than twice the block's lines: ranked by the catalog
        hand_write(root, f"project_knowledge_n{i:03d}.md", f"Note {i}", f"Body {i}.")
    store = Store(root, Level.PROJECT)
    for _ in range(50):  # until a stat pass finds it settled
        store.load_index()
        if store.catalog_current() is not None:
            break
        time.sleep(0.02)
    assert store.catalog_current() == 450
    store.apply([create("Newest correction")])

    def no_stat_pass(self: Store) -> str:
        raise AssertionError("the block listed the store")

    with monkeypatch.context() as m:
        m.setattr(Store, "load_index", no_stat_pass)
        block = prompt_block(store, None)
    assert "Newest correction" in block
    # The same block a full load makes.
    forget_open_indexes()
    shutil.rmtree(state(root))
    assert prompt_block(Store(root, Level.PROJECT), None) == block
    # Behind mdmem's back: the log cannot vouch, the block lists the store again.
    hand_write(root, "project_knowledge_hand.md", "Hand made", "By hand.")
    assert Store(root, Level.PROJECT).catalog_current() is None
    assert marks.ranked_index(Store(root, Level.PROJECT), 200)[1] == 452


# -- the invariant: following the log gives what a full check gives ---------------------

STEPS = st.lists(
    st.tuples(
        st.sampled_from(["create", "update", "delete", "hand-create", "hand-edit", "hand-delete"]),
        st.integers(0, 7),
    ),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=STEPS)
def test_following_the_log_equals_a_full_check(
    tmp_path: Path, steps: list[tuple[str, int]]
) -> None:
    root = tmp_path / f"s{time.monotonic_ns()}"
    store = Store(root, Level.PROJECT)
    store.apply([create(f"Seed {i}") for i in range(4)])
    index = Index(store)
    index.sync(full=True)
    for _ in range(100):  # in step by a full check, its place in the log recorded
        if index._meta("log"):
            break
        time.sleep(0.011)
        index.sync(full=True)
    assert index._meta("log")
    caught: list[int | None] = []
    real = index._catch_up

    def counting(db: object, key: str) -> int | None:
        caught.append(real(db, key))  # type: ignore[arg-type]
        return caught[-1]

    index._catch_up = counting  # type: ignore[method-assign]
    for step, (kind, n) in enumerate(steps):
        name = f"project_knowledge_n{n}.md"
        path = root / name
        if kind == "create":
            store.apply([{**create(f"N {n}"), "filename": name}])
        elif kind == "update" and path.exists():
            store.apply(
                [
                    {
                        "action": "update",
                        "level": "project",
                        "filename": name,
                        "content": f"New {kind}",
                    }
                ]
            )
        elif kind == "delete" and path.exists():
            store.apply([{"action": "delete", "level": "project", "filename": name}])
        elif kind.startswith("hand"):
            time.sleep(0.011)  # a clock tick after mdmem's last write, as above
        if kind == "hand-create" and not path.exists():
            hand_write(root, name, f"Hand {n}", f"By hand {n}.")
        elif kind == "hand-edit" and path.exists():
            hand_write(root, name, f"Edited {n}", f"Edited in place {n}, {time.time_ns()}.")
            store.load_index()  # the read that notices it (and logs it)
        elif kind == "hand-delete" and path.exists():
            path.unlink()
        caught.clear()
        index.sync()
        if step == 0 and kind in ("create", "update", "delete") and caught:
            assert caught[0] is not None  # an mdmem write, right after a full check: by the log
        indexed = dict(index._connect().execute("SELECT name, sha FROM notes").fetchall())
        assert indexed == Store(root, Level.PROJECT).entry_versions()


def test_a_live_index_whose_state_folder_is_deleted_starts_again(store: Store) -> None:
    index = Index(store)
    index.sync(full=True)
    shutil.rmtree(state(store.root))  # derived: anyone may delete it at any moment
    store.apply([create("After the wipe", "The tapir arrived.")])
    index.sync()
    rows = dict(index._connect().execute("SELECT name, sha FROM notes").fetchall())
    assert rows == Store(store.root, Level.PROJECT).entry_versions()
    assert "project_knowledge_after-the-wipe.md" in rows
    assert (state(store.root) / "recall.sqlite").exists()
    index.close()


def test_streamed_versions_are_the_versions(store: Store) -> None:
    hand_write(store.root, "project_knowledge_hand.md", "Hand made", "By hand.")
    (store.root / "project_knowledge_broken.md").write_text("no front matter\n", encoding="utf-8")
    fresh = Store(store.root, Level.PROJECT)
    streamed = list(fresh.iter_versions())
    assert streamed == sorted(Store(store.root, Level.PROJECT).entry_versions().items())
    assert "project_knowledge_hand.md" in dict(streamed)
    assert "project_knowledge_broken.md" not in dict(streamed)


def test_whether_the_log_can_say_is_answered_without_reading_its_names(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # catalog_current only asks whether the log chains (names=False): its answer is the
    # full reading's, for a chain, a key it does not start at, a catch-up in full and a
    # pruned log.
    cat = _catalog.Catalog(str(store.root), private=True)

    def agree(position: tuple[str, int], key: str) -> bool:
        now = _catalog.store_key(str(store.root))
        full = cat.changes_after(position, key, now)
        alone = cat.changes_after(position, key, now, names=False)
        assert (full is None) == (alone is None)
        assert alone is None or (alone[0] == full[0] and alone[1] == set())  # type: ignore[index]
        return full is not None

    start, key = cat.position(), _catalog.store_key(str(store.root))
    store.apply([create("Zeppelin deploys")])
    assert agree(start, key)
    assert not agree(start, _catalog.store_key(str(store.root)))
    monkeypatch.setattr(_catalog, "LOG_NAMES", 2)
    before, key = cat.position(), _catalog.store_key(str(store.root))
    store.apply([create(f"Batch {i}") for i in range(3)])
    assert not agree(before, key)
    monkeypatch.setattr(_catalog, "LOG_KEEP", 3)
    for i in range(70):
        store.apply([create(f"Churn {i}")])
    assert not agree(start, key)
    recent, key = cat.position(), _catalog.store_key(str(store.root))
    store.apply([create("One more")])
    assert agree(recent, key)
