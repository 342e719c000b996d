"""The search index kept up to date incrementally agrees with one rebuilt from scratch."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from builders import index_dump
from conftest import state
from mdmem import Level, Store
from mdmem.recall import search
from mdmem.recall.fts import Index

NAMES = [f"project_knowledge_n{i}.md" for i in range(5)]
WORDS = st.lists(
    st.sampled_from(["deploy", "release", "QUARRY_TZ", "部署", "日志", "logger.dart", "cache"]),
    min_size=1,
    max_size=6,
).map(" ".join)


def assert_counts_agree(index: Index) -> None:
    """The kept term counts are FTS5's own (what fts5vocab counts from the postings)."""
    db = index._connect()
    kept = sorted(db.execute("SELECT term, n FROM df WHERE n > 0").fetchall())
    assert kept == sorted(db.execute("SELECT term, doc FROM vocab").fetchall())
    assert db.execute("SELECT count(*) FROM df WHERE n <= 0").fetchone()[0] == 0
    # And the note count SQLite's triggers keep is the notes' own.
    (tally,) = db.execute("SELECT n FROM tally WHERE what = 'notes'").fetchone()
    assert tally == db.execute("SELECT count(*) FROM notes").fetchone()[0]
    index._count = None
    assert index.count() == tally


# Any text at all: the terms mdmem splits out must be the tokens FTS5 counts.
ANY_TEXT = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=60
)


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.tuples(st.integers(0, 4), ANY_TEXT), min_size=1, max_size=8))
def test_kept_term_counts_are_fts5s_for_any_text(texts: list[tuple[int, str]]) -> None:
    from datetime import datetime, timezone

    from mdmem import Note, NoteType

    store = Store(Path(tempfile.mkdtemp()) / "memory", Level.PROJECT)
    index = Index(store, path=":memory:")
    db = index._connect()
    moment = datetime(2026, 1, 1, tzinfo=timezone.utc)
    try:
        for n, text in texts:
            note = Note(
                f"project_knowledge_n{n}.md",
                NoteType.PROJECT_KNOWLEDGE,
                text,
                text,
                text,
                moment,
                moment,
            )
            db.execute("BEGIN")
            if n % 3 == 2:
                index._remove(db, note.filename)
            else:
                index._put(db, note, f"sha{n}")
            db.execute("COMMIT")
            assert_counts_agree(index)
    finally:
        index.close()


