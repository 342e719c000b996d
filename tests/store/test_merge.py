"""The three-way merge of MEMORY.md: a table of cases, properties, and the driver's file I/O."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import Level, Store
from mdmem.store.merge import index_lines, merge_files, merge_index


def line(name: str, title: str = "T", summary: str = "s") -> str:
    return f"- [project_knowledge] {title} — {summary} (project_knowledge_{name}.md)"


def text(*lines: str) -> str:
    return "".join(f"{x}\n" for x in lines)


A, A2, A3 = line("a"), line("a", "T2"), line("a", "T3")
B, B2 = line("b"), line("b", "T2")
C = line("c")


@pytest.mark.parametrize(
    ("base", "ours", "theirs", "expected"),
    [
        pytest.param([], [], [], [], id="all empty"),
        pytest.param([A], [A], [A], [A], id="unchanged"),
        pytest.param([A], [A, B], [A], [A, B], id="added by us"),
        pytest.param([A], [A], [A, C], [A, C], id="added by them"),
        pytest.param([A], [A, B], [A, C], [A, B, C], id="added on both sides"),
        pytest.param([A, B], [A], [A, B], [A], id="deleted by us"),
        pytest.param([A, B], [A, B], [B], [B], id="deleted by them"),
        pytest.param([A, B], [B], [A], [], id="each deletes one"),
        pytest.param([A, B], [A2, B], [A, B], [A2, B], id="changed by us"),
        pytest.param([A, B], [A, B], [A, B2], [A, B2], id="changed by them"),
        pytest.param([A, B], [A2, B], [A, B2], [A2, B2], id="each changes one"),
        pytest.param([A], [A2], [A2], [A2], id="same change on both sides"),
        pytest.param([A], [A2], [A3], [A2], id="different changes: ours"),
        pytest.param([], [A2], [A3], [A2], id="added differently: ours"),
        pytest.param([A], [], [A2], [], id="deleted by us, changed by them: dropped"),
        pytest.param([A], [A2], [], [], id="changed by us, deleted by them: dropped"),
        pytest.param([A, B, C], [B2, C], [A, B, C, line("d")], [B2, C, line("d")], id="mixed"),
    ],
)
def test_merge_table(
    base: list[str], ours: list[str], theirs: list[str], expected: list[str]
) -> None:
    assert merge_index(text(*base), text(*ours), text(*theirs)) == text(*expected)


def test_output_is_sorted_by_file_name_and_drops_other_lines() -> None:
    ours = "# Memory\n\n" + text(C, A) + "stray words\n- [x] not a line\n"
    assert merge_index("", ours, text(B)) == text(A, B, C)


def test_crlf_and_trailing_spaces_are_not_changes() -> None:
    base = text(A, B)
    assert merge_index(base, base.replace("\n", "\r\n"), text(A, B2)) == text(A, B2)
    assert merge_index(base, f"{A}   \n{B}\n", base) == base


@pytest.mark.parametrize(
    "bad", ["- [t] x (../escape.md)", "- [t] x (MEMORY.md)", "- [t] x (.hidden.md)"]
)
def test_lines_naming_no_valid_note_are_dropped(bad: str) -> None:
    assert index_lines(text(A, bad)) == {"project_knowledge_a.md": A}


def test_the_result_is_what_a_store_writes(tmp_path: Path) -> None:
    store = Store(tmp_path / "mem", Level.PROJECT, redact=lambda s: s)
    ops = [
        {"action": "create", "level": "project", "type": t, "title": title, "content": "body."}
        for t, title in [
            ("project_knowledge", "Zeta"),
            ("user_preference", "Alpha"),
            ("project_knowledge", "发布流程"),
            ("reference_material", "API"),
        ]
    ]
    store.apply(ops)
    written = store.load_index()
    shuffled = "\n".join(reversed(written.splitlines()))
    assert merge_index("", shuffled, "") == written
    store.apply(
        [{"action": "delete", "level": "project", "filename": n} for n in index_lines(written)]
    )
    assert merge_index(written, store.load_index(), written) == ""


def test_merge_files_writes_ours(tmp_path: Path) -> None:
    paths = {}
    for name, lines in (("base", [A, B]), ("ours", [A2, B]), ("theirs", [A, B, C])):
        paths[name] = tmp_path / name
        paths[name].write_text(text(*lines), encoding="utf-8")
    paths["ours"].chmod(0o640)
    merge_files(str(paths["base"]), str(paths["ours"]), str(paths["theirs"]))
    assert paths["ours"].read_text(encoding="utf-8") == text(A2, B, C)
    assert paths["ours"].stat().st_mode & 0o777 == 0o640
    assert paths["theirs"].read_text(encoding="utf-8") == text(A, B, C)


# -- properties -------------------------------------------------------------------------

names = st.sampled_from([f"n{i}" for i in range(8)])
versions = st.dictionaries(names, st.sampled_from(["T1", "T2", "T3"]), max_size=8)


def render(version: dict[str, str]) -> str:
    lines = [line(name, title) for name, title in version.items()]
    return text(*lines)


def canonical(version: dict[str, str]) -> str:
    return text(*(line(name, version[name]) for name in sorted(version)))


@given(base=versions, x=versions)
def test_same_on_both_sides_is_that_side(base: dict[str, str], x: dict[str, str]) -> None:
    assert merge_index(render(base), render(x), render(x)) == canonical(x)


@given(base=versions, x=versions)
def test_unchanged_side_takes_the_other(base: dict[str, str], x: dict[str, str]) -> None:
    assert merge_index(render(base), render(base), render(x)) == canonical(x)
    assert merge_index(render(base), render(x), render(base)) == canonical(x)


@given(base=versions, ours=versions, theirs=versions)
def test_symmetric_except_conflicts(
    base: dict[str, str], ours: dict[str, str], theirs: dict[str, str]
) -> None:
    conflicts = {
        n
        for n in ours.keys() & theirs.keys()
        if ours[n] != theirs[n] and base.get(n) not in (ours[n], theirs[n])
    }
    files = {f"project_knowledge_{n}.md" for n in conflicts}
    forward = index_lines(merge_index(render(base), render(ours), render(theirs)))
    backward = index_lines(merge_index(render(base), render(theirs), render(ours)))
    assert {n: v for n, v in forward.items() if n not in files} == {
        n: v for n, v in backward.items() if n not in files
    }
    for name in conflicts:
        assert forward[f"project_knowledge_{name}.md"] == line(name, ours[name])
        assert backward[f"project_knowledge_{name}.md"] == line(name, theirs[name])


@given(base=versions, ours=versions, theirs=versions)
def test_result_is_canonical_and_only_holds_lines_of_some_side(
    base: dict[str, str], ours: dict[str, str], theirs: dict[str, str]
) -> None:
    merged = merge_index(render(base), render(ours), render(theirs))
    assert merge_index(merged, merged, merged) == merged
    lines = merged.splitlines()
    assert lines == sorted(lines, key=lambda x: x.rsplit("(", 1)[1])
    everything = set(render(ours).splitlines()) | set(render(theirs).splitlines())
    assert set(lines) <= everything
    # Added or kept on both sides, never deleted by either: always there.
    for name in ours.keys() & theirs.keys():
        if name not in base:
            assert f"project_knowledge_{name}.md" in index_lines(merged)


# -- the driver refuses what is not an index ------------------------------------------


@pytest.mark.parametrize(
    ("ours", "why"),
    [
        pytest.param("# Project\n\nSome prose.\n", "not an index line", id="prose"),
        pytest.param(text(A, "stray words"), "line 2 is not an index line", id="one stray line"),
        pytest.param(text(A, A2), "a second time", id="a name twice"),
        pytest.param(text("- [t] x (../escape.md)"), "names no valid note", id="bad name"),
    ],
)
def test_the_driver_refuses_a_side_that_is_not_an_index(
    tmp_path: Path, ours: str, why: str
) -> None:
    from mdmem.errors import StoreError

    paths = [tmp_path / n for n in ("base", "ours", "theirs")]
    for path, content in zip(paths, ["", ours, text(B)], strict=True):
        path.write_text(content, encoding="utf-8")
    with pytest.raises(StoreError, match=why):
        merge_files(*map(str, paths))
    after = paths[1].read_text(encoding="utf-8")
    # git's text merge is left (both sides' lines, with markers), never less than ours.
    for kept in [*ours.splitlines(), B]:
        assert kept in after


@pytest.mark.parametrize(
    "path", ["README.md", "docs/MEMORY.md", "MEMORY.md", ".PseudoClaude/memory/notes.md"]
)
def test_the_driver_refuses_a_path_that_is_not_a_stores_index(tmp_path: Path, path: str) -> None:
    from mdmem.errors import StoreError

    paths = [tmp_path / n for n in ("base", "ours", "theirs")]
    for file, content in zip(paths, [text(A), text(A, B), text(A, C)], strict=True):
        file.write_text(content, encoding="utf-8")
    with pytest.raises(StoreError, match=r"not a store's MEMORY\.md"):
        merge_files(*map(str, paths), path)
    assert A in paths[1].read_text() and B in paths[1].read_text()
    paths[1].write_text(text(A, B), encoding="utf-8")
    merge_files(*map(str, paths), "sub/.PseudoClaude/memory/MEMORY.md")
    assert paths[1].read_text() == text(A, B, C)


@given(st.lists(st.sampled_from(["", A, B, C, A2, "prose", "# h"]), max_size=6))
def test_index_problem_accepts_exactly_what_merges_without_loss(lines: list[str]) -> None:
    from mdmem.store.merge import index_problem

    body = text(*lines)
    kept = [x for x in lines if x]
    lossless = len(index_lines(body)) == len(kept)
    assert (index_problem(body) is None) is lossless
