"""Dedupe bounded per create whatever the titles: everyday words too, not only numbers.

A create is compared with at most ``LIMIT`` notes of the catalog and ``LIMIT``
of its own batch: those sharing the most of its keys held by at most ``CAP``
notes (``store/_dedupe_keys.py``). Checked here: a worded create into a store
whose titles are all near each other is compared with a bounded number of notes
(a counter, not a timing; the full comparison compares it with hundreds);
duplicates are still caught there; and against the full comparison (every note
whose title is near, as the planner does without the keys), on random stores
of a small vocabulary with ``CAP`` and ``LIMIT`` small enough to bite: the keys
never find a duplicate the full comparison would not, find the same one
whenever it is among their candidates, and miss it only as the module says
(it shares no key held by at most ``CAP`` notes, or ``LIMIT`` others rank as high).
"""

from __future__ import annotations

import random
from datetime import datetime, timezone
from pathlib import Path

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.store import _catalog, _dedupe_keys, _planner, dedupe
from mdmem.store.dedupe import (
    Index,
    candidate,
    find_duplicate,
    near_among,
    near_rows,
    number_key,
)

# A store's everyday words: any two titles of them share half their trigrams or so.
EVERYDAY = ["cache", "deploy", "worker", "queue", "retry", "build", "test", "lint", "server"]
OTHER = ["postgres", "redis", "friday", "tokens", "nightly", "schema", "vendored", "flaky"]