class IndexUpkeep(RuleBasedStateMachine):
    """Creates, updates, deletes and hand edits, each followed by an incremental sync."""

    @initialize()
    def start(self) -> None:
        self.tmp = tempfile.mkdtemp()
        self.saved = os.environ.get("MDMEM_STATE_DIR")
        os.environ["MDMEM_STATE_DIR"] = os.path.join(self.tmp, "state")
        self.store = Store(Path(self.tmp) / "memory", Level.PROJECT)
        self.index = Index(self.store)
        self.live: set[str] = set()

    @rule(name=st.sampled_from(NAMES), text=WORDS)
    def create_or_update(self, name: str, text: str) -> None:
        if name in self.live:
            op = {"action": "update", "level": "project", "filename": name, "content": text}
        else:
            slug = name.removeprefix("project_knowledge_").removesuffix(".md")
            op = {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": text,
                "content": text,
                "slug": slug,
            }
        (applied,) = self.store.apply([op]).applied
        # A create that repeats an existing note is not written (the store dedupes).
        if applied.action in ("create", "update"):
            self.live.add(applied.filename)

    @rule(name=st.sampled_from(NAMES))
    def delete(self, name: str) -> None:
        if name in self.live:
            self.store.apply([{"action": "delete", "level": "project", "filename": name}])
            self.live.discard(name)

    @rule(name=st.sampled_from(NAMES), text=WORDS, broken=st.booleans())
    def hand_edit(self, name: str, text: str, broken: bool) -> None:
        path = self.store.root / name
        self.store.root.mkdir(parents=True, exist_ok=True)
        if broken:
            path.write_text("no front matter here\n", encoding="utf-8")
            self.live.discard(name)
        else:
            path.write_text(
                f"---\ntype: project_knowledge\ntitle: {text}\n---\n{text} by hand\n",
                encoding="utf-8",
            )
            self.live.add(name)

    @rule(name=st.sampled_from(NAMES))
    def hand_delete(self, name: str) -> None:
        path = self.store.root / name
        if path.exists():
            path.unlink()
        self.live.discard(name)

    @rule(old=st.sampled_from(NAMES), new=st.sampled_from(NAMES))
    def hand_rename(self, old: str, new: str) -> None:
        # A rename by hand (or by git): over another note when that name is taken.
        source = self.store.root / old
        if old == new or not source.exists():
            return
        os.replace(source, self.store.root / new)
        if old in self.live:
            self.live.discard(old)
            self.live.add(new)
        else:
            self.live.discard(new)  # a broken file now stands there

    @rule()
    def rebuild(self) -> None:
        self.index.rebuild()

    @invariant()
    def agrees_with_a_rebuild(self) -> None:
        if not hasattr(self, "index"):
            return
        fresh = Index(self.store, path=":memory:")
        fresh.rebuild()
        # What a query does: the cheap sync, then the notes it returns checked.
        self.index.sync()
        self.index.refresh(NAMES)
        assert index_dump(self.index) == index_dump(fresh)
        assert {row[0] for row in index_dump(self.index)} == self.live
        assert_counts_agree(self.index)
        # And a full check agrees too.
        self.index.sync(full=True)
        assert index_dump(self.index) == index_dump(fresh)
        assert_counts_agree(self.index)

    def teardown(self) -> None:
        if hasattr(self, "index"):
            self.index.close()
            shutil.rmtree(self.tmp, ignore_errors=True)
            if self.saved is None:
                os.environ.pop("MDMEM_STATE_DIR", None)
            else:
                os.environ["MDMEM_STATE_DIR"] = self.saved


IndexUpkeep.TestCase.settings = settings(max_examples=25, stateful_step_count=8, deadline=None)
TestIndexUpkeep = IndexUpkeep.TestCase


def test_sync_reindexes_only_changed_notes(tmp_path: Path) -> None:
    store = Store(tmp_path / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "content": f"body {i}",
            }
            for i in range(20)
        ]
    )
    index = Index(store)
    assert index.sync() == 20
    assert index.sync() == 0
    store.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": "project_knowledge_note-3.md",
                "content": "zeppelin",
            }
        ]
    )
    assert index.sync() == 1
    assert [h.filename for h in search([store], "zeppelin", semantic=False)] == [
        "project_knowledge_note-3.md"
    ]
    assert index.rebuild() == 20


def test_an_unwritable_state_folder_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "blocked"
    blocker.write_text("a file where the state folder should be")
    monkeypatch.setenv("MDMEM_STATE_DIR", str(blocker / "state"))
    store = Store(tmp_path / "memory", Level.PROJECT)
    store.root.mkdir()
    (store.root / "project_knowledge_x.md").write_text(
        "---\ntype: project_knowledge\ntitle: Zebra crossing\n---\nStripes.\n"
    )
    assert [h.filename for h in search([store], "zebra", semantic=False)] == [
        "project_knowledge_x.md"
    ]


def test_the_user_stores_search_state_is_owner_only(tmp_path: Path) -> None:
    """recall.sqlite, vectors.sqlite and their -wal/-shm are 0600 whatever the umask."""
    import stat

    from mdmem.recall.semantic import Vectors

    old = os.umask(0o022)
    try:
        user = Store(tmp_path / "home" / "memory", Level.USER)
        user.apply(
            [
                {
                    "action": "create",
                    "level": "user",
                    "type": "user_preference",
                    "title": "Answer in Chinese",
                    "content": "用中文回答",
                }
            ]
        )
        assert user.search("Chinese")
        vectors = Vectors(user.path)
        assert vectors.get(["no-such-hash"]) == {}  # opens (creates) the file
        vectors.close()
    finally:
        os.umask(old)
    folder = state(user.root)
    made = {p.name for p in folder.iterdir()}
    assert {"recall.sqlite", "vectors.sqlite"} <= made, made
    for path in folder.rglob("*"):
        if path.is_file():
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
