"""Derived state that changes by the note: always what a rebuild from the notes gives.

A stateful property: after any sequence of writes through the store, hand
edits (write, rename, delete files directly) and "kills" (the derived state
deleted, corrupted or truncated at random points), the catalog and MEMORY.md
equal a rebuild from the notes, and ``load_index`` equals ``reindex``'s text.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from array import array
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from builders import create_op
from conftest import state
from mdmem import Level, Store
from mdmem.recall import fts as recall_index
from mdmem.store import _catalog, _dedupe_keys, _scan
from mdmem.store.dedupe import number_key

NOTE = "---\ntype: {type}\ntitle: {title}\nsummary: s\n---\n{body}\n"
TITLES = st.sampled_from(["Alpha", "Beta", "构建 测试", "Gamma ray", "Δelta", "Zed"])
NAMES = st.sampled_from(
    [
        "project_knowledge_a.md",
        "project_knowledge_b.md",
        "reference_material_构建.md",
        "user_preference_z.md",
        "broken.md",
    ]
)


def rebuilt(root: Path) -> str:
    """MEMORY.md as a store with no derived state at all computes it."""
    fresh = Store(root, Level.PROJECT)
    folder = state(root)
    shutil.rmtree(folder, ignore_errors=True)
    text = fresh.reindex() and (root / "MEMORY.md").read_text(encoding="utf-8")
    return text


class DerivedState(RuleBasedStateMachine):
    """Writes, hand edits and kills, in any order."""

    def __init__(self) -> None:
        super().__init__()
        import tempfile

        self.tmp = Path(tempfile.mkdtemp(prefix="mdmem-scale-"))
        self.root = self.tmp / "mem"
        self.store = Store(self.root, Level.PROJECT)
        # A search index kept from step to step: it follows the store's change log.
        self.index = recall_index.Index(self.store)
        self.n = 0

    @initialize()
    def start(self) -> None:
        self.store.apply([self._create("Seed")])

    def _create(self, title: str) -> dict[str, object]:
        self.n += 1
        return {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": f"{title} {self.n}",
            "content": f"body {self.n}",
        }

    def _names(self) -> list[str]:
        return sorted(p.name for p in self.root.glob("*.md") if p.name != "MEMORY.md")

    # -- writes through mdmem ----------------------------------------------------

    @rule(title=TITLES, count=st.integers(1, 3))
    def create(self, title: str, count: int) -> None:
        self.store.apply([self._create(title) for _ in range(count)])

    @rule(pick=st.integers(0, 50), body=st.text(min_size=1, max_size=20))
    def update(self, pick: int, body: str) -> None:
        names = self._names()
        if names:
            name = names[pick % len(names)]
            self.store.apply(
                [{"action": "update", "level": "project", "filename": name, "content": body}]
            )

    @rule(pick=st.integers(0, 50))
    def delete(self, pick: int) -> None:
        names = self._names()
        if names:
            name = names[pick % len(names)]
            self.store.apply([{"action": "delete", "level": "project", "filename": name}])

    # -- hand edits ----------------------------------------------------------------

    @rule(name=NAMES, title=TITLES, same_size=st.booleans())
    def hand_write(self, name: str, title: str, same_size: bool) -> None:
        path = self.root / name
        if name == "broken.md":
            path.write_text("---\ntitle: [unclosed\n---\n", encoding="utf-8")
            return
        before = path.stat() if path.exists() else None
        path.write_text(NOTE.format(type="project_knowledge", title=title, body="hand"))
        if same_size and before is not None:
            # The mtime put back: only the ctime (and size) can tell.
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))

    @rule(pick=st.integers(0, 50), title=TITLES)
    def hand_rename(self, pick: int, title: str) -> None:
        names = self._names()
        if names:
            old = names[pick % len(names)]
            new = f"project_knowledge_renamed-{self.n}.md"
            self.n += 1
            os.rename(self.root / old, self.root / new)

    @rule(pick=st.integers(0, 50))
    def hand_delete(self, pick: int) -> None:
        names = self._names()
        if names:
            (self.root / names[pick % len(names)]).unlink()

    @rule()
    def hand_mangle_index(self) -> None:
        (self.root / "MEMORY.md").write_text("# someone typed here\n", encoding="utf-8")

    # -- kills: the derived state lost or damaged --------------------------------------

    @rule(what=st.sampled_from(["all", "catalog", "fingerprint", "truncate", "garbage", "wal"]))
    def kill(self, what: str) -> None:
        folder = state(self.root)
        catalog = folder / "catalog.sqlite"
        if what == "all":
            shutil.rmtree(folder, ignore_errors=True)
        elif what == "catalog":
            for suffix in ("", "-wal", "-shm"):
                Path(f"{catalog}{suffix}").unlink(missing_ok=True)
        elif what == "fingerprint":
            (folder / "fingerprint").unlink(missing_ok=True)
        elif what == "truncate" and catalog.exists():
            with open(catalog, "r+b") as f:
                f.truncate(max(catalog.stat().st_size // 2, 1))
        elif what == "garbage" and catalog.exists():
            catalog.write_bytes(b"this is not a database" * 10)
        elif what == "wal" and Path(f"{catalog}-wal").exists():
            Path(f"{catalog}-wal").write_bytes(b"\0" * 100)
        # A kill is a new process: nothing of the old one survives.
        self.store = Store(self.root, Level.PROJECT)
        self.index.close()
        self.index = recall_index.Index(self.store)

    @rule()
    def time_passes(self) -> None:
        time.sleep(0.011)  # past a clock tick: rows can become trusted, a fingerprint written

    # -- what must always hold ---------------------------------------------------------

    @invariant()
    def derived_state_is_a_rebuild(self) -> None:
        loaded = self.store.load_index()
        entries = [e.filename for e in self.store.entries()]
        head, total = self.store.index_head()
        expected = rebuilt(self.root)
        assert loaded == expected
        assert entries == [n for n in self._names() if f"({n})" in expected]
        self._dedupe_keys_are_a_rebuild(entries)
        lines = expected.splitlines()
        assert total == len(lines) and head == lines[: len(head)]
        # The search index, caught up (by the change log, or by a listing), is a rebuild.
        self.index.sync()
        indexed = self.index._connect().execute("SELECT name, sha FROM notes").fetchall()
        assert dict(indexed) == self.store.entry_versions()
        # The rebuild replaced the derived state: a new process starts from it.
        self.store = Store(self.root, Level.PROJECT)
        assert self.store.load_index() == expected

    def _dedupe_keys_are_a_rebuild(self, names: list[str]) -> None:
        """The catalog's dedupe keys, once built, are those of the notes on disk."""
        con = sqlite3.connect(state(self.root) / "catalog.sqlite")
        try:
            if not _dedupe_keys.is_built(con):
                return
            notes, counts = _dedupe_keys.dump(con)
        finally:
            con.close()
        held = {}
        for name in names:
            note = self.store.read(name)
            numbers = number_key(note.title, note.summary, note.body)
            held[name] = _dedupe_keys.keys(note.title, note.summary, numbers)
        assert notes == [(n, array("q", k).tobytes()) for n, k in sorted(held.items())]
        assert counts == sorted(Counter(x for k in held.values() for x in k).items())

    def teardown(self) -> None:
        self.index.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


