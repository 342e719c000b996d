"""A catalog row is a typed value that survives SQLite unchanged (store/_row.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem.store import _catalog
from mdmem.store._row import CatalogRow

_text = st.one_of(st.none(), st.text(st.characters(exclude_characters="\x00"), max_size=30))
_stats = st.one_of(
    st.none(), st.tuples(*(st.integers(min_value=0, max_value=2**62) for _ in range(4)))
)
_names = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=1, max_size=20)
rows = st.builds(
    CatalogRow,
    st=_stats,
    at=st.integers(min_value=0, max_value=2**62),
    sha=_text,
    line=_text,
    type=_text,
    title=_text,
    summary=_text,
    updated=_text,
    error=_text,
    supersedes=st.lists(_names, max_size=3).map(tuple),
    expires=_text,
    expires_ts=st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False)),
)


@given(rows)
def test_a_row_reads_back_as_it_was_put(row: CatalogRow) -> None:
    cat = _catalog.Catalog("/nonexistent-store", private=True, memory=True)
    try:
        cat.begin(0)
        cat.put("project_knowledge_x.md", row)
        assert cat.get("project_knowledge_x.md") == row
        cat.rollback()
    finally:
        cat.close()


def test_a_row_names_its_fields_and_is_immutable() -> None:
    row = CatalogRow((1, 2, 3, 4), 5, sha="s", line="- x", supersedes=("a.md",))
    assert (row.st, row.at, row.sha, row.line) == ((1, 2, 3, 4), 5, "s", "- x")
    assert (row.supersedes, row.expires, row.error) == (("a.md",), None, None)
    assert row.stamped(9).at == 9 and row.stamped(9).st == row.st
    assert row.with_stat((5, 6, 7, 8)).st == (5, 6, 7, 8) and row.with_stat((5, 6, 7, 8)).at == 5
    assert row == CatalogRow((1, 2, 3, 4), 5, sha="s", line="- x", supersedes=("a.md",))
    assert "line='- x'" in repr(row)
    with pytest.raises(AttributeError):
        row.line = "y"  # type: ignore[misc]
