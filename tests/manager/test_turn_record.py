"""The journaled turn and the checked operation: typed records that read back what they wrote.

Round trips (hypothesis) for ``operations.format_op`` / ``validate`` and ``Turn.format`` /
``Turn.parse``; a turn file written by the code before the records (version 1) still
replays; a name is checked once per write.
"""

from __future__ import annotations

import json
from datetime import timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from builders import Scripted, create_op, delete_op, update_op
from conftest import state
from mdmem import Level, Manager, NoteType, Store
from mdmem.errors import InvalidOperation, InvalidPath
from mdmem.manager.provenance import Source
from mdmem.manager.turn_record import (
    LEVELS,
    VERSION,
    Answer,
    Dropped,
    Failure,
    Turn,
    sort_answer,
)
from mdmem.store import paths
from mdmem.store.operations import Create, Update, ValidOperation, format_op, validate

# JSON holds any text but lone surrogates (a turn file is UTF-8).
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
NAMES = st.one_of(
    st.from_regex(r"[a-z][a-z0-9_.-]{0,30}\.md", fullmatch=True),
    st.builds(lambda t: f"{t}.md", TEXT),
    TEXT,
)
OFFSETS = st.timedeltas(min_value=timedelta(hours=-23), max_value=timedelta(hours=23))
MOMENTS = st.datetimes(
    timezones=st.one_of(st.none(), st.just(timezone.utc), st.builds(timezone, OFFSETS))
).map(lambda d: d.isoformat())


@st.composite
def raw_ops(draw: st.DrawFn) -> dict[str, object]:
    """An operation as a model might send it: most fields right, some odd or wrong."""
    op: dict[str, object] = {
        "action": draw(st.sampled_from(["create", "update", "delete", "CREATE", "noop"])),
        "level": draw(st.sampled_from(LEVELS)),
    }
    for key, values in (
        ("type", st.sampled_from([t.value for t in NoteType])),
        ("title", TEXT),
        ("summary", TEXT),
        ("slug", TEXT),
        ("filename", NAMES),
        ("content", st.text(max_size=200) | st.text(st.characters(max_codepoint=31), max_size=3)),
        ("expires", st.one_of(MOMENTS, TEXT)),
        ("supersedes", st.one_of(NAMES, st.lists(NAMES, max_size=3))),
    ):
        if draw(st.integers(0, 3)):  # three times in four: most operations are whole
            op[key] = draw(values)
    return op


def checked_or_none(raw: dict[str, object]) -> ValidOperation | None:
    try:
        return validate(raw)
    except (InvalidOperation, InvalidPath):
        return None


VALID_OPS = raw_ops().map(checked_or_none).filter(lambda op: op is not None)


@settings(max_examples=150, suppress_health_check=[HealthCheck.filter_too_much])
@given(VALID_OPS)
def test_a_checked_operation_reads_back_as_itself(op: ValidOperation) -> None:
    written = json.loads(json.dumps(format_op(op), ensure_ascii=False))
    again = validate(written, op.level)
    assert again == op
    assert format_op(again) == written  # canonical: formatting twice changes nothing
    assert validate(op, op.level) is op  # a checked operation is not checked again


@pytest.mark.parametrize(
    "raw",
    [
        # Read as 37 characters, written by isoformat() as 42: still read back.
        create_op("Soon gone", expires="2000-01-01T00:00:00.1+01:00:00.000001"),
        update_op("a.md", "Body.", supersedes=[" b.md", "b.md", "c.md "], title="\x00Odd  title"),
    ],
)
def test_edge_operations_read_back_as_themselves(raw: dict[str, object]) -> None:
    op = validate(raw)
    assert op is not None and validate(format_op(op)) == op


def test_a_body_of_control_characters_only_stays_an_empty_body_on_replay() -> None:
    op = validate(create_op("Empty", content="\x01\x02 \x7f"))
    assert op is not None and op.content == ""
    assert validate(format_op(op)) == op


def test_a_checked_operation_keeps_its_level() -> None:
    op = validate(create_op("Kept", level="user"))
    assert op is not None
    with pytest.raises(InvalidOperation, match="user operation sent to the project store"):
        validate(op, Level.PROJECT)


@st.composite
def answers(draw: st.DrawFn) -> Answer:
    ops: list[ValidOperation] = draw(st.lists(VALID_OPS, max_size=3))
    json_values = st.recursive(
        st.none() | st.booleans() | st.integers() | TEXT,
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(TEXT, inner, max_size=3),
        max_leaves=6,
    )
    return Answer(
        project=tuple(op for op in ops if op.level is Level.PROJECT),
        user=tuple(op for op in ops if op.level is Level.USER),
        invalid=tuple(
            Dropped(value, reason, level)
            for value, reason, level in draw(
                st.lists(st.tuples(json_values, TEXT, st.sampled_from(LEVELS)), max_size=3)
            )
        ),
        rejected=tuple(
            Dropped(value, reason)
            for value, reason in draw(st.lists(st.tuples(json_values, TEXT), max_size=3))
        ),
    )


