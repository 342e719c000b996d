"""Hand edits are first-class: notes are the truth, and MEMORY.md follows them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from conftest import state
from mdmem import Level, Store

NOTE = "---\ntype: {type}\ntitle: {title}\nsummary: {summary}\n---\n{body}\n"


def write(
    path: Path, title: str, summary: str = "s", type: str = "project_knowledge", body: str = "b"
) -> None:
    path.write_text(
        NOTE.format(type=type, title=title, summary=summary, body=body), encoding="utf-8"
    )


def age(path: Path, seconds: float = 60) -> None:
    """Make a file look written a while ago, as most notes in a real store are."""
    past = time.time() - seconds
    os.utime(path, (past, past))


def disk_lines(store: Store) -> list[str]:
    """What MEMORY.md should say, computed independently of the store's catalog."""
    fresh = Store(store.root, Level.PROJECT)
    for name in ("catalog.sqlite", "catalog.sqlite-wal", "catalog.sqlite-shm", "fingerprint"):
        (state(store.root) / name).unlink(missing_ok=True)
    return fresh.load_index().splitlines()


@pytest.fixture
def store(tmp_path: Path) -> Store:
    s = Store(tmp_path / "mem", Level.PROJECT)
    s.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "content": f"body {i}",
            }
            for i in range(5)
        ]
    )
    for p in s.root.glob("*.md"):
        age(p)
    s.load_index()
    return s


def test_add_edit_rename_delete_by_hand(store: Store) -> None:
    root = store.root
    write(root / "added_by_hand.md", "Added by hand")
    text = (root / "project_knowledge_note-1.md").read_text()
    (root / "project_knowledge_note-1.md").write_text(
        text.replace("title: Note 1", "title: Edited")
    )
    os.rename(root / "project_knowledge_note-2.md", root / "renamed.md")
    (root / "project_knowledge_note-3.md").unlink()

    index = store.load_index()
    assert "Added by hand" in index and "(added_by_hand.md)" in index
    assert "Edited" in index and "Note 1 " not in index
    assert "(renamed.md)" in index and "(project_knowledge_note-2.md)" not in index
    assert "note-3" not in index
    assert (root / "MEMORY.md").read_text() == index
    report = store.reindex()
    assert report.notes == 5 and report.problems == () and not report.changed
    assert index.splitlines() == disk_lines(store)


def test_same_size_edit_within_one_clock_tick_is_noticed(store: Store) -> None:
    path = store.root / "project_knowledge_note-0.md"
    write(path, "AAAA")
    assert "AAAA" in store.load_index()
    st = path.stat()
    write(path, "BBBB")  # same size...
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # ...and the same mtime
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert "BBBB" in store.load_index()


def test_same_size_edit_that_restores_an_old_mtime_is_noticed(store: Store) -> None:
    """The deterministic form of the case above: the note is clearly older than the catalog,
    so only the ctime (which no utime can set back) shows that it changed."""
    path = store.root / "project_knowledge_note-0.md"
    write(path, "AAAA")
    age(path)
    assert "AAAA" in store.load_index()
    st = path.stat()
    write(path, "BBBB")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert path.stat().st_mtime_ns == st.st_mtime_ns and path.stat().st_size == st.st_size
    assert "BBBB" in store.load_index()


