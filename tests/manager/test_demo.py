"""The README's main job: `mdmem demo` runs the bundled example offline, end to end."""

from __future__ import annotations

import os
from pathlib import Path

from typer.testing import CliRunner

from mdmem import Level, Store
from mdmem.cli import app
from mdmem.manager import demo
from mdmem.store.index import PREAMBLE


def test_demo_extracts_the_example_turn_into_a_scratch_workspace(tmp_path: Path) -> None:
    target = tmp_path / "scratch"
    result = CliRunner().invoke(app, ["demo", "--dir", str(target)])
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Scratch workspace: {target}" in out
    assert "Secrets in the turn: 2; found on disk afterwards: 0" in out
    assert out.count("  create project: ") == 4
    block = out.split("The prompt block a new session starts with:\n\n", 1)[1]
    assert block.startswith(f"{PREAMBLE}\n\n## Project Memory\n")
    project = Store(target / ".PseudoClaude" / "memory", Level.PROJECT)
    assert block.strip() == f"{PREAMBLE}\n\n## Project Memory\n" + project.load_index().strip()
    assert len(project.entries()) == 7 + 4  # the example store, and what the turn added
    assert not (Path(os.environ["HOME"]) / ".PseudoClaude").exists()  # the real home is left alone


def test_demo_refuses_a_directory_that_already_has_a_store(tmp_path: Path) -> None:
    demo.run(str(tmp_path / "once"))
    result = CliRunner().invoke(app, ["demo", "--dir", str(tmp_path / "once")])
    assert result.exit_code == 1
    assert "already exists" in result.stderr


def test_the_example_files_are_found() -> None:
    store, turn = demo.example_files()
    assert os.path.isfile(os.path.join(store, "MEMORY.md"))
    assert turn.endswith("turn.json")
