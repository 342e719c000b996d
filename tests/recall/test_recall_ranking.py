"""Ranking properties of the lexical engine: coverage, versions of one note, term edge cases."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import write_note
from mdmem import Level, NoteType, Store
from mdmem.recall import engine, search
from mdmem.recall.text import stem, terms

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
# Made-up words: no stop word, no stem collision, no glossary entry.
_SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "ve", "zo", "pu", "bi"]
WORDS = sorted({"".join(p) for p in itertools.product(_SYLLABLES, repeat=3)})[:400]
# Filler notes give the store realistic document frequencies.
FILLER = WORDS[300:]


def put(
    store: Store,
    name: str,
    title: str,
    body: str,
    *,
    updated: datetime = T0,
    kind: NoteType = NoteType.PROJECT_KNOWLEDGE,
    **extra: object,
) -> None:
    write_note(store.root, name, title, body, kind=kind, updated=updated, **extra)


def fresh(root: Path) -> Store:
    engine._INDEXES.clear()
    store = Store(root, Level.PROJECT)
    for i in range(8):
        words = FILLER[i * 10 : i * 10 + 10]
        put(store, f"project_knowledge_filler{i}.md", " ".join(words[:3]), " ".join(words))
    return store


def ranked(store: Store, query: str) -> list[str]:
    return [h.filename for h in search([store], query, limit=20, semantic=False)]


_FAST = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_FAST
@given(
    data=st.data(),
    size=st.integers(2, 4),
    repeats=st.integers(1, 8),
    in_title=st.booleans(),
)
def test_a_note_with_every_query_word_outranks_one_repeating_one_word(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    size: int,
    repeats: int,
    in_title: bool,
) -> None:
    chosen = data.draw(st.lists(st.sampled_from(WORDS[:200]), min_size=size + 12, unique=True))
    query, own_a, own_b = chosen[:size], chosen[size : size + 6], chosen[size + 6 :]
    store = fresh(tmp_path_factory.mktemp("s"))
    put(store, "project_knowledge_all.md", " ".join(own_a[:2]), " ".join(query + own_a))
    one = " ".join([query[0]] * repeats)
    put(
        store,
        "project_knowledge_one.md",
        f"{query[0]} {own_b[0]}" if in_title else own_b[0],
        f"{one} {' '.join(own_b)}",
        updated=T0 + timedelta(days=1),
    )
    order = ranked(store, " ".join(query))
    assert order[0] == "project_knowledge_all.md"


@_FAST
@given(
    data=st.data(),
    changed=st.integers(1, 3),
    older_first_in_name=st.booleans(),
)
def test_the_newest_of_near_identical_notes_ranks_first_without_supersedes(
    tmp_path_factory: pytest.TempPathFactory,
    data: st.DataObject,
    changed: int,
    older_first_in_name: bool,
) -> None:
    chosen = data.draw(st.lists(st.sampled_from(WORDS[:200]), min_size=16, unique=True))
    base, replacements = chosen[:12], chosen[12 : 12 + changed]
    newer_words = replacements + base[changed:]
    store = fresh(tmp_path_factory.mktemp("s"))
    old, new = ("a_old", "b_new") if older_first_in_name else ("b_old", "a_new")
    # The older version even matches the query better: it has the words the newer dropped.
    put(store, f"project_knowledge_{old}.md", " ".join(base[:3]), " ".join(base))
    put(
        store,
        f"project_knowledge_{new}.md",
        " ".join(newer_words[:3]),
        " ".join(newer_words),
        updated=T0 + timedelta(days=30),
    )
    query = " ".join(base[:changed] + base[changed : changed + 2])
    order = ranked(store, query)
    assert order.index(f"project_knowledge_{new}.md") < order.index(f"project_knowledge_{old}.md")


def test_unrelated_notes_keep_their_order_whatever_their_dates(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    put(store, "project_knowledge_match.md", "kalomi nerutave", "kalomi nerutave zopubi")
    put(
        store,
        "project_knowledge_other.md",
        "kaloka vezomi",
        "kalomi " + " ".join(WORDS[200:210]),
        updated=T0 + timedelta(days=90),
    )
    assert ranked(store, "kalomi nerutave")[0] == "project_knowledge_match.md"


def test_notes_of_different_types_are_not_versions_of_one_another(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    words = WORDS[:10]
    put(store, "project_knowledge_fact.md", " ".join(words[:3]), " ".join(words))
    put(
        store,
        "reference_material_fact.md",
        " ".join(words[3:5]),
        " ".join(words[2:]),
        updated=T0 + timedelta(days=30),
        kind=NoteType.REFERENCE_MATERIAL,
    )
    assert ranked(store, " ".join(words[:3]))[0] == "project_knowledge_fact.md"


def test_a_successor_is_found_by_the_words_of_the_note_it_replaced(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    put(
        store,
        "user_preference_fedora.md",
        "Workstation: Fedora laptop",
        "Her main machine runs Fedora; install tools with dnf.",
        kind=NoteType.USER_PREFERENCE,
    )
    put(
        store,
        "user_preference_mac.md",
        "Workstation: switched to a MacBook",
        "Use brew for system packages.",
        kind=NoteType.USER_PREFERENCE,
        updated=T0 + timedelta(days=30),
        supersedes="user_preference_fedora.md",
    )
    put(
        store,
        "project_knowledge_machine.md",
        "Build machine",
        "The CI machine has 4 cores.",
    )
    order = ranked(store, "how do I install tools on her machine?")
    assert order[0] == "user_preference_mac.md"
    assert "user_preference_fedora.md" not in order


def test_a_successor_of_a_successor_inherits_and_the_chain_ends_current(tmp_path: Path) -> None:
    store = fresh(tmp_path)
    put(store, "project_knowledge_v1.md", "Deploy to Heroku", "git push heroku main")
    put(
        store,
        "project_knowledge_v2.md",
        "Deploy to Render",
        "render deploy",
        updated=T0 + timedelta(days=1),
        supersedes="project_knowledge_v1.md",
    )
    put(
        store,
        "project_knowledge_v3.md",
        "Deploy to Fly.io",
        "fly deploy",
        updated=T0 + timedelta(days=2),
        supersedes="project_knowledge_v2.md",
    )
    assert ranked(store, "heroku")[:1] == ["project_knowledge_v3.md"]


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("migrate", "migration"),
        ("migrated", "migrations"),
        ("authenticate", "authentication"),
        ("authenticated", "authenticate"),
        ("coding", "code"),
        ("based", "base"),
        ("enabled", "enable"),
        ("created", "creation"),
        ("updated", "update"),
        ("formatted", "format"),
        ("added", "add"),
        ("stopped", "stop"),
    ],
)
def test_stemming_joins_word_forms(a: str, b: str) -> None:
    assert stem(a) == stem(b)


def test_clitics_leave_no_stray_terms() -> None:
    assert terms("Lucía's machine") == ["lucía", "machin"]
    assert terms("I'll check; it’s fine, don't worry") == ["check", "fine", "worri"]


def test_inflected_stop_words_are_stop_words() -> None:
    assert terms("who gets paged when it uses") == ["page"]


def test_chinese_function_words_split_runs() -> None:
    assert terms("端到端测试怎么跑") == ["端到", "到端", "端测", "测试", "跑"]
    assert "用什" not in terms("提交信息应该用什么格式？")