def test_settled_store_loads_without_parsing(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    store.load_index()  # settle: fingerprint written
    assert (state(store.root) / "fingerprint").exists()
    import mdmem.store.note
    import mdmem.store.quicknote

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a settled store must not parse notes")

    monkeypatch.setattr(mdmem.store.note, "parse", boom)
    monkeypatch.setattr(mdmem.store.quicknote, "parse", boom)  # a catalog row's reader
    monkeypatch.setattr("mdmem.store._catalog.Catalog.stats", boom)
    assert store.load_index().count("\n") == 5


def test_only_changed_notes_are_parsed(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import mdmem.store.quicknote

    # A catalog row reads its note through quicknote.parse (the full parse behind it).
    parsed: list[str] = []
    real = mdmem.store.quicknote.parse
    monkeypatch.setattr(
        mdmem.store.quicknote, "parse", lambda text, name: parsed.append(name) or real(text, name)
    )
    write(store.root / "project_knowledge_note-4.md", "Changed", body="a longer body than before")
    store.load_index()
    assert parsed == ["project_knowledge_note-4.md"]


MALFORMED = {
    "bad_yaml.md": "---\ntitle: [unclosed\n---\ntext I typed\n",
    "no_front_matter.md": "just some text\n",
    "missing_type.md": "---\ntitle: No type\n---\nbody\n",
    "latin1.md": None,
}


def test_malformed_notes_never_crash_and_are_never_deleted(store: Store) -> None:
    for name, text in MALFORMED.items():
        if text is None:
            (store.root / name).write_bytes(b"---\ntype: project_knowledge\ntitle: caf\xe9\n---\n")
        else:
            (store.root / name).write_text(text)
    before = {name: (store.root / name).read_bytes() for name in MALFORMED}
    index = store.load_index()
    assert index.count("\n") == 5
    report = store.reindex()
    assert sorted(p.filename for p in report.problems) == sorted(MALFORMED)
    assert {p.filename: p.reason for p in store.problems()}["bad_yaml.md"].startswith("bad YAML")
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "After",
                "content": "x",
            }
        ]
    )
    store.apply([{"action": "delete", "level": "project", "filename": "bad_yaml.md"}])
    store.restore("bad_yaml.md")
    assert {name: (store.root / name).read_bytes() for name in MALFORMED} == before


def test_index_rebuilt_after_memory_md_is_deleted_or_mangled(store: Store) -> None:
    good = store.load_index()
    (store.root / "MEMORY.md").unlink()
    assert store.load_index() == good
    (store.root / "MEMORY.md").write_text("# someone typed here\n")
    assert store.load_index() == good
    assert (store.root / "MEMORY.md").read_text() == good


def test_derived_state_is_safe_to_delete(store: Store) -> None:
    good = store.load_index()
    import shutil

    shutil.rmtree(state(store.root))
    assert store.load_index() == good
    assert store.reindex().notes == 5


def test_store_without_writable_state_still_answers(store: Store) -> None:
    import shutil

    shutil.rmtree(state(store.root))
    state(store.root).write_text("not a directory")  # derived state cannot be written
    write(store.root / "new.md", "New")
    assert "New" in store.load_index()
    assert "New" in store.load_index()


def test_a_note_as_new_as_the_catalog_is_hashed_again(store: Store) -> None:
    """Git's racy-clean rule: a stat no older than the catalog proves nothing."""
    folder = state(store.root)
    path = store.root / "project_knowledge_note-0.md"
    tick = time.time_ns() - 10**9
    write(path, "CCCC")
    os.utime(path, ns=(tick, tick))
    assert "CCCC" in store.load_index()
    # As if the note's row had been recorded in the same clock tick as the note: then
    # no fingerprint is saved, and the recorded stat is all there is.
    import sqlite3

    with sqlite3.connect(folder / "catalog.sqlite") as db:
        db.execute("UPDATE notes SET at = ? WHERE name = ?", (tick, path.name))
    db.close()
    (folder / "fingerprint").unlink(missing_ok=True)
    # Rewrite in place, same size, same mtime: the stat cannot tell, only the bytes.
    with open(path, "r+", encoding="utf-8") as f:
        text = f.read().replace("CCCC", "DDDD")
        f.seek(0)
        f.write(text)
    os.utime(path, ns=(tick, tick))
    assert "DDDD" in store.load_index()


def test_a_burst_of_single_creates_rehashes_only_the_newest(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.store import _catalog

    hashed: list[int] = []
    real = _catalog.content_hash
    monkeypatch.setattr(_catalog, "content_hash", lambda data: hashed.append(1) or real(data))
    for i in range(30):
        store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": f"Burst {i}",
                    "content": "x",
                }
            ]
        )
    # Each apply hashes what it wrote and at most the few notes as new as the
    # catalog, not every note written in the last seconds.
    assert len(hashed) < 30 * 6
