"""The dedupe keys built in steps, in the background, while writes go on.

After an upgrade (a new catalog format) or a rebuilt catalog, a large store's keys
are built by a background process (``_dedupe_keys.main``), a step a transaction;
meanwhile a create is compared with the keyed notes through the keys and with the
others by the full comparison's title test, so it finds what the full comparison
finds among those. Steps and writes in any order leave the tables what a build
from the rows gives; a builder killed midway leaves them consistent, and the next
create starts another.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import time
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import create_op, note_names
from mdmem import Level, Store, _spawn
from mdmem.store import _catalog, _dedupe_keys, dedupe
from mdmem.store.cedict import _busy
from mdmem.store.dedupe import number_key
from mdmem.store.state import KEYS_LOCK

WORDS = ["cache", "build", "test", "the", "MSRV", "1.74", "v2", "构建", "部署", "deploy"]
TITLE = st.lists(st.sampled_from(WORDS), min_size=1, max_size=5).map(" ".join)
NAMES = st.integers(0, 40).map(lambda i: f"project_knowledge_n{i:02d}.md")
ROWS = st.dictionaries(NAMES, st.tuples(TITLE, TITLE), max_size=30)
# A write: put a note (title, summary), make it invalid (None), or remove it ("").
WRITES = st.lists(
    st.tuples(NAMES, st.one_of(st.tuples(TITLE, TITLE), st.none(), st.just(""))), max_size=12
)


def _row(title: str, summary: str) -> _catalog.CatalogRow:
    return _catalog.CatalogRow(
        line=f"- {title}", title=title, summary=summary, nums=number_key(title, summary, "")
    )


def _write(cat: _catalog.Catalog, name: str, what: tuple[str, str] | str | None) -> None:
    cat.begin(0)
    if what == "":
        cat.remove([name])
    elif what is None:
        cat.put(name, _catalog.CatalogRow(error="not a note"))
    else:
        assert isinstance(what, tuple)
        cat.put(name, _row(*what))
    cat.commit()


def _rebuilt(cat: _catalog.Catalog) -> tuple[list[tuple[str, bytes]], list[tuple[int, int]]]:
    """What a build from the rows gives, in a catalog of the same rows."""
    other = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    con = cat._open()
    rows = con.execute("SELECT name, title, summary, nums, line FROM notes").fetchall()
    other.begin(0)
    for name, title, summary, nums, line in rows:
        if line is None:
            other.put(name, _catalog.CatalogRow(error="not a note"))
        else:
            other.put(name, _catalog.CatalogRow(line=line, title=title, summary=summary, nums=nums))
    _dedupe_keys.build(other._open())
    other.commit()
    return _dedupe_keys.dump(other._open())


def _consistent(con: sqlite3.Connection) -> None:
    """The tables hold the keys of the valid notes named up to the build's place, only."""
    upto = _dedupe_keys.built_upto(con)
    held = dict(con.execute("SELECT name, keys FROM dedupe_notes").fetchall())
    for name, title, summary, nums, line in con.execute(
        "SELECT name, title, summary, nums, line FROM notes"
    ):
        if line is not None and _dedupe_keys.keeps(upto, name):
            want = array("q", _dedupe_keys.keys(title, summary or "", nums)).tobytes()
            assert held.pop(name) == want, name
    assert held == {}, f"keys of notes outside the built range: {sorted(held)}"
    counts: dict[int, int] = {}
    notes, _ = _dedupe_keys.dump(con)  # also checks the postings against the notes' keys
    for _, blob in notes:
        ids = array("q")
        ids.frombytes(blob)
        for k in ids:
            counts[k] = counts.get(k, 0) + 1
    assert dict(con.execute("SELECT key, n FROM dedupe_count").fetchall()) == counts


