"""`mdmem add --title T TEXT` answers without typer and says what the full CLI says (issue 23)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builders import modules_loaded_by
from conftest import PYTHON, python_env
from mdmem import Level, Store

SECRET = "sk-ant-api03-" + "a" * 40

CASES = [
    ["add", "--title", "Build", "Run make test before pushing."],
    ["add", "--title=Deploy", "--summary", "How we deploy.", "Tag, then push the tag."],
    ["add", "--level", "user", "--type", "correction_feedback", "--title", "Tabs", "Use tabs."],
    ["add", "--title", "From stdin", "-"],
    ["add", "--title", "A key", f"The key is {SECRET} for now."],
    ["add", "--title", f"Key {SECRET} in the title", "The title holds it."],
    ["add", "--title", "Key in the summary", "--summary", f"Uses {SECRET}.", "Body."],
    ["add", "--title", "Private", "Before <private>a secret 4111 1111 1111 1111</private> after."],
    ["add", "--title", "", "An empty title is refused."],
    ["add", "--title", "Dash dash", "--", "--not-an-option"],
]


def _ws(tmp_path: Path, name: str) -> tuple[Path, Path]:
    ws = tmp_path / name
    (ws / ".git").mkdir(parents=True)
    return ws, tmp_path / f"{name}-user"


def _run(
    command: list[str], args: list[str], ws: Path, user: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "--workspace", str(ws), "--user-dir", str(user), *args],
        env=python_env(MDMEM_SEMANTIC="off"),
        input="Read from stdin.\n",
        capture_output=True,
        text=True,
        timeout=60,
    )


def _notes(ws: Path, user: Path) -> list[tuple[str, str, str, str]]:
    out = []
    for root, level in ((ws / ".PseudoClaude" / "memory", Level.PROJECT), (user, Level.USER)):
        if root.is_dir():
            out += [(n.filename, n.type.value, n.title, n.body) for n in Store(root, level).notes()]
    return out


@pytest.mark.parametrize("args", CASES, ids=lambda a: a[2] if len(a) > 2 else a[0])
def test_add_fast_path_and_typer_do_the_same(tmp_path: Path, args: list[str]) -> None:
    fast_ws, fast_user = _ws(tmp_path, "fast")
    slow_ws, slow_user = _ws(tmp_path, "slow")
    slow_cli = [PYTHON, "-c", "import sys; from mdmem.cli import run; sys.exit(run(sys.argv[1:]))"]
    fast = _run([PYTHON, "-m", "mdmem"], args, fast_ws, fast_user)
    slow = _run(slow_cli, args, slow_ws, slow_user)
    assert fast.returncode == 0 or args[2] == "", fast.stderr  # only the empty title fails
    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        slow.stderr.replace(str(slow_ws), str(fast_ws)),
    )
    assert _notes(fast_ws, fast_user) == _notes(slow_ws, slow_user)
    if any(SECRET in a or "<private>" in a for a in args):
        assert "redacted from your text" in fast.stderr
    # Nothing private reached a file, anywhere: the notes, MEMORY.md, the catalog, the
    # ledger, the history (the state folder is inside tmp_path too).
    for path in tmp_path.rglob("*"):
        name = str(path.relative_to(tmp_path))
        assert SECRET not in name and "4111" not in name
        if path.is_file():
            data = path.read_bytes()
            assert SECRET.encode() not in data and b"4111 1111" not in data, path


def test_add_imports_neither_typer_nor_dataclasses(tmp_path: Path) -> None:
    ws, user = _ws(tmp_path, "ws")
    add = ["add", "--title", "Quick", "A quick note."]
    proc, modules = modules_loaded_by(
        ["--workspace", str(ws), "--user-dir", str(user), *add],
        env=python_env(MDMEM_SEMANTIC="off"),
    )
    assert "typer" not in modules and "anthropic" not in modules
    # dataclasses imports inspect: ~8 ms of a ~50 ms command (mdmem/_record.py)
    assert "dataclasses" not in modules and "inspect" not in modules
    assert proc.stdout == "project_knowledge_quick.md\n"
    assert (ws / ".PseudoClaude" / "memory" / "project_knowledge_quick.md").is_file()


def test_add_outside_a_project_still_explains_init(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    bare.mkdir()
    proc = subprocess.run(
        [PYTHON, "-m", "mdmem", "add", "--title", "Lost", "Where does it go?"],
        env=python_env(MDMEM_SEMANTIC="off"),
        cwd=bare,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "mdmem init" in proc.stderr
    assert not (bare / ".PseudoClaude").exists()
