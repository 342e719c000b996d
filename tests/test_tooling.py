"""The house tooling holds on the whole tree: ruff (lint and format) and mypy --strict on src/."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True, timeout=300
    )


def test_ruff_lint() -> None:
    proc = run("ruff", "check", "src", "tests", "benchmarks", "scripts", "examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_ruff_format() -> None:
    proc = run("ruff", "format", "--check", "src", "tests", "benchmarks", "scripts", "examples")
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_mypy_strict() -> None:
    proc = run("mypy")  # files and strictness come from pyproject.toml
    assert proc.returncode == 0, proc.stdout + proc.stderr
