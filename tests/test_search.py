"""Keyword search over notes: tokens, ranking, snippets; and a property over random notes."""

from __future__ import annotations

import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import PYTHON, python_env
from mdmem import Level, Note, NoteType, Store
from mdmem.recall.search import SNIPPET_CHARS, search, search_stores, tokenize

T0 = datetime(2026, 11, 1, tzinfo=timezone.utc)


def note(
    filename: str,
    title: str,
    body: str = "",
    summary: str = "",
    updated: datetime | None = T0,
) -> Note:
    return Note(
        filename=filename,
        type=NoteType.PROJECT_KNOWLEDGE,
        title=title,
        summary=summary,
        body=body,
        created=T0,
        updated=updated,
    )


def project(*notes: Note) -> list[tuple[Level, Note]]:
    return [(Level.PROJECT, n) for n in notes]


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("Run `go test ./...` now", ["run", "go", "test", "now"]),
        ("HeLLo, WORLD!", ["hello", "world"]),
        ("project_knowledge_build.md", ["project_knowledge_build", "md"]),
        ("使用中文回答", ["使", "用", "中", "文", "回", "答"]),
        ("用Go写测试", ["用", "go", "写", "测", "试"]),
        ("テストを書く", ["テ", "ス", "ト", "を", "書", "く"]),
        ("ＡＢＣ　ｄｅｆ", ["abc", "def"]),
        ("Straße", ["strasse"]),
        ("café-au-lait", ["café", "au", "lait"]),
        ("  !!! ... ", []),
        ("", []),
    ],
)
def test_tokenize(text: str, tokens: list[str]) -> None:
    assert tokenize(text) == tokens


def test_a_title_hit_outranks_a_summary_hit_which_outranks_a_body_hit() -> None:
    notes = project(
        note("a.md", "Deploy", body="release steps"),
        note("b.md", "Steps", summary="How to release", body="nothing"),
        note("c.md", "Release", body="nothing"),
    )

    hits = search("release", notes)

    assert [(h.filename, h.score) for h in hits] == [("c.md", 3), ("b.md", 2), ("a.md", 1)]


def test_term_frequency_counts_and_every_query_term_adds() -> None:
    notes = project(
        note("once.md", "A", body="cache"),
        note("twice.md", "B", body="cache and cache"),
        note("both.md", "C", body="cache redis cache"),
    )

    hits = search("Cache REDIS", notes)

    assert [(h.filename, h.score) for h in hits] == [
        ("both.md", 3),
        ("twice.md", 2),
        ("once.md", 1),
    ]


def test_ties_go_to_the_newer_note_then_the_file_name() -> None:
    notes = project(
        note("b-old.md", "Lint", updated=T0),
        note("z-new.md", "Lint", updated=T0 + timedelta(days=1)),
        note("a-old.md", "Lint", updated=T0),
        note("no-date.md", "Lint", updated=None),
    )

    hits = search("lint", notes)

    assert [h.filename for h in hits] == ["z-new.md", "a-old.md", "b-old.md", "no-date.md"]


def test_no_match_empty_query_and_limit() -> None:
    notes = project(*(note(f"n{i}.md", f"Note {i}", body="shared word") for i in range(5)))

    assert search("absent", notes) == []
    assert search("  ...  ", notes) == []
    assert search("shared", notes, limit=0) == []
    assert len(search("shared", notes, limit=3)) == 3


def test_chinese_query_matches_chinese_text() -> None:
    notes = project(
        note("zh.md", "回答语言", body="总是用中文回答用户。"),
        note("en.md", "Language", body="Answer in English."),
    )

    hits = search("中文", notes)

    assert [h.filename for h in hits] == ["zh.md"]
    assert "中文" in hits[0].snippet


def test_a_snippet_shows_the_match_in_the_body() -> None:
    body = "Intro. " * 60 + "Run the migrations with `make migrate` first. " + "Outro. " * 60
    (hit,) = search("migrate", project(note("m.md", "Database", body=body, summary="DB notes")))

    assert "make migrate" in hit.snippet
    assert hit.snippet.startswith("…")
    assert hit.snippet.endswith("…")
    assert len(hit.snippet) <= SNIPPET_CHARS + 2
    assert "\n" not in hit.snippet


def test_a_snippet_falls_back_to_the_summary_when_the_body_does_not_match() -> None:
    (hit,) = search(
        "deploy", project(note("d.md", "Deploy", body="Use the script.", summary="How"))
    )

    assert hit.snippet == "How"


def test_search_stores_spans_both_levels_and_skips_broken_notes(tmp_path: Path) -> None:
    project_store = Store(tmp_path / "project", Level.PROJECT)
    user_store = Store(tmp_path / "user", Level.USER)
    op = {"action": "create", "type": "project_knowledge", "title": "Tests", "content": "make test"}
    project_store.apply([{**op, "level": "project"}])
    user_store.apply([{**op, "level": "user", "type": "user_preference"}])
    (tmp_path / "project" / "broken.md").write_text("---\ntitle: [\n---\nmake test\n")

    hits = search_stores("test", [project_store, user_store])
    only_user = search_stores("test", [user_store])

    assert sorted((h.level, h.filename) for h in hits) == [
        (Level.PROJECT, "project_knowledge_tests.md"),
        (Level.USER, "user_preference_tests.md"),
    ]
    assert [h.level for h in only_user] == [Level.USER]


# -- property --------------------------------------------------------------------------

WORDS = st.sampled_from(
    ["build", "test", "Deploy", "cache", "中", "文", "go", "RUST", "lint", "テスト", "ß", "x_y"]
)
TEXT = st.lists(st.one_of(WORDS, st.text(max_size=6)), max_size=12).map(" ".join)


@given(
    notes=st.lists(st.tuples(TEXT, TEXT, TEXT, st.integers(min_value=0, max_value=3)), max_size=8),
    query=TEXT,
    limit=st.integers(min_value=1, max_value=10),
)
def test_every_result_holds_a_query_token(
    notes: list[tuple[str, str, str, int]], query: str, limit: int
) -> None:
    corpus = project(
        *(
            note(
                f"n{i}.md", title or "t", body=body, summary=summary, updated=T0 + timedelta(days=d)
            )
            for i, (title, summary, body, d) in enumerate(notes)
        )
    )
    by_name = {n.filename: n for _, n in corpus}
    terms = set(tokenize(query))

    hits = search(query, corpus, limit=limit)

    assert len(hits) <= limit
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    for hit in hits:
        n = by_name[hit.filename]
        assert hit.score > 0
        assert terms & set(tokenize(f"{n.title} {n.summary} {n.body}"))


def test_importing_search_stays_light() -> None:
    code = (
        "import sys, mdmem.recall.search; "
        "print([m for m in ('anthropic', 'mcp', 'yaml', 'typer') if m in sys.modules])"
    )
    out = subprocess.run(
        [PYTHON, "-c", code], env=python_env(), capture_output=True, text=True, check=True
    )

    assert out.stdout.strip() == "[]"
