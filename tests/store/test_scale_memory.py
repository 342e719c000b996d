"""Whole-store passes that hold a page at a time, and survive a kill -9 halfway.

The first load after a clone, ``reindex``, the recall index's full build, the
prompt block and ``mdmem doctor`` each go over every note; none may keep every
note (or every line) in memory at once, and a kill in the middle of one must
leave a store whose next command works and equals a rebuild from the notes.
Memory itself is measured in ``benchmarks/bench_scale.py``; here the shape.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import textwrap
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import CLONED_TYPES, fill, index_dump
from conftest import PYTHON, python_env, state
from mdmem import Level, Store
from mdmem.manager.doctor import examine
from mdmem.recall import fts as recall_index
from mdmem.store import _catalog, _catalog_reads, _index_file, sync
from mdmem.store import block as block
from mdmem.store import store as store_module
from mdmem.store.block import MAX_BYTES, MAX_LINES


def rows(root: Path) -> list[tuple[str, object]]:
    """The catalog's rows but their stat and time (``st``, ``at``)."""
    return sorted((name, tuple(e)[2:]) for name, e in _catalog_reads.load(str(root))[0].items())


def rebuilt(root: Path) -> tuple[str, list[tuple[str, object]]]:
    """MEMORY.md and the catalog's rows as a store with no derived state computes them."""
    copy = root.parent / "rebuilt"
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(root, copy)
    (copy / "MEMORY.md").unlink(missing_ok=True)
    Store(copy, Level.PROJECT).reindex()
    return (copy / "MEMORY.md").read_text(encoding="utf-8"), rows(copy)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "ws" / ".PseudoClaude" / "memory"
    fill(folder, 320)
    return folder


