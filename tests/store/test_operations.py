"""Operations: validation, and finding the array of operations in whatever a model answered."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import InvalidOperation, Level, Operation, ProviderError
from mdmem.store.operations import Create, Delete, Update, parse_answer, validate

OPS = [
    {
        "action": "create",
        "level": "project",
        "type": "project_knowledge",
        "title": "T",
        "content": "c",
    }
]
TEXT = json.dumps(OPS)


@pytest.mark.parametrize(
    "answer",
    [
        TEXT,
        f"```json\n{TEXT}\n```",
        f"```\n{TEXT}\n```",
        f"Sure! Here are the operations:\n{TEXT}",
        f"{TEXT}\n\nI kept only the stable fact [see above].",
        f"Notes [1]: first, [2] second.\n{TEXT}\nThanks [3].",
        f"Prose with a stray ] and [ bracket, then {TEXT} and [more] text",
        json.dumps({"operations": OPS}),
        f"Result: {json.dumps({'operations': OPS})} done",
        OPS,
        {"operations": OPS},
        {"memories": OPS},
        OPS[0],
    ],
)
def test_answers_that_hold_the_operations(answer: object) -> None:
    assert parse_answer(answer) == OPS


def test_brackets_inside_strings() -> None:
    ops = [{"action": "create", "title": "a ] b [ c", "content": "[x] ] ["}]
    assert parse_answer("before [ " + json.dumps(ops) + " after ]") == ops


@pytest.mark.parametrize(
    "answer", ["[]", "Nothing worth keeping: []", "```json\n[]\n```", {"operations": []}, []]
)
def test_nothing_to_keep(answer: object) -> None:
    assert parse_answer(answer) == []


@pytest.mark.parametrize(
    "answer",
    ["", "   ", "I cannot help with that.", "{not json", "[unclosed", 42, None, {"no": "list"}],
)
def test_answers_without_operations(answer: object) -> None:
    with pytest.raises(ProviderError) as info:
        parse_answer(answer)
    assert info.value.raw is not None or answer in ("", "   ")


def test_huge_garbage_is_bounded() -> None:
    with pytest.raises(ProviderError):
        parse_answer("[" * 200_000 + "{" * 200_000)


@given(st.text())
def test_parse_answer_never_crashes(text: str) -> None:
    try:
        result = parse_answer(text)
    except ProviderError:
        return
    assert isinstance(result, list)


@given(
    st.lists(
        st.dictionaries(st.sampled_from(["action", "title", "level"]), st.text(max_size=10)),
        max_size=5,
    ),
    st.text(max_size=50),
    st.text(max_size=50),
)
def test_array_survives_any_prose_around_it(
    ops: list[dict[str, str]], before: str, after: str
) -> None:
    wrapped = f"{before}\n{json.dumps(ops)}\n{after}"
    if "[" in before or "{" in before:
        return  # prose with its own JSON may legitimately come first
    result = parse_answer(wrapped)
    assert result == ops or (not ops and result == [])


def test_validate_forms() -> None:
    create = validate(
        {
            "action": "create",
            "level": "user",
            "type": "user_preference",
            "title": " Title\nwith newline ",
            "content": " body ",
        }
    )
    assert create == Create(Level.USER, create.type, "Title with newline", "body")  # type: ignore[union-attr]
    update = validate(Operation("update", "project", filename="a.md", content="x", title="New"))
    assert isinstance(update, Update) and update.title == "New"
    assert isinstance(
        validate({"action": "DELETE", "level": "project", "filename": "a.md"}), Delete
    )
    assert validate({"action": "noop"}) is None


@pytest.mark.parametrize(
    ("op", "field"),
    [
        (
            {"action": "create", "level": "project", "type": "project_knowledge", "content": "x"},
            "title",
        ),
        ({"action": "create", "level": "project", "title": "t", "content": "x"}, "type"),
        (
            {"action": "update", "level": "project", "filename": "../a.md", "content": "x"},
            "filename",
        ),
        ({"action": "update", "level": "project", "filename": "a.md"}, "content"),
        ({"action": "delete", "filename": "a.md"}, "level"),
        (
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "t" * 600,
                "content": "x",
            },
            "title",
        ),
        (
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "t",
                "content": "\ud800",
            },
            "content",
        ),
        ({"action": "create", "title": ["list"]}, "title"),
    ],
)
def test_invalid_operations_name_their_field(op: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidOperation) as info:
        validate(op)
    assert info.value.field == field


def test_validate_against_a_store_level() -> None:
    with pytest.raises(InvalidOperation, match="user operation sent to the project store"):
        validate({"action": "delete", "level": "user", "filename": "a.md"}, Level.PROJECT)


def test_operation_round_trips_through_dict() -> None:
    op = Operation("create", "project", "project_knowledge", "T", None, None, None, "c")
    assert Operation.from_dict(op.to_dict()) == op