@settings(max_examples=50, deadline=None)
@given(
    rows=ROWS,
    plan=st.lists(st.one_of(st.integers(1, 7), WRITES), max_size=8),
)
def test_steps_and_writes_in_any_order_end_as_a_rebuild(
    rows: dict[str, tuple[str, str]], plan: list[int | list[tuple[str, object]]]
) -> None:
    cat = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    cat.begin(0)
    for name, (title, summary) in rows.items():
        cat.put(name, _row(title, summary))
    cat.commit()
    con = cat._open()
    assert _dedupe_keys.built_upto(con) == ""  # nothing keyed: an upgraded catalog's state
    for item in plan:
        if isinstance(item, int):  # a step of the background build
            cat.begin(0)
            _dedupe_keys.build_some(con, item)
            cat.commit()
        else:
            for name, what in item:
                _write(cat, name, what)  # type: ignore[arg-type]
        _consistent(con)
    cat.begin(0)
    assert _dedupe_keys.build_some(con, None)
    cat.commit()
    assert _dedupe_keys.built_upto(con) is None
    assert _dedupe_keys.dump(con) == _rebuilt(cat)


@settings(max_examples=50, deadline=None)
@given(rows=ROWS, step=st.integers(0, 30), title=TITLE, summary=TITLE)
def test_a_lookup_during_the_build_keeps_every_unkeyed_near_title(
    tmp_path_factory: pytest.TempPathFactory,
    rows: dict[str, tuple[str, str]],
    step: int,
    title: str,
    summary: str,
) -> None:
    folder = tmp_path_factory.mktemp("cat")
    cat = _catalog.Catalog(str(folder), private=True)
    cat.begin(0)
    for name, (t, s) in rows.items():
        cat.put(name, _row(t, s))
    cat.commit()
    con = cat._open()
    if step:
        cat.begin(0)
        _dedupe_keys.build_some(con, step)
        cat.commit()
    upto = _dedupe_keys.built_upto(con)
    numbers = number_key(title, summary, "")
    saved = _dedupe_keys.INLINE
    _dedupe_keys.INLINE = 0  # every store is a large one here
    try:
        found = cat.near(title, summary, numbers, 0) or []
    finally:
        _dedupe_keys.INLINE = saved
    cat.close()
    names = [n for n, _, _ in found]
    assert len(names) == len(set(names))
    if upto is None:
        return  # all keyed: test_dedupe_bounded holds the keys against the full comparison
    # Notes left to key: a background build is asked for (else the lookup keyed the rest).
    assert cat.keys_wanted == any(name > upto for name in rows)
    # Among the notes not keyed, the full comparison's own test: every near title is there.
    for name, (t, s) in rows.items():
        if name > upto and number_key(t, s, "") == numbers:
            near = dedupe.near_rows(title, [(name, t, s)])
            assert (name in names) == bool(near), name


def _wait_built(store: Store, timeout: float = 60.0) -> None:
    """Until the keys are built and no builder holds the lock (it has exited)."""
    deadline = time.monotonic() + timeout
    lock = os.path.join(store.state.path, KEYS_LOCK)
    while time.monotonic() < deadline:
        con = sqlite3.connect(store.state.catalog)
        try:
            built = _dedupe_keys.built_upto(con) is None
        finally:
            con.close()
        if built and not _busy(lock):
            return
        time.sleep(0.05)
    raise AssertionError("the background build did not finish")


def _upgraded(tmp_path: Path, count: int) -> Store:
    """A store of ``count`` notes whose catalog has no dedupe keys (as after an upgrade)."""
    store = Store(tmp_path / "mem", Level.PROJECT)
    words = ["cache", "deploy", "retry", "budget", "lint", "queue", "server", "worker"]
    store.apply(
        [
            create_op(
                f"{words[i % 8]} {words[(i // 8) % 8]} {words[(i // 64) % 8]} note {i}",
                f"The {words[i % 8]} step of release {i} runs after the {words[(i // 8) % 8]}.",
            )
            for i in range(count)
        ]
    )
    store.load_index()
    con = sqlite3.connect(store.state.catalog)
    with con:
        _dedupe_keys.clear(con)
    con.close()
    return store


