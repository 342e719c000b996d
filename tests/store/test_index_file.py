"""MEMORY.md spliced in place on disk gives the same bytes as patching it in memory."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import create_op as _create
from mdmem.store import _index_file
from mdmem.store._index_file import IndexRecord

NAMES = st.builds(
    lambda i, accent: f"project_knowledge_n{i:03d}{'é' if accent else ''}.md",
    st.integers(0, 60),
    st.booleans(),
)
TEXT = st.text("ab 构", max_size=700)  # lines longer than a read of the bisection, too


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    lines=st.dictionaries(NAMES, TEXT, max_size=25),
    changes=st.dictionaries(NAMES, st.none() | TEXT, max_size=6),
)
@pytest.mark.parametrize("reserved", [False, True], ids=["as-written", "blocks-reserved"])
def test_splice_is_patch(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    reserved: bool,
    lines: dict[str, str],
    changes: dict[str, str | None],
) -> None:
    from mdmem.store import files

    # A large MEMORY.md's blocks are reserved before the copy (files._preallocate): any
    # size here, so the bytes are shown the same either way.
    monkeypatch.setattr(files, "PREALLOCATE_BYTES", 0 if reserved else 1 << 62)
    data = _index_file.join(f"- {text} ({name})" for name, text in sorted(lines.items()))
    wanted = {n: None if t is None else f"- {t} ({n})" for n, t in changes.items()}
    path = tmp_path / "MEMORY.md"
    path.write_bytes(data)
    expected = _index_file.patch(data, wanted)
    assert expected is not None
    # Both equal the file rebuilt from the lines as they become.
    after = {n: f"- {t} ({n})" for n, t in lines.items()}
    for name, line in wanted.items():
        if line is None:
            after.pop(name, None)
        else:
            after[name] = line
    assert expected == (_index_file.join(after[n] for n in sorted(after)), len(after) - len(lines))
    dry = _index_file.splice(str(path), wanted, private=False, dry=True)
    assert path.read_bytes() == data  # a dry run writes nothing
    spliced = _index_file.splice(str(path), wanted, private=False)
    assert spliced is not None
    assert dry == spliced
    assert path.read_bytes() == expected[0]
    assert spliced[0] == expected[1]
    assert spliced[1] == (expected[0] != data)


def test_splice_refuses_what_mdmem_did_not_write(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"- a (a.md)\n- no newline at the end (b.md)")
    assert _index_file.splice(str(path), {"a.md": "- A (a.md)"}, private=False) is None
    assert path.read_bytes() == b"- a (a.md)\n- no newline at the end (b.md)"


def _fresh_ctime_after_a_stat(folder: Path) -> bool:
    """Whether this file system gives a change made after a stat a new ctime even within
    one clock tick (Linux 6.13+ multigrain timestamps on ext4, xfs, btrfs, tmpfs)."""
    import os

    probe = folder / "probe"
    probe.write_bytes(b"a")
    seen = set()
    for _ in range(20):
        os.utime(probe)
        seen.add(probe.stat().st_ctime_ns)
    probe.unlink()
    return len(seen) == 20


@pytest.mark.parametrize("mtime", ["left alone", "put back after a tick", "put back at once"])
def test_a_same_size_edit_of_memory_md_is_not_spliced_over(tmp_path: Path, mtime: str) -> None:
    import os
    import time

    from mdmem import Level, Store

    if mtime == "put back at once" and not _fresh_ctime_after_a_stat(tmp_path):
        pytest.skip("the one edit a stat cannot see here: docs/concepts/index.md")
    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create("Alpha"), _create("Beta")])
    store.apply([_create("Gamma")])  # MEMORY.md spliced; its stat recorded
    index = store.root / "MEMORY.md"
    before = index.stat()
    text = index.read_bytes()
    # The same size, at once: within the clock tick of mdmem's own write.
    with open(index, "r+b") as f:
        f.write(text.replace(b"Alpha", b"Alfa!"))
    if mtime != "left alone":
        if mtime == "put back after a tick":
            time.sleep(0.011)
        os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert index.stat().st_size == before.st_size
    store.apply([_create("Delta")])
    lines = index.read_text(encoding="utf-8")
    assert "Alfa!" not in lines and "Alpha" in lines and "Delta" in lines


def test_memory_md_is_stamped_so_the_next_write_goes_by_its_stat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem import Level, Store
    from mdmem.store import _catalog, files

    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create(f"Note {i}") for i in range(5)])
    index = store.root / "MEMORY.md"
    st = index.stat()
    assert st.st_ctime_ns - st.st_mtime_ns >= files.STAMP_NS
    assert files.stamped(st)

    real_hash = _catalog.content_hash

    def no_index_hash(data: bytes) -> str:
        if data.startswith(b"- ["):  # MEMORY.md's lines (a note starts with its front matter)
            raise AssertionError("MEMORY.md was hashed: its stat should have proved it")
        return real_hash(data)

    def refuse(*args: object) -> object:
        raise AssertionError("MEMORY.md was patched in memory, not spliced")

    # Back to back, well within one clock tick: never hashed, never read whole.
    with monkeypatch.context() as m:
        m.setattr(_catalog, "content_hash", no_index_hash)
        m.setattr(_index_file, "patch", refuse)
        for i in range(5):
            store.apply([_create(f"More {i}")])
    text = index.read_text(encoding="utf-8")
    assert all(f"More {i}" in text for i in range(5))
    assert Store(store.root, Level.PROJECT).reindex().changed is False


def test_memory_md_is_swapped_in_not_renamed_over(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new file takes the name by exchange; the old one is unlinked, never left."""
    import os

    from mdmem.store import files

    if files._renameat2() is None:
        pytest.skip("no renameat2 here: MEMORY.md is renamed over (tested below)")

    def no_rename_over(*args: object) -> None:
        raise AssertionError("renamed over, not exchanged")

    monkeypatch.setattr(os, "replace", no_rename_over)
    tmp_path = tmp_path / "store"
    tmp_path.mkdir()
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"- old (a.md)\n")
    old_ino = path.stat().st_ino
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _index_file.splice(str(path), {"b.md": "- new (b.md)"}, private=False) == (1, True)
        # The descriptor still reads the old file: it was replaced, not rewritten in place.
        assert os.pread(fd, 100, 0) == b"- old (a.md)\n"
        assert os.fstat(fd).st_nlink == 0  # and it is gone from the directory
    finally:
        os.close(fd)
    assert path.read_bytes() == b"- old (a.md)\n- new (b.md)\n"
    assert path.stat().st_ino != old_ino
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md"]


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_large_memory_md_is_copied_into_blocks_reserved_for_it(tmp_path: Path) -> None:
    """The kernel is asked for the new file's blocks first (keeping its size to what is
    written): the file is exactly the spliced bytes, with no padding."""
    import subprocess
    import sys

    path = tmp_path / "MEMORY.md"
    lines = {
        f"project_knowledge_n{i:05d}.md": f"- [project_knowledge] Note {i}" for i in range(6000)
    }
    data = _index_file.join(f"{text} ({name})" for name, text in sorted(lines.items()))
    assert len(data) > 256 * 1024
    path.write_bytes(data)
    script = (
        "import sys; from mdmem.store import _index_file; "
        "print(_index_file.splice(sys.argv[1], {'project_knowledge_n02999a.md': '- new "
        "(project_knowledge_n02999a.md)'}, private=False))"
    )
    trace = tmp_path / "trace.txt"
    done = subprocess.run(
        [
            "strace",
            "-f",
            "-e",
            "trace=fallocate",
            "-o",
            str(trace),
            sys.executable,
            "-c",
            script,
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "(1, True)"
    calls = [line for line in trace.read_text().splitlines() if "fallocate(" in line]
    size = len(data) + len("- new (project_knowledge_n02999a.md)\n")
    assert len(calls) == 1 and f"FALLOC_FL_KEEP_SIZE, 0, {size})" in calls[0], calls
    after = path.read_bytes()
    assert len(after) == size == path.stat().st_size and b"\0" not in after
    expected = _index_file.patch(
        data, {"project_knowledge_n02999a.md": "- new (project_knowledge_n02999a.md)"}
    )
    assert expected is not None and after == expected[0]


def test_swap_in_falls_back_to_a_rename(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mdmem.store import files

    tmp_path = tmp_path / "store"
    tmp_path.mkdir()
    target = tmp_path / "elsewhere"
    target.write_bytes(b"not ours")
    path = tmp_path / "MEMORY.md"
    path.symlink_to(target)  # a name, not followed: the link itself is replaced
    files.atomic_write(str(path), b"- a (a.md)\n", derived=True)
    assert not path.is_symlink() and path.read_bytes() == b"- a (a.md)\n"
    assert target.read_bytes() == b"not ours"
    # Without renameat2 (another kernel or libc): os.replace, the same result.
    monkeypatch.setattr(files, "_EXCHANGE", [None])
    files.atomic_write(str(path), b"- b (b.md)\n", derived=True)
    assert path.read_bytes() == b"- b (b.md)\n" and files.stamped(path.stat())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["MEMORY.md", "elsewhere"]


READER = """
import os, sys, time
path, until = sys.argv[1], float(sys.argv[2])
reads = 0
while time.time() < until:
    with open(path, "rb") as f:  # never missing, never half written
        data = f.read()
    assert data.endswith(b"\\n") and data.count(b"\\n") >= 3, data[-80:]
    reads += 1
print(reads)
"""


@pytest.mark.slow
def test_a_reader_never_sees_memory_md_missing_or_half_written(tmp_path: Path) -> None:
    import subprocess
    import sys
    import time

    from mdmem import Level, Store

    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create(f"Base {i}") for i in range(3)])
    until = time.time() + 2.0
    reader = subprocess.Popen(
        [sys.executable, "-c", READER, str(store.root / "MEMORY.md"), str(until)],
        stdout=subprocess.PIPE,
        text=True,
    )
    i = 0
    while time.time() < until:
        store.apply([_create(f"Churn {i} " + "x" * (i % 50))])
        i += 1
    out, _ = reader.communicate(timeout=30)
    assert reader.returncode == 0 and int(out) > 0 and i > 10


def test_a_write_splices_memory_md_without_reading_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil
    import time

    from conftest import state
    from mdmem import Level, Store

    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create(f"Note {i}") for i in range(20)])
    time.sleep(0.011)  # past a clock tick: MEMORY.md's stat can prove it from now on
    store.load_index()

    real_patch, real_join = _index_file.patch, _index_file.join

    def whole(*args: object) -> object:
        if len(args) == 2 and not args[1]:
            return real_patch(*args)  # type: ignore[arg-type]  # a read that changes nothing
        raise AssertionError("MEMORY.md was patched or rebuilt in memory, not spliced")

    # (A write within the clock tick of the one before may still hash the file it
    # spliced, to record it: that read is allowed, rendering or patching it is not.)
    monkeypatch.setattr(_index_file, "patch", whole)
    monkeypatch.setattr(_index_file, "join", whole)
    gone = "project_knowledge_note-3.md"
    for ops in (
        [_create("More 0")],
        [{"action": "delete", "level": "project", "filename": gone}],
        [_create("More 1")],
    ):
        store.apply(ops)
        # A read a tick later: whichever way the write recorded MEMORY.md, its stat proves it.
        time.sleep(0.011)
        store.load_index()
    monkeypatch.setattr(_index_file, "patch", real_patch)
    monkeypatch.setattr(_index_file, "join", real_join)
    index = store.root / "MEMORY.md"
    spliced = index.read_text(encoding="utf-8")
    assert "More 0" in spliced and "More 1" in spliced and gone not in spliced
    shutil.rmtree(state(store.root))
    Store(store.root, Level.PROJECT).reindex()
    assert index.read_text(encoding="utf-8") == spliced


