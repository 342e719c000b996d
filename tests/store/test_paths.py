"""The one note-name validator, slugs, and where stores live."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mdmem import InvalidPath, Level, Operation, Store
from mdmem.store import _scan
from mdmem.store.paths import (
    MAX_NAME_BYTES,
    check_name,
    discover_workspace,
    is_plain_name,
    note_path,
    project_root,
    slugify,
    user_root,
)

HOSTILE_NAMES = [
    "",
    ".",
    "..",
    ".md",
    "../escape.md",
    "../../etc/passwd.md",
    "sub/dir.md",
    "..\\escape.md",
    "C:\\evil.md",
    "C:evil.md",
    "/etc/passwd.md",
    "/tmp/abs.md",
    "nul\x00byte.md",
    "new\nline.md",
    "carriage\rreturn.md",
    "tab\there.md",
    "escape\x1b[31m.md",
    "del\x7f.md",
    "line\u2028sep.md",
    "rtl\u202eoverride.md",
    ".hidden.md",
    "MEMORY.md",
    "memory.md",
    "note.txt",
    "note.md.txt",
    "note",
    "a" * (MAX_NAME_BYTES - 2) + ".md",
    "长" * 40 + ".md",
    " leading.md",
    "trailing .md",
    "trailing..md",
    "con.md",
    "LPT1.md",
    "pipe|name.md",
    "star*.md",
    "question?.md",
    'quote".md',
    "angle<bracket>.md",
    "colon:name.md",
    "paren(s).md",
]


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_names_are_rejected(name: str) -> None:
    with pytest.raises(InvalidPath) as info:
        check_name(name)
    assert info.value.reason


@pytest.mark.parametrize(
    "name",
    [
        "project_knowledge_build.md",
        "user_preference_回复语言.md",
        "Notes on CI.md",
        "reference_material_api-contract-2.md",
        "émigré_notes.md",
        "a.b.md",
        "a" * (MAX_NAME_BYTES - 3) + ".md",
    ],
)
def test_good_names_pass(name: str) -> None:
    assert check_name(name) == name


def _outside_listing(tmp_path: Path) -> set[str]:
    # mdmem's own state (under the test's home) is mdmem's, not "outside".
    return {
        str(p.relative_to(tmp_path))
        for p in tmp_path.rglob("*")
        if "store" not in p.parts and ".local" not in p.parts
    }


@pytest.fixture
def escape_store(tmp_path: Path) -> Store:
    """A store with symlinks that lead outside it, to a directory, and nowhere."""
    root = tmp_path / "store"
    root.mkdir()
    secret = tmp_path / "secret.md"
    secret.write_text("---\ntype: project_knowledge\ntitle: outside\n---\nsecret\n")
    (root / "link-out.md").symlink_to(secret)
    (root / "link-abs.md").symlink_to("/etc/hostname")
    (root / "dangling.md").symlink_to(tmp_path / "missing.md")
    (root / "dir.md").mkdir()
    (root / "fifo.md").symlink_to(tmp_path)
    (tmp_path / "parent-dir").mkdir()
    (root / "through-parent.md").symlink_to(Path("..") / "secret.md")
    return Store(root, Level.PROJECT, redact=lambda s: s)


SYMLINK_ESCAPES = [
    "link-out.md",
    "link-abs.md",
    "dangling.md",
    "dir.md",
    "fifo.md",
    "through-parent.md",
]


@pytest.mark.parametrize("name", SYMLINK_ESCAPES)
def test_symlink_escapes_are_rejected(escape_store: Store, name: str) -> None:
    with pytest.raises(InvalidPath):
        note_path(escape_store.path, name)


@pytest.mark.parametrize("name", HOSTILE_NAMES + SYMLINK_ESCAPES)
@pytest.mark.parametrize("action", ["update", "delete"])
def test_hostile_operations_write_nothing_outside(
    escape_store: Store, tmp_path: Path, name: str, action: str
) -> None:
    secret = tmp_path / "secret.md"
    before_secret = secret.read_bytes()
    before = _outside_listing(tmp_path)
    op = Operation(action, level="project", filename=name, content="pwned")
    result = escape_store.apply([op])
    assert not result.applied
    assert len(result.rejected) == 1
    assert _outside_listing(tmp_path) == before
    assert secret.read_bytes() == before_secret
    assert os.path.islink(escape_store.root / "link-out.md") or name != "link-out.md"


def test_hostile_slugs_stay_inside(escape_store: Store, tmp_path: Path) -> None:
    before = _outside_listing(tmp_path)
    ops = [
        Operation("create", "project", "project_knowledge", title=t, slug=t, content="body")
        for t in ["../../escape", "/etc/passwd", "..", "a/b/c", "x\x00", "C:\\x", "~/.ssh/id"]
    ]
    nul_only = Operation("create", "project", "project_knowledge", title="\x00", content="b")
    result = escape_store.apply([*ops, nul_only])
    assert len(result.applied) == len(ops)
    assert [r.operation for r in result.rejected] == [nul_only]
    for applied in result.applied:
        check_name(applied.filename)
        assert (escape_store.root / applied.filename).is_file()
    assert _outside_listing(tmp_path) == before


def test_a_symlink_is_never_a_note_even_inside_the_store(tmp_path: Path) -> None:
    # Readers open notes with O_NOFOLLOW: a symlink is refused with a clear reason.
    root = tmp_path / "store"
    root.mkdir()
    (root / "real.md").write_text("---\ntype: project_knowledge\ntitle: Real\n---\nbody\n")
    (root / "alias.md").symlink_to("real.md")
    with pytest.raises(InvalidPath, match="symlink"):
        note_path(str(root), "alias.md")


@pytest.mark.parametrize("then", ["file", "fifo", "gone"])
def test_a_symlink_swapped_between_the_lstat_and_the_readlink(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, then: str
) -> None:
    # A racing swapper replaces the symlink right after note_path saw it: the readlink
    # in realpath then fails (EINVAL, or ENOENT), which must not escape as an OSError.
    root = tmp_path / "store"
    root.mkdir()
    alias = root / "alias.md"
    alias.symlink_to(tmp_path / "outside.md")
    real_readlink = os.readlink

    def swapping(path: str) -> str:
        if path == str(alias) and alias.is_symlink():
            alias.unlink()
            if then == "file":
                alias.write_text("x")
            elif then == "fifo":
                os.mkfifo(alias)
        return real_readlink(path)

    monkeypatch.setattr(os, "readlink", swapping)
    if then == "gone":
        with pytest.raises(FileNotFoundError):
            note_path(str(root), "alias.md", must_exist=True)
    else:
        with pytest.raises(InvalidPath, match="symlink"):
            note_path(str(root), "alias.md", must_exist=True)


@pytest.mark.parametrize(
    ("title", "slug"),
    [
        ("Build workflow", "build-workflow"),
        ("发布流程", "发布流程"),
        ("使用 Go 测试", "使用-go-测试"),
        ("  --Hello,   World!!--  ", "hello-world"),
        ("Crème brûlée", "crème-brûlée"),
        ("🎉🎉", "note"),
        ("", "note"),
        ("../../etc/passwd", "etc-passwd"),
        ("snake_case_title", "snake_case_title"),
        ("ＦＵＬＬＷＩＤＴＨ", "fullwidth"),
    ],
)
def test_slugify_examples(title: str, slug: str) -> None:
    assert slugify(title) == slug


@given(st.text())
def test_slugify_is_always_a_usable_name(title: str) -> None:
    slug = slugify(title)
    assert slug
    assert len(slug) <= 60
    assert re.fullmatch(r"[-\w]+", slug)
    assert slug == slug.lower()
    check_name(f"correction_feedback_{slug}-999.md")


@given(st.text(min_size=1, max_size=40))
def test_check_name_never_accepts_a_path(name: str) -> None:
    try:
        check_name(name)
    except InvalidPath:
        return
    assert "/" not in name and "\\" not in name and "\x00" not in name
    assert name.endswith(".md") and not name.startswith(".")
    assert os.path.basename(name) == name


@given(
    st.text(alphabet=st.characters(codec="ascii"), min_size=1, max_size=30).map(lambda s: s + ".md")
)
def test_plain_fast_check_agrees_with_full_check(name: str) -> None:
    if is_plain_name(name):
        check_name(name)


def test_user_root_honours_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MDMEM_USER_DIR", str(tmp_path / "u"))
    assert user_root() == str(tmp_path / "u")
    monkeypatch.delenv("MDMEM_USER_DIR")
    assert user_root() == os.path.join(os.path.expanduser("~"), ".PseudoClaude", "memory")


def test_discover_workspace(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / "a" / "b").mkdir(parents=True)
    (repo / ".git").mkdir()
    assert discover_workspace(str(repo / "a" / "b")) == str(repo)
    (repo / "a" / ".PseudoClaude").mkdir()
    assert discover_workspace(str(repo / "a" / "b")) == str(repo / "a")
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    found = discover_workspace(
        str(lonely), user_store=str(tmp_path / "u" / "m"), ceiling=str(tmp_path)
    )
    assert found == str(lonely)
    assert project_root(str(repo)) == str(repo / ".PseudoClaude" / "memory")


def test_worktree_git_file_marks_a_workspace(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "src").mkdir(parents=True)
    (tree / ".git").write_text("gitdir: /elsewhere/.git/worktrees/tree\n")
    assert discover_workspace(str(tree / "src")) == str(tree)


def test_home_user_store_is_not_a_workspace(tmp_path: Path) -> None:
    home = tmp_path / "h"
    user_store = home / ".PseudoClaude" / "memory"
    user_store.mkdir(parents=True)
    project = home / "code" / "proj"
    project.mkdir(parents=True)
    found = discover_workspace(str(project), user_store=str(user_store), ceiling=str(tmp_path))
    assert found == str(project)


def test_the_ceiling_hides_every_marker_above_it(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    start = repo / "vendored" / "pkg"
    start.mkdir(parents=True)
    assert discover_workspace(str(start)) == str(repo)
    assert discover_workspace(str(start), ceiling=str(repo / "vendored")) == str(start)


# The listing remembers which names passed the check (store/_scan.py), for the 100k pass.
@given(st.lists(st.text(min_size=1, max_size=40).map(lambda s: s + ".md"), max_size=20))
def test_the_remembered_plain_names_answer_as_the_check(names: list[str]) -> None:
    for name in names + names:  # the second time from the set
        assert _scan._plain_name(name) == is_plain_name(name)


@given(
    st.text(alphabet="aZ09_-\n.\u00e9\u0661 /", max_size=110)
    | st.text(max_size=3)
    | st.integers()
    | st.none()
)
def test_a_session_id_is_what_the_pattern_it_replaced_accepts(session: object) -> None:
    # is_session_id stands for re.match(r"^[A-Za-z0-9_-]{1,100}$", ...) (no pattern
    # compiled on the hook's path): the same answer for anything, a final newline too.
    from mdmem.store.paths import is_session_id

    want = isinstance(session, str) and re.match(r"^[A-Za-z0-9_-]{1,100}$", session) is not None
    assert is_session_id(session) == want


@pytest.mark.parametrize("session", ["a" * 100, "a" * 100 + "\n", "a" * 101, "a\n\n", "", "\n"])
def test_a_session_ids_edges(session: str) -> None:
    from mdmem.store.paths import is_session_id

    want = re.match(r"^[A-Za-z0-9_-]{1,100}$", session) is not None
    assert is_session_id(session) == want


_CONTROL = st.sampled_from(["\x01", "\x1f", "\x7f", "\x85", "\u2028", "\u2029", "\u202e", "\u200f"])


@given(
    st.lists(st.one_of(st.characters(codec="ascii"), st.characters(), _CONTROL), max_size=30).map(
        "".join
    )
)
def test_a_control_character_is_found_whatever_else_the_name_holds(text: str) -> None:
    # Printable ASCII skips the per-character look; the verdict is the per-character one.
    import unicodedata

    from mdmem.store.paths import _BIDI_CONTROLS, _name_problem

    name = text.replace("/", "").replace("\\", "").replace("\x00", "") + ".md"
    control = any(
        unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI_CONTROLS for ch in name
    )
    found = (_name_problem(name) or "").startswith("contains the control character")
    assert found == control
