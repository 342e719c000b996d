"""A prompt whose every word most notes hold: the per-prompt gate names none, without ranking.

When the document frequencies alone show that more than ``CROWD`` notes hold every
word of a prompt (none distinctive), the gate recalls nothing ("a prompt that more
than CROWD notes match equally well names none"), so the hook does not rank them:
that was BM25 over most of a 100,000-note store (0.3-0.5 s). The answers must be
those of the full ranking: checked on generated stores small enough that every
match is a candidate (where the two are provably equal); ``search`` still ranks.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import per_prompt_recall
from mdmem import Level, Store
from mdmem.recall import engine, weights
from mdmem.recall.fts import Index

COMMON = ["deploy", "cache", "server", "release"]
RARE = ["quokka", "zephyr", "marmot", "lantern", "obsidian", "walrus"]


def _stores(root: Path, notes: list[tuple[list[bool], int]]) -> list[Store]:
    store = Store(root / "project", Level.PROJECT)
    ops = []
    for i, (has, rare) in enumerate(notes):
        words = [w for w, here in zip(COMMON, has, strict=True) if here] + [RARE[rare]]
        ops.append(
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i} {' '.join(words[:2])}",
                "content": " ".join(words * 2) + f" item{i}",
            }
        )
    store.apply(ops)
    return [store, Store(root / "user", Level.USER)]


_note = st.tuples(
    st.lists(
        st.sampled_from([True, True, True, False]), min_size=len(COMMON), max_size=len(COMMON)
    ),
    st.integers(0, len(RARE) - 1),
)


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    notes=st.lists(_note, min_size=8, max_size=40),
    # Common words, a rarer one, and words no note holds ("timeout", "yak").
    words=st.lists(
        st.sampled_from([*COMMON, RARE[0], "timeout", "yak"]), min_size=1, max_size=4, unique=True
    ),
)
def test_the_crowd_shortcut_gives_the_full_rankings_answer(  # type: ignore[no-untyped-def]
    tmp_path_factory, monkeypatch, notes, words
) -> None:
    # A "large" store from 6 notes on (instead of 500), so that small stores, whose every
    # match is a candidate, show the rule.
    monkeypatch.setattr(weights, "_COMMON", 6)
    engine._INDEXES.clear()
    stores = _stores(tmp_path_factory.mktemp("crowd"), notes)
    prompt = " ".join(words) + "?"
    quick = per_prompt_recall(stores, prompt)
    with monkeypatch.context() as m:
        m.setattr(engine, "crowded", lambda *a, **k: False)
        full = per_prompt_recall(stores, prompt)
    assert quick == full
    engine._INDEXES.clear()


def test_a_crowded_prompt_ranks_nothing_and_search_still_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(weights, "_COMMON", 6)
    engine._INDEXES.clear()
    # Every note holds every common word: a crowd of 30.
    stores = _stores(tmp_path, [([True] * len(COMMON), i % len(RARE)) for i in range(30)])
    matched: list[object] = []
    real = Index.match

    def counting(self, words, limit, **kw):  # type: ignore[no-untyped-def]
        matched.append(words)
        return real(self, words, limit, **kw)

    monkeypatch.setattr(Index, "match", counting)
    assert per_prompt_recall(stores, "how do we deploy the cache server?") == ("", [])
    assert matched == []  # no note ranked for it
    assert per_prompt_recall(stores, "why does the cache server time out?") == ("", [])
    assert matched == []  # a word no note holds changes nothing
    assert len(engine.search(stores, "deploy cache server", limit=5)) == 5
    assert matched  # search ranks as before
    # A distinctive word among them: ranked, and the one note holding it found.
    assert per_prompt_recall(stores, "how do we deploy the cache of item7?")[1] == [
        "project_knowledge_note-7-deploy-cache.md"
    ]
    engine._INDEXES.clear()
