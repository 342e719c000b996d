"""The catalog's dedupe keys: kept by every write as a build from the rows makes them.

The keys (``store/_dedupe_keys.py``) are derived state: after any mix of
creates, retitles and removals they must be what :func:`_dedupe_keys.build`
makes from the rows, a hand edit changes them, and a create's lookup reads a
bounded number of postings however long its title. What they find, against
the full comparison, is ``test_dedupe_bounded.py``.
"""

from __future__ import annotations

import random
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.store import _catalog, _dedupe_keys
from mdmem.store.dedupe import number_key

WORDS = ["cache", "build", "test", "the", "a", "MSRV", "1.74", "1.80", "v2", "构建", "测试", "部署"]
TITLE = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text("abcxyz 构建测", min_size=1, max_size=6)),
    min_size=0,
    max_size=7,
).map(" ".join)
ROWS = st.dictionaries(
    st.integers(0, 40).map(lambda i: f"project_knowledge_n{i}.md"),
    st.tuples(TITLE, TITLE),
    max_size=30,
)


def _row(title: str, summary: str) -> _catalog.CatalogRow:
    return _catalog.CatalogRow(
        line=f"- {title}", title=title, summary=summary, nums=number_key(title, summary, "")
    )


def _catalog_with(rows: dict[str, tuple[str, str]]) -> _catalog.Catalog:
    cat = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    cat.begin(0)
    for name, (title, summary) in rows.items():
        cat.put(name, _row(title, summary))
    cat.commit()
    return cat


@settings(max_examples=100, deadline=None)
@given(rows=ROWS, changes=ROWS, gone=st.sets(st.integers(0, 40)))
def test_the_keys_a_write_keeps_are_a_rebuild(
    rows: dict[str, tuple[str, str]], changes: dict[str, tuple[str, str]], gone: set[int]
) -> None:
    cat = _catalog_with(rows)
    con = cat._open()
    assert cat.near("anything", "", "", 0) is not None  # built now, from the rows
    # Kept by the note afterwards: retitled, added and removed notes, and one that is no note.
    cat.begin(0)
    for name, (title, summary) in changes.items():
        cat.put(name, _row(title, summary))
    cat.remove([f"project_knowledge_n{i}.md" for i in gone])
    cat.put("project_knowledge_broken.md", _catalog.CatalogRow(error="not a note"))
    cat.commit()
    kept = _dedupe_keys.dump(con)
    final = {n: r for n, r in {**rows, **changes}.items() if int(n[19:-3]) not in gone}
    assert [name for name, _ in kept[0]] == sorted(final)
    cat.begin(0)
    _dedupe_keys.build(con)
    assert _dedupe_keys.dump(con) == kept
    cat.rollback()
    cat.close()


@given(title=TITLE, summary=TITLE)
def test_a_note_is_found_by_its_own_title_and_summary(title: str, summary: str) -> None:
    cat = _catalog_with({"project_knowledge_x.md": (title, summary)})
    try:
        found = cat.near(title, summary, number_key(title, summary, ""), 0)
        assert [name for name, _, _ in found or []] == ["project_knowledge_x.md"]
    finally:
        cat.close()


def test_a_hand_retitled_note_changes_its_keys(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    create = {"action": "create", "level": "project", "type": "project_knowledge"}
    store.apply([{**create, "title": "Deploy on Fridays", "content": "never deploy on fridays"}])
    path = next(p for p in store.root.glob("*.md") if p.name != "MEMORY.md")
    text = path.read_text(encoding="utf-8").replace("Deploy on Fridays", "Tabs or spaces")
    text = text.replace("never deploy on fridays", "tabs only")
    path.write_text(text, encoding="utf-8")
    store.entries()  # the hand edit is noticed; the keys follow it
    with store.lock():
        assert store._near_titles("Deploy on Fridays", "Never deploy on fridays.", "") == []
        found = store._near_titles("Tabs or spaces", "", "") or []
        assert [r[0] for r in found] == [path.name]


def test_a_long_title_makes_a_bounded_number_of_keys() -> None:
    # Thousands of words, Chinese and Latin: the keys (and so the postings a create
    # reads, at most CAP a key) stay bounded, and the note is still found by them.
    rng = random.Random(7)
    alphabet = [chr(0x4E00 + i) for i in range(3000)]
    base = "".join(rng.choice(alphabet) for _ in range(2600))
    words = " ".join(f"w{rng.randrange(10**6)}x" for _ in range(2000))
    for title in (base, words):
        assert len(_dedupe_keys.keys(title, title[:240], None)) <= 3 + 3 * 40
    cat = _catalog_with(
        {"project_knowledge_cjk.md": (base, ""), "project_knowledge_w.md": (words, "")}
    )
    try:
        assert [n for n, _, _ in cat.near(base, "", number_key(base, "", ""), 0) or []] == [
            "project_knowledge_cjk.md"
        ]
    finally:
        cat.close()


@settings(max_examples=100, deadline=None)
@given(rows=ROWS, gone=st.sets(st.integers(0, 40)), query=st.tuples(TITLE, TITLE))
def test_a_batch_finds_its_notes_as_the_catalog_finds_them(
    rows: dict[str, tuple[str, str]], gone: set[int], query: tuple[str, str]
) -> None:
    # The same notes in a batch (in memory) and in the catalog, with CAP small enough
    # to leave keys out: the same notes share a key that is looked up.
    cat = _catalog_with(rows)
    batch = _dedupe_keys.Batch()
    for name, (title, summary) in rows.items():
        batch.put(name, title, summary, number_key(title, summary, ""))
    cat.begin(0)
    cat.remove([f"project_knowledge_n{i}.md" for i in gone])
    cat.commit()
    for i in gone:
        batch.put(f"project_knowledge_n{i}.md", None)
    before = _dedupe_keys.CAP, _dedupe_keys.LIMIT
    _dedupe_keys.CAP, _dedupe_keys.LIMIT = 2, 100
    try:
        title, summary = query
        numbers = number_key(title, summary, "")
        found = cat.near(title, summary, numbers, 0)
        assert sorted(batch.near(title, summary, numbers)) == [n for n, _, _ in found or []]
    finally:
        _dedupe_keys.CAP, _dedupe_keys.LIMIT = before
        cat.close()