def test_a_first_load_writes_rows_in_batches_and_streams_memory_md(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(root, Level.PROJECT)
    store.reindex()
    text = (root / "MEMORY.md").read_text(encoding="utf-8")
    shutil.rmtree(state(root))  # a clone: the notes and MEMORY.md, no derived state
    batches: list[int] = []
    real = _catalog.Catalog.put_many

    def put_many(self: _catalog.Catalog, items: list[tuple[str, _catalog.CatalogRow]]) -> None:
        batches.append(len(items))
        real(self, items)

    def whole(lines: object) -> bytes:
        raise AssertionError("MEMORY.md was built whole")

    with monkeypatch.context() as patch:
        patch.setattr(_catalog.Catalog, "put_many", put_many)
        patch.setattr(_index_file, "join", whole)
        patch.setattr(sync, "_BATCH", 50)
        fresh = Store(root, Level.PROJECT)
        assert fresh.load_index() == text
    assert sum(batches) == 320 and max(batches) <= 50
    assert (text, rows(root)) == rebuilt(root)


def test_a_reindex_rebuilds_memory_md_in_chunks(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(root, Level.PROJECT)
    store.reindex()
    expected = (root / "MEMORY.md").read_bytes()
    (root / "MEMORY.md").write_text("# typed by hand\n", encoding="utf-8")
    written: list[object] = []
    real = store_module.files.atomic_write

    def atomic_write(path: str, data: object, **kw: bool) -> None:
        if path.endswith("MEMORY.md"):
            written.append(data)
        real(path, data, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(store_module.files, "atomic_write", atomic_write)
    report = store.reindex()
    assert report.changed and report.notes == 320
    assert (root / "MEMORY.md").read_bytes() == expected
    assert len(written) == 1 and not isinstance(written[0], bytes)  # chunks, not the whole file


KILLED_REINDEX = textwrap.dedent(
    """
    import os, sys
    from mdmem import Level, Store
    from mdmem.recall.fts import Index

    store = Store(sys.argv[1], Level.PROJECT)
    at = int(sys.argv[2])
    what = sys.argv[3]

    def progress(done, total):
        if done >= at:
            print("halfway", flush=True)
            sys.stdin.readline()  # killed here

    if what == "catalog":
        store.reindex(progress=progress)
    else:
        Index(store).rebuild(progress=progress)
    """
)


@pytest.mark.parametrize("what", ["catalog", "recall"])
def test_kill_dash_nine_during_a_rebuild_leaves_a_usable_store(root: Path, what: str) -> None:
    store = Store(root, Level.PROJECT)
    store.reindex()
    before = recall_index.Index(store)
    before.rebuild()
    before.close()
    # Changed behind mdmem's back, then the rebuild is killed halfway through.
    (root / "reference_material_n07919.md").unlink()
    fill(root.parent / "more", 3)
    for extra in (root.parent / "more").iterdir():
        extra.rename(root / f"reference_material_extra-{extra.name}")
    for at in (1, 150 if what == "catalog" else 256):
        proc = subprocess.Popen(
            [PYTHON, "-c", KILLED_REINDEX, str(root), str(at), what],
            env=python_env(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        assert proc.stdout.readline() == "halfway\n"
        proc.send_signal(signal.SIGKILL)
        proc.communicate()  # waits, and closes the pipes
        assert proc.returncode == -signal.SIGKILL
        after = Store(root, Level.PROJECT)
        text = after.load_index()
        assert (text, rows(root)) == rebuilt(root)
        idx = recall_index.Index(after)
        idx.sync()
        other = recall_index.Index(after, ":memory:")
        other.rebuild()
        assert index_dump(idx) == index_dump(other)
        idx.close()
        other.close()


def test_the_bulk_recall_build_equals_one_note_at_a_time(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = Store(root, Level.PROJECT)
    bulk = recall_index.Index(store, ":memory:")
    assert bulk.rebuild() == 320
    assert bulk.sync() == 0
    with monkeypatch.context() as patch:
        patch.setattr(recall_index, "_BULK", 10_000)
        single = recall_index.Index(store, ":memory:")
        assert single.sync() == 320
    assert index_dump(bulk) == index_dump(single)
    # Many changes at once go the bulk way too, and end where one at a time ends.
    notes = sorted(p for p in root.glob("*.md") if p.name != "MEMORY.md")
    notes[0].unlink()
    for path in notes[1:301]:
        path.write_text(path.read_text(encoding="utf-8") + "edited\n", encoding="utf-8")
    assert bulk.sync() == 300
    again = recall_index.Index(store, ":memory:")
    again.rebuild()
    assert index_dump(bulk) == index_dump(again)
    assert [r.name for r in bulk.match(["cache"], 3)] == [r.name for r in again.match(["cache"], 3)]


# -- the prompt block: the best lines kept, never every line -------------------------


def reference_merge(
    project: str, user: str, max_lines: int, max_bytes: int, updated: tuple[dict[str, str], ...]
) -> str:
    """The block as the version that split every line computed it (the oracle)."""

    def lines_of(text: str) -> list[str]:
        return [line.rstrip() for line in text.splitlines() if line.strip()]

    size = block._size
    sections = []
    for heading, text, times in (
        (block.PROJECT_HEADING, project, updated[0]),
        (block.USER_HEADING, user, updated[1]),
    ):
        lines = lines_of(text)
        if lines:
            sections.append((heading, lines, times))
    if not sections:
        return ""
    head = len(block.PREAMBLE.encode("utf-8")) + 2
    room_all, bytes_all = max_lines - 2, max_bytes - head
    whole = [ln for i, (h, ls, _) in enumerate(sections) for ln in ([""] if i else []) + [h, *ls]]
    if len(whole) <= room_all and sum(size(ln) for ln in whole) - 1 <= bytes_all:
        body = "\n".join(whole)
        return f"{block.PREAMBLE}\n\n{body}" if body else ""
    total = sum(len(ls) for _, ls, _ in sections)
    omitted = block._omitted
    fixed_lines = 1 + len(sections) + (len(sections) - 1)
    fixed_bytes = (
        size(omitted(total, "cli")) + sum(size(h) for h, _, _ in sections) + len(sections) - 1
    )
    room_lines, room_bytes = room_all - fixed_lines, bytes_all - fixed_bytes
    if room_lines <= 0 or room_bytes <= 0:
        body = omitted(total, "cli") if size(omitted(total, "cli")) - 1 <= bytes_all else ""
        return f"{block.PREAMBLE}\n\n{body}" if body else ""
    ranked = []
    for _, lines, times in sections:
        names = [block.line_filename(line) for line in lines]
        order = sorted(range(len(lines)), key=names.__getitem__)
        order.sort(key=lambda i: times.get(names[i]) or "", reverse=True)
        order.sort(key=lambda i: block._WORTH.get(block._line_type(lines[i]), 3))
        ranked.append(order)
    kept: list[set[int]] = [set() for _ in sections]
    used_lines = used_bytes = 0
    share_lines, share_bytes = room_lines // len(sections), room_bytes // len(sections)
    for pass_ in (0, 1):
        for s, (_, lines, _) in enumerate(sections):
            s_lines, s_bytes = len(kept[s]), sum(size(lines[i]) for i in kept[s])
            for i in ranked[s]:
                if i in kept[s]:
                    continue
                cost = size(lines[i])
                if pass_ == 0 and (s_lines + 1 > share_lines or s_bytes + cost > share_bytes):
                    break
                if used_lines + 1 > room_lines or used_bytes + cost > room_bytes:
                    break
                kept[s].add(i)
                s_lines, s_bytes = s_lines + 1, s_bytes + cost
                used_lines, used_bytes = used_lines + 1, used_bytes + cost
    out: list[str] = []
    for s, (heading, lines, _) in enumerate(sections):
        if kept[s]:
            out += ([""] if out else []) + [heading] + [lines[i] for i in sorted(kept[s])]
    shown = sum(len(k) for k in kept)
    if shown < total:
        out.append(omitted(total - shown, "cli"))
    body = "\n".join(out)
    return f"{block.PREAMBLE}\n\n{body}" if body else ""


LINE = st.builds(
    lambda kind, title, name, pad: f"- [{kind}] {title}{'x' * pad} ({name}.md)",
    st.sampled_from([*CLONED_TYPES, "odd"]),
    st.sampled_from(["A", "构建", "Fix"]),
    st.sampled_from([f"n{i}" for i in range(40)]),  # repeated names too
    st.integers(0, 60),
)
INDEX = st.lists(st.one_of(LINE, st.just(""), st.just("  stray text")), max_size=160).map(
    lambda lines: "".join(f"{line}\n" for line in lines)
)
TIMES = st.dictionaries(
    st.sampled_from([f"n{i}.md" for i in range(40)]),
    st.sampled_from(["2026-01-01", "2026-02-01", "2025-12-31"]),
)


@given(INDEX, INDEX, st.integers(0, 60), st.integers(0, 4000), TIMES, TIMES)
def test_the_streamed_block_equals_sorting_every_line(
    project: str, user: str, lines: int, size: int, p_times: dict[str, str], u_times: dict[str, str]
) -> None:
    got = block.merge(project, user, max_lines=lines, max_bytes=size, updated=(p_times, u_times))
    assert got == reference_merge(project, user, lines, size, (p_times, u_times))


def test_the_block_of_a_large_index_keeps_only_candidates() -> None:
    lines = [f"- [project_knowledge] Note {i} (n{i:05d}.md)" for i in range(5_000)]
    times = {f"n{i:05d}.md": f"2026-01-01T00:00:{i % 60:02d}Z" for i in range(5_000)}
    text = "".join(f"{line}\n" for line in lines)
    section = block._Section("h", times, MAX_LINES + 1)
    for line in lines:
        section.add(line)
        assert len(section.ranked) < 2 * (MAX_LINES + 1) + 64
    assert block.merge(text, "", updated=(times, {})) == reference_merge(
        text, "", MAX_LINES, MAX_BYTES, (times, {})
    )


# -- mdmem doctor: MEMORY.md and the notes side by side --------------------------------


def test_doctor_compares_in_order_and_out_of_order(root: Path) -> None:
    store = Store(root, Level.PROJECT)
    store.reindex()
    assert not examine(store).problems
    index = root / "MEMORY.md"
    lines = index.read_text(encoding="utf-8").splitlines()
    gone = lines[5].rsplit("(", 1)[1][:-1]
    stale = lines[7].rsplit("(", 1)[1][:-1]
    edited = [*lines[:5], *lines[6:7], lines[7].replace("] ", "] Old "), *lines[8:]]
    edited.insert(3, "- [project_knowledge] Ghost (project_knowledge_ghost.md)")
    edited.sort(key=lambda line: line.rsplit("(", 1)[1])
    for text in ("\n".join(edited) + "\n", "\n".join(reversed(edited)) + "\n"):
        index.write_text(text, encoding="utf-8")
        found = {f.subject: f.message for f in examine(store).problems if f.check == "index"}
        assert found == {
            "project_knowledge_ghost.md": "MEMORY.md lists this note, which does not exist",
            gone: "this note is missing from MEMORY.md",
            stale: "MEMORY.md's line for this note is out of date",
        }
    index.write_text("\n".join([*lines[:3], lines[2], *lines[3:]]) + "\n", encoding="utf-8")
    found = {f.subject for f in examine(store).problems if f.check == "index"}
    assert found == {"MEMORY.md"}  # a repeated line: not what a reindex writes
    index.write_text("\n".join(lines) + "\n\n", encoding="utf-8")
    assert {f.subject for f in examine(store).problems if f.check == "index"} == {"MEMORY.md"}
    index.write_bytes(b"\xff\n")
    assert [f.message for f in examine(store).problems if f.check == "index"] == [
        "MEMORY.md is not UTF-8"
    ]


def test_stats_counts_from_the_catalog_and_rows_only_what_it_shows(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.manager.stats import collect

    project = Store(root, Level.PROJECT)
    user = Store(root.parent.parent.parent / "user", Level.USER)
    project.reindex()

    def no_parse(self: Store, filename: str) -> object:
        raise AssertionError("stats parsed a note")

    with monkeypatch.context() as patch:
        patch.setattr(Store, "read", no_parse)
        full = collect(project, user)
        lean = collect(project, user, per_note=False)
    assert full["notes"] == lean["notes"]
    assert full["notes"]["project"] == {  # type: ignore[index]
        "total": 320,
        "by_type": dict.fromkeys(sorted(CLONED_TYPES), 80),
    }
    assert len(full["usage"]) == 320 and lean["usage"] == []  # type: ignore[arg-type]
    assert full["unused"] == lean["unused"] and full["most_used"] == lean["most_used"]
