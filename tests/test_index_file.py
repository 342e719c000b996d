"""MEMORY.md spliced in place on disk gives the same bytes as patching it in memory."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mdmem.store import _index_file

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
def test_splice_is_patch(
    tmp_path: Path, lines: dict[str, str], changes: dict[str, str | None]
) -> None:
    data = _index_file.join(f"- {text} ({name})" for name, text in sorted(lines.items()))
    wanted = {n: None if t is None else f"- {t} ({n})" for n, t in changes.items()}
    path = tmp_path / "MEMORY.md"
    path.write_bytes(data)
    expected = _index_file.patch(data, wanted)
    assert expected is not None
    spliced = _index_file.splice(str(path), wanted, private=False)
    assert spliced is not None
    assert path.read_bytes() == expected[0]
    assert spliced[0] == expected[1]
    assert spliced[1] == (expected[0] != data)


def test_splice_refuses_what_mdmem_did_not_write(tmp_path: Path) -> None:
    path = tmp_path / "MEMORY.md"
    path.write_bytes(b"- a (a.md)\n- no newline at the end (b.md)")
    assert _index_file.splice(str(path), {"a.md": "- A (a.md)"}, private=False) is None
    assert path.read_bytes() == b"- a (a.md)\n- no newline at the end (b.md)"


def _create(title: str) -> dict[str, str]:
    return {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": title,
        "content": f"What {title} says.",
    }


def test_a_same_size_edit_of_memory_md_is_not_spliced_over(tmp_path: Path) -> None:
    import os
    import time

    from mdmem import Level, Store

    store = Store(tmp_path / "mem", Level.PROJECT)
    store.apply([_create("Alpha"), _create("Beta")])
    time.sleep(0.011)
    store.apply([_create("Gamma")])  # MEMORY.md spliced or written; its stat recorded
    index = store.root / "MEMORY.md"
    before = index.stat()
    text = index.read_bytes()
    # The same size, the mtime put back, within the same clock tick: only the ctime moved.
    with open(index, "r+b") as f:
        f.write(text.replace(b"Alpha", b"Alfa!"))
    os.utime(index, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert index.stat().st_size == before.st_size
    store.apply([_create("Delta")])
    lines = index.read_text(encoding="utf-8")
    assert "Alfa!" not in lines and "Alpha" in lines and "Delta" in lines


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