TURNS = st.builds(
    Turn,
    id=TEXT,
    messages=st.lists(st.tuples(st.sampled_from(["user", "assistant"]), TEXT), max_size=4).map(
        tuple
    ),
    accepted=TEXT,
    workspace=TEXT,
    session=TEXT,
    attempts=st.integers(min_value=0, max_value=10),
    errors=st.lists(st.builds(Failure, TEXT, TEXT, st.none() | TEXT), max_size=3).map(tuple),
    answer=st.none() | answers(),
    applied=st.lists(st.sampled_from(LEVELS), max_size=2, unique=True).map(tuple),
    skipped=st.booleans(),
    held=TEXT,
    source=st.none() | st.builds(Source, TEXT, TEXT, TEXT, TEXT, TEXT),
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.filter_too_much])
@given(TURNS)
def test_a_turn_reads_back_as_itself(turn: Turn) -> None:
    written = json.loads(json.dumps(turn.format(), ensure_ascii=False))
    assert written["v"] == VERSION
    assert Turn.parse(written) == turn


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"messages": []},
        {"id": 7},
        {"id": "x", "messages": [["user"]]},
        {"id": "x", "messages": "hello"},
        {"id": "x", "answer": []},
        {"id": "x", "v": VERSION + 1},
        {"id": "x", "v": "2"},
    ],
)
def test_what_is_not_a_turn_record_is_refused_in_one_line(data: object) -> None:
    with pytest.raises(ValueError, match="turn"):
        Turn.parse(data)


def test_the_answer_is_sorted_once_where_it_is_read() -> None:
    items: list[object] = [
        create_op("Kept"),
        create_op("Mine", level="user"),
        {"action": "create", "level": "project", "type": "project_knowledge", "content": "x"},
        {"action": "create", "level": "team", "title": "T", "content": "x"},
        "not an object",
        {"action": "noop"},
    ]
    answer = sort_answer(items, lambda text: text.replace("hunter2", "[secret]"))
    assert [op.title for op in answer.project if isinstance(op, Create)] == ["Kept"]
    assert [op.level for op in answer.user] == [Level.USER]
    [missing] = answer.refused("project")
    assert "title" in missing.reason and missing.level == "project"
    assert [d.reason for d in answer.rejected] == [
        "level: 'team' is not 'project' or 'user'",
        "expected a JSON object, got str",
    ]


# -- a turn file written by the code before the typed records -----------------------


def v1_turn(turn_id: str, workspace: Path) -> dict[str, object]:
    """A turn file as the previous code wrote it (no "v", the model's operations unchecked)."""
    return {
        "id": turn_id,
        "accepted": "2026-12-01T10:00:00+00:00",
        "workspace": str(workspace),
        "messages": [["user", "Remember that deploys run on Fridays."], ["assistant", "Noted."]],
        "attempts": 1,
        "errors": [{"at": "2026-12-01T10:00:05+00:00", "error": "overloaded"}],
        "session": "s-old",
        "answer": {
            "project": [
                create_op("Deploys run on Fridays"),
                {"action": "create", "level": "project", "type": "project_knowledge"},
                update_op("project_knowledge_ghost.md", "Nothing to update."),
            ],
            "user": [create_op("Short answers", level="user")],
            "rejected": [[{"action": "create", "level": "team"}, "level: 'team' is not ..."]],
        },
        "source": {
            "turn": turn_id,
            "at": "2026-12-01T10:00:01Z",
            "model": "anthropic/claude-old",
            "git": "",
            "session": "s-old",
        },
    }


def test_a_turn_file_of_the_previous_version_still_replays(tmp_path: Path) -> None:
    from mdmem.manager._journal import new_turn_id

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    project = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    project.apply([])
    pending = state(project.root) / "turns" / "pending"
    pending.mkdir(parents=True)
    turn_id = new_turn_id()
    (pending / f"{turn_id}.json").write_text(json.dumps(v1_turn(turn_id, ws)), encoding="utf-8")
    # A hook's turn of that version, with its messages only: the model is asked.
    asked_id = new_turn_id()
    (pending / f"{asked_id}.json").write_text(
        json.dumps({"id": asked_id, "messages": [["user", "Remember: CI uses Go 1.23."]]}),
        encoding="utf-8",
    )
    provider = Scripted([create_op("CI uses Go 1.23")])
    user_dir = tmp_path / "user"
    with Manager(ws, user_dir=user_dir, provider=provider) as manager:
        assert manager.flush(timeout=60)
    assert len(provider.requests) == 1  # the old turn's answer was kept, not asked again
    note = project.read("project_knowledge_deploys-run-on-fridays.md")
    assert "anthropic/claude-old" in str(note.extra.get("source"))  # its provenance kept
    assert project.read("project_knowledge_ci-uses-go-1-23.md").title == "CI uses Go 1.23"
    assert Store(user_dir, Level.USER).read("user_preference_short-answers.md")
    assert sorted(n.filename for n in project.notes()) == [
        "project_knowledge_ci-uses-go-1-23.md",
        "project_knowledge_deploys-run-on-fridays.md",
    ]
    assert list((state(project.root) / "turns").rglob("*.json")) == []