def _worded(rng: random.Random) -> dict[str, object]:
    title = " ".join(rng.choice(EVERYDAY) for _ in range(rng.randint(2, 4))).capitalize()
    # A body of its own: everyday words among words of its own making.
    words = [
        rng.choice(EVERYDAY + OTHER)
        if rng.random() < 0.5
        else "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(6))
        for _ in range(rng.randint(20, 40))
    ]
    return {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": title,
        "content": " ".join(words).capitalize() + ".",
    }


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many existing notes each create was compared with (find_duplicate's candidates)."""
    sizes: list[int] = []
    real = _planner.find_duplicate

    def counting(title, summary, body, candidates, read, threshold=dedupe.THRESHOLD):  # type: ignore[no-untyped-def]
        candidates = list(candidates)
        sizes.append(len(candidates))
        return real(title, summary, body, candidates, read, threshold)

    monkeypatch.setattr(_planner, "find_duplicate", counting)
    return sizes


class _FullScan:
    """The store without its dedupe keys: the planner compares with every near title."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def __getattr__(self, name: str) -> object:
        if name == "_near_titles":
            return lambda title, summary, numbers: None
        return getattr(self._store, name)


def test_a_worded_create_is_compared_with_a_bounded_number_of_notes(
    tmp_path: Path, counted: list[int]
) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    rng = random.Random(5)
    notes = [_worded(rng) for _ in range(400)]
    for start in range(0, len(notes), 200):
        assert len(store.apply(notes[start : start + 200]).applied) == 200
    # Within a batch too: its own notes are compared through the same bounded keys.
    assert max(counted) <= 2 * _dedupe_keys.LIMIT
    del counted[:]
    fresh = [_worded(rng) for _ in range(5)]
    for op in fresh:
        assert [a.action for a in store.apply([op]).applied] == ["create"]
    assert max(counted) <= _dedupe_keys.LIMIT
    # The full comparison would compare the same create with most of the store.
    del counted[:]
    op = _worded(rng)
    with store.lock():
        planner = _planner.Planner(store, datetime.now(timezone.utc), None)
        planner.store = _FullScan(store)  # type: ignore[assignment]
        planner.add(op)
    assert counted[0] > 100


def test_duplicates_are_still_caught_among_crowded_titles(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    rng = random.Random(9)
    notes = [_worded(rng) for _ in range(300)]
    store.apply(notes)
    again = store.apply([notes[123]])
    assert [a.action for a in again.applied] == ["unchanged"]
    near = dict(notes[77])
    near["content"] = str(near["content"]).replace(".", ", always.", 1)
    assert [a.action for a in store.apply([near]).applied] == ["update"]
    other = dict(notes[77])
    other["content"] = "Friday deploys are frozen; the nightly build still runs on the worker."
    assert [a.action for a in store.apply([other]).applied] == ["create"]


def test_duplicates_within_one_crowded_batch_are_caught(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    rng = random.Random(11)
    notes = [_worded(rng) for _ in range(300)]
    near = dict(notes[40])
    near["content"] = str(near["content"]).replace(".", ", always.", 1)
    # One batch: 300 crowded notes, then a repeat and a near repeat of the 41st.
    result = store.apply([*notes, dict(notes[40]), near])
    assert [a.action for a in result.applied[-2:]] == ["unchanged", "update"]
    assert {a.filename for a in result.applied[-2:]} == {result.applied[40].filename}


# -- against the full comparison ----------------------------------------------------------

VOCAB = ["cache", "deploy", "worker", "the", "a", "retry", "v2", "1.74", "构建", "测试"]
PHRASE = st.lists(st.sampled_from(VOCAB), min_size=0, max_size=5).map(" ".join)
BODY = st.lists(st.sampled_from(VOCAB), min_size=8, max_size=40).map(" ".join)
NOTE = st.tuples(PHRASE, PHRASE, BODY)


@given(title=PHRASE, rows=st.lists(st.tuples(PHRASE, PHRASE), max_size=12))
def test_near_rows_keeps_what_near_among_keeps(title: str, rows: list[tuple[str, str]]) -> None:
    named = [(f"project_knowledge_n{i}.md", t, s) for i, (t, s) in enumerate(rows)]
    assert near_rows(title, named) == near_among(title, [candidate(*r) for r in named])


def _edited(note: tuple[str, str, str], edits: list[tuple[int, str]]) -> tuple[str, str, str]:
    title, summary, body = note
    words = body.split()
    for at, word in edits:
        words.insert(at % (len(words) + 1), word)
    return title, summary, " ".join(words)


@settings(max_examples=300, deadline=None)
@given(
    notes=st.lists(NOTE, max_size=30),
    fresh=NOTE,
    pick=st.integers(0, 29),
    edits=st.lists(st.tuples(st.integers(0, 40), st.sampled_from(VOCAB)), max_size=3),
    cap=st.sampled_from([1, 2, 4, _dedupe_keys.CAP]),
    limit=st.sampled_from([1, 3, _dedupe_keys.LIMIT]),
)
def test_the_keys_miss_only_what_the_module_says(
    notes: list[tuple[str, str, str]],
    fresh: tuple[str, str, str],
    pick: int,
    edits: list[tuple[int, str]],
    cap: int,
    limit: int,
) -> None:
    texts = {f"project_knowledge_n{i:02d}.md": n for i, n in enumerate(notes)}
    cat = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    cat.begin(0)
    for name, (title, summary, body) in texts.items():
        row = _catalog.CatalogRow(
            line=f"- {title}", title=title, summary=summary, nums=number_key(title, summary, body)
        )
        cat.put(name, row)
    cat.commit()
    creates = [fresh]
    if notes:  # a repeat of a stored note, exact or with a few words put in its body
        creates.append(_edited(notes[pick % len(notes)], edits))
    before = _dedupe_keys.CAP, _dedupe_keys.LIMIT
    _dedupe_keys.CAP, _dedupe_keys.LIMIT = cap, limit
    try:
        for title, summary, body in creates:
            _check(cat, texts, title, summary, body, cap, limit)
    finally:
        _dedupe_keys.CAP, _dedupe_keys.LIMIT = before
        cat.close()


def _check(
    cat: _catalog.Catalog,
    texts: dict[str, tuple[str, str, str]],
    title: str,
    summary: str,
    body: str,
    cap: int,
    limit: int,
) -> None:
    numbers = number_key(title, summary, body)
    full = Index()
    for name, (t, s, b) in texts.items():
        if number_key(t, s, b) == numbers:  # the number groups, as before the keys
            full.add(candidate(name, t, s))
    everyone = full.near(title)
    old = find_duplicate(title, summary, body, everyone, texts.get)
    rows = cat.near(title, summary, numbers, 0)
    assert rows is not None and len(rows) <= limit
    mine = near_rows(title, rows)
    new = find_duplicate(title, summary, body, mine, texts.get)
    # Never a merge the full comparison would not make: the candidates are some of its own.
    assert {c.filename for c in mine} <= {c.filename for c in everyone}
    if old is None:
        assert new is None
        event("no duplicate")
        return
    if old.filename in {c.filename for c in mine}:
        assert new == old
        event("the same duplicate")
        return
    # Missed: it shares no key held by at most CAP notes, or LIMIT others rank as high.
    con = cat._open()
    counts = dict(con.execute("SELECT key, n FROM dedupe_count").fetchall())
    held = {
        name: set(_dedupe_keys.keys(t, s, number_key(t, s, b))) for name, (t, s, b) in texts.items()
    }
    wanted = {k for k in _dedupe_keys.keys(title, summary, numbers) if counts.get(k, 0) <= cap}
    score = {n: sum(1 / counts[k] for k in wanted & ks) for n, ks in held.items()}
    if score[old.filename] == 0:
        event("missed: no key in common held by at most CAP notes")
        return
    ahead = [n for n, s in score.items() if n != old.filename and s >= score[old.filename] - 1e-9]
    assert len(ahead) >= limit, (old, score)
    event("missed: LIMIT others rank as high")
