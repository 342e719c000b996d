"""The sdist is complete: built offline with the build backend, its own plugin and docs tests pass.

``python -m build --sdist`` would need the ``build`` package and an isolated
environment from the network; hatchling's builder (the project's build backend,
in the test extra) makes the same archive in process, offline.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import pytest

import mdmem
from conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

# What the suite reads besides src/ and tests/: the plugin tests, the docs tests, the release tests.
NEEDED = [
    ".claude-plugin/marketplace.json",
    "plugins/mdmem/.claude-plugin/plugin.json",
    "plugins/mdmem/hooks/hooks.json",
    "plugins/mdmem/.mcp.json",
    "plugins/mdmem/scripts/mdmem-run",
    "plugins/mdmem/commands/doctor.md",
    "scripts/gen_cli_docs.py",
    ".github/workflows/ci.yml",
    ".ci/run",
    "CHANGELOG.md",
    "README.md",
    "LICENSE",
    "docs/cli.md",
    "examples/turn.json",
    "tests/conftest.py",
    "src/mdmem/__init__.py",
]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    hatchling = pytest.importorskip("hatchling.builders.sdist", reason="needs the test extra")
    out = tmp_path_factory.mktemp("dist")
    # The backend's scratch file goes to tempfile's folder: this module-wide fixture runs
    # before the autouse one points it into tmp_path, so point it here.
    with pytest.MonkeyPatch.context() as m:
        m.setattr(tempfile, "tempdir", str(out))
        [built] = hatchling.SdistBuilder(str(ROOT)).build(directory=str(out))
    return Path(built)


def test_the_sdist_holds_what_the_tests_read(sdist: Path) -> None:
    assert sdist.name == f"mdmem-{mdmem.__version__}.tar.gz"
    top = f"mdmem-{mdmem.__version__}/"
    with tarfile.open(sdist) as archive:
        members = {m.name.removeprefix(top): m for m in archive.getmembers()}
    missing = [name for name in NEEDED if name not in members]
    assert not missing, f"not in the sdist: {missing} (pyproject's sdist include)"
    assert members["plugins/mdmem/scripts/mdmem-run"].mode & 0o111  # still executable
    assert not [n for n in members if n.startswith((".venv/", ".git/")) or "__pycache__" in n]


def test_the_unpacked_sdist_passes_its_plugin_docs_and_release_tests(
    sdist: Path, tmp_path: Path
) -> None:
    with tarfile.open(sdist) as archive:
        if hasattr(tarfile, "data_filter"):
            archive.extractall(tmp_path, filter="data")
        else:  # Python < 3.10.12 / 3.11.4; the archive is the one just built
            archive.extractall(tmp_path)
    unpacked = tmp_path / f"mdmem-{mdmem.__version__}"
    tests = ["tests/test_plugin.py", "tests/test_docs.py", "tests/test_release.py"]
    # The release file's interpreter-level checks (no fcntl, no mcp) do not read the sdist.
    only = ["-k", "not posix_only and not mcp_extra"]
    # In this process alone (-n 0): the suite's own workers already share the machine.
    pytest_args = ["-q", "-x", "-p", "no:cacheprovider", "-n", "0", *only, *tests]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args],
        cwd=unpacked,
        # The sdist's own mdmem first, so its files are the ones under test.
        env={**os.environ, "PYTHONPATH": str(unpacked / "src")},
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]
