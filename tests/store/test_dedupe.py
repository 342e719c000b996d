"""Dedupe on write: repeats become `unchanged` or an update; different facts never merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from builders import create_op
from conftest import FIXTURES
from mdmem import Level, Store
from mdmem.store.dedupe import THRESHOLD, candidate, find_duplicate, note_text, similarity

PAIRS = json.loads((FIXTURES / "dedupe_pairs.json").read_text())
NOTES = PAIRS["notes"]


def op(note: dict[str, str], level: str | None = None) -> dict[str, object]:
    return create_op(
        note["title"],
        note["body"],
        level=level or note["level"],
        type=note["type"],
        summary=note["summary"],
    )


def store_for(tmp_path: Path, level: str) -> Store:
    return Store(tmp_path / level, Level(level))


@pytest.mark.parametrize(
    ("a", "b", "why"), PAIRS["different"] + [[*p, "changed"] for p in PAIRS["changed"]]
)
def test_hard_pairs_that_share_words_are_never_merged(
    tmp_path: Path, a: str, b: str, why: str
) -> None:
    store = store_for(tmp_path, "project")
    first, second = NOTES[a], NOTES[b]
    store.apply([op(first, "project")])
    result = store.apply([op(second, "project")])
    assert [x.action for x in result.applied] == ["create"], (why, result)
    assert len(store.entries()) == 2


@pytest.mark.parametrize("dup", PAIRS["duplicates"], ids=lambda d: d["of"])
def test_paraphrased_duplicates_become_an_update_of_the_note(
    tmp_path: Path, dup: dict[str, str]
) -> None:
    original = NOTES[dup["of"]]
    store = store_for(tmp_path, original["level"])
    [created] = store.apply([op(original)]).applied
    again = {
        **op(original),
        "title": dup["title"],
        "summary": dup["summary"],
        "content": dup["body"],
    }
    [applied] = store.apply([again]).applied
    assert (applied.action, applied.filename) == ("update", created.filename)
    assert "near-duplicate" in applied.detail
    assert store.read(created.filename).body == dup["body"]
    assert len(store.history(created.filename)) == 2  # the first wording is kept


def test_the_same_text_again_is_unchanged_even_under_another_title_case(tmp_path: Path) -> None:
    store = store_for(tmp_path, "project")
    note = NOTES["d025"]
    [first] = store.apply([op(note, "project")]).applied
    again = {**op(note, "project"), "title": note["title"].upper(), "content": note["body"] + "  "}
    [second] = store.apply([again]).applied
    assert (second.action, second.filename) == ("unchanged", first.filename)
    assert "same note" in second.detail


def test_the_same_note_at_another_level_is_not_merged(tmp_path: Path) -> None:
    note = NOTES["d002"]
    project, user = store_for(tmp_path, "project"), store_for(tmp_path, "user")
    project.apply([op(note, "project")])
    [applied] = user.apply([op(note, "user")]).applied
    assert applied.action == "create"
    assert len(project.entries()) == len(user.entries()) == 1


def test_duplicates_within_one_batch_are_merged(tmp_path: Path) -> None:
    store = store_for(tmp_path, "project")
    note = NOTES["d026"]
    result = store.apply([op(note, "project"), op(note, "project")])
    assert [a.action for a in result.applied] == ["create", "unchanged"]


def test_an_explicit_supersedes_is_never_taken_for_a_duplicate(tmp_path: Path) -> None:
    store = store_for(tmp_path, "project")
    note = NOTES["d026"]
    [first] = store.apply([op(note, "project")]).applied
    dup = next(d for d in PAIRS["duplicates"] if d["of"] == "d026")
    newer = {**op(note, "project"), "content": dup["body"], "supersedes": first.filename}
    result = store.apply([newer])
    assert result.applied[0].action == "create"
    assert result.applied[0].filename != first.filename


def test_the_threshold_separates_the_table() -> None:
    hard = [
        similarity(note_text(**_fields(NOTES[a])), note_text(**_fields(NOTES[b])))
        for a, b, *_ in PAIRS["different"] + PAIRS["changed"]
    ]
    same = [
        similarity(
            note_text(**_fields(NOTES[d["of"]])), note_text(d["title"], d["summary"], d["body"])
        )
        for d in PAIRS["duplicates"]
    ]
    assert max(hard) < THRESHOLD <= min(same)


def test_find_duplicate_reads_only_close_candidates() -> None:
    read: list[str] = []
    notes = {k: _fields(v) for k, v in NOTES.items()}

    def reader(name: str) -> tuple[str, str, str]:
        read.append(name)
        n = notes[name]
        return n["title"], n["summary"], n["body"]

    target = notes["d044"]
    found = find_duplicate(
        target["title"],
        target["summary"],
        target["body"],
        (candidate(k, v["title"], v["summary"]) for k, v in notes.items()),
        reader,
    )
    assert found is not None and found.filename == "d044" and found.exact
    assert len(read) < len(notes) / 2


def _fields(note: dict[str, str]) -> dict[str, str]:
    return {"title": note["title"], "summary": note["summary"], "body": note["body"]}
