"""MEMORY.md on a single write: spliced, equal to a full rebuild, and safe against kill -9.

A create, update or delete changes MEMORY.md by splicing its lines into a new
file (``_index_file.splice``) when the file's stat proves it is what mdmem wrote.
Whatever sequence of writes, the file must be byte for byte what ``reindex``
builds from the notes; and a process killed at any step of that write leaves
the notes intact and MEMORY.md either right or detectably wrong: the next
reader answers the right text, the next writer repairs the file.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import textwrap
import time
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import create_op, delete_op, note_names, update_op
from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.store import _index_file


def rebuilt(root: Path, scratch: Path) -> bytes:
    """The MEMORY.md a full rebuild makes from the notes of ``root`` (in a copy of them)."""
    if scratch.exists():
        shutil.rmtree(scratch)
    scratch.mkdir(parents=True)
    for note in root.glob("*.md"):
        if note.name != "MEMORY.md":
            shutil.copy2(note, scratch / note.name)
    Store(scratch, Level.PROJECT).reindex()
    path = scratch / "MEMORY.md"
    return path.read_bytes() if path.exists() else b""


WORDS = st.sampled_from(["alpha", "beta", "gamma", "delta", "kilo", "zulu", "構築", "émigré"])
TITLES = st.lists(WORDS, min_size=1, max_size=3, unique=True).map(" ".join)
STEPS = st.lists(
    st.tuples(st.sampled_from(["create", "update", "delete"]), TITLES, st.integers(0, 50)),
    min_size=1,
    max_size=12,
)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=STEPS)
def test_memory_md_after_any_writes_is_a_rebuild_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, steps: list[tuple[str, str, int]]
) -> None:
    base = tmp_path_factory.mktemp("writes")
    root = base / "mem"
    store = Store(root, Level.PROJECT)
    # A first note, so that every step after it has a MEMORY.md to splice.
    store.apply([create_op("Seed note", "The first body.")])
    real = _index_file.splice
    spliced: list[bool] = []

    def counted(*args: object, **kw: object) -> tuple[int, bool] | None:
        found = real(*args, **kw)  # type: ignore[arg-type]
        spliced.append(found is not None)
        return found

    with mock.patch.object(_index_file, "splice", counted):
        for number, (action, title, pick) in enumerate(steps):
            names = note_names(store)
            if action == "create" or not names:
                op = create_op(f"{title} {number}", f"Body {number} of {title}.")
            elif action == "update":
                op = update_op(names[pick % len(names)], f"Changed to {title} at {number}.")
            else:
                op = delete_op(names[pick % len(names)])
            result = store.apply([op])
            assert not result.rejected, result.rejected
            assert (root / "MEMORY.md").read_bytes() == rebuilt(root, base / "rebuild")
    # The splice is the path these writes took, not a rebuild each time.
    assert spliced and all(spliced)


# A writer killed at one step of MEMORY.md's write: while the temporary file is being
# filled, once it is whole but not swapped in, once swapped in but before the catalog
# commits, and once the write is done but the old file not yet closed.
KILLED = textwrap.dedent(
    """
    import os, sys
    from mdmem import Store, Level
    from mdmem.store import _catalog, _index_file, files

    root, where, action = sys.argv[1:4]
    store = Store(root, Level.PROJECT)

    def die(*args, **kw):
        os.kill(os.getpid(), 9)

    def after(real):
        def run(*args, **kw):
            real(*args, **kw)
            die()
        return run

    if where == "copy":
        real_copy, calls = files._copy_range, []
        def copy(*args, **kw):
            calls.append(1)
            if len(calls) > 1:  # the first range copied, the rest not
                die()
            return real_copy(*args, **kw)
        files._copy_range = copy
    elif where == "swap":
        files._swap_in = die
    elif where == "swapped":
        files._swap_in = after(files._swap_in)
    elif where == "commit":
        _catalog.Catalog.commit = die
    elif where == "release":
        _index_file.RELEASE_BYTES = 0  # a large MEMORY.md's path, for these few lines
        _index_file._release = die
    if action == "create":
        op = {"action": "create", "level": "project", "type": "project_knowledge",
              "title": "Middle note", "content": "Written when the writer died."}
    else:
        op = {"action": "delete", "level": "project",
              "filename": "project_knowledge_middle-note.md"}
    store.apply([op])
    """
)


@pytest.mark.parametrize("action", ["create", "delete"])
@pytest.mark.parametrize("where", ["copy", "swap", "swapped", "commit", "release"])
def test_a_writer_killed_inside_memory_md_s_write(tmp_path: Path, where: str, action: str) -> None:
    root = tmp_path / "mem"
    store = Store(root, Level.PROJECT)
    # Lines on both sides of the one written, and enough of them that the splice copies
    # two ranges of the old file.
    for title in ("Alpha one", "Zulu one", "Alpha two", "Zulu two"):
        store.apply([create_op(title, f"Body of {title}.")])
    if action == "delete":
        store.apply([create_op("Middle note", "Written before the writer died.")])
    before = note_names(store)
    proc = subprocess.run(
        [PYTHON, "-c", KILLED, str(root), where, action], env=python_env(), capture_output=True
    )
    assert proc.returncode == -9, proc.stderr.decode()
    # The notes are intact: the write's own note written (create) or in the trash (delete).
    middle = root / "project_knowledge_middle-note.md"
    if action == "create":
        assert note_names(store) == sorted([*before, middle.name])
        assert "Written when the writer died." in middle.read_text()
    else:
        assert note_names(store) == [n for n in before if n != middle.name]
        assert [t.filename for t in Store(root, Level.PROJECT).trash()] == [middle.name]
    right = rebuilt(root, tmp_path / "rebuild")
    # The next reader is never handed a wrong index: the right text, whatever the file says.
    reader = Store(root, Level.PROJECT)
    assert reader.load_index().encode() == right
    # The next write repairs the file itself.
    Store(root, Level.PROJECT).apply([])
    assert (root / "MEMORY.md").read_bytes() == right
    assert Store(root, Level.PROJECT).reindex().changed is False


def _old_memory_mds_open() -> list[str]:
    """This process's descriptors of a MEMORY.md that is gone (swapped out and unlinked)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if "MEMORY.md" in target and target.endswith("(deleted)"):
                found.append(target)
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc/self/fd")
def test_the_old_memory_md_a_large_store_swaps_out_is_closed_all_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every MEMORY.md counts as large here: its old file is closed on a thread.
    monkeypatch.setattr(_index_file, "RELEASE_BYTES", 0)
    released: list[int] = []
    real = _index_file._release

    def counted(fd: int) -> None:
        released.append(fd)
        real(fd)

    monkeypatch.setattr(_index_file, "_release", counted)
    store = Store(tmp_path / "mem", Level.PROJECT)
    for i in range(12):
        store.apply([create_op(f"Note {i} of twelve", f"Body {i}.")])
    assert len(released) == 11  # every write but the first, which had no file to splice
    # The threads close them; none is left open for good (a bounded wait, not a timing).
    for _ in range(1000):
        if not _old_memory_mds_open():
            break
        time.sleep(0.01)
    assert _old_memory_mds_open() == []


