"""SQLite's errors become one named error at the catalog's edge (store/_catalog.py)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from builders import create_op
from mdmem import Level, MdmemError, Store
from mdmem.store import _catalog


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
