"""Store: apply semantics, the trash, permissions, the lock, and recovery of interrupted batches."""

from __future__ import annotations

import os
import stat
import subprocess
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from builders import create_op, note_names
from conftest import PYTHON, python_env, state
from mdmem import Level, LockTimeout, NoteExists, NoteNotFound, Operation, Store
from mdmem.store.note import parse

T0 = datetime(2026, 11, 29, 10, 12, tzinfo=timezone.utc)
T1 = datetime(2026, 11, 30, 8, 0, tzinfo=timezone.utc)


def create(title: str, content: str = "body", **kw: str) -> dict[str, object]:
    return create_op(title, content, **kw)


def index_names(store: Store) -> list[str]:
    entries = [line.rsplit("(", 1)[1].rstrip(")") for line in store.load_index().splitlines()]
    return sorted(entries)


def test_create_writes_note_and_index(store: Store) -> None:
    result = store.apply(
        [
            create(
                "Build workflow",
                "Run `go test ./...` first.",
                summary="Run Go tests before release.",
            )
        ],
        now=T0,
    )
    assert [(a.action, a.filename) for a in result.applied] == [
        ("create", "project_knowledge_build-workflow.md")
    ]
    text = (store.root / "project_knowledge_build-workflow.md").read_text()
    assert text == (
        "---\ntype: project_knowledge\ntitle: Build workflow\n"
        "summary: Run Go tests before release.\ncreated: 2026-11-29T10:12:00+00:00\n"
        "updated: 2026-11-29T10:12:00+00:00\n---\nRun `go test ./...` first.\n"
    )
    assert (store.root / "MEMORY.md").read_text() == (
        "- [project_knowledge] Build workflow — Run Go tests before release. "
        "(project_knowledge_build-workflow.md)\n"
    )


def test_summary_defaults_to_first_sentence(store: Store) -> None:
    store.apply([create("Deploy", "Deploys go through Fly.io. Heroku is gone.\n\nMore.")])
    assert store.read("project_knowledge_deploy.md").summary == "Deploys go through Fly.io."


def test_create_never_overwrites(store: Store) -> None:
    store.apply([create("Same title", "first")])
    result = store.apply([create("Same title", "second"), create("Same title", "third")])
    assert [a.filename for a in result.applied] == [
        "project_knowledge_same-title-2.md",
        "project_knowledge_same-title-3.md",
    ]
    assert store.read("project_knowledge_same-title.md").body == "first"
    assert store.read("project_knowledge_same-title-3.md").body == "third"


def test_create_of_the_very_same_note_is_unchanged(store: Store) -> None:
    store.apply([create("Same", "same body")])
    result = store.apply([create("Same", "same body")])
    assert [(a.action, a.filename) for a in result.applied] == [
        ("unchanged", "project_knowledge_same.md")
    ]
    assert not result.changed
    assert note_names(store) == ["project_knowledge_same.md"]


def test_create_avoids_names_differing_only_in_case(store: Store) -> None:
    store.root.mkdir(parents=True)
    (store.root / "Project_Knowledge_Build.md").write_text(
        "---\ntype: project_knowledge\ntitle: B\n---\nx\n"
    )
    result = store.apply([create("Build")])
    assert result.applied[0].filename == "project_knowledge_build-2.md"


def test_update_keeps_created_and_unknown_keys(store: Store) -> None:
    store.apply([create("Release", "old")], now=T0)
    path = store.root / "project_knowledge_release.md"
    text = path.read_text().replace("---\nold", "tags:\n- ci\nowner: ana\n---\nold")
    path.write_text(text)
    result = store.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": "project_knowledge_release.md",
                "content": "new body",
                "summary": "Now with tags.",
            }
        ],
        now=T1,
    )
    assert result.applied[0].action == "update"
    note = store.read("project_knowledge_release.md")
    assert note.body == "new body"
    assert note.created == T0 and note.updated == T1
    assert list(note.extra.items()) == [("tags", ["ci"]), ("owner", "ana")]
    assert "Now with tags." in store.load_index()


def test_update_with_same_content_is_unchanged(store: Store) -> None:
    store.apply([create("Stable", "same")], now=T0)
    result = store.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": "project_knowledge_stable.md",
                "content": "same",
            }
        ],
        now=T1,
    )
    assert result.applied[0].action == "unchanged"
    assert store.read("project_knowledge_stable.md").updated == T0


