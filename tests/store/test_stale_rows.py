"""The stale check's per-note rows outlive a change of the tree: a commit reads no unchanged note.

What a note names (its paths, its symbols, its ``updated``) is its bytes'; only the
judgement (gone, renamed, changed since, symbol gone) is the tree's. In a real git
repository: after a commit, a ``git add``, a rename, a delete or a symbol removed, a
check reads only the notes whose bytes changed, and finds exactly what a check with
no cache finds (the list, ``stale.marks`` and the rows themselves).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from builders import git
from mdmem import Level, Store
from mdmem.store import stale

LONG_AGO = "2025-06-01T00:00:00+00:00"
FILES = ("src/app.py", "src/old.py", "src/moved.py", "lib/util.go", "lib/keep.go")
BODIES = (
    "Entry in `src/app.py` calls `parse_config`.",
    "Old code in `src/old.py`.",
    "See `src/moved.py` and `lib/util.go`.",
    "Nothing named here.",
    "Helpers `load_things` in `lib/keep.go`.",
    "Only a symbol: `parse_config`.",
)


def commit_old(ws: Path, message: str) -> None:
    """Commit with both dates long before the notes (code older than what was written of it)."""
    subprocess.run(
        [
            "git",
            "-c",
            "user.name=T",
            "-c",
            "user.email=t@example.com",
            "commit",
            "-q",
            "-m",
            message,
        ],
        cwd=ws,
        env={**os.environ, "GIT_AUTHOR_DATE": LONG_AGO, "GIT_COMMITTER_DATE": LONG_AGO},
        check=True,
        capture_output=True,
    )


def make_repo(ws: Path) -> None:
    ws.mkdir(parents=True)
    git(ws, "init", "-q", "-b", "main")
    for path in FILES:
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(f"def parse_config(): pass\ndef load_things(): pass  # {path}\n")
    git(ws, "add", "-A")
    commit_old(ws, "initial")


def make_store(ws: Path, bodies: tuple[str, ...] = BODIES) -> Store:
    store = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "slug": f"note-{i}",
                "content": body,
            }
            for i, body in enumerate(bodies)
        ],
        now=datetime.now(timezone.utc) - timedelta(days=1),
    )
    return store


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    make_repo(ws)
    return ws


class Reads:
    """Counts the note files the check reads (``store.read_text``, which every note it
    parses is read with)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.names: list[str] = []
        real = store.read_text

        def read_text(filename: str) -> str:
            self.names.append(filename)
            return real(filename)

        monkeypatch.setattr(store, "read_text", read_text)


def state_file(store: Store, name: str) -> bytes:
    return (Path(store.state.path) / name).read_bytes()


def agrees(store: Store, ws: Path, reads: list[str] | None = None) -> list[stale.Stale]:
    """A cached check, then one with no cache: the same list, marks and rows (``reads``:
    the notes the cached check read, when given)."""
    with pytest.MonkeyPatch.context() as patch:
        counted = Reads(store, patch) if reads is not None else None
        cached = stale.check(store, str(ws))
    if reads is not None and counted is not None:
        reads.extend(counted.names)
    marks, rows = state_file(store, stale.MARKS), state_file(store, stale.ROWS)
    fresh = stale.check(store, str(ws), use_cache=False)
    assert cached == fresh
    assert state_file(store, stale.MARKS) == marks
    assert state_file(store, stale.ROWS) == rows
    return cached


def test_a_commit_reads_only_the_notes_whose_bytes_changed(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = make_store(repo)
    stale.check(store, str(repo))
    key = stale.tree_key(str(repo))
    store.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": "project_knowledge_note-1.md",
                "content": "Old code in `src/old.py`, and `lib/util.go`.",
            }
        ]
    )
    (repo / "CHANGELOG").write_text("one\n")
    git(repo, "add", "CHANGELOG")
    git(repo, "commit", "-q", "-m", "a change elsewhere")
    assert stale.tree_key(str(repo)) != key
    reads = Reads(store, monkeypatch)
    stale.check(store, str(repo))
    assert reads.names == ["project_knowledge_note-1.md"]
    (repo / "CHANGELOG").write_text("two\n")
    git(repo, "add", "CHANGELOG")  # the index's stat moves the key too
    stale.check(store, str(repo))
    assert reads.names == ["project_knowledge_note-1.md"]
    monkeypatch.undo()
    agrees(store, repo)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ("commit", None),
        ("rename", "renamed: src/moved.py → src/new.py"),
        ("delete", "path gone: src/old.py"),
        ("edit", "changed since"),
        ("symbol", "symbol gone: parse_config"),
    ],
)
def test_after_a_tree_change_the_rows_judge_as_a_check_without_cache(
    repo: Path, monkeypatch: pytest.MonkeyPatch, change: str, reason: str | None
) -> None:
    store = make_store(repo)
    assert stale.check(store, str(repo)) == []
    if change == "commit":
        (repo / "CHANGELOG").write_text("x\n")
        git(repo, "add", "CHANGELOG")
    elif change == "rename":
        git(repo, "mv", "src/moved.py", "src/new.py")
    elif change == "delete":
        git(repo, "rm", "-q", "src/old.py")
    elif change == "edit":
        (repo / "src/app.py").write_text("def parse_config(): return 1\n")
    else:
        for path in FILES:
            (repo / path).write_text(f"def other(): pass  # {path}\n")
    git(repo, "commit", "-q", "-am", change)
    reads = Reads(store, monkeypatch)
    found = stale.check(store, str(repo))
    assert reads.names == []  # no note's bytes changed: none is read, each judged again
    monkeypatch.undo()
    assert found == agrees(store, repo)
    reasons = [r for s in found for r in s.reasons]
    if reason is None:
        assert reasons == []
    else:
        assert any(r.startswith(reason) for r in reasons), reasons


