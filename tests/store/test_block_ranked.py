"""The prompt block of a large store, ranked by its catalog, is the block ranked line by line."""

from __future__ import annotations

import os
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from mdmem import Level, NoteType
from mdmem.store import files
from mdmem.store.block import fitted, prompt_block
from mdmem.store.marks import prompt_index, ranked_index
from mdmem.store.note import Note, render
from mdmem.store.stale import check
from mdmem.store.store import Store

TYPES = list(NoteType)


def write_store(root: Path, count: int, seed: int, level: Level = Level.PROJECT) -> Store:
    """``count`` notes on disk: mixed types, dates (some equal, some absent), long and short
    lines, some superseded and some expired."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    past = time.time() - 3600
    base = datetime(2026, 1, 1, tzinfo=timezone.utc)
    for i in range(count):
        extra: dict[str, object] = {}
        if i % 37 == 5:
            extra["supersedes"] = [f"{TYPES[(i - 1) % 4].value}_n{i - 1:05d}.md"]
        if i % 53 == 7:
            extra["expires"] = "2026-01-02" if i % 2 else "2099-01-01"
        when = base + timedelta(days=rng.randint(0, 30)) if i % 11 else None
        note = Note(
            filename=f"{TYPES[i % 4].value}_n{i:05d}.md",
            type=TYPES[rng.randrange(4)] if i % 3 else TYPES[i % 4],
            title=f"Note {i} " + "word " * rng.randint(1, 12),
            summary="A summary " + "x" * rng.randint(0, 150) + ".",
            body=f"Body {i}: see `src/gone_{i}.py`." if i % 29 == 3 else f"Body {i}.",
            created=when or base,
            updated=when or base,
            extra=extra,
        )
        text = render(note)
        if when is None:
            text = text.replace(f"updated: {base.isoformat()}\n", "")
        path = root / note.filename
        files.atomic_write(str(path), text.encode(), durable=False)
        os.utime(path, (past, past))
    return Store(root, level)


@pytest.mark.parametrize(("count", "users", "seed"), [(450, 0, 1), (700, 30, 2), (520, 600, 3)])
def test_ranked_block_equals_the_block_from_every_line(
    tmp_path: Path, count: int, users: int, seed: int
) -> None:
    project = write_store(tmp_path / "p", count, seed)
    user = write_store(tmp_path / "u", users, seed + 10, Level.USER) if users else None
    assert check(project, str(tmp_path))  # stale marks (paths gone) on some lines
    expected = fitted(
        prompt_index(project),
        prompt_index(user) if user is not None else "",
        project,
        user,
    )
    assert "more notes not shown" in expected and "[stale: path gone" in expected
    text, total, _ = ranked_index(project, 200)
    assert total is not None and text.count("\n") <= 200  # only the best lines were read
    assert prompt_block(project, user) == expected


def test_a_small_store_is_read_whole(tmp_path: Path) -> None:
    store = write_store(tmp_path / "p", 120, 4)
    text, total, times = ranked_index(store, 200)
    assert (text, total, times) == (prompt_index(store), None, {})
    assert prompt_block(store, None) == fitted(prompt_index(store), "", store, None)


def test_a_small_store_after_a_write_is_read_from_its_catalog_and_sees_an_edit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store of at most 400 lines whose catalog is current (mdmem's own write since the
    last stat pass): its index comes from the rows, no stat pass; an edit in place is seen."""
    from builders import create_op
    from mdmem.store import _catalog

    store = write_store(tmp_path / "p", 150, 8)
    store.load_index()  # the stat pass of a first load
    assert os.path.getsize(store.root / "MEMORY.md") > 400 * 16  # "big" by its size
    store.apply([create_op("Written by mdmem after the pass")])
    passes: list[str] = []
    real = _catalog.Scan.__init__

    def counted(self: object, *args: object, **kwargs: object) -> None:
        passes.append(str(args[0]))
        real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(_catalog.Scan, "__init__", counted)
    text, total, times = ranked_index(store, 200)
    assert passes == [] and total is None and times == {}
    assert "Written by mdmem after the pass" in text
    monkeypatch.undo()
    assert text == prompt_index(store)
    # An edit in place (no file created, renamed or removed) of a line the index shows.
    name = sorted(p.name for p in store.root.glob("*_n*.md"))[3]
    path = store.root / name
    before = path.read_text(encoding="utf-8")
    title = next(line for line in before.splitlines() if line.startswith("title: "))
    path.write_text(before.replace(title, "title: Edited in place by hand"), encoding="utf-8")
    text, total, _ = ranked_index(store, 200)
    assert "Edited in place by hand" in text and text == prompt_index(store)


def test_a_large_store_has_a_block_even_when_its_index_file_is_too_large_to_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem.store import store as store_module

    store = write_store(tmp_path / "p", 450, 5)
    whole = prompt_block(store, None)
    monkeypatch.setattr(store_module, "MAX_INDEX_BYTES", 1_000)  # MEMORY.md is "too large"
    assert store.load_index() == ""
    assert prompt_block(store, None) == whole


@pytest.mark.parametrize("seed", [6, 7])
def test_a_large_store_s_first_block_reads_no_memory_md_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # A clone's first load (no catalog yet): the block's lines come from the catalog, and
    # MEMORY.md's whole text (~50 MB once decoded at 100,000 notes) is never read.
    store = write_store(tmp_path / "p", 480, seed)
    made = write_store(tmp_path / "q", 480, seed)
    made.load_index()  # the repository's MEMORY.md, as a clone brings it
    (tmp_path / "p" / "MEMORY.md").write_bytes((tmp_path / "q" / "MEMORY.md").read_bytes())
    read: list[str] = []
    real = files.read_text

    def counting(path: str, limit: int) -> str | None:
        read.append(os.path.basename(path))
        return real(path, limit)

    monkeypatch.setattr(files, "read_text", counting)
    first = prompt_block(store, None)
    assert "MEMORY.md" not in read
    monkeypatch.undo()
    assert first == fitted(prompt_index(store), "", store, None)  # the block from every line