def test_a_state_file_is_swapped_in_once_renameat2_is_loaded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from mdmem.store import files

    path = tmp_path / "state.json"
    path.write_bytes(b"old")
    renames: list[str] = []
    real_replace = os.replace

    def counting(src: str, dst: str) -> None:
        renames.append(dst)
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", counting)
    # Not loaded in this process (a one-shot hook): renamed over, no ctypes import.
    monkeypatch.setattr(files, "_EXCHANGE", [])
    files.atomic_write(str(path), b"one", durable=False)
    assert renames == [str(path)] and files._EXCHANGE == []
    # Loaded (MEMORY.md was written): exchanged, where the kernel can.
    files._renameat2()
    renames.clear()
    files.atomic_write(str(path), b"two", durable=False)
    assert renames == ([] if files._EXCHANGE[0] is not None else [str(path)])
    assert path.read_bytes() == b"two"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "home") == ["state.json"]
    # A durable write is always renamed (its bytes were fsynced before).
    renames.clear()
    files.atomic_write(str(path), b"three")
    assert renames == [str(path)] and path.read_bytes() == b"three"


@given(
    st.tuples(*(st.integers(0, 2**63) for _ in range(4))),
    st.one_of(st.just("-"), st.text("0123456789abcdef", min_size=1, max_size=32)),
    st.integers(0, 10**9),
    st.integers(0, 2**63),
)
def test_the_index_record_round_trips(
    stat: tuple[int, int, int, int], digest: str, lines: int, when: int
) -> None:
    record = IndexRecord(stat, digest, lines, when)
    assert IndexRecord.parse(record.format()) == record
    assert record.same_stat(stat) and not record.same_stat(None)
    assert record.stat_proves(stat) == (max(stat[0], stat[3]) < when)


