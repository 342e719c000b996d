"""The catalog's dedupe keys find the candidates the full scan finds, and the same duplicate.

The old path built ``dedupe.Index`` from every catalog entry on each create;
the keys answer from SQLite. On random stores (titles from a small vocabulary,
so that many are near each other, Chinese included) both must give the same
near notes and the same :class:`~mdmem.store.dedupe.Duplicate`.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.store import _catalog, _dedupe_keys
from mdmem.store._planner import Planner
from mdmem.store.dedupe import Index, candidate

WORDS = ["cache", "build", "test", "the", "a", "MSRV", "1.74", "1.80", "v2", "构建", "测试", "部署"]
TITLE = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text("abcxyz 构建测", min_size=1, max_size=6)),
    min_size=0,
    max_size=7,
).map(" ".join)
ROWS = st.dictionaries(
    st.integers(0, 40).map(lambda i: f"project_knowledge_n{i}.md"), TITLE, max_size=30
)


def _catalog_with(rows: dict[str, str]) -> _catalog.Catalog:
    cat = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    cat.begin(0)
    for name, title in rows.items():
        cat.put(name, _catalog.CatalogRow(line=f"- {title} ({name})", title=title, summary="s"))
    cat.commit()
    return cat


@contextlib.contextmanager
def _exact(always: bool) -> Iterator[None]:
    """``near`` counting every posting always, or never."""
    before = _dedupe_keys._by_count
    _dedupe_keys._by_count = lambda df, lookups: always  # type: ignore[assignment]
    try:
        yield
    finally:
        _dedupe_keys._by_count = before


def _full(rows: dict[str, str], title: str) -> list[str]:
    index = Index()
    for name, t in rows.items():
        index.add(candidate(name, t, "s"))
    return [c.filename for c in index.near(title)]


@settings(max_examples=150, deadline=None)
@given(
    rows=ROWS, changes=ROWS, gone=st.sets(st.integers(0, 40)), queries=st.lists(TITLE, max_size=5)
)
def test_the_keys_find_what_the_full_index_finds(
    rows: dict[str, str], changes: dict[str, str], gone: set[int], queries: list[str]
) -> None:
    cat = _catalog_with(rows)
    con = cat._open()
    assert cat.near("anything", 0) is not None  # built now, from the rows
    # Kept by the note afterwards: retitled, added and removed notes.
    cat.begin(0)
    for name, title in changes.items():
        cat.put(name, _catalog.CatalogRow(line=f"- {title} ({name})", title=title, summary="s"))
    removed = [f"project_knowledge_n{i}.md" for i in gone]
    cat.remove(removed)
    cat.put("project_knowledge_broken.md", _catalog.CatalogRow(error="not a note"))
    cat.commit()
    final = {n: t for n, t in {**rows, **changes}.items() if n not in removed}
    for title in [*queries, *final.values()]:
        # Both ways of finding them: the pruned lookups, and counting every posting.
        for exact in (False, True):
            with _exact(exact):
                found = cat.near(title, 0)
            assert found is not None
            assert [name for name, _, _ in found] == _full(final, title), (title, exact)
    # And the keys are what a build from the rows gives.
    kept = _dedupe_keys.dump(con)
    cat.begin(0)
    _dedupe_keys.build(con)
    assert _dedupe_keys.dump(con) == kept
    cat.rollback()
    cat.close()


NOTE = st.fixed_dictionaries(
    {"title": TITLE, "summary": TITLE, "body": st.lists(st.sampled_from(WORDS), max_size=40)}
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(notes=st.lists(NOTE, max_size=12), query=NOTE, again=st.integers(0, 11))
def test_a_create_finds_the_same_duplicate_as_the_full_scan(
    tmp_path_factory: pytest.TempPathFactory,
    notes: list[dict[str, object]],
    query: dict[str, object],
    again: int,
) -> None:
    store = Store(tmp_path_factory.mktemp("keys") / "mem", Level.PROJECT)
    for i, note in enumerate(notes):
        store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "filename": f"project_knowledge_n{i}.md",
                    "title": note["title"] or "untitled",
                    "summary": note["summary"],
                    "content": " ".join(note["body"]) or "x",  # type: ignore[arg-type]
                }
            ]
        )
    queries = [query]
    if notes:  # a repeat of a note in the store, near or exact
        queries.append(notes[again % len(notes)])
    now = datetime.now(timezone.utc)
    for q in queries:
        args = (
            str(q["title"]) or "untitled",
            str(q["summary"]),
            " ".join(q["body"]) or "x",  # type: ignore[arg-type]
        )
        with store.lock():
            by_keys = Planner(store, now, None)._duplicate(*args)
            full = Planner(store, now, None)
            full.store = _FullScan(store)  # type: ignore[assignment]
            by_scan = full._duplicate(*args)
        assert by_keys == by_scan


class _FullScan:
    """The store without its dedupe keys: the planner falls back to every entry."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        if name == "_near_titles":
            return lambda title, numbers=None: None
        return getattr(self._store, name)


def test_a_hand_retitled_note_changes_its_keys(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    create = {"action": "create", "level": "project", "type": "project_knowledge"}
    store.apply([{**create, "title": "Deploy on Fridays", "content": "never deploy on fridays"}])
    path = next(p for p in store.root.glob("*.md") if p.name != "MEMORY.md")
    text = path.read_text(encoding="utf-8").replace("Deploy on Fridays", "Tabs or spaces")
    path.write_text(text, encoding="utf-8")
    store.entries()  # the hand edit is noticed; the keys follow it
    with store.lock():
        assert store._near_titles("Deploy on Fridays") == []
        assert [r[0] for r in store._near_titles("Tabs or spaces") or []] == [path.name]


@given(title=TITLE | st.text(max_size=30))
def test_gram_ids_are_the_trigrams_index_uses(title: str) -> None:
    from mdmem.store.dedupe import _trigrams

    grams = {gram.ljust(3, "\0") for gram in _trigrams(title)}
    assert _dedupe_keys.gram_ids(title) == sorted(
        (ord(g[0]) << 42) | (ord(g[1]) << 21) | ord(g[2]) for g in grams
    )


def test_long_titles_are_found_past_the_chunked_lookups() -> None:
    # Thousands of distinct trigrams: the lookups go over several statements (and the
    # count of every posting is not tried), and must still find exactly the near notes.
    rng = random.Random(7)
    alphabet = [chr(0x4E00 + i) for i in range(3000)]
    base = "".join(rng.choice(alphabet) for _ in range(2600))
    rows = {
        "project_knowledge_same.md": base,
        "project_knowledge_most.md": base[:1500] + "".join(rng.sample(alphabet, 400)),
        "project_knowledge_part.md": base[:900] + "".join(rng.sample(alphabet, 2000)),
        "project_knowledge_short.md": base[100:400],
        "project_knowledge_other.md": "".join(rng.choice(alphabet) for _ in range(2600)),
        "project_knowledge_tiny.md": "cache",
    }
    assert len(_dedupe_keys.gram_ids(base)) > 2_000
    cat = _catalog_with(rows)
    try:
        for title in [base, rows["project_knowledge_most.md"], rows["project_knowledge_short.md"]]:
            found = cat.near(title, 0)
            assert found is not None
            assert [name for name, _, _ in found] == _full(rows, title)
        assert "project_knowledge_same.md" in [n for n, _, _ in cat.near(base, 0) or []]
    finally:
        cat.close()