def _dump(store: Store) -> tuple[list[tuple[str, bytes]], list[tuple[int, int]]]:
    con = sqlite3.connect(store.state.catalog)
    try:
        return _dedupe_keys.dump(con)
    finally:
        con.close()


def _rebuild_of(store: Store) -> tuple[list[tuple[str, bytes]], list[tuple[int, int]]]:
    con = sqlite3.connect(store.state.catalog)
    try:
        con.execute("BEGIN IMMEDIATE")
        _dedupe_keys.build(con)
        out = _dedupe_keys.dump(con)
        con.execute("ROLLBACK")
        return out
    finally:
        con.close()


def test_the_first_create_after_an_upgrade_leaves_the_build_to_a_background_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _upgraded(tmp_path, 120)
    monkeypatch.setattr(_dedupe_keys, "INLINE", 10)
    original = "cache cache cache note 0"
    text = "The cache step of release 0 runs after the cache."
    # A repeat of a note that is not keyed yet is still the same note, and a near one
    # updates it: the full comparison decided both.
    result = store.apply([create_op(original, text)])
    assert [a.action for a in result.applied] == ["unchanged"], result.applied
    again = store.apply(
        [create_op(original, text + " It also warms the cache for the next release build.")]
    )
    assert [a.action for a in again.applied] == ["update"], again.applied
    new = store.apply([create_op("A title of its own", "Nothing like the others at all.")])
    assert [a.action for a in new.applied] == ["create"]
    _wait_built(store)  # a background process built them meanwhile
    assert _dump(store) == _rebuild_of(store)
    # Later creates use the keys: the same decisions.
    assert store.apply([create_op(original, text)]).applied[0].action in ("unchanged", "update")


def test_writers_during_a_background_build_leave_the_keys_a_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _upgraded(tmp_path, 150)
    # A builder of small steps (5 notes each), while this process creates, retitles, deletes.
    child = _spawn.start(["5"], cwd=store.state.path, entry=_dedupe_keys.ENTRY)
    monkeypatch.setattr(_dedupe_keys, "INLINE", 10)
    names = note_names(store)
    try:
        for i in range(12):
            store.apply([create_op(f"Written during the build {i}", f"Body number {i} here.")])
            store.apply(
                [
                    {
                        "action": "update",
                        "level": "project",
                        "filename": names[i * 9],
                        "title": f"Retitled while building {i}",
                        "content": "A new body.",
                    }
                ]
            )
            store.apply([{"action": "delete", "level": "project", "filename": names[i * 9 + 4]}])
        assert child.wait(timeout=60) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    _wait_built(store)
    assert _dump(store) == _rebuild_of(store)


def test_a_builder_killed_midway_leaves_consistent_keys_and_the_next_create_goes_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _upgraded(tmp_path, 200)
    child = _spawn.start(["3"], cwd=store.state.path, entry=_dedupe_keys.ENTRY)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            con = sqlite3.connect(store.state.catalog)
            upto = _dedupe_keys.built_upto(con)
            con.close()
            if upto:  # some steps done, not all
                break
            time.sleep(0.01)
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.wait()
    con = sqlite3.connect(store.state.catalog)
    try:
        _consistent(con)
        upto = _dedupe_keys.built_upto(con)
    finally:
        con.close()
    assert upto is not None, "the build finished before the kill: make its steps smaller"
    monkeypatch.setattr(_dedupe_keys, "INLINE", 10)
    store.apply([create_op("After the kill", "A create once the builder died.")])
    _wait_built(store)  # that create started another builder
    assert _dump(store) == _rebuild_of(store)


def test_a_first_load_of_a_large_store_starts_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from builders import fill

    root = tmp_path / "mem"
    fill(root, 700)  # a clone: notes, no catalog
    monkeypatch.setattr(_dedupe_keys, "INLINE", 600)
    store = Store(root, Level.PROJECT)
    store.load_index()  # the first load writes 700 rows: a background build starts
    _wait_built(store)
    assert _dump(store) == _rebuild_of(store)
