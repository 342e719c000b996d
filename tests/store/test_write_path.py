"""The single-op write path gives the same answers with less work: near titles without an
index, redaction asked once a text, history bounded from the listing it made."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import create_op
from mdmem import Level, Store
from mdmem.store import history
from mdmem.store.dedupe import Candidate, Duplicate, Index, candidate, near_among

if TYPE_CHECKING:
    from collections.abc import Callable

    Reader = Callable[[str], tuple[str, str, str] | None]

WORDS = ["cache", "build", "test", "the", "MSRV", "1.74", "v2", "构建", "测试"]
TITLE = st.lists(
    st.one_of(st.sampled_from(WORDS), st.text("abcxyz 构建测", min_size=1, max_size=6)),
    max_size=6,
).map(" ".join)


@given(titles=st.lists(TITLE, max_size=12), query=TITLE)
def test_near_among_keeps_what_the_index_keeps(titles: list[str], query: str) -> None:
    found = [candidate(f"n{i}.md", title, "s") for i, title in enumerate(titles)]
    index = Index()
    for c in found:
        index.add(c)
    assert near_among(query, reversed(found)) == index.near(query)


def _create(
    title: str, content: str = "Run the whole suite before a release."
) -> dict[str, object]:
    return create_op(title, content)


def test_a_text_that_redaction_changed_is_redacted_again(tmp_path: Path) -> None:
    # Each text is redacted whole, then its cleaned fields again. A redaction that
    # needs the second pass still gets it, though a batch asks each text only once.
    def redact(text: str) -> str:
        return text.replace("XY", "Y")

    store = Store(tmp_path / "mem", Level.PROJECT, redact=redact)
    result = store.apply([_create("XXY release checklist", "XXY before tagging.")])
    note = store.read(result.applied[0].filename)
    assert note.title == "Y release checklist"
    assert note.body == "Y before tagging."


def test_redaction_is_asked_once_per_text_of_a_batch(tmp_path: Path) -> None:
    asked: list[str] = []

    def redact(text: str) -> str:
        asked.append(text)
        return text

    store = Store(tmp_path / "mem", Level.PROJECT, redact=redact)
    store.apply([_create("Release checklist"), _create("Release checklist")])
    assert asked.count("Release checklist") == 1
    assert asked.count("Run the whole suite before a release.") == 1


def test_history_bounds_a_version_taken_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = str(tmp_path / "mem")
    (tmp_path / "mem").mkdir()
    now = datetime.now(timezone.utc)
    for i in range(history.MAX_VERSIONS):
        history.record(root, "a.md", f"take {i}".encode(), source="api", now=now)
    # Another writer adds a version between this one's listing and its link: the
    # number it chose is taken, so it takes the next and bounds from a new listing.
    listing = history._numbers
    stale = [True]

    def numbers(folder: str) -> list[int]:
        found = listing(folder)
        if stale[0]:
            stale[0] = False
            return found[:-1]
        return found

    monkeypatch.setattr(history, "_numbers", numbers)
    number = history.record(root, "a.md", b"take last", source="api", now=now)
    assert number == history.MAX_VERSIONS + 1
    versions = history.list_versions(root, "a.md")
    assert len(versions) == history.MAX_VERSIONS
    assert versions[-1].version == number


@given(st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=200))
def test_content_drops_the_same_control_characters_as_before(text: str) -> None:
    from mdmem.errors import InvalidOperation
    from mdmem.store.operations import _content

    # The definition it replaced, character by character.
    kept = "".join(ch for ch in text if ch in "\n\t" or (ch >= " " and ch != "\x7f")).strip()
    try:
        assert _content(text) == kept
    except InvalidOperation:
        assert not text.strip()


def _find_duplicate_as_before(
    title: str, summary: str, body: str, candidates: list[Candidate], read: Reader
) -> Duplicate | None:
    """find_duplicate as it was: every text computed up front, tests in the old order."""
    from mdmem.store import dedupe as d

    text = d.note_text(title, summary, body)
    wanted = d.normalise(text)
    short = len(wanted) < d.MIN_CHARS
    wanted_title = d.normalise(title)
    head = d._trigrams(f"{title}\n{summary}")
    title_grams = d._trigrams(title)
    numbers = d._numbers(text)
    best: Duplicate | None = None
    for c in candidates:
        if c.norm_title != wanted_title:
            if short:
                continue
            common = len(head & c.head)
            if common < d.PREFILTER * (len(head) + len(c.head) - common):
                continue
            if d._containment(title_grams, c.title_grams) < d.TITLE_CONTAINMENT:
                continue
            if not c.numbers <= numbers:
                continue
        full = read(c.filename)
        if full is None:
            continue
        other = d.note_text(*full)
        if d.normalise(other) == wanted:
            return Duplicate(c.filename, 1.0, True)
        if short or numbers != d._numbers(other):
            continue
        if d._containment(title_grams, d._trigrams(full[0])) < d.TITLE_CONTAINMENT:
            continue
        score = d.similarity(text, other)
        if score >= d.THRESHOLD and (best is None or score > best.score):
            best = Duplicate(c.filename, score, False)
    return best


PIECES = ["MSRV 1.74", "MSRV 1.80", "v2", "cache", "build", "the", "ﬁ", "Ⅻ", "构建", "12", "\n"]
TEXT = st.lists(st.sampled_from(PIECES) | st.text("ab1.2 ", max_size=4), max_size=30).map(" ".join)


@given(
    new=st.tuples(TEXT, TEXT, TEXT),
    stored=st.lists(st.tuples(TEXT, TEXT, TEXT), max_size=6),
)
def test_find_duplicate_finds_what_it_found_before(
    new: tuple[str, str, str], stored: list[tuple[str, str, str]]
) -> None:
    from mdmem.store.dedupe import find_duplicate

    notes = {f"n{i}.md": note for i, note in enumerate(stored)}
    found = [candidate(name, t, s) for name, (t, s, _) in notes.items()]
    title, summary, body = new
    assert find_duplicate(title, summary, body, found, notes.get) == _find_duplicate_as_before(
        title, summary, body, found, notes.get
    )
    # And a note against itself, and against a copy with one number changed.
    if stored:
        t, s, b = stored[0]
        for text in (b, b + " 7", b.replace("1", "2")):
            assert find_duplicate(t, s, text, found, notes.get) == _find_duplicate_as_before(
                t, s, text, found, notes.get
            )


def _marked_notes() -> st.SearchStrategy[object]:
    """The notes strategy's notes, some of them with the keys the catalog's marks read."""
    from builders import notes

    marks = st.fixed_dictionaries(
        {},
        optional={
            "supersedes": st.just("project_knowledge_old.md")
            | st.lists(st.sampled_from(["a.md", "b.md", "c d.md"]), max_size=3),
            "expires": st.sampled_from(["2030-01-02", "2026-12-01T10:00:00+00:00", "soon"]),
        },
    )
    return st.tuples(notes(), marks).map(
        lambda pair: pair[0].with_changes(extra={**pair[0].extra, **pair[1]})
    )


@given(note=_marked_notes())
def test_a_writes_row_from_its_own_note_is_the_row_parsing_would_give(
    tmp_path_factory: pytest.TempPathFactory, note: object
) -> None:
    from mdmem.store import rows
    from mdmem.store.note import Note, render

    assert isinstance(note, Note)
    store = Store(tmp_path_factory.mktemp("s"), Level.PROJECT)
    data = render(note).encode("utf-8")
    st_ = (1, len(data), 2, 3)
    known = {note.filename: data}
    assert rows.note_row(store.path, note.filename, st_, None, known, note) == rows.note_row(
        store.path, note.filename, st_, None, known
    )


def _count_listings(root: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every ``os.listdir`` of the store's folder from now on (a name check's listing)."""
    import os

    calls: list[str] = []
    real = os.listdir

    def listdir(path: str = ".") -> list[str]:
        if os.fspath(path) == str(root):
            calls.append(os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    return calls


def _settled(root: Path, titles: list[str]) -> list[str]:
    store = Store(root, Level.PROJECT)
    names = [store.apply([create_op(t)]).applied[0].filename for t in titles]
    store.load_index()
    return names


def test_after_an_editor_saved_a_note_the_folder_is_listed_twice_not_at_each_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An editor's save (a new file renamed over the note) moves the folder: the rows no
    # longer vouch for its names, so a write lists it to check a name. A process that
    # writes again (the worker, an import) lists it a second time, finds the rows hold
    # every note listed and records the folder again: its writes after that, and every
    # other process's, check a name with one query. So do processes of one write each.
    root = tmp_path / "mem"
    names = _settled(root, ["Release steps", "Cache keys", "Port numbers"])
    saved = root / names[1]
    (root / ".edit.tmp").write_text(saved.read_text("utf-8") + "One more line.\n", "utf-8")
    (root / ".edit.tmp").replace(saved)
    listed = _count_listings(root, monkeypatch)

    worker = Store(root, Level.PROJECT)
    for title in ("Deploy window", "Build flags", "Lint rules", "Test matrix"):
        assert worker.apply([create_op(title)]).applied
    assert len(listed) == 2
    assert Store(root, Level.PROJECT).apply([create_op("Release notes")]).applied
    assert len(listed) == 2
    # Processes that write once each (`mdmem add` after `mdmem add`): the first lists the
    # folder; the second lists it too, knowing the write before it did not know it, and
    # finds the rows are every note: the third checks with one query.
    (root / ".edit.tmp").write_text(saved.read_text("utf-8") + "Two more.\n", "utf-8")
    (root / ".edit.tmp").replace(saved)
    for title in ("Runbook", "On call", "Pager rota"):
        assert Store(root, Level.PROJECT).apply([create_op(title)]).applied
    assert len(listed) == 4
    # ... and a name that differs only in case from a note is still taken.
    upper = names[0].removesuffix(".md").upper() + ".md"
    clash = Store(root, Level.PROJECT).apply([{**create_op("Other"), "filename": upper}])
    assert not clash.applied and "exists" in clash.rejected[0].reason, clash.rejected


def test_after_a_note_came_from_elsewhere_a_write_still_knows_it_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A note written by hand (or by a pull) is a name the rows lack: the listing is what
    # knows it, so each write lists again until a read has read the note into the rows.
    root = tmp_path / "mem"
    _settled(root, ["Release steps", "Cache keys"])
    from builders import write_note

    write_note(root, "project_knowledge_hand-made.md", "Hand made")
    listed = _count_listings(root, monkeypatch)
    worker = Store(root, Level.PROJECT)
    clash = {**create_op("Other"), "filename": "Project_Knowledge_Hand-Made.md"}
    for op in (create_op("Deploy window"), clash, create_op("Build flags")):
        result = worker.apply([op])
        assert bool(result.applied) == (op is not clash), result
    assert "exists" in worker.apply([clash]).rejected[0].reason
    assert len(listed) == 3
    Store(root, Level.PROJECT).load_index()  # a read: the hand-made note gets its row
    assert worker.apply([create_op("Lint rules")]).applied
    assert Store(root, Level.PROJECT).apply([create_op("Test matrix")]).applied
    assert len(listed) == 3


#: What happens to the store's folder between writes: mdmem's own write, or a change made
#: elsewhere (a note written by hand, one deleted, an editor's save, a read that resyncs).
STEPS = st.lists(
    st.tuples(
        st.sampled_from(
            ["write", "write", "write-new", "hand-new", "hand-delete", "editor-save", "read"]
        ),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=10,
)


@settings(max_examples=40, deadline=None)
@given(steps=STEPS)
def test_a_write_name_check_answers_what_the_folder_holds(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, int]]
) -> None:
    # Whatever was changed elsewhere and written between (by a process that lives on, or a
    # new one, as each `mdmem add` is), the next name check answers as the folder does.
    import time

    from builders import write_note

    root = tmp_path_factory.mktemp("mem")
    _settled(root, ["Seed note"])
    writer = Store(root, Level.PROJECT)  # one that lives on: the worker, an import
    for i, (step, n) in enumerate(steps):
        time.sleep(0.005)  # past the folder's clock tick: a change within one is not told
        names = sorted(p.name for p in root.glob("*.md") if p.name != "MEMORY.md")
        if step in ("write", "write-new"):
            store = writer if step == "write" else Store(root, Level.PROJECT)
            assert store.apply([create_op(f"Written {i}")]).applied
        elif step == "hand-new":
            write_note(root, f"project_knowledge_by-hand-{i}-{n}.md", f"By hand {i}")
        elif step == "hand-delete" and names:
            (root / names[n % len(names)]).unlink()
        elif step == "editor-save" and names:
            saved = root / names[n % len(names)]
            (root / ".save.tmp").write_bytes(saved.read_bytes() + b"\nSaved.\n")
            (root / ".save.tmp").replace(saved)
        elif step == "read":
            Store(root, Level.PROJECT).load_index()
        time.sleep(0.005)
        there = {p.name.casefold() for p in root.iterdir()}
        probes = names + [f"project_knowledge_by-hand-{j}-{n}.md" for j in range(i + 1)]
        store = Store(root, Level.PROJECT)
        with store.lock():
            for probe in probes:
                variant = probe.removesuffix(".md").upper() + ".md"
                assert store.name_taken(variant) == (probe.casefold() in there), (steps, probe)