@pytest.mark.parametrize("action", ["update", "delete"])
def test_update_or_delete_of_missing_note_is_rejected(store: Store, action: str) -> None:
    store.apply([create("Exists")])
    result = store.apply(
        [{"action": action, "level": "project", "filename": "ghost.md", "content": "x"}]
    )
    assert not result.applied
    assert "no note 'ghost.md'" in result.rejected[0].reason
    assert note_names(store) == ["project_knowledge_exists.md"]


def test_update_of_malformed_note_is_rejected_and_file_kept(store: Store) -> None:
    store.root.mkdir(parents=True)
    broken = "---\ntype: [oops\n---\nhand-typed text worth keeping\n"
    (store.root / "broken.md").write_text(broken)
    result = store.apply(
        [{"action": "update", "level": "project", "filename": "broken.md", "content": "x"}]
    )
    assert "fix it by hand" in result.rejected[0].reason
    assert (store.root / "broken.md").read_text() == broken


def test_wrong_level_is_rejected(store: Store) -> None:
    result = store.apply([create("Mine", level="user")])
    assert "user operation sent to the project store" in result.rejected[0].reason
    assert not store.root.exists() or note_names(store) == []


@pytest.mark.parametrize(
    ("op", "reason"),
    [
        ({"action": "explode", "level": "project"}, "unknown action"),
        (
            {"action": "create", "level": "project", "type": "project_knowledge", "content": "x"},
            "title: missing",
        ),
        (
            {"action": "create", "level": "project", "type": "nope", "title": "t", "content": "x"},
            "type:",
        ),
        (
            {
                "action": "create",
                "level": "moon",
                "type": "project_knowledge",
                "title": "t",
                "content": "x",
            },
            "level:",
        ),
        (
            {"action": "create", "level": "project", "type": "project_knowledge", "title": "t"},
            "content: missing",
        ),
        (
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "t",
                "content": "x" * 70_000,
            },
            "larger than",
        ),
        (
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": 42,
                "content": "x",
            },
            "title:",
        ),
        ({"action": "update", "level": "project", "content": "x"}, "filename: missing"),
        ("not an object", "expected a JSON object"),
    ],
)
def test_invalid_operations_are_rejected_with_reason(store: Store, op: object, reason: str) -> None:
    result = store.apply([op, create("Valid one")])  # type: ignore[list-item]
    assert [a.filename for a in result.applied] == ["project_knowledge_valid-one.md"]
    assert reason in result.rejected[0].reason


def test_noop_and_empty_action_are_ignored(store: Store) -> None:
    result = store.apply([{"action": "noop"}, {"action": ""}, Operation("noop")])
    assert result.applied == () and result.rejected == ()


def test_batch_sees_its_own_writes(store: Store) -> None:
    result = store.apply(
        [
            create("Temp", "x"),
            {
                "action": "update",
                "level": "project",
                "filename": "project_knowledge_temp.md",
                "content": "y",
            },
            {"action": "delete", "level": "project", "filename": "project_knowledge_temp.md"},
            create("Temp", "z"),
        ]
    )
    assert [a.action for a in result.applied] == ["create", "update", "delete", "create"]
    assert note_names(store) == ["project_knowledge_temp-2.md"]
    assert store.trash() == []  # never written, so nothing to keep


def test_delete_moves_to_trash_and_restore_brings_it_back(store: Store) -> None:
    store.apply([create("Gone soon", "precious")])
    result = store.apply(
        [{"action": "delete", "level": "project", "filename": "project_knowledge_gone-soon.md"}]
    )
    assert result.applied[0].action == "delete"
    assert note_names(store) == []
    assert store.load_index() == ""
    [item] = store.trash()
    assert item.filename == "project_knowledge_gone-soon.md"
    assert store.restore("project_knowledge_gone-soon.md") == "project_knowledge_gone-soon.md"
    assert store.read("project_knowledge_gone-soon.md").body == "precious"
    assert "gone-soon" in store.load_index()
    with pytest.raises(NoteNotFound):
        store.restore("project_knowledge_gone-soon.md")


def test_restore_refuses_to_overwrite(store: Store) -> None:
    store.apply([create("Twice", "one")])
    store.apply(
        [{"action": "delete", "level": "project", "filename": "project_knowledge_twice.md"}]
    )
    store.apply([create("Twice", "two")])
    with pytest.raises(NoteExists):
        store.restore("project_knowledge_twice.md")
    assert store.read("project_knowledge_twice.md").body == "two"