@pytest.mark.parametrize("text", [None, "", "1 2 3 4 h 5", "1 2 3 4 h 5 6 7", "1 2 x 4 h 5 6"])
def test_a_record_that_is_not_one_parses_as_none(text: str | None) -> None:
    assert IndexRecord.parse(text) is None


def _settled(tmp_path: Path) -> tuple[object, Path]:
    import time

    from mdmem import Level, Store

    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create(f"Note {i}") for i in range(30)])
    time.sleep(0.011)  # past a clock tick: MEMORY.md's stat can prove it from now on
    store.load_index()
    return store, store.root / "MEMORY.md"


def _hand_edit(root: Path) -> None:
    """An in-place edit, a rename, an editor's save and a delete, as a person makes them."""
    import os

    edited = root / "project_knowledge_note-4.md"
    edited.write_text(edited.read_text(encoding="utf-8").replace("title: Note 4", "title: Four"))
    os.rename(root / "project_knowledge_note-7.md", root / "project_knowledge_seven.md")
    saved = root / "project_knowledge_note-12.md"
    tmp = root / ".project_knowledge_note-12.md.swp"
    tmp.write_text(saved.read_text(encoding="utf-8").replace("title: Note 12", "title: Twelve"))
    os.replace(tmp, saved)
    (root / "project_knowledge_note-20.md").unlink()


