"""`mdmem rm NAME` answers without typer and says and does what the full CLI does (issue 23)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from builders import add_note, modules_loaded_by
from conftest import PYTHON, python_env
from mdmem import Level, Store

CASES = [
    ["rm", "project_knowledge_build.md"],
    ["rm", "user_preference_tabs.md"],
    ["rm", "--level", "user", "user_preference_tabs.md"],
    ["rm", "--level=project", "project_knowledge_build.md"],
    ["-q", "rm", "project_knowledge_build.md"],
    ["rm", "--level", "user", "project_knowledge_build.md"],  # not in that store
    ["rm", "project_knowledge_missing.md"],
    ["rm", "../outside.md"],
    ["rm", "--", "project_knowledge_build.md"],
]


def _ws(tmp_path: Path, name: str) -> tuple[Path, Path]:
    ws = tmp_path / name
    (ws / ".git").mkdir(parents=True)
    user = tmp_path / f"{name}-user"
    add_note(Store(ws / ".PseudoClaude" / "memory", Level.PROJECT), "Build", "Run make test.")
    add_note(Store(user, Level.USER), "Tabs", "Use tabs.")
    return ws, user


def _run(
    command: list[str], args: list[str], ws: Path, user: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*command, "--workspace", str(ws), "--user-dir", str(user), *args],
        env=python_env(MDMEM_SEMANTIC="off"),
        capture_output=True,
        text=True,
        timeout=60,
    )


def _state(ws: Path, user: Path) -> list[tuple[str, list[str], list[str], str]]:
    out = []
    for root, level in ((ws / ".PseudoClaude" / "memory", Level.PROJECT), (user, Level.USER)):
        store = Store(root, level)
        notes = sorted(n.filename for n in store.notes())
        trash = [t.filename for t in store.trash()]
        out.append((level.value, notes, trash, store.load_index()))
    return out


@pytest.mark.parametrize("args", CASES, ids=lambda a: " ".join(a))
def test_rm_fast_path_and_typer_do_the_same(tmp_path: Path, args: list[str]) -> None:
    fast_ws, fast_user = _ws(tmp_path, "fast")
    slow_ws, slow_user = _ws(tmp_path, "slow")
    slow_cli = [PYTHON, "-c", "import sys; from mdmem.cli import run; sys.exit(run(sys.argv[1:]))"]
    fast = _run([PYTHON, "-m", "mdmem"], args, fast_ws, fast_user)
    slow = _run(slow_cli, args, slow_ws, slow_user)

    def same(text: str) -> str:
        return text.replace(str(slow_ws), str(fast_ws)).replace(str(slow_user), str(fast_user))

    assert (fast.returncode, fast.stdout, fast.stderr) == (
        slow.returncode,
        slow.stdout,
        same(slow.stderr),
    )
    assert _state(fast_ws, fast_user) == _state(slow_ws, slow_user)


def test_rm_imports_no_typer(tmp_path: Path) -> None:
    ws, user = _ws(tmp_path, "ws")
    proc, modules = modules_loaded_by(
        ["--workspace", str(ws), "--user-dir", str(user), "rm", "project_knowledge_build.md"],
        env=python_env(MDMEM_SEMANTIC="off"),
    )
    assert "typer" not in modules, proc.stderr
    assert proc.stdout == (
        "moved project_knowledge_build.md to the trash;"
        " `mdmem restore project_knowledge_build.md` brings it back\n"
    )
    assert not (ws / ".PseudoClaude" / "memory" / "project_knowledge_build.md").exists()
    store = Store(ws / ".PseudoClaude" / "memory", Level.PROJECT)
    assert [t.filename for t in store.trash()] == ["project_knowledge_build.md"]