def test_the_previous_versions_unchecked_operations_are_checked_on_reading() -> None:
    turn = Turn.parse(v1_turn("t1", Path("/ws")))
    assert turn.answer is not None and turn.attempts == 1 and turn.session == "s-old"
    assert [op.filename for op in turn.answer.project if isinstance(op, Update)] == [
        "project_knowledge_ghost.md"
    ]
    [refused] = turn.answer.refused("project")
    assert "title" in refused.reason
    assert Turn.parse(turn.format()) == turn  # and written back in this version


def test_a_turn_file_of_a_newer_version_is_set_aside_not_guessed(tmp_path: Path) -> None:
    from mdmem.manager._journal import damaged, new_turn_id, put_pending

    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    project = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    project.apply([])
    turns = str(state(project.root) / "turns")
    put_pending(turns, {"v": VERSION + 1, "id": new_turn_id(), "messages": [["user", "x"]]})
    provider = Scripted()
    with Manager(ws, user_dir=tmp_path / "user", provider=provider) as manager:
        assert manager.flush(timeout=60)
    assert provider.requests == [] and len(damaged(turns)) == 1


# -- one name check per write -----------------------------------------------------------


@pytest.fixture
def name_checks(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every name the one validator looks at from now on."""
    seen: list[object] = []
    real = paths._name_problem

    def counting(name: object) -> str | None:
        seen.append(name)
        return real(name)

    monkeypatch.setattr(paths, "_name_problem", counting)
    return seen


def test_each_write_checks_its_name_once(store: Store, name_checks: list[object]) -> None:
    store.apply([create_op("Seed"), create_op("Named", filename="named.md")])
    seed = "project_knowledge_seed.md"
    batches = [
        [create_op("Fresh")],
        [update_op(seed, "Changed.")],
        [create_op("Newer", supersedes=[seed])],
        [delete_op("named.md")],
    ]
    for ops in batches:
        name_checks.clear()
        result = store.apply(ops)
        assert result.applied and not result.rejected
        names = [str(n) for n in name_checks]
        assert sorted(names) == sorted(set(names)), names  # no name checked twice


def test_the_workers_operations_are_checked_where_the_answer_is_read(
    store: Store, name_checks: list[object]
) -> None:
    store.apply([create_op("Seed")])
    answer = sort_answer([update_op("project_knowledge_seed.md", "Changed.")], str)
    name_checks.clear()
    result = store.apply(answer.project)
    assert [a.action for a in result.applied] == ["update"]
    assert name_checks == []  # checked once already, in sort_answer


def test_the_answer_is_journaled_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A turn that fails after its answer keeps the answer on disk as checked operations."""
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    answer = [
        create_op("  Deploys   run on Fridays ", summary="When we deploy."),
        {"action": "create", "level": "project", "type": "project_knowledge", "content": "x"},
        create_op("Short answers", level="user"),
    ]
    manager = Manager(ws, user_dir=tmp_path / "user", provider=Scripted(answer), max_attempts=1)

    def disk_full(*args: object, **kwargs: object) -> object:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(manager.user, "apply", disk_full)  # the second store fails
    with manager:
        manager.update_async([{"role": "user", "content": "Remember: deploys run on Fridays."}])
        assert manager.flush(timeout=60)
    [path] = (state(ws / ".PseudoClaude" / "memory") / "turns" / "failed").glob("*.json")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["v"] == VERSION and record["applied"] == ["project"]
    assert record["answer"]["project"] == [
        {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": "Deploys run on Fridays",  # as checked, not as sent
            "summary": "When we deploy.",
            "content": "What   Deploys   run on Fridays  says.",
        }
    ]
    [(level, _, reason)] = record["answer"]["invalid"]
    assert level == "project" and reason.startswith("title")
    assert record["answer"]["user"][0]["title"] == "Short answers"
    turn = Turn.parse(record)
    assert turn.attempts == 1 and "No space left" in turn.errors[-1].error