def _rebuilt(root: Path) -> str:
    import shutil

    from conftest import state
    from mdmem import Level, Store

    copy = root.parent / "copy"
    shutil.copytree(root, copy)
    shutil.rmtree(state(copy), ignore_errors=True)
    Store(copy, Level.PROJECT).reindex()
    return (copy / "MEMORY.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("proof", ["stat", "hash", "pulled"])
def test_a_hand_edit_of_a_large_store_never_reads_memory_md_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, proof: str
) -> None:
    """Above STREAM_BYTES MEMORY.md is hashed in chunks and spliced, or (not what mdmem
    wrote: a pull) compared and rebuilt in chunks: never read, patched or rebuilt whole
    (that was 70 MiB of a 121 MiB peak at 100,000 notes), and the same bytes."""
    import os
    import types

    from mdmem import Level, Store
    from mdmem.store import _memory_md, files

    store, index = _settled(tmp_path)
    monkeypatch.setattr(_index_file, "STREAM_BYTES", 0)
    if proof == "hash":  # touched, not changed (a checkout): its stat proves nothing now
        later = os.stat(index).st_mtime_ns + 5_000_000_000
        os.utime(index, ns=(later, later))
    if proof == "pulled":  # another checkout's MEMORY.md, a line short
        index.write_bytes(index.read_bytes().split(b"\n", 1)[1])
    real_patch, real_join, real_read = _index_file.patch, _index_file.join, files.read_bytes

    def whole(*args: object) -> object:
        raise AssertionError("MEMORY.md was patched or rebuilt in memory, not spliced")

    def read_bytes(path: str, limit: int) -> bytes:
        assert not path.endswith("MEMORY.md"), "MEMORY.md was read whole"
        return real_read(path, limit)

    monkeypatch.setattr(_index_file, "patch", whole)
    monkeypatch.setattr(_index_file, "join", whole)
    proxy = types.SimpleNamespace(read_bytes=read_bytes, stamped=files.stamped)
    monkeypatch.setattr(_memory_md, "files", proxy)
    real_draft, real_digest = _memory_md.draft, _memory_md._file_digest
    hashes: list[int] = []

    def draft(*args: object, **kwargs: object) -> object:
        hashes.append(0)
        return real_draft(*args, **kwargs)  # type: ignore[arg-type]

    def digest(path: str) -> tuple[str, int]:
        hashes[-1] += 1
        return real_digest(path)

    monkeypatch.setattr(_memory_md, "draft", draft)
    monkeypatch.setattr(_memory_md, "_file_digest", digest)
    _hand_edit(store.root)
    # A new process's view (nothing cached); its answer is the file, read as usual.
    shown = Store(store.root, Level.PROJECT).load_index()
    assert hashes and max(hashes) <= 1  # the 18 MB of a large store hashed once a pass
    monkeypatch.setattr(_index_file, "patch", real_patch)
    monkeypatch.setattr(_index_file, "join", real_join)
    text = index.read_text(encoding="utf-8")
    assert shown == text
    assert "Four" in text and "Twelve" in text and "(project_knowledge_seven.md)" in text
    assert "note-20.md" not in text and "note-7.md" not in text
    assert text == _rebuilt(store.root)


