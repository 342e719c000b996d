"""Layer boundaries and the public API, checked by reading the source and by running it."""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
from pathlib import Path

import pytest

import mdmem
from conftest import PYTHON, ROOT, SRC, python_env

PACKAGE = SRC / "mdmem"
# Where each heavy or outside dependency may be imported (module paths relative to src/mdmem).
ALLOWED = {
    "typer": {"cli_base.py", "cli_editor.py", "cli_notes.py", "cli_agents.py"},
    "anthropic": {"providers/anthropic.py", "integrations/anthropic.py"},
    "mcp": {"mcp_server.py"},
    "frontmatter": {"note.py"},
    "yaml": {"note.py"},
    "filelock": {"store.py"},
}
CLI_ONLY = {
    "cli.py",
    "cli_base.py",
    "cli_editor.py",
    "cli_notes.py",
    "cli_agents.py",
    "__main__.py",
    "_fastpath.py",
}


def imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


MODULES = sorted(p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("module", MODULES)
def test_dependencies_stay_in_their_layer(module: str) -> None:
    used = imports(PACKAGE / module)
    for dependency, homes in ALLOWED.items():
        if dependency in used:
            assert module in homes, f"{module} imports {dependency}; only {sorted(homes)} may"


@pytest.mark.parametrize("module", [m for m in MODULES if m not in CLI_ONLY])
def test_library_never_prints_or_exits(module: str) -> None:
    tree = ast.parse((PACKAGE / module).read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in ("print", "exit", "quit"), f"{module}:{node.lineno}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            target = ast.unparse(node.func)
            assert target not in ("sys.exit", "os._exit"), f"{module}:{node.lineno}"


EXPECTED_API = [
    "Applied",
    "ApplyResult",
    "IndexEntry",
    "InvalidNote",
    "InvalidOperation",
    "InvalidPath",
    "Level",
    "LockTimeout",
    "Manager",
    "MdmemError",
    "Note",
    "NoteExists",
    "NoteNotFound",
    "NoteType",
    "Operation",
    "Problem",
    "ProviderError",
    "ReindexReport",
    "Rejected",
    "Store",
    "StoreError",
    "__version__",
]


def test_public_api_is_declared_once_and_sorted() -> None:
    assert mdmem.__all__ == sorted(mdmem.__all__) == EXPECTED_API
    for name in mdmem.__all__:
        assert getattr(mdmem, name) is not None
    assert issubclass(mdmem.LockTimeout, TimeoutError)
    assert issubclass(mdmem.InvalidPath, ValueError)
    from mdmem import errors

    for name in errors.__all__:
        assert name in mdmem.__all__
        assert issubclass(getattr(mdmem, name), mdmem.MdmemError)


def test_every_public_name_has_a_docstring() -> None:
    for name in mdmem.__all__:
        obj = getattr(mdmem, name)
        if isinstance(obj, type):
            assert obj.__doc__ and obj.__doc__.strip(), name


def test_errors_pickle_with_their_fields() -> None:
    import pickle

    error = mdmem.LockTimeout("/x/store", 3.0)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.store == "/x/store"


@pytest.fixture
def example_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(ROOT / ".PseudoClaude.example", ws / ".PseudoClaude")
    return ws


PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['mdmem'] + sys.argv[1:]\n"
    "try:\n"
    "    runpy.run_module('mdmem', run_name='__main__')\n"
    "except SystemExit:\n"
    "    pass\n"
    "heavy = sorted(m for m in ('anthropic', 'typer', 'httpx2', 'mcp', 'yaml', 'frontmatter')"
    " if m in sys.modules)\n"
    "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
)


def run_probe(ws: Path, *args: str) -> tuple[str, list[str]]:
    proc = subprocess.run(
        [PYTHON, "-c", PROBE, "--workspace", str(ws), *args],
        env=python_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    heavy_line = next(line for line in proc.stderr.splitlines() if line.startswith("HEAVY="))
    return proc.stdout, [m for m in heavy_line[6:].split(",") if m]


def test_mdmem_index_imports_nothing_heavy(example_workspace: Path) -> None:
    out, heavy = run_probe(example_workspace, "index")
    assert out.startswith("## Project Memory\n")
    assert "anthropic" not in heavy and "typer" not in heavy
    out, heavy = run_probe(example_workspace, "index")  # settled: not even YAML
    assert heavy == []


@pytest.mark.parametrize("args", [["list"], ["index", "--json"], ["show", "MEMORY.md"]])
def test_everyday_commands_do_not_import_anthropic(
    example_workspace: Path, args: list[str]
) -> None:
    proc = subprocess.run(
        [PYTHON, "-c", PROBE, "--workspace", str(example_workspace), *args],
        env=python_env(),
        capture_output=True,
        text=True,
    )
    heavy_line = next(line for line in proc.stderr.splitlines() if line.startswith("HEAVY="))
    assert "anthropic" not in heavy_line


def test_fast_path_and_typer_print_the_same(example_workspace: Path) -> None:
    from mdmem.cli import run

    for args in (
        ["index"],
        ["index", "--json"],
        ["index", "--level", "user"],
        ["index", "--level=project"],
    ):
        fast = subprocess.run(
            [PYTHON, "-m", "mdmem", "--workspace", str(example_workspace), *args],
            env=python_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        slow = subprocess.run(
            [
                PYTHON,
                "-c",
                "import sys; from mdmem.cli import run; sys.exit(run(sys.argv[1:]))",
                "--workspace",
                str(example_workspace),
                *args,
            ],
            env=python_env(),
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        assert fast == slow, args
        if "--json" in args:
            assert json.loads(fast)["block"].startswith("## Project Memory")
    assert callable(run)
