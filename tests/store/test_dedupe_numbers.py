"""Dedupe bounded per create whatever the titles: notes are grouped by the numbers they name.

A duplicate names the numbers the note it repeats names (``find_duplicate``
compares them); ``number_key`` is those numbers' normal form, so a create is
compared only with the notes of its key. Checked here: the key is a function
of the numbers ``find_duplicate`` compares (hypothesis), every duplicate
``find_duplicate`` finds shares the new note's key (hypothesis), a create with
a numbered title among hundreds of numbered notes reads none of them (a
counter, not a timing), and real duplicates are still caught.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.store import _planner, dedupe
from mdmem.store.dedupe import _NUMBERS, _numbers, find_duplicate, normalise, number_key

# Digits of other scripts, full-width and superscript ones, dots, underscores, dashes:
# what decides where a number starts and ends.
CHARS = "ab1_2.-9 x\n٣５²Ⅻé0"
TEXT = st.text(alphabet=CHARS, max_size=24)
WORDS = ["Note", "number", "ADR", "Migration", "0042", "17", "v2", "1.74", "2024-03-01", "cache"]
PHRASE = st.lists(st.sampled_from(WORDS) | TEXT, max_size=8).map(" ".join)


@given(TEXT)
def test_the_key_is_a_function_of_the_numbers_find_duplicate_compares(text: str) -> None:
    from_numbers = sorted({n for t in _numbers(text) for n in _NUMBERS.findall(normalise(t))})
    assert number_key(text, "", "").split() == from_numbers


@given(
    title=PHRASE,
    summary=PHRASE,
    body=st.lists(st.sampled_from(WORDS) | TEXT, min_size=10, max_size=40).map(" ".join),
    edits=st.lists(st.tuples(st.integers(0, 60), st.sampled_from([*WORDS, " ", "."])), max_size=4),
)
def test_every_duplicate_find_duplicate_finds_shares_the_key(
    title: str, summary: str, body: str, edits: list[tuple[int, str]]
) -> None:
    # The other note: the same text with a few words put in (near, or not at all).
    other = body
    for at, word in edits:
        other = other[:at] + word + other[at:]
    candidates = [dedupe.candidate("project_knowledge_x.md", title, summary)]
    found = find_duplicate(title, summary, other, candidates, lambda _: (title, summary, body))
    if found is not None:
        assert number_key(title, summary, other) == number_key(title, summary, body)


@given(st.text(alphabet=CHARS + "Ab..", max_size=60) | PHRASE)
def test_the_numbers_are_what_the_pattern_finds_on_any_text(text: str) -> None:
    # _NUMBERS defines a note's numbers; they are found by dedupe._number_tokens, in one
    # pass (the pattern's own search is quadratic in a word's length): the same, on any
    # text, its normal form and its folded form.
    folded = unicodedata.normalize("NFKC", text).casefold()
    for value in (text, normalise(text), folded):
        assert dedupe._number_tokens(value) == set(_NUMBERS.findall(value))
    assert number_key(text, "", "").split() == sorted(set(_NUMBERS.findall(normalise(text))))


class _Refused:
    def findall(self, text: str) -> list[str]:
        raise AssertionError("the backtracking pattern ran on a note's text")


def test_a_note_of_one_huge_word_costs_one_pass(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Notes of one huge word (a clone may hold them): the pattern would backtrack over
    # such a word for seconds to minutes. Their catalog rows, a create compared with them
    # and a duplicate of one never run the pattern; the duplicate is still found.
    huge, big = "a" * 200_000 + "7", "b" * 30_000 + "7"
    store.root.mkdir(parents=True, exist_ok=True)
    for name, title, body in (("huge", "Huge word", huge), ("big", "Big word", f"{big} {big}")):
        (store.root / f"project_knowledge_{name}.md").write_text(
            f"---\ntype: project_knowledge\ntitle: {title}\n---\n{body}\n"
        )
    monkeypatch.setattr(dedupe, "_NUMBERS", _Refused())
    index = store.load_index()
    assert "project_knowledge_huge.md" in index and "project_knowledge_big.md" in index
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    again = store.apply([{**op, "title": "Big word", "content": f"{big} {big}"}])
    # The same note (a hand-written one: its times and summary are filled in).
    assert [(a.action, a.filename) for a in again.applied] == [
        ("update", "project_knowledge_big.md")
    ]
    other = store.apply([{**op, "title": "Another big word", "content": big.replace("7", "8")}])
    assert [a.action for a in other.applied] == ["create"]


def _numbered(store: Store, count: int) -> None:
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    for start in range(0, count, 100):
        store.apply(
            [
                {**op, "title": f"Note number {i}", "content": f"What note {i} says, in full."}
                for i in range(start, min(count, start + 100))
            ]
        )


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


def test_a_numbered_create_is_not_compared_with_every_numbered_note(
    tmp_path: Path, counted: list[int]
) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    _numbered(store, 300)
    # Within one batch too: the 100th create of a batch was compared with none of the 99.
    assert max(counted, default=0) <= 1
    del counted[:]
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    for title in ("Note number 300", "ADR 17", "Migration 0042", "Note number 1 of 2024"):
        result = store.apply([{**op, "title": title, "content": f"{title}: something new."}])
        assert [a.action for a in result.applied] == ["create"]
    assert counted == [0, 0, 0, 0] or max(counted) <= 1


def test_numbered_duplicates_are_still_caught(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT)
    _numbered(store, 150)
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    again = store.apply(
        [{**op, "title": "Note number 42", "content": "What note 42 says, in full."}]
    )
    assert [(a.action, a.filename) for a in again.applied] == [
        ("unchanged", "project_knowledge_note-number-42.md")
    ]
    longer = "What note 77 says, in full, and the same again: deploy on Tuesdays after the review."
    store.apply([{**op, "title": "Note number 77", "content": longer}])
    near = store.apply(
        [{**op, "title": "Note number 77", "content": longer.replace("Tuesdays", "Tuesday")}]
    )
    assert [a.action for a in near.applied] == ["update"]
    # Another number is another fact, however alike the words.
    other = store.apply([{**op, "title": "Note number 78", "content": longer.replace("77", "78")}])
    assert [a.action for a in other.applied] == ["create"]
