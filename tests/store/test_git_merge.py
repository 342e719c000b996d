"""Team memory over real git: clones and branches merge MEMORY.md with no hand-resolved conflict."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from builders import git
from conftest import SRC
from mdmem import Level, Store
from mdmem.cli import app
from mdmem.store.merge import this_driver

pytestmark = [
    pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary"),
    pytest.mark.timeout(120),
]

DRIVER = f"{shlex.quote(sys.executable)} -m mdmem merge-index"
# A scripted editor: sets the summary of the note it is given to $NEW_SUMMARY.
EDITOR = """
import os, sys
path = sys.argv[1]
lines = open(path, encoding="utf-8").read().split("\\n")
lines = [f"summary: {os.environ['NEW_SUMMARY']}" if x.startswith("summary:") else x for x in lines]
open(path, "w", encoding="utf-8").write("\\n".join(lines))
"""


@pytest.fixture(autouse=True)
def _driver_imports_this_checkout(monkeypatch: pytest.MonkeyPatch) -> None:
    # Git's own config is isolated by conftest's autouse fixture. The merge driver is a
    # child of git: let it import this checkout.
    monkeypatch.setenv("PYTHONPATH", str(SRC))


class Clone:
    """A clone of the shared repository, and mdmem run in it."""

    def __init__(self, path: Path, editor: Path) -> None:
        self.path = path
        self.editor = editor

    def mdmem(self, *args: str, **env: str) -> str:
        result = CliRunner().invoke(app, ["--workspace", str(self.path), *args], env=env)
        assert result.exit_code == 0, (args, result.output)
        return result.stdout

    def add(self, title: str) -> str:
        return self.mdmem("add", "--title", title, f"What {title} says.").strip()

    def update(self, name: str, summary: str) -> None:
        editor = f"{shlex.quote(sys.executable)} {shlex.quote(str(self.editor))}"
        self.mdmem("edit", name, VISUAL=editor, NEW_SUMMARY=summary)

    def commit(self, message: str) -> None:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)

    @property
    def store(self) -> Store:
        return Store(self.path / ".PseudoClaude" / "memory", Level.PROJECT)

    def index(self) -> str:
        return (self.store.root / "MEMORY.md").read_text(encoding="utf-8")


@pytest.fixture
def origin(tmp_path: Path) -> Path:
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "origin.git")
    return tmp_path / "origin.git"


def clone(origin: Path, name: str, *, init: bool = True) -> Clone:
    path = origin.parent / name
    git(origin.parent, "clone", "-q", str(origin), name)
    git(path, "checkout", "-q", "-B", "main")
    editor = origin.parent / "editor.py"
    editor.write_text(EDITOR, encoding="utf-8")
    repo = Clone(path, editor)
    if init:
        repo.mdmem("init", "--driver-command", DRIVER)
    return repo


def assert_index_is_a_reindex(repo: Clone) -> None:
    merged = repo.index()
    report = repo.store.reindex()
    assert report.changed is False, (merged, repo.index())
    assert repo.index() == merged
    assert not report.problems


def test_two_clones_create_update_delete_then_merge_without_conflict(origin: Path) -> None:
    a = clone(origin, "a")
    base = [a.add(title) for title in ("Base one", "Base two", "Base three", "Base four")]
    a.commit("base notes")
    git(a.path, "push", "-q", "origin", "main")
    assert "MEMORY.md merge=mdmem-index" in (a.store.root / ".gitattributes").read_text()
    # mdmem keeps its state outside the repository: the clone holds nothing of it
    assert git(a.path, "status", "--porcelain", "--ignored").stdout.count(".mdmem") == 0

    b = clone(origin, "b")
    driver = git(b.path, "config", "merge.mdmem-index.driver").stdout.strip()
    assert driver == f"{DRIVER} %O %A %B %P"

    from_a = a.add("From A")
    a.update(base[1], "changed in A")
    a.mdmem("rm", base[0])
    a.commit("A's work")
    git(a.path, "push", "-q", "origin", "main")

    from_b = b.add("From B")
    b.update(base[2], "changed in B")
    b.mdmem("rm", base[3])
    b.commit("B's work")
    git(b.path, "branch", "b-work")

    merge = git(b.path, "pull", "--no-rebase", "--no-edit", "origin", "main", check=False)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert git(b.path, "status", "--porcelain").stdout == ""
    assert "<<<<<<<" not in b.index()
    names = [line.rsplit("(", 1)[1][:-1] for line in b.index().splitlines()]
    assert names == sorted([base[1], base[2], from_a, from_b])
    assert "changed in A" in b.index() and "changed in B" in b.index()
    assert_index_is_a_reindex(b)

    # The same merge without the driver (a clone where `mdmem init` never ran) conflicts:
    # the test above is not passing by luck.
    c = clone(origin, "c", init=False)
    git(c.path, "fetch", "-q", str(b.path), "b-work")
    plain = git(c.path, "merge", "--no-edit", "FETCH_HEAD", check=False)
    assert plain.returncode != 0 and "MEMORY.md" in plain.stdout


def test_a_worktree_branch_carries_its_own_memory_and_merges_back(origin: Path) -> None:
    a = clone(origin, "a")
    first = a.add("First")
    a.commit("first")
    worktree = Clone(origin.parent / "feature-tree", a.editor)
    git(a.path, "worktree", "add", "-q", "-b", "feature", str(worktree.path))
    # The worktree shares the repository's config, so its driver too; its memory is its own.
    assert git(worktree.path, "config", "merge.mdmem-index.driver").stdout.strip()
    on_feature = worktree.add("Feature detail")
    worktree.update(first, "changed on the feature branch")
    worktree.commit("feature work")
    assert on_feature not in a.index()

    on_main = a.add("Main detail")
    a.commit("main work")
    merge = git(a.path, "merge", "--no-edit", "feature", check=False)
    assert merge.returncode == 0, merge.stdout + merge.stderr
    assert on_feature in a.index() and on_main in a.index()
    assert "changed on the feature branch" in a.index()
    assert_index_is_a_reindex(a)


def test_init_is_idempotent_and_keeps_a_custom_driver(origin: Path) -> None:
    a = clone(origin, "a")
    assert "already set up" in a.mdmem("init")
    driver = git(a.path, "config", "merge.mdmem-index.driver").stdout.strip()
    assert driver == f"{DRIVER} %O %A %B %P"
    a.mdmem("init", "--driver-command", "mdmem merge-index")
    assert git(a.path, "config", "merge.mdmem-index.driver").stdout.strip() == (
        "mdmem merge-index %O %A %B %P"
    )
    attributes = (a.store.root / ".gitattributes").read_text()
    assert attributes.count("MEMORY.md merge=mdmem-index") == 1


def driver_of(repo: Clone) -> str:
    return git(repo.path, "config", "merge.mdmem-index.driver").stdout.strip()


def test_init_names_this_mdmem_by_its_absolute_path(origin: Path) -> None:
    """Git runs the driver with its own PATH: the default names this mdmem by absolute paths."""
    a = clone(origin, "a", init=False)
    a.mdmem("init")
    assert driver_of(a) == f"{this_driver()} %O %A %B %P"
    # The console script by absolute path, run with -E: not `python -m mdmem`, which
    # would import a clone's own mdmem/ folder (git runs the driver at the clone's top).
    assert " -E " in driver_of(a) and " -m mdmem" not in driver_of(a)


def test_init_replaces_an_old_bare_driver_and_keeps_a_working_custom_one(origin: Path) -> None:
    a = clone(origin, "a", init=False)
    git(a.path, "config", "merge.mdmem-index.driver", "mdmem merge-index %O %A %B")
    a.mdmem("init")
    assert driver_of(a) == f"{this_driver()} %O %A %B %P"
    custom = f"{shutil.which('env')} mdmem merge-index %O %A %B"
    git(a.path, "config", "merge.mdmem-index.driver", custom)
    CliRunner().invoke(app, ["--workspace", str(a.path), "init"])
    assert driver_of(a) == f"{custom} %P"  # kept; git now passes the path too


def test_doctor_finds_and_repairs_a_stale_or_missing_driver(origin: Path, tmp_path: Path) -> None:
    a = clone(origin, "a")
    gone = tmp_path / "uninstalled" / "python"
    git(a.path, "config", "merge.mdmem-index.driver", f"{gone} -m mdmem merge-index %O %A %B %P")
    doctor = CliRunner().invoke(app, ["--workspace", str(a.path), "doctor"])
    assert doctor.exit_code == 1
    assert f"stale: {gone} is not found" in doctor.output
    a.mdmem("doctor", "--fix")
    assert driver_of(a) == f"{this_driver()} %O %A %B %P"
    assert CliRunner().invoke(app, ["--workspace", str(a.path), "doctor"]).exit_code == 0
    # A clone whose config lost the driver (config is not committed).
    git(a.path, "config", "--unset", "merge.mdmem-index.driver")
    doctor = CliRunner().invoke(app, ["--workspace", str(a.path), "doctor"])
    assert doctor.exit_code == 1 and "not configured in this clone" in doctor.output
    a.mdmem("doctor", "--fix")
    assert driver_of(a) == f"{this_driver()} %O %A %B %P"


# -- the driver refuses what is not a MEMORY.md index --------------------------------

README = "".join(f"Line {n} of the project's README.\n" for n in range(1, 21))


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    }


@pytest.mark.parametrize(
    ("pattern", "overlap"),
    [pytest.param("*.md", True, id="*.md, the same line"), pytest.param("*", False, id="*")],
)
def test_a_committed_attribute_routing_every_file_to_the_driver_loses_nothing(
    origin: Path, pattern: str, overlap: bool
) -> None:
    """The attack of issue 21: `*.md merge=mdmem-index` once emptied README.md (20 -> 0 lines)."""
    a = clone(origin, "a")
    (a.path / "README.md").write_text(README, encoding="utf-8")
    (a.path / "logo.bin").write_bytes(b"\x89PNG\x00\x01base")
    (a.path / ".gitattributes").write_text(f"{pattern} merge=mdmem-index\n", encoding="utf-8")
    base_note = a.add("Base")
    a.commit("a README and a too-wide merge attribute")
    git(a.path, "checkout", "-q", "-b", "feature")
    theirs_line, ours_line = "Line 3 changed on feature.", "Line 3 changed on main."
    if not overlap:
        ours_line = "Line 18 changed on main."
    text = README.replace("Line 3 of the project's README.", theirs_line)
    (a.path / "README.md").write_text(text, encoding="utf-8")
    (a.path / "logo.bin").write_bytes(b"\x89PNG\x00\x01feature")
    on_feature = a.add("Feature note")
    a.commit("feature edits README")
    git(a.path, "checkout", "-q", "main")
    old = "Line 3 of the project's README." if overlap else "Line 18 of the project's README."
    (a.path / "README.md").write_text(README.replace(old, ours_line), encoding="utf-8")
    (a.path / "logo.bin").write_bytes(b"\x89PNG\x00\x01main")
    on_main = a.add("Main note")
    a.commit("main edits README")
    before = _files(a.path)

    merge = git(a.path, "merge", "--no-edit", "feature", check=False)

    assert merge.returncode != 0, merge.stdout + merge.stderr
    assert "CONFLICT" in merge.stdout and "README.md" in merge.stdout
    readme = (a.path / "README.md").read_text(encoding="utf-8")
    assert theirs_line in readme and ours_line in readme
    assert len(readme.splitlines()) >= 20
    assert ("<<<<<<<" in readme) is overlap
    # Nothing that had content before the merge was emptied.
    for name, data in before.items():
        if data and (a.path / name).exists():
            assert (a.path / name).read_bytes(), name
    # A binary file git cannot line-merge is left as ours, and in conflict too.
    assert (a.path / "logo.bin").read_bytes() == b"\x89PNG\x00\x01main"
    # The real index still merges note by note, in the same merge.
    unmerged = git(a.path, "diff", "--name-only", "--diff-filter=U").stdout.split()
    assert unmerged == ["README.md", "logo.bin"]
    names = [line.rsplit("(", 1)[1][:-1] for line in a.index().splitlines()]
    assert names == sorted([base_note, on_feature, on_main])


def test_init_adds_the_path_to_an_older_driver_line(origin: Path) -> None:
    a = clone(origin, "a")
    git(a.path, "config", "merge.mdmem-index.driver", f"{DRIVER} %O %A %B")
    a.mdmem("init")
    assert git(a.path, "config", "merge.mdmem-index.driver").stdout.strip() == (
        f"{DRIVER} %O %A %B %P"
    )