@pytest.mark.parametrize("action", ["create", "delete"])
def test_a_single_write_s_folder_sync_overlaps_its_record_and_ends_before_apply_returns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, action: str
) -> None:
    import _thread

    from mdmem.store import files

    store = Store(tmp_path / "mem", Level.PROJECT)
    name = store.apply([create_op("Synced note", "Its body.")]).applied[0].filename
    events: list[tuple[str, str, bool]] = []
    real = files.fsync_dir
    main = _thread.get_ident()

    def traced(path: str) -> None:
        events.append(("start", os.path.basename(path), _thread.get_ident() == main))
        real(path)
        events.append(("end", os.path.basename(path), _thread.get_ident() == main))

    monkeypatch.setattr(files, "fsync_dir", traced)
    op = create_op("Another note", "More.") if action == "create" else delete_op(name)
    assert store.apply([op]).applied
    folders = ["trash", "mem"] if action == "delete" else ["mem"]
    # Every folder synced, in order (the trash before the store), all done by the time
    # apply returned, and not on the thread that records the write.
    assert events == [(e, f, False) for f in folders for e in ("start", "end")]
    # A batch with a journal keeps its syncs in line: the journal goes only after them.
    events.clear()
    both = [create_op("Third note", "Three."), create_op("Fourth note", "Four.")]
    assert len(store.apply(both).applied) == 2
    assert events and all(on_main for _, _, on_main in events)
