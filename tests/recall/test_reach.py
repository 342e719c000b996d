"""A store whose notes cannot hold enough of a prompt is not ranked for it.

The per-prompt gate keeps a candidate only when it holds ``min_coverage`` of the
prompt's (IDF-weighted) words, and reads the others' lexical scores only for its
lead rule, when no candidate is ``ABOUT`` the prompt. A store's document
frequencies bound the coverage of every note in it (``engine.reach``), so a store
that cannot reach the floor is ranked only when that rule is read: the answers
must be those of ranking every store, which the property tests check against the
engine with the bound switched off.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import per_prompt_recall
from mdmem import Level, Store
from mdmem.recall import engine
from mdmem.recall.fts import Index

WORDS = ["deploy", "cache", "queue", "janitor", "vacuum", "broker", "lantern", "walrus"]


def _stores(root: Path, project: list[list[int]], user: list[list[int]]) -> list[Store]:
    stores = []
    for level, notes in ((Level.PROJECT, project), (Level.USER, user)):
        store = Store(root / level.value, level)
        ops = [
            {
                "action": "create",
                "level": level.value,
                "type": "project_knowledge" if level is Level.PROJECT else "user_preference",
                "title": f"Note {i} {WORDS[held[0]]}",
                "content": " ".join(WORDS[w] for w in held) + f" item{i}",
            }
            for i, held in enumerate(notes)
        ]
        if ops:
            store.apply(ops)
        stores.append(store)
    return stores


def _search(stores: list[Store], prompt: str) -> list[tuple[str, float]]:
    return [
        (h.filename, round(h.score, 9))
        for h in engine.search(stores, prompt, limit=20, semantic=False, min_coverage=0.4)
    ]


# Words may repeat in a note (a higher score for the same coverage).
_note = st.lists(st.integers(0, len(WORDS) - 1), min_size=1, max_size=6)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    project=st.lists(_note, min_size=0, max_size=12),
    user=st.lists(_note, min_size=0, max_size=12),
    words=st.lists(st.sampled_from([*WORDS, "timeout"]), min_size=1, max_size=4, unique=True),
)
def test_skipping_a_store_out_of_reach_gives_the_full_rankings_answers(  # type: ignore[no-untyped-def]
    tmp_path_factory, monkeypatch, project, user, words
) -> None:
    engine._INDEXES.clear()
    stores = _stores(tmp_path_factory.mktemp("reach"), project, user)
    prompt = " ".join(words) + "?"
    quick = (per_prompt_recall(stores, prompt), _search(stores, prompt))
    with monkeypatch.context() as m:
        m.setattr(engine, "reach", lambda *a, **k: 1.0)  # every store within reach
        full = (per_prompt_recall(stores, prompt), _search(stores, prompt))
    assert quick == full
    engine._INDEXES.clear()


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of notes in each index a match ran in."""
    counted: list[int] = []
    real = Index.match

    def counting(self, words, limit, **kw):  # type: ignore[no-untyped-def]
        counted.append(self.count())
        return real(self, words, limit, **kw)

    monkeypatch.setattr(Index, "match", counting)
    return counted


def test_a_store_holding_only_a_common_word_of_the_prompt_is_not_ranked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine._INDEXES.clear()
    # The project store has the note the prompt is about; every note of the user
    # store holds "queue" and none of the prompt's other words.
    project = [[0, 1]] * 5 + [[3, 4, 5, 2]]
    user = [[2, 6]] * 7
    stores = _stores(tmp_path, project, user)
    matched = _counting(monkeypatch)
    read: list[str] = []
    real_reads = engine.reads

    def reads(store, index):  # type: ignore[no-untyped-def]
        read.append(store.level.value)
        return real_reads(store, index)

    monkeypatch.setattr(engine, "reads", reads)
    block, hits = per_prompt_recall(stores, "when does the janitor vacuum the broker queues?")
    assert hits == ["project_knowledge_note-5-janitor.md"]
    assert "janitor" in block.lower()
    assert matched == [6]  # the project store only
    assert read == ["project"]  # nor is the user store's usage ledger read
    engine._INDEXES.clear()


def test_a_store_out_of_reach_is_ranked_when_the_lead_rule_reads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine._INDEXES.clear()
    # "lantern" is in one project note, "walrus" (repeated) in two user notes, "zebu" in
    # none: the user store cannot hold a quarter of the prompt, but no note is ABOUT it, so
    # the gate's lead rule reads every score, and the user notes' scores cut the lantern
    # note's lead below LEAD: the gate names nothing. Not ranking the user store would
    # have named the lantern note.
    project = ["lantern beacon", *["deploy cache"] * 12]
    user = [" ".join(["walrus"] * 6)] * 2
    stores = []
    for level, notes in ((Level.PROJECT, project), (Level.USER, user)):
        store = Store(tmp_path / level.value, level)
        store.apply(
            [
                {
                    "action": "create",
                    "level": level.value,
                    "type": "project_knowledge",
                    "title": f"Note {i} {text.split()[0]}",
                    "content": f"{text} item{i}",
                }
                for i, text in enumerate(notes)
            ]
        )
        stores.append(store)
    prompt = "lantern walrus zebu?"
    with monkeypatch.context() as m:
        m.setattr(engine, "reach", lambda *a, **k: 1.0)
        full = per_prompt_recall(stores, prompt)
    matched = _counting(monkeypatch)
    assert per_prompt_recall(stores, prompt) == full == ("", [])
    assert sorted(matched) == [2, 13]  # both stores ranked
    engine._INDEXES.clear()


def test_a_store_within_reach_is_ranked_whatever_the_others_hold(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine._INDEXES.clear()
    stores = _stores(tmp_path, [[3, 4, 5, 2]], [[3, 4, 2]])
    matched = _counting(monkeypatch)
    _, hits = per_prompt_recall(stores, "when does the janitor vacuum the broker queues?")
    assert sorted(matched) == [1, 1]
    assert "project_knowledge_note-0-janitor.md" in hits
    engine._INDEXES.clear()


def test_reach_is_the_share_of_the_weight_a_store_holds() -> None:
    pool = ({"janitor": 1, "queu": 9}, 10)
    qterms = ["janitor", "queu"]
    full = engine.reach(qterms, {}, {"janitor": 1, "queu": 4}, pool)
    assert full == pytest.approx(1.0)
    only_common = engine.reach(qterms, {}, {"queu": 5}, pool)
    assert 0 < only_common < 0.25
    assert engine.reach(qterms, {}, {}, pool) == 0.0
    # A translation the store holds counts for its word.
    assert engine.reach(qterms, {"janitor": ["清洁工"]}, {"清洁工": 1}, pool) > 0.75