def test_read_errors(store: Store) -> None:
    store.root.mkdir(parents=True)
    with pytest.raises(NoteNotFound):
        store.read("absent.md")
    (store.root / "latin1.md").write_bytes(b"---\ntype: project_knowledge\ntitle: caf\xe9\n---\n")
    (store.root / "huge.md").write_bytes(
        b"---\ntype: project_knowledge\ntitle: h\n---\n" + b"x" * 300_000
    )
    problems = {p.filename: p.reason for p in store.problems()}
    assert "not UTF-8" in problems["latin1.md"]
    assert "too large" in problems["huge.md"]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_user_store_is_private(tmp_path: Path) -> None:
    os.umask(0o022)
    user = Store(tmp_path / "home" / "u" / "memory", Level.USER)
    result = user.apply(
        [
            {
                "action": "create",
                "level": "user",
                "type": "user_preference",
                "title": "Answer in Chinese",
                "content": "用中文回答",
            }
        ]
    )
    user.apply([{"action": "delete", "level": "user", "filename": result.applied[0].filename}])
    user.restore(result.applied[0].filename)
    assert mode(user.root) == 0o700
    for path in [state(user.root), state(user.root) / "trash"]:
        assert mode(path) == 0o700, path
    for path in user.root.rglob("*"):
        if path.is_file():
            assert mode(path) == 0o600, path


def test_project_store_follows_umask(tmp_path: Path) -> None:
    os.umask(0o022)
    project = Store(tmp_path / "p", Level.PROJECT)
    project.apply([create("Shared")])
    assert mode(project.root / "project_knowledge_shared.md") == 0o644
    assert mode(project.root / "MEMORY.md") == 0o644


HOLD_LOCK = textwrap.dedent(
    """
    import sys, time
    from mdmem import Store, Level
    store = Store(sys.argv[1], Level.PROJECT)
    with store.lock():
        print("held", flush=True)
        time.sleep(60)
    """
)


