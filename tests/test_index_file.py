"""MEMORY.md spliced in place on disk gives the same bytes as patching it in memory."""

from __future__ import annotations

from pathlib import Path

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
