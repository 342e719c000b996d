"""Records without dataclasses (mdmem/_record.py): each held to its dataclass twin.

The same class is made twice, once by :func:`mdmem._record.record` and once by
``@dataclass(frozen=True)``; on any values the two construct, compare, hash,
print, copy, pickle and refuse assignment alike, and ``dataclasses``' own
functions work on the record. The write path's records are checked too.
"""

from __future__ import annotations

import copy
import dataclasses
import inspect
import pickle
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import _record
from mdmem._kinds import Level, NoteType
from mdmem.store import dedupe, history, note, operations, results


@_record.record
class Sample:
    """A record of every kind of field."""

    name: str
    score: float
    tags: tuple[str, ...] = ()
    when: str | None = None
    extra: Mapping[str, object] = _record.field(default_factory=dict, hash=False)


@dataclasses.dataclass(frozen=True)
class Twin:
    """The same fields, as a dataclass."""

    name: str
    score: float
    tags: tuple[str, ...] = ()
    when: str | None = None
    extra: Mapping[str, object] = dataclasses.field(default_factory=dict, hash=False)


_values = st.fixed_dictionaries(
    {"name": st.text(max_size=5), "score": st.floats(allow_nan=True)},
    optional={
        "tags": st.lists(st.text(max_size=3), max_size=3).map(tuple),
        "when": st.none() | st.text(max_size=5),
        "extra": st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    },
)


def _same_repr(mine: object, twin: object) -> None:
    assert repr(mine) == repr(twin).replace("Twin(", "Sample(", 1)


@given(_values, _values)
def test_a_record_behaves_as_its_dataclass_twin(a: dict[str, object], b: dict[str, object]) -> None:
    mine, other = Sample(**a), Sample(**b)  # type: ignore[arg-type]
    twin, other_twin = Twin(**a), Twin(**b)  # type: ignore[arg-type]
    _same_repr(mine, twin)
    assert (mine == other) == (twin == other_twin)
    assert mine == mine and mine != twin  # a NaN score: the same object is equal to itself
    assert hash(mine) == hash(twin)  # the same fields in the same order, `extra` left out
    assert dataclasses.asdict(mine) == dataclasses.asdict(twin) == _record.values(mine)
    assert [f.name for f in dataclasses.fields(mine)] == [f.name for f in dataclasses.fields(twin)]
    assert dataclasses.is_dataclass(mine) and dataclasses.is_dataclass(Sample)
    changed = dataclasses.replace(mine, name="x")
    assert changed == _record.replace(mine, name="x")
    _same_repr(changed, dataclasses.replace(twin, name="x"))
    for again in (copy.copy(mine), copy.deepcopy(mine), pickle.loads(pickle.dumps(mine))):
        _same_repr(again, twin)
    positional = Sample(*[a[k] for k in ("name", "score")])  # type: ignore[arg-type]
    assert positional == Sample(name=a["name"], score=a["score"])  # type: ignore[arg-type]


def test_a_record_refuses_what_a_frozen_dataclass_refuses() -> None:
    mine = Sample("a", 1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        mine.name = "b"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del mine.name  # type: ignore[misc]
    with pytest.raises(TypeError):
        Sample("a")  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Sample("a", 1.0, nope=1)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="no field 'nope'"):
        _record.replace(mine, nope=1)
    # Each record gets its own default from the factory, as a dataclass does.
    assert Sample("a", 1.0).extra is not Sample("a", 1.0).extra
    assert str(inspect.signature(Sample)) == str(inspect.signature(Twin))
    assert Sample.__match_args__ == Twin.__match_args__
    match mine:
        case Sample(name, score):
            assert (name, score) == ("a", 1.0)


def test_a_field_without_a_default_after_one_is_refused() -> None:
    class Bad:
        first: str = ""
        second: int

    with pytest.raises(TypeError, match="'second' without a default follows 'first'"):
        _record.record(Bad)


def test_the_write_paths_records_are_records() -> None:
    made = [
        note.Note("a.md", NoteType.PROJECT_KNOWLEDGE, "A", extra={"k": [1]}),
        note.IndexEntry("a.md", "project_knowledge", "A", "s"),
        operations.Operation("create", title="A"),
        operations.Create(Level.PROJECT, NoteType.PROJECT_KNOWLEDGE, "A", "body"),
        operations.Delete(Level.PROJECT, "a.md"),  # type: ignore[arg-type]
        results.ApplyResult((results.Applied("create", "a.md", Level.PROJECT),), ()),
        results.Rejected(operations.Operation("x"), "why"),
        dedupe.Duplicate("a.md", 0.9, False),
        history.Version(1, "2026-12-01T00:00:00+00:00", "cli", "create", "abc", 3),
    ]
    for value in made:
        assert dataclasses.is_dataclass(value)
        assert dataclasses.replace(value) == value == pickle.loads(pickle.dumps(value))
        with pytest.raises(dataclasses.FrozenInstanceError):
            value.filename = "b.md"  # type: ignore[misc, union-attr]
    # A note's `extra` (a mapping) is not hashed, as before.
    first = made[0]
    assert hash(first) == hash(note.Note("a.md", NoteType.PROJECT_KNOWLEDGE, "A"))
    assert operations.Operation("create", title="A").to_dict() == {"action": "create", "title": "A"}