@pytest.mark.timeout(60)
def test_lock_held_by_another_process_times_out_naming_the_store(store: Store) -> None:
    store.apply([create("First")])
    holder = subprocess.Popen(
        [PYTHON, "-c", HOLD_LOCK, str(store.root)],
        stdout=subprocess.PIPE,
        env=python_env(),
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        impatient = Store(store.root, Level.PROJECT, lock_timeout=0.3)
        with pytest.raises(LockTimeout) as info:
            impatient.apply([create("Second")])
        assert str(store.root) in str(info.value)
        assert isinstance(info.value, TimeoutError)
        # Readers never wait for the lock.
        assert "first" in impatient.load_index()
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
    assert Store(store.root, Level.PROJECT, lock_timeout=5).apply([create("Second")]).changed


CRASH_MID_BATCH = textwrap.dedent(
    """
    import os, sys
    from mdmem import Store, Level
    from mdmem.store import _txn
    real_write = _txn._write
    count = 0
    def dying_write(root, name, data, private, **kw):
        global count
        count += 1
        if count > int(sys.argv[2]):
            os.kill(os.getpid(), 9)
        return real_write(root, name, data, private, **kw)
    _txn._write = dying_write
    store = Store(sys.argv[1], Level.PROJECT)
    store.apply([{"action": "create", "level": "project", "type": "project_knowledge",
                  "title": f"Note {i}", "content": f"body {i}"} for i in range(20)]
                + [{"action": "delete", "level": "project",
                    "filename": "project_knowledge_old.md"}])
    """
)


@pytest.mark.parametrize("survive", [0, 7, 19])
def test_batch_killed_midway_is_completed_by_the_next_writer(store: Store, survive: int) -> None:
    store.apply([create("Old")])
    proc = subprocess.run(
        [PYTHON, "-c", CRASH_MID_BATCH, str(store.root), str(survive)],
        env=python_env(),
        capture_output=True,
    )
    assert proc.returncode == -9, proc.stderr
    assert (state(store.root) / "txn.json").exists()
    assert len(note_names(store)) == 1 + survive
    # Any locked operation finishes the batch first.
    store.apply([])
    assert not (state(store.root) / "txn.json").exists()
    assert note_names(store) == sorted(f"project_knowledge_note-{i}.md" for i in range(20))
    assert index_names(store) == note_names(store)
    assert [t.filename for t in store.trash()] == ["project_knowledge_old.md"]


def test_recovery_never_overwrites_a_hand_edit(store: Store) -> None:
    store.apply([create("Old")])
    subprocess.run(
        [PYTHON, "-c", CRASH_MID_BATCH, str(store.root), "3"], env=python_env(), capture_output=True
    )
    edited = store.root / "project_knowledge_note-1.md"
    edited.write_text("---\ntype: project_knowledge\ntitle: Edited by hand\n---\nmine\n")
    store.apply([])
    assert parse(edited.read_text()).title == "Edited by hand"
    assert len(note_names(store)) == 20


def test_unreadable_journal_is_discarded(store: Store) -> None:
    store.apply([create("Keep")])
    (state(store.root) / "txn.json").write_text("{not json")
    store.apply([])
    assert note_names(store) == ["project_knowledge_keep.md"]
    assert not (state(store.root) / "txn.json").exists()


def test_create_with_an_exact_file_name(store: Store) -> None:
    op = create("Progress", "where we are", filename="progress.md")
    assert store.apply([op]).applied[0].filename == "progress.md"
    assert store.apply([op]).applied[0].action == "unchanged"  # the same note again
    clash = store.apply([create("Other", "different", filename="progress.md")])
    assert "already exists" in clash.rejected[0].reason
    hostile = store.apply([create("Bad", filename="../progress.md")])
    assert "filename" in hostile.rejected[0].reason
    assert note_names(store) == ["progress.md"]


def test_rename_keeps_the_bytes_and_never_overwrites(store: Store) -> None:
    store.apply([create("Keep me", "body")])
    path = store.root / "project_knowledge_keep-me.md"
    path.write_text(path.read_text().replace("---\nbody", "owner: ana\n---\nbody"))
    before = path.read_bytes()
    assert store.rename("project_knowledge_keep-me.md", "kept.md") == "kept.md"
    assert (store.root / "kept.md").read_bytes() == before
    assert "(kept.md)" in store.load_index() and "keep-me" not in store.load_index()
    store.apply([create("Other")])
    with pytest.raises(NoteExists):
        store.rename("kept.md", "project_knowledge_other.md")
    with pytest.raises(NoteNotFound):
        store.rename("ghost.md", "x.md")
    from mdmem import InvalidPath

    with pytest.raises(InvalidPath):
        store.rename("kept.md", "../kept.md")
    assert (store.root / "kept.md").read_bytes() == before


@pytest.mark.parametrize(
    ("body", "summary"),
    [
        ("# Build\nRun `make` first. Then test.", "Run `make` first."),
        ("## A\n\n### B\n\nText here.\n\nMore.", "Text here."),
        ("# Only a heading", "Only a heading"),
        ("用中文回答。代码用英文。", "用中文回答。"),
        ("- item one\n- item two", "item one - item two"),
    ],
)
def test_derived_summary_skips_headings(store: Store, body: str, summary: str) -> None:
    result = store.apply([create("S", body)])
    assert store.read(result.applied[0].filename).summary == summary


def test_save_writes_the_whole_note_as_given(store: Store) -> None:
    from mdmem import InvalidNote, StoreError

    store.apply([create("Note 0", "Body 0.")], now=T0)
    name = "project_knowledge_note-0.md"
    before = store.read_text(name)
    assert store.save(parse(before, name), expect=before) == "unchanged"
    edited = parse(
        before.replace("Body 0.", "New body.").replace("---\nNew", "owner: me\n---\nNew"), name
    )
    assert store.save(edited, expect=before, now=T1) == "update"
    note = store.read(name)
    assert note.body == "New body." and note.extra == {"owner": "me"}
    assert note.created == T0 and note.updated == T1
    text = store.read_text(name)
    assert text.index("owner: me") > text.index("updated:")
    with pytest.raises(StoreError):
        store.save(edited, expect=before)  # the file is no longer what the editor started from
    with pytest.raises(NoteNotFound):
        store.read_text("project_knowledge_nope.md")
    store.root.joinpath("broken.md").write_text("---\ntype: [\n---\nmine\n")
    with pytest.raises(InvalidNote):
        store.read("broken.md")
    fixed = parse("---\ntype: project_knowledge\ntitle: Fixed\n---\nmine\n", "broken.md")
    assert store.save(fixed, expect=store.read_text("broken.md")) == "update"
    assert "Fixed" in store.load_index()


def test_save_redacts_and_creates(store: Store) -> None:
    token = "ghp_" + "a1B2" * 9
    from mdmem import Note, NoteType

    note = Note("new.md", NoteType.PROJECT_KNOWLEDGE, "Clone", body=f"Clone with {token}.")
    assert store.save(note) == "create"
    assert token not in store.read_text("new.md")
    assert "[REDACTED:github_token]" in store.read("new.md").body
    assert "(new.md)" in store.load_index()