def test_rows_of_an_older_format_are_rebuilt(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = make_store(repo)
    git(repo, "rm", "-q", "src/old.py")
    git(repo, "commit", "-q", "-m", "gone")
    expected = stale.check(store, str(repo), use_cache=False)
    assert expected
    key = stale.tree_key(str(repo))
    rows = Path(store.state.path) / stale.ROWS
    assert stale._CACHE_VERSION > 4
    old_format = [json.dumps([4, key, str(repo)])]
    # Version 4's rows: five fields, no paths; claimed clean, for this very tree.
    for line in rows.read_text(encoding="utf-8").splitlines()[1:]:
        name, sha = json.loads(line)[:2]
        old_format.append(json.dumps([name, sha, [], [], []]))
    rows.write_text("\n".join(old_format) + "\n", encoding="utf-8")
    reads = Reads(store, monkeypatch)
    assert stale.check(store, str(repo)) == expected
    assert len(reads.names) == len(BODIES)  # every note read again, once
    head = json.loads(rows.read_text(encoding="utf-8").splitlines()[0])
    assert head == [stale._CACHE_VERSION, key, str(repo)]


def test_without_git_rows_carry_to_a_new_repository(tmp_path: Path) -> None:
    # A plain folder first (no symbols looked for), then `git init`: the rows' symbols count.
    ws = tmp_path / "plain"
    for path in FILES:
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text("def parse_config(): pass\n")
    store = make_store(ws)
    os.remove(ws / "src/old.py")
    assert [s.reasons for s in stale.check(store, str(ws))] == [("path gone: src/old.py",)]
    git(ws, "init", "-q", "-b", "main")
    git(ws, "add", "-A")
    commit_old(ws, "initial")
    for path in FILES[2:]:
        (ws / path).write_text("def other(): pass\n")
    git(ws, "commit", "-q", "-am", "symbol gone")
    agrees(store, ws)


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("note"), st.integers(0, 5), st.sampled_from(BODIES)),
        st.tuples(st.just("rename"), st.sampled_from(FILES), st.just("")),
        st.tuples(st.just("delete"), st.sampled_from(FILES), st.just("")),
        st.tuples(st.just("edit"), st.sampled_from(FILES), st.sampled_from(("keep", "drop"))),
        st.tuples(st.just("stage"), st.just(""), st.just("")),
    ),
    min_size=1,
    max_size=6,
)


@settings(max_examples=12, deadline=None)
@given(steps=STEPS)
def test_any_sequence_of_note_edits_and_tree_changes_agrees_with_no_cache(
    steps: list[tuple[str, object, str]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "repo"
        make_repo(ws)
        store = make_store(ws, BODIES[:4])
        stale.check(store, str(ws))
        for n, (kind, what, extra) in enumerate(steps):
            changed: set[str] = set()
            if kind == "note":
                name = f"project_knowledge_note-{what}.md"
                op: dict[str, str] = {"level": "project", "content": f"{extra} (take {n})"}
                if (Path(store.path) / name).exists():
                    op.update(action="update", filename=name)
                else:
                    op.update(
                        action="create",
                        type="project_knowledge",
                        title=f"Note {what}",
                        slug=f"note-{what}",
                    )
                result = store.apply([op])
                changed = {a.filename for a in result.applied if a.action != "unchanged"}
            elif kind in ("rename", "delete", "edit") and (ws / str(what)).exists():
                if kind == "rename":
                    git(ws, "mv", str(what), f"{what}.{n}.go")
                elif kind == "delete":
                    git(ws, "rm", "-q", str(what))
                else:
                    text = "def parse_config(): pass\n" if extra == "keep" else "x = 1\n"
                    (ws / str(what)).write_text(text + f"# {n}\n")
                git(ws, "commit", "-q", "-am", f"step {n}")
            elif kind == "stage":
                (ws / "CHANGELOG").write_text(f"{n}\n")
                git(ws, "add", "CHANGELOG")
            reads: list[str] = []
            agrees(store, ws, reads)
            assert set(reads) <= changed  # only a note whose bytes changed is read
