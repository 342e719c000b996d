"""`mdmem doctor` and `mdmem stats` over a store, streamed: the same results as holding it whole.

The references below are the computations these commands made before they
streamed (every row in a list, MEMORY.md read whole, one sort of every row).
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import fill, git
from conftest import state
from mdmem import Level, Store
from mdmem.manager import stats as stats_module
from mdmem.manager.doctor import examine
from mdmem.manager.stats import Rows, collect, json_chunks
from mdmem.store import files, ledger, stale
from mdmem.store.block import prompt_block

T0 = 1_767_225_600.0  # 2026-01-01


# -- stats --------------------------------------------------------------------------


@pytest.fixture
def stores(tmp_path: Path) -> tuple[Store, Store]:
    root = tmp_path / "ws" / ".PseudoClaude" / "memory"
    fill(root, 320)  # more lines than a block shows: MEMORY.md is ranked, not shown whole
    user_root = tmp_path / "user"
    fill(user_root, 12)
    project, user = Store(root, Level.PROJECT), Store(user_root, Level.USER)
    project.reindex()
    user.reindex()
    names = sorted(e.filename for e in project.entries())
    ledger.record(str(root), "inject", T0, n=names[:40], via="session-start")
    ledger.record(str(root), "read", T0 + 5, n=names[10:15], via="cli")
    ledger.record(str(root), "read", T0 + 6, n=names[12:13], via="cli")
    ledger.record(str(root), "write", T0 + 7, n=names[300:302], via="worker")
    user_names = sorted(e.filename for e in user.entries())
    ledger.record(str(user_root), "read", T0 + 8, n=user_names[:3], via="cli")
    ledger.record(str(user_root), "call", T0 + 9, turn="t1", **{"in": 10, "out": 2, "cr": 1})
    return project, user


def _reference(project: Store, user: Store, now: float, unused_days: int, top: int) -> dict:  # type: ignore[type-arg]
    """What collect computed before it streamed."""
    usage, unused = [], []
    for store in (project, user):
        recorded = ledger.load(store.path)["notes"]
        assert isinstance(recorded, dict)
        for entry in store.entries():
            e = recorded.get(entry.filename) or {}
            last = max(float(e.get("last_inject", 0)), float(e.get("last_read", 0)))
            assert entry.updated is not None
            written = datetime.fromisoformat(entry.updated.replace("Z", "+00:00")).timestamp()
            since = now - unused_days * 86_400
            if last < since and written < since:  # a note written since has had no time
                unused.append({"level": store.level.value, "filename": entry.filename})
            row: dict[str, object] = {"filename": entry.filename, "level": store.level.value}
            for kind, label in (("inject", "injected"), ("read", "read"), ("write", "written")):
                row[label] = int(e.get(kind, 0))
                row[f"last_{label}"] = stats_module._iso(e.get(f"last_{kind}"))
            usage.append(row)
    most = sorted(
        (r for r in usage if int(str(r["injected"])) + int(str(r["read"])) > 0),
        key=lambda r: (-(int(str(r["injected"])) + int(str(r["read"]))), str(r["filename"])),
    )[:top]
    block = prompt_block(project, user)  # what `mdmem index` prints
    return {"usage": usage, "unused": unused, "most": most, "block": block}


@pytest.mark.parametrize("top", [0, 1, 3, 10, 1000])
def test_stats_streamed_is_what_holding_every_row_gave(
    stores: tuple[Store, Store], top: int
) -> None:
    project, user = stores
    now = T0 + 40 * 86_400
    ref = _reference(project, user, now, 30, top)
    held = collect(project, user, now=now, top=top)
    streamed = collect(project, user, now=now, top=top, stream=True)
    assert isinstance(streamed["usage"], Rows)
    assert held["usage"] == ref["usage"] and held["most_used"] == ref["most"]
    assert held["unused"] == {"days": 30, "notes": ref["unused"]}
    assert held["prompt_block"] == _figures(ref["block"])
    assert "".join(json_chunks(streamed)) == json.dumps(held, ensure_ascii=False, indent=2)
    lean = collect(project, user, now=now, top=top, per_note=False, stream=True)
    assert list(lean["usage"]) == [  # type: ignore[call-overload]
        r for r in ref["usage"] if r["injected"] or r["read"] or r["written"]
    ]
    unused = lean["unused"]
    assert isinstance(unused, dict) and len(unused["notes"]) == len(ref["unused"])


def _unused_by_reading(store: Store, now: float, unused_days: int) -> list[dict[str, str]]:
    """The unused notes as the pass over the listing found them: each note's ``updated`` as
    the note says it, else its file's mtime; its last use from the ledger."""
    recorded = ledger.load(store.path)["notes"]
    assert isinstance(recorded, dict)
    since = now - unused_days * 86_400
    out = []
    for entry in sorted(store.entries(), key=lambda e: e.filename):
        e = recorded.get(entry.filename) or {}
        last = max(float(e.get("last_inject", 0)), float(e.get("last_read", 0)))
        if entry.updated is not None:
            written = datetime.fromisoformat(entry.updated.replace("Z", "+00:00")).timestamp()
        else:
            written = os.lstat(os.path.join(store.path, entry.filename)).st_mtime
        if last < since and written < since:
            out.append({"level": store.level.value, "filename": entry.filename})
    return out


