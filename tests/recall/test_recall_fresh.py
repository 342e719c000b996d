"""The recall index's freshness contract: cold searches never answer from stale notes.

A settled store is trusted on its key (the directory, MEMORY.md, the marks and
the catalog's files) without listing it; the in-place sweep (up to SWEEP_MAX
notes) or, above it, the notes a query returns are checked. So a create,
delete, rename or git checkout (they change the directory) is always seen, and
a note edited in place is seen by the next query, or, above SWEEP_MAX with no
watcher, when it is returned. Each "cold search" here is a new Store and an
emptied process cache, as a new process has; one case runs real processes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path

import pytest

from builders import cold_search, create_op, git, write_note
from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.recall import fts
from mdmem.recall.fts import Index, freshness_key

T0_TITLE = "Deploy with the zeppelin"


def cold(root: Path, query: str) -> list[tuple[str, str, str]]:
    """A search as a new process makes it: (file name, title, snippet) of each hit."""
    return [(h.filename, h.title, h.snippet) for h in cold_search(root, query)]


def settle(root: Path) -> Index:
    """Search until the index has recorded its key (the directory must be a clock tick old)."""
    for _ in range(100):
        cold(root, "anything")
        index = Index(Store(root, Level.PROJECT))
        if index._trusted(freshness_key(str(root))):
            return index
        time.sleep(0.02)
    raise AssertionError("the store never settled")


@pytest.fixture
def root(workspace: Path) -> Path:
    store = workspace / ".PseudoClaude" / "memory"
    write_note(store, "project_knowledge_deploy.md", T0_TITLE, "Ship the build by zeppelin.")
    for i in range(20):
        write_note(store, f"project_knowledge_other-{i}.md", f"Other {i}", f"Unrelated detail {i}.")
    return store


@pytest.fixture
def no_listing(listings: list[str]) -> list[str]:
    """Record every full listing of a store (a key that holds must spare it)."""
    return listings


def test_a_settled_store_is_answered_without_listing_it(root: Path, no_listing: list[str]) -> None:
    settle(root)
    no_listing.clear()
    assert [h[0] for h in cold(root, "zeppelin")] == ["project_knowledge_deploy.md"]
    assert no_listing == []


def test_a_key_older_than_the_max_age_means_a_full_check(
    root: Path, no_listing: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    settle(root)
    no_listing.clear()
    later = time.time() + 3600
    monkeypatch.setattr(time, "time", lambda: later)
    cold(root, "zeppelin")
    assert str(root) in no_listing


def _create(root: Path) -> None:
    write_note(root, "project_knowledge_airship.md", "Airship zeppelin", "A second zeppelin note.")


def _delete(root: Path) -> None:
    (root / "project_knowledge_deploy.md").unlink()


def _rename(root: Path) -> None:
    os.rename(root / "project_knowledge_deploy.md", root / "project_knowledge_shipping.md")


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (_create, ["project_knowledge_airship.md", "project_knowledge_deploy.md"]),
        (_delete, []),
        (_rename, ["project_knowledge_shipping.md"]),
    ],
)
def test_creates_deletes_and_renames_between_two_cold_searches_are_seen(
    root: Path, change: object, expect: list[str]
) -> None:
    settle(root)
    assert [h[0] for h in cold(root, "zeppelin")] == ["project_knowledge_deploy.md"]
    assert callable(change)
    change(root)
    assert sorted(h[0] for h in cold(root, "zeppelin")) == expect


def test_a_git_checkout_between_two_cold_searches_is_seen(root: Path, workspace: Path) -> None:
    git(workspace, "init", "-q", "-b", "main")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "zeppelin")
    git(workspace, "checkout", "-q", "-b", "balloon")
    write_note(
        root, "project_knowledge_deploy.md", "Deploy with the balloon", "Ship it by balloon."
    )
    git(workspace, "commit", "-q", "-am", "balloon")
    settle(root)
    assert [h[0] for h in cold(root, "balloon")] == ["project_knowledge_deploy.md"]
    assert cold(root, "zeppelin") == []
    git(workspace, "checkout", "-q", "main")  # the same file name, the old content
    assert cold(root, "balloon") == []
    ((name, title, _),) = cold(root, "zeppelin")
    assert (name, title) == ("project_knowledge_deploy.md", T0_TITLE)


def test_an_in_place_edit_of_a_returned_note_is_seen_and_never_stale(
    root: Path, no_listing: list[str]
) -> None:
    settle(root)
    path = root / "project_knowledge_deploy.md"
    directory = os.stat(root).st_mtime_ns
    time.sleep(0.02)  # a clock tick, so the edit's mtime differs from the recorded one
    # Edited in place (same inode, the directory untouched): still matches "zeppelin".
    with open(path, "r+", encoding="utf-8") as f:
        text = f.read().replace(T0_TITLE, "Deploy with the new zeppelin fleet")
        f.seek(0)
        f.write(text)
        f.truncate()
    assert os.stat(root).st_mtime_ns == directory
    no_listing.clear()
    ((name, title, _),) = cold(root, "zeppelin")
    assert (name, title) == ("project_knowledge_deploy.md", "Deploy with the new zeppelin fleet")
    assert no_listing == []  # seen without listing the store
    # Edited again so it no longer matches: it is not returned with its old content.
    time.sleep(0.02)
    path.write_text(text.replace("zeppelin", "glider"), encoding="utf-8")
    assert cold(root, "zeppelin") == []
    # Returned by the old content, it was re-indexed on the way: now found by the new.
    assert [h[0] for h in cold(root, "glider")] == ["project_knowledge_deploy.md"]


def test_an_in_place_same_size_edit_of_a_note_not_returned_is_seen_at_once(
    root: Path, no_listing: list[str]
) -> None:
    settle(root)
    path = root / "project_knowledge_other-3.md"
    before = path.read_bytes()
    directory, inode = os.stat(root).st_mtime_ns, os.stat(path).st_ino
    time.sleep(0.02)
    # In place, same size, a word no note had: the index cannot return it by its content.
    with open(path, "r+b") as f:
        f.write(before.replace(b"Unrelated", b"Kitesurfs"))
    assert path.stat().st_size == len(before) and path.stat().st_ino == inode
    assert os.stat(root).st_mtime_ns == directory
    no_listing.clear()
    assert [h[0] for h in cold(root, "kitesurfs")] == ["project_knowledge_other-3.md"]
    assert no_listing == []  # seen by its ctime, without a full check
    # Read once, its stat stands for its content: the next search does not read it again.
    reads: list[str] = []
    real = Store.read_text
    Store.read_text = lambda self, name, *a, **k: reads.append(name) or real(self, name, *a, **k)  # type: ignore[method-assign]
    try:
        time.sleep(2.1)  # past the file system clock's margin
        cold(root, "kitesurfs")
        reads.clear()
        assert [h[0] for h in cold(root, "kitesurfs")] == ["project_knowledge_other-3.md"]
        assert reads == []
    finally:
        Store.read_text = real  # type: ignore[method-assign]


@pytest.mark.parametrize("swept", [True, False], ids=["swept", "above-sweep-max"])
def test_the_returned_notes_are_checked_only_when_the_sync_did_not_check_every_note(
    root: Path, swept: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A store the in-place sweep covers had every note's ctime looked at by the query's own
    # sync: the notes it returns are not stat'ed again. Above MDMEM_SWEEP_MAX, with no
    # watcher to ask, the key alone vouches for the folder, and the returned notes are
    # checked (the older contract): an in-place edit of one is seen either way.
    if not swept:
        monkeypatch.setenv("MDMEM_SWEEP_MAX", "5")
    settle(root)
    # The notes the ranking itself had checked (the sweep's own checks are the sync's).
    by_ranking: list[list[str]] = []
    real = Index.refresh

    def refresh(self: Index, names: Iterable[str]) -> bool:
        wanted = list(names)
        # Called by the ranking (from a comprehension in it, a frame of its own before 3.12).
        caller = sys._getframe(1)
        if "_rank" in (caller.f_code.co_name, caller.f_back and caller.f_back.f_code.co_name):
            by_ranking.append(wanted)
        return real(self, wanted)

    monkeypatch.setattr(Index, "refresh", refresh)
    assert [h[0] for h in cold(root, "zeppelin")] == ["project_knowledge_deploy.md"]
    assert by_ranking == ([] if swept else [["project_knowledge_deploy.md"]])
    time.sleep(0.02)
    path = root / "project_knowledge_deploy.md"
    with open(path, "r+", encoding="utf-8") as f:  # in place: the folder is untouched
        text = f.read().replace(T0_TITLE, "Deploy with the zeppelin armada")
        f.seek(0)
        f.write(text)
        f.truncate()
    ((name, title, _),) = cold(root, "zeppelin")
    assert (name, title) == ("project_knowledge_deploy.md", "Deploy with the zeppelin armada")


def test_a_warm_process_sweeps_once_in_two_seconds_and_a_recheck_sweeps_again(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A long-lived process (a Manager's worker) that swept a store moments ago does not
    # sweep it again when the folder changes (mdmem's own write, in the change log); what
    # a query returns is still checked, an edit in place elsewhere waits for the next
    # sweep; recheck() (the prompt server, before each prompt) has the next one sweep.
    from mdmem.recall import engine

    monkeypatch.setattr(fts, "SWEEP_AGAIN", 60.0)  # however slow the machine, within it
    settle(root)
    store = Store(root, Level.PROJECT)
    warm = lambda query: [h.filename for h in engine.search([store], query, semantic=False)]  # noqa: E731
    assert warm("zeppelin") == ["project_knowledge_deploy.md"]  # swept just now
    time.sleep(0.02)
    hidden = root / "project_knowledge_other-3.md"
    before = hidden.read_bytes()
    with open(hidden, "r+b") as f:  # in place, same size, a word no note had
        f.write(before.replace(b"Unrelated", b"Kitesurfs"))
    returned = root / "project_knowledge_deploy.md"
    with open(returned, "r+", encoding="utf-8") as f:  # in place, still a hit
        text = f.read().replace(T0_TITLE, "Deploy with the zeppelin armada")
        f.seek(0)
        f.write(text)
        f.truncate()
    store.apply([create_op("Kept a day", "The cache is kept a day.")])  # the folder moves
    # A hit is checked by its own stat: never returned with what it said before.
    hits = engine.search([store], "zeppelin", semantic=False)
    assert [(h.filename, h.title) for h in hits] == [
        ("project_knowledge_deploy.md", "Deploy with the zeppelin armada")
    ]
    assert warm("kitesurfs") == []  # not swept again within SWEEP_AGAIN (60 s here)
    engine.recheck()
    assert warm("kitesurfs") == ["project_knowledge_other-3.md"]
    # And without a recheck, once SWEEP_AGAIN has passed.
    time.sleep(0.02)
    with open(hidden, "r+b") as f:
        f.write(before.replace(b"Unrelated", b"Paraglide"))
    store.apply([create_op("Kept a week", "The log is kept a week.")])
    assert warm("paraglide") == []
    monkeypatch.setattr(fts, "SWEEP_AGAIN", 0.0)  # as if the time had passed
    store.apply([create_op("Kept a month", "The trash is kept a month.")])
    assert warm("paraglide") == ["project_knowledge_other-3.md"]


def test_a_warm_process_compares_notes_as_new_as_the_full_check_once_not_every_sweep(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Notes whose ctime is within the margin of the full check (a clone's, a copy's)
    # are compared by the first sweep; the next sweeps compare only what changed since
    # it, and an edit in place after it is still seen.
    from mdmem.recall import engine

    monkeypatch.setattr(fts, "_SWEEP_MARGIN", 0.2)
    settle(root)
    store = Store(root, Level.PROJECT)
    compared: list[list[str]] = []
    real_refresh = Index.refresh

    def refresh(self: Index, names: Iterable[str]) -> bool:
        listed = sorted(names)
        compared.append(listed)
        return real_refresh(self, listed)

    monkeypatch.setattr(Index, "refresh", refresh)
    warm = lambda query: [h.filename for h in engine.search([store], query, semantic=False)]  # noqa: E731
    time.sleep(0.3)  # the notes older than a sweep's margin, not than the full check's
    engine.recheck()
    assert warm("zeppelin") == ["project_knowledge_deploy.md"]
    assert max(map(len, compared)) >= 21  # every note: as new as the full check
    compared.clear()
    engine.recheck()
    assert warm("zeppelin") == ["project_knowledge_deploy.md"]
    assert max(map(len, compared), default=0) <= 1  # the hit's own check, no sweep's
    hidden = root / "project_knowledge_other-3.md"
    with open(hidden, "r+b") as f:  # in place, same size, a word no note had
        f.write(hidden.read_bytes().replace(b"Unrelated", b"Kitesurfs"))
    compared.clear()
    engine.recheck()
    assert warm("kitesurfs") == ["project_knowledge_other-3.md"]
    assert [hidden.name] in compared


def test_a_returned_note_edited_into_garbage_is_dropped(root: Path) -> None:
    settle(root)
    time.sleep(0.02)
    (root / "project_knowledge_deploy.md").write_text("zeppelin, no front matter\n")
    assert cold(root, "zeppelin") == []


def test_cold_processes_see_an_in_place_edit_and_a_rename(root: Path, workspace: Path) -> None:
    settle(root)
    env = {**python_env(), "HOME": os.environ["HOME"], "MDMEM_SEMANTIC": "off"}
    for key in ("MDMEM_STATE_DIR", "MDMEM_USER_DIR"):
        if key in os.environ:
            env[key] = os.environ[key]

    def process(query: str) -> list[dict[str, object]]:
        done = subprocess.run(
            [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "search", query, "--json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=True,
        )
        rows = json.loads(done.stdout or "[]")
        assert isinstance(rows, list)
        return rows

    assert [r["title"] for r in process("zeppelin")] == [T0_TITLE]
    time.sleep(0.02)
    path = root / "project_knowledge_deploy.md"
    path.write_text(path.read_text().replace(T0_TITLE, "Zeppelin, edited by hand"))
    assert [r["title"] for r in process("zeppelin")] == ["Zeppelin, edited by hand"]
    os.rename(path, root / "project_knowledge_moved.md")
    assert [r["filename"] for r in process("zeppelin")] == ["project_knowledge_moved.md"]