DerivedState.TestCase.settings = settings(max_examples=20, stateful_step_count=10, deadline=None)
test_derived_state = DerivedState.TestCase


# -- the rest of the promises, one by one ------------------------------------------


def _create(title: str) -> dict[str, object]:
    return create_op(title, "x")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of 205 notes (more than a block shows), written once for the module."""
    root = tmp_path_factory.mktemp("template") / "mem"
    root.mkdir()
    for i in range(205):
        (root / f"project_knowledge_note-{i:03d}.md").write_text(
            NOTE.format(type="project_knowledge", title=f"Note {i:03d}", body="x")
        )
    return root


@pytest.fixture
def store(tmp_path: Path, template: Path) -> Store:
    shutil.copytree(template, tmp_path / "mem")
    s = Store(tmp_path / "mem", Level.PROJECT)
    past = time.time() - 60
    for p in s.root.glob("*.md"):
        os.utime(p, (past, past))
    s.load_index()
    time.sleep(0.011)
    s.load_index()
    return s


def test_a_single_write_does_not_look_at_the_other_notes(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*a: object, **k: object) -> None:
        raise AssertionError("a single write must not scan the store")

    # (A create looks for a duplicate among the entries: see the planner's dedupe.)
    store.apply([_create("One more")])
    real_listdir = os.listdir

    def listdir(path: object = ".") -> list[str]:
        if os.fspath(path) == str(store.root):  # type: ignore[call-overload]
            boom()
        return real_listdir(path)  # type: ignore[call-overload]

    with monkeypatch.context() as m:
        m.setattr(_catalog.Scan, "__init__", boom)
        m.setattr(os, "listdir", listdir)
        store.apply(
            [
                {
                    "action": "update",
                    "level": "project",
                    "filename": "project_knowledge_note-000.md",
                    "content": "new",
                }
            ]
        )
        store.apply(
            [{"action": "delete", "level": "project", "filename": "project_knowledge_one-more.md"}]
        )
    assert store.load_index() == rebuilt(store.root)


def test_the_block_reads_only_what_it_shows(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    head, total = store.index_head()
    assert total == 205 and len(head) == 201
    # On a settled store, the block checks a few stats: no scan, no catalog.
    monkeypatch.setattr(_catalog.Scan, "__init__", lambda *a: (_ for _ in ()).throw(AssertionError))
    monkeypatch.setattr(_catalog.Catalog, "_open", lambda *a: (_ for _ in ()).throw(AssertionError))
    assert store.index_head() == (head, total)


def test_a_hand_edit_of_a_note_in_the_block_is_seen_by_the_block(store: Store) -> None:
    path = store.root / "project_knowledge_note-005.md"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("title: Note 005", "title: Edited!"), encoding="utf-8")
    head, _ = store.index_head()
    assert any("Edited!" in line for line in head)


def test_a_hand_added_note_is_seen_by_the_block(store: Store) -> None:
    (store.root / "aaa.md").write_text(
        NOTE.format(type="project_knowledge", title="First", body="b")
    )
    head, total = store.index_head()
    assert "First" in head[0] and total == 206


def test_entries_page_and_stream(store: Store) -> None:
    every = [e.filename for e in store.entries()]
    assert len(every) == 205 and every == sorted(every)
    assert [e.filename for e in store.iter_entries(offset=10, limit=5)] == every[10:15]
    assert [e.filename for e in store.iter_entries(offset=200)] == every[200:]


def test_entry_versions_tell_what_changed(store: Store) -> None:
    before = store.entry_versions()
    assert len(before) == 205
    path = store.root / "project_knowledge_note-007.md"
    path.write_text(path.read_text(encoding="utf-8") + "more\n", encoding="utf-8")
    (store.root / "project_knowledge_note-008.md").unlink()
    after = store.entry_versions()
    changed = {n for n in after if before.get(n) != after[n]}
    assert changed == {"project_knowledge_note-007.md"}
    assert set(before) - set(after) == {"project_knowledge_note-008.md"}


def test_a_name_is_validated_once(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from mdmem.store import paths

    (store.root / "project_knowledge_构建.md").write_text(
        NOTE.format(type="project_knowledge", title="CJK", body="b")
    )
    assert "CJK" in store.load_index()
    checked: list[str] = []
    real = paths.check_name
    monkeypatch.setattr(_scan, "check_name", lambda n: checked.append(n) or real(n))
    (state(store.root) / "fingerprint").unlink(missing_ok=True)
    store.load_index()
    assert checked == []


def test_a_truncated_catalog_is_rebuilt(store: Store) -> None:
    good = store.load_index()
    catalog = state(store.root) / "catalog.sqlite"
    with open(catalog, "r+b") as f:
        f.truncate(100)
    (state(store.root) / "fingerprint").unlink()
    fresh = Store(store.root, Level.PROJECT)
    assert fresh.load_index() == good
    with sqlite3.connect(catalog) as db:
        assert db.execute("SELECT count(*) FROM notes").fetchone()[0] == 205
    db.close()


def test_mdmem_list_pages(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    from typer.testing import CliRunner

    from mdmem.cli import app

    ws = store.root.parent / "ws"
    (ws / ".git").mkdir(parents=True)
    shutil.copytree(store.root, ws / ".PseudoClaude" / "memory")
    monkeypatch.setenv("MDMEM_WORKSPACE", str(ws))
    monkeypatch.chdir(ws)
    everything = [e.filename for e in store.entries()]
    runner = CliRunner()
    out = runner.invoke(
        app, ["list", "--level", "project", "--limit", "3", "--offset", "2", "--json"]
    )
    assert out.exit_code == 0, out.output
    assert [row["filename"] for row in json.loads(out.stdout)] == everything[2:5]
    out = runner.invoke(app, ["list", "--level", "project", "--offset", "204"])
    assert len(out.stdout.splitlines()) == 1


NOTE_NAMES = st.lists(
    st.text(alphabet="abz构Δ-_09", min_size=1, max_size=6).map(lambda s: f"{s}.md"),
    unique=True,
    max_size=12,
)


@given(before=NOTE_NAMES, changed=NOTE_NAMES, drop=st.data())
def test_patching_memory_md_equals_rebuilding_it(
    before: list[str], changed: list[str], drop: st.DataObject
) -> None:
    from mdmem.store import _index_file

    def line(name: str, tag: str) -> str:
        return f"- [project_knowledge] {tag} (x) — s ({name})"

    old = {name: line(name, "old") for name in before}
    changes: dict[str, str | None] = {
        name: None if drop.draw(st.booleans()) else line(name, "new") for name in changed
    }
    new = {**old, **{n: v for n, v in changes.items() if v is not None}}
    for name, value in changes.items():
        if value is None:
            new.pop(name, None)
    data = _index_file.join(old[n] for n in sorted(old))
    expected = _index_file.join(new[n] for n in sorted(new))
    assert _index_file.patch(data, changes) == (expected, len(new) - len(old))