def test_a_hand_edit_while_another_process_writes_answers_and_catches_up(
    tmp_path: Path,
) -> None:
    """The lock is held elsewhere: the text is right, MEMORY.md is left for the next pass."""
    import subprocess
    import sys

    from mdmem import Level, Store

    store, index = _settled(tmp_path)
    before = index.read_bytes()
    _hand_edit(store.root)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom mdmem import Level, Store\n"
            "with Store(sys.argv[1], Level.PROJECT).lock():\n"
            "    print('held', flush=True)\n    sys.stdin.read()\n",
            str(store.root),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        text = Store(store.root, Level.PROJECT).load_index()
        assert index.read_bytes() == before  # not written without the lock
    finally:
        holder.communicate("", timeout=30)
    assert "Four" in text and "Twelve" in text and "note-20.md" not in text
    assert Store(store.root, Level.PROJECT).load_index() == text
    assert index.read_text(encoding="utf-8") == text == _rebuilt(store.root)


def test_a_hand_edit_in_a_store_that_cannot_be_written_answers_and_catches_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MEMORY.md cannot be written (a read-only checkout): the text is right all the
    same, the catalog does not move ahead of the file, and the next pass writes it."""
    import errno

    from mdmem import Level, Store
    from mdmem.store import files

    store, index = _settled(tmp_path)
    before = index.read_bytes()
    real_write, real_parts = files.atomic_write, files.atomic_write_parts

    def refuse(write):  # type: ignore[no-untyped-def]
        def inner(path: str, *args: object, **kwargs: object) -> None:
            if str(path).endswith("MEMORY.md"):
                raise OSError(errno.EROFS, "read-only file system", path)
            write(path, *args, **kwargs)

        return inner

    monkeypatch.setattr(files, "atomic_write", refuse(real_write))
    monkeypatch.setattr(files, "atomic_write_parts", refuse(real_parts))
    _hand_edit(store.root)
    text = Store(store.root, Level.PROJECT).load_index()
    again = Store(store.root, Level.PROJECT).load_index()
    assert index.read_bytes() == before
    monkeypatch.setattr(files, "atomic_write", real_write)
    monkeypatch.setattr(files, "atomic_write_parts", real_parts)
    assert "Four" in text and "Twelve" in text and "note-20.md" not in text and again == text
    assert Store(store.root, Level.PROJECT).load_index() == text
    assert index.read_text(encoding="utf-8") == text == _rebuilt(store.root)


def test_memory_md_is_hashed_only_as_a_bounded_regular_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the chunked hash of a large MEMORY.md reads is a repository's file: a regular
    one, never through a link, never past MAX_INDEX_BYTES."""
    import os

    from mdmem.store import _catalog, _memory_md

    monkeypatch.setattr(_memory_md, "MAX_INDEX_BYTES", 1_000)
    index = tmp_path / "MEMORY.md"
    index.write_bytes(b"- a line (a.md)\n" * 62)  # 992 bytes: within the bound
    assert _memory_md.hash_file(str(index)) == _catalog.content_hash(index.read_bytes())
    index.write_bytes(b"- a line (a.md)\n" * 70)  # 1,120 bytes: past it
    assert _memory_md.hash_file(str(index)) is None
    target = tmp_path / "elsewhere.md"
    target.write_bytes(b"- a line (a.md)\n")
    index.unlink()
    os.symlink(target, index)
    assert _memory_md.hash_file(str(index)) is None
    index.unlink()
    os.mkfifo(index)  # would block a reader that waited on it
    assert _memory_md.hash_file(str(index)) is None
