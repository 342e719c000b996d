"""SQLite's errors become one named error at the catalog's edge (store/_catalog.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from builders import create_op
from mdmem import Level, MdmemError, Store
from mdmem.store import _catalog, _catalog_reads


@pytest.mark.parametrize(
    ("error", "busy"),
    [
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("database table is busy"), True),
        (sqlite3.DatabaseError("file is not a database"), False),
        (sqlite3.IntegrityError("UNIQUE constraint failed"), False),
    ],
)
def test_an_sqlite_error_becomes_a_catalog_error(error: sqlite3.Error, busy: bool) -> None:
    with pytest.raises(_catalog.CatalogError) as raised, _catalog.translated:
        raise error
    assert raised.value.busy is busy
    assert raised.value.__cause__ is error
    assert isinstance(raised.value, MdmemError)


@pytest.mark.parametrize("error", [OSError("disk"), ValueError("bad"), KeyError("x")])
def test_other_errors_pass_unchanged(error: Exception) -> None:
    with pytest.raises(type(error)) as raised, _catalog.translated:
        raise error
    assert raised.value is error


def test_every_public_catalog_method_is_at_the_edge(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([create_op("Build")])
    cat = _catalog.Catalog(store.path, private=True)
    try:
        assert cat.begin(1.0)
        with pytest.raises(_catalog.CatalogError) as raised:
            cat.begin(1.0)  # SQLite: cannot start a transaction within a transaction
        assert isinstance(raised.value.__cause__, sqlite3.OperationalError)
        assert not raised.value.busy
        cat.rollback()
        assert [name for name, *_ in cat.iter_stats()] == ["project_knowledge_build.md"]
    finally:
        cat.close()


def test_a_replaced_catalog_is_reopened_between_calls_never_inside_a_transaction(
    tmp_path: Path,
) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([create_op("Build")])
    cat = _catalog.Catalog(store.path, private=True)
    other = tmp_path / "other.sqlite"
    try:
        assert cat.begin(1.0)
        cat.set_meta("probe", "mine")
        # Another process puts a new catalog in its place (a rebuild, `mdmem doctor`).
        sqlite3.connect(other).close()
        for suffix in ("-wal", "-shm"):
            Path(cat.path + suffix).unlink(missing_ok=True)
        other.replace(cat.path)
        # The transaction goes on with the file it began on: its own write is still
        # there, and its commit is a commit (not one silently dropped with the connection).
        assert cat.meta("probe") == "mine"
        cat.commit()
        # The next call sees the new file: a new catalog, without the probe.
        assert cat.meta("probe") is None
    finally:
        cat.close()


def test_a_shared_reader_is_reused_and_never_reads_a_catalog_that_is_gone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The module's one-query readers keep their connection for the thread's next query,
    and open a new one whenever the file is not the one they opened: thrown away and
    rebuilt (on a reused inode too: its ctime is new), or written since; in a forked
    child; after an error; beyond the few stores kept."""
    from mdmem._sqlite import sqlite3 as used

    opened: list[str] = []
    real_connect = used.connect

    def connect(path: str, *a: object, **k: object) -> sqlite3.Connection:
        opened.append(str(path))
        return real_connect(path, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(used, "connect", connect)
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([create_op("Build"), create_op("Deploy")])
    opened.clear()
    assert _catalog_reads.type_counts(store.state) == {"project_knowledge": 2}
    assert _catalog_reads.present(store.state, ["project_knowledge_build.md"])
    assert len(opened) == 1  # one connection for both
    # The catalog thrown away and made again, as after damage: never the old rows.
    _catalog.Catalog(store.path, private=True, state=store.state).reset()
    store.apply([create_op("Release")])
    assert _catalog_reads.type_counts(store.state) == {"project_knowledge": 3}
    assert len(opened) >= 2
    # Rows another connection commits since: what is there now, not a snapshot.
    store.apply(
        [{"action": "delete", "level": "project", "filename": "project_knowledge_release.md"}]
    )
    store.load_index()
    assert "project_knowledge_release.md" not in _catalog_reads.present(
        store.state, ["project_knowledge_release.md"]
    )
    # A forked child (another pid) opens its own.
    count = len(opened)
    monkeypatch.setattr(_catalog.os, "getpid", lambda: -1)
    _catalog_reads.type_counts(store.state)
    assert len(opened) == count + 1
    # At most _SHARED_MAX kept: a fifth store's reader closes the oldest.
    others = [Store(tmp_path / f"m{i}", Level.PROJECT) for i in range(_catalog_reads._SHARED_MAX)]
    for other in others:
        other.apply([create_op("Note")])
        _catalog_reads.type_counts(other.state)
    _, readers = _catalog_reads._SHARED.readers
    assert len(readers) == _catalog_reads._SHARED_MAX
    assert store.state.catalog not in readers


def test_get_many_is_get_for_each_name_it_holds(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([create_op("Build"), create_op("Deploy"), create_op("Release")])
    store.load_index()
    cat = _catalog.Catalog(store.path, private=True, state=store.state)
    try:
        held = [p.name for p in store.root.glob("project_knowledge_*.md")]
        absent = [f"project_knowledge_absent-{i}.md" for i in range(700)]  # two statements
        got = cat.get_many([*absent, *held, held[0]])
        assert got == {name: cat.get(name) for name in held}
        assert len(got) == 3
    finally:
        cat.close()