def test_stats_unused_from_the_catalog_is_what_reading_every_note_gave(tmp_path: Path) -> None:
    root = tmp_path / "ws" / ".PseudoClaude" / "memory"
    root.mkdir(parents=True)
    user_root = tmp_path / "user"
    fill(user_root, 6)
    now = T0 + 40 * 86_400
    since = now - 30 * 86_400
    moments = {  # every way a note's time is written, on both sides of ``since`` and on it
        "utc-before": datetime.fromtimestamp(since - 1, timezone.utc).isoformat(),
        "utc-on": datetime.fromtimestamp(since, timezone.utc).isoformat(),
        "utc-after": datetime.fromtimestamp(since + 1, timezone.utc).isoformat(),
        "z-before": datetime.fromtimestamp(since - 60, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "india-before": datetime.fromtimestamp(since - 1, IST).isoformat(),
        "india-after": datetime.fromtimestamp(since + 1, IST).isoformat(),
        "pacific-before": datetime.fromtimestamp(since - 3600, PST).isoformat(),
        "seconds-offset-before": datetime.fromtimestamp(since - 5, ODD).isoformat(),
        "seconds-offset-after": datetime.fromtimestamp(since + 5, ODD).isoformat(),
        "date-only": "2025-06-01",
        "used-recently": datetime.fromtimestamp(since - 100, timezone.utc).isoformat(),
        "used-long-ago": datetime.fromtimestamp(since - 100, timezone.utc).isoformat(),
    }
    for slug, moment in moments.items():
        (root / f"project_knowledge_{slug}.md").write_text(
            f"---\ntype: project_knowledge\ntitle: {slug}\nupdated: {moment}\n---\n\nBody.\n"
        )
    for slug, mtime in (("no-time-old", since - 10), ("no-time-new", since + 10)):
        path = root / f"project_knowledge_{slug}.md"
        path.write_text(f"---\ntype: project_knowledge\ntitle: {slug}\n---\n\nBody.\n")
        os.utime(path, (mtime, mtime))
    project, user = Store(root, Level.PROJECT), Store(user_root, Level.USER)
    project.reindex()
    user.reindex()
    ledger.record(str(root), "read", since + 50, n=["project_knowledge_used-recently.md"])
    ledger.record(str(root), "inject", since - 50, n=["project_knowledge_used-long-ago.md"])
    ledger.record(str(user_root), "read", since + 50, n=[user.entries()[0].filename])
    expected = _unused_by_reading(project, now, 30) + _unused_by_reading(user, now, 30)
    assert {"filename": "project_knowledge_utc-on.md", "level": "project"} not in expected
    assert len(expected) == 8 + 5  # 8 project notes, the 5 user notes not read since
    for stream in (False, True):
        for per_note in (False, True):
            unused = collect(project, user, now=now, stream=stream, per_note=per_note)["unused"]
            assert isinstance(unused, dict)
            assert list(unused["notes"]) == expected and len(unused["notes"]) == len(expected)


IST = timezone(timedelta(hours=5, minutes=30))
PST = timezone(-timedelta(hours=8))
ODD = timezone(timedelta(hours=5, minutes=30, seconds=15))  # SQLite cannot read this one


def _figures(block: str) -> dict[str, int]:
    return {
        "tokens": stats_module.estimate_tokens(block),
        "bytes": len(block.encode("utf-8")),
        "lines": len(block.splitlines()),
    }


def test_stats_block_figures_are_the_block_index_prints(stores: tuple[Store, Store]) -> None:
    project, user = stores
    assert collect(project, user)["prompt_block"] == _figures(prompt_block(project, user))
    # A note written by hand since (a new file): the figures follow the block.
    note = Path(project.path) / "correction_feedback_by-hand.md"
    note.write_text("---\ntype: correction_feedback\ntitle: By hand\n---\n\nWritten by hand.\n")
    block = prompt_block(project, user)
    assert "By hand" in block
    assert collect(project, user)["prompt_block"] == _figures(block)


# -- the streaming helpers ----------------------------------------------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


def _lazy(value: object) -> object:
    """The same value with every list made a generator or a Rows (written as lists)."""
    if isinstance(value, dict):
        return {k: _lazy(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_lazy(v) for v in value]
        return Rows(lambda: iter(items)) if len(items) % 2 else (x for x in items)
    return value


@given(JSON, st.integers(0, 4))
def test_json_chunks_is_json_dumps(value: object, indent: int) -> None:
    expected = json.dumps(value, ensure_ascii=False, indent=indent)
    assert "".join(json_chunks(value, indent)) == expected
    assert "".join(json_chunks(_lazy(value), indent)) == expected


def test_json_chunks_spells_keys_and_refuses_as_json_does() -> None:
    value = {1: "a", 2.5: None, False: [], None: {}}
    assert "".join(json_chunks(value)) == json.dumps(value, ensure_ascii=False, indent=2)
    with pytest.raises(TypeError):
        "".join(json_chunks({"a": b"bytes"}))


# -- doctor and stale ---------------------------------------------------------------


def test_doctor_state_and_temp_findings_are_the_sorted_ones(tmp_path: Path) -> None:
    root = tmp_path / "ws" / ".PseudoClaude" / "memory"
    fill(root, 30)
    store = Store(root, Level.PROJECT)
    store.reindex()
    for name in ("zz-catalog.json", "catalog.json", "fingerprint"):
        (root / name).write_text("x")
    os.symlink("/nowhere", root / "b-link")
    os.symlink("/elsewhere", root / "a-link")
    os.mkfifo(root / "m-fifo")
    legacy = root / ".mdmem"
    legacy.mkdir()
    os.symlink("/x", legacy / "y-link")
    os.symlink("/x", legacy / "c-link")
    # Temp files of writers that are gone (no such pid), in the store and in its state.
    (root / ".note.md.999999999.abcd.tmp").write_text("half")
    (state(root) / ".stale.rows.999999998.beef.tmp").write_text("half")
    found = [(f.check, f.subject) for f in examine(store).findings]
    assert [s for c, s in found if c == "repository-state"] == [
        ".mdmem",
        "a-link",
        "b-link",
        "catalog.json",
        "fingerprint",
        "m-fifo",
        ".mdmem/c-link",
        ".mdmem/y-link",
    ]
    assert [s for c, s in found if c == "temp-files"] == [
        ".note.md.999999999.abcd.tmp",
        str(state(root) / ".stale.rows.999999998.beef.tmp"),
    ]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    ws = tmp_path / "repo"
    ws.mkdir()
    git(ws, "init", "-q", "-b", "main")
    for path in ("src/app.py", "src/old.py", "src/moved.py", "lib/util.go"):
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(f"def parse_config(): pass  # {path}\n")
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "initial", "--date=2025-12-01T00:00:00")
    return ws


def test_stale_rows_cold_warm_cut_and_unwritable_agree(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from datetime import datetime, timedelta, timezone

    store = Store(repo / ".PseudoClaude" / "memory", Level.PROJECT)
    bodies = [
        "Entry in `src/app.py` calls `parse_config`.",
        "Old code in `src/old.py`.",
        "See `src/moved.py` and `lib/util.go`.",
        "Nothing named here.",
        *[f"Plain note {i} about `src/app.py`." for i in range(20)],
    ]
    store.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": f"Note {i}",
                "content": body,
            }
            for i, body in enumerate(bodies)
        ],
        now=datetime.now(timezone.utc) - timedelta(days=1),
    )
    os.remove(repo / "src/old.py")
    git(repo, "mv", "src/moved.py", "src/new.py")
    (repo / "src/app.py").write_text("def load(): pass\n")
    (repo / "lib/util.go").write_text("func parse_config() {}\n")
    git(repo, "commit", "-q", "-am", "move things")
    expected = stale.check(store, str(repo), use_cache=False)
    assert {s.filename for s in expected} and any(s.renames for s in expected)
    assert stale.check(store, str(repo)) == expected  # cold: rows written
    rows_path = state(store.path) / stale.ROWS
    lines = rows_path.read_text(encoding="utf-8").splitlines()
    names = [json.loads(line)[0] for line in lines[1:]]
    assert names == sorted(names) and len(names) == len(bodies)

    def no_git(*args: object, **kwargs: object) -> str:
        raise AssertionError("git ran for a settled cache")

    with monkeypatch.context() as patch:
        patch.setattr(stale, "_git", no_git)
        assert stale.check(store, str(repo)) == expected  # warm: no note read, no git
    rows_path.write_text("\n".join(lines[: len(lines) // 2]) + '\n["cut', encoding="utf-8")
    assert stale.check(store, str(repo)) == expected  # a crash's cut: the rest checked again
    (state(store.path) / stale.CACHE).write_text(json.dumps({"version": 3, "notes": {}}))
    assert stale.check(store, str(repo)) == expected  # an older cache is not trusted
    real = files.atomic_write

    def refuse(path: str, *args: object, **kwargs: object) -> None:
        if path.endswith(stale.ROWS):
            raise PermissionError(path)
        real(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(files, "atomic_write", refuse)
    assert stale.check(store, str(repo), use_cache=False) == expected
