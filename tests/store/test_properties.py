"""Invariants over arbitrary sequences of operations."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from mdmem import Level, NoteType, Store
from mdmem.store.note import index_line

titles = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=40).filter(
    str.strip
)
bodies = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=200).filter(
    str.strip
)
types = st.sampled_from([t.value for t in NoteType])


class StoreMachine(RuleBasedStateMachine):
    """Creates, updates and deletes in random batches; MEMORY.md must always match the disk."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="mdmem-prop-"))
        self.store = Store(self.dir / "mem", Level.PROJECT, redact=lambda s: s)
        self.expected: set[str] = set()

    def teardown(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(batch=st.lists(st.tuples(types, titles, bodies), min_size=1, max_size=4))
    def create(self, batch: list[tuple[str, str, str]]) -> None:
        result = self.store.apply(
            [
                {"action": "create", "level": "project", "type": t, "title": title, "content": body}
                for t, title, body in batch
            ]
        )
        assert not result.rejected, result.rejected
        self.expected |= {a.filename for a in result.applied}

    @rule(data=st.data(), body=bodies, title=st.none() | titles)
    def update(self, data: st.DataObject, body: str, title: str | None) -> None:
        if not self.expected:
            return
        name = data.draw(st.sampled_from(sorted(self.expected)))
        op = {"action": "update", "level": "project", "filename": name, "content": body}
        if title:
            op["title"] = title
        result = self.store.apply([op])
        assert [a.filename for a in result.applied] == [name]

    @rule(data=st.data())
    def delete(self, data: st.DataObject) -> None:
        if not self.expected:
            return
        name = data.draw(st.sampled_from(sorted(self.expected)))
        result = self.store.apply([{"action": "delete", "level": "project", "filename": name}])
        assert [a.action for a in result.applied] == ["delete"]
        self.expected.discard(name)

    @rule(name=st.text(max_size=20))
    def delete_something_random(self, name: str) -> None:
        result = self.store.apply([{"action": "delete", "level": "project", "filename": name}])
        if name in self.expected:
            self.expected.discard(name)
        else:
            assert result.applied == ()

    @invariant()
    def index_lists_exactly_the_notes_on_disk(self) -> None:
        root = self.store.root
        on_disk = (
            sorted(p.name for p in root.glob("*.md") if p.name != "MEMORY.md")
            if root.exists()
            else []
        )
        assert on_disk == sorted(self.expected)
        index = self.store.load_index()
        memory_md = (
            (root / "MEMORY.md").read_text(encoding="utf-8")
            if (root / "MEMORY.md").exists()
            else ""
        )
        assert index == memory_md
        expected_lines = [index_line(self.store.read(name)) for name in on_disk]
        assert index.splitlines() == expected_lines


TestStoreMachine = StoreMachine.TestCase


@given(st.lists(st.tuples(types, titles), min_size=1, max_size=30))
def test_create_names_are_unique_and_valid(batch: list[tuple[str, str]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "mem", Level.PROJECT, redact=lambda s: s)
        result = store.apply(
            [
                {
                    "action": "create",
                    "level": "project",
                    "type": t,
                    "title": title,
                    "content": f"b{i}",
                }
                for i, (t, title) in enumerate(batch)
            ]
        )
        names = [a.filename for a in result.applied]
        assert len(names) == len(set(names)) == len(batch)
        assert len({n.casefold() for n in names}) == len(names)
        assert all(len(n.encode()) <= 120 for n in names)
