"""Release machinery and install words: CI matches pyproject, one version, hints that work.

mdmem is not on the package index, so every install hint in the docs, the code
and the plugin installs from git (``mdmem._install``); the CI workflow tests every
Python that the classifiers name, and publishes on a tag with trusted publishing.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import mdmem
from conftest import ROOT, SRC, python_env
from mdmem._install import EXTRAS, FROM_CLONE, INSTALL_HINT, INSTALL_LINE, REPOSITORY, extra_hint

WORKFLOW = ROOT / ".github" / "workflows" / "ci.yml"
PYPROJECT = (ROOT / "pyproject.toml").read_text(encoding="utf-8")


def workflow() -> dict[object, object]:
    data = yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def classifier_pythons() -> list[str]:
    return re.findall(r'"Programming Language :: Python :: (3\.\d+)"', PYPROJECT)


def test_the_workflow_tests_every_supported_python_on_linux_and_macos() -> None:
    jobs = workflow()["jobs"]
    assert isinstance(jobs, dict)
    matrix = jobs["test"]["strategy"]["matrix"]
    pythons = classifier_pythons()
    assert pythons == ["3.10", "3.11", "3.12", "3.13"]
    assert matrix["python-version"] == pythons
    [minimum] = re.findall(r'^requires-python = ">=([\d.]+)"$', PYPROJECT, re.MULTILINE)
    assert minimum == pythons[0]
    assert set(matrix["os"]) == {"ubuntu-latest", "macos-latest"}
    # POSIX only: no Windows runner, and the classifiers say so.
    assert not any("windows" in os_ for os_ in matrix["os"])
    assert '"Operating System :: POSIX"' in PYPROJECT
    assert "Operating System :: Microsoft" not in PYPROJECT


def test_the_workflow_builds_and_publishes_on_a_tag_without_a_token() -> None:
    data = workflow()
    # PyYAML reads the bare key `on` as True (YAML 1.1).
    triggers = data.get("on", data.get(True))
    assert isinstance(triggers, dict) and "v*" in triggers["push"]["tags"]
    jobs = data["jobs"]
    assert isinstance(jobs, dict)
    build = " ".join(str(step.get("run", "")) for step in jobs["build"]["steps"])
    assert "python -m build" in build and "tests/test_plugin.py" in build
    publish = jobs["publish"]
    assert publish["if"] == "startsWith(github.ref, 'refs/tags/v')"
    assert set(publish["needs"]) == {"test", "build"}
    assert publish["permissions"] == {"id-token": "write"}
    uses = [step.get("uses", "") for step in publish["steps"]]
    assert "pypa/gh-action-pypi-publish@release/v1" in uses
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "secrets." not in text and "password" not in text


def test_the_version_is_written_once() -> None:
    from importlib.metadata import version

    assert re.search(r'^dynamic = \["version"\]$', PYPROJECT, re.MULTILINE)
    assert not re.search(r"^version = ", PYPROJECT, re.MULTILINE)
    assert 'path = "src/mdmem/__init__.py"' in PYPROJECT
    assert version("mdmem") == mdmem.__version__
    proc = subprocess.run(
        [sys.executable, "-m", "mdmem", "--version"],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert proc.stdout.strip() == f"mdmem {mdmem.__version__}"
    manifest = json.loads((ROOT / "plugins/mdmem/.claude-plugin/plugin.json").read_text())
    market = json.loads((ROOT / ".claude-plugin/marketplace.json").read_text())
    assert manifest["version"] == market["plugins"][0]["version"] == mdmem.__version__
    changelog = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert "## Unreleased" in changelog or f"## {mdmem.__version__}" in changelog


# `pip install mdmem`, `pipx install "mdmem[mcp]"`, `uv tool install mdmem`: from the index.
FROM_INDEX = re.compile(
    r"(?:pip|pipx|uv tool|uv pip) install (?:--\S+ )*['\"]?mdmem(?:\[[\w,]+\])?(?! @ git\+)['\"\s`]"
)


def hint_files() -> list[Path]:
    files = [ROOT / "README.md", *(ROOT / "docs").rglob("*.md"), *SRC.rglob("*.py")]
    files += [p for p in (ROOT / "plugins").rglob("*") if p.is_file()]
    return [*files, ROOT / ".claude-plugin" / "marketplace.json"]


@pytest.mark.parametrize("path", hint_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_hint_installs_mdmem_from_the_package_index(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    assert not FROM_INDEX.findall(text), f"{path}: no release exists yet; install from git"
    for url in re.findall(r"git\+([^{\s]+?)['\"`)]", text):
        assert url == REPOSITORY, f"{path}: git+{url} (the README defines {REPOSITORY})"


def test_the_readme_defines_the_placeholder_once_and_installs_from_git() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count(f"**`{REPOSITORY}`**") == 1
    assert INSTALL_LINE in readme and FROM_CLONE in readme
    assert f"mdmem[{','.join(EXTRAS)}]" in INSTALL_LINE and INSTALL_LINE in INSTALL_HINT
    assert EXTRAS == ("mcp", "dictionary")  # the plugin's MCP server; CC-CEDICT for recall


def test_the_launcher_repeats_the_install_hint() -> None:
    launcher = (ROOT / "plugins/mdmem/scripts/mdmem-run").read_text(encoding="utf-8")
    [line] = re.findall(r'^INSTALL="(.*)"$', launcher, re.MULTILINE)
    assert line == INSTALL_HINT


def test_an_extra_hint_keeps_the_plugins_mcp_extra() -> None:
    assert extra_hint("mcp") == INSTALL_HINT
    assert extra_hint("dictionary") == INSTALL_HINT
    assert f"'mdmem[mcp,dictionary,ui] @ git+{REPOSITORY}'" in extra_hint("ui")
    assert "pip install '.[ui]'" in extra_hint("ui")


@pytest.mark.parametrize(
    "code", ["import mdmem", "from mdmem.__main__ import main; main(['--version'])"]
)
def test_without_fcntl_import_says_posix_only_in_one_line(code: str) -> None:
    """Windows has no fcntl: simulated by a None in sys.modules, which makes its import fail."""
    proc = subprocess.run(
        [sys.executable, "-c", f"import sys; sys.modules['fcntl'] = None; {code}"],
        capture_output=True,
        text=True,
        env=python_env(),
        timeout=60,
    )
    assert proc.returncode == 1
    last = proc.stderr.strip().splitlines()[-1]
    assert last == (
        "ImportError: mdmem runs on POSIX systems only (Linux, macOS, WSL): "
        "this Python has no fcntl module"
    )


def test_without_the_mcp_extra_the_server_says_how_to_install_it() -> None:
    """What the plugin's /mdmem:doctor shows on a base install (mcp simulated missing)."""
    code = (
        "import sys; sys.modules['mcp'] = None; from mdmem.__main__ import main; "
        "sys.exit(main(['mcp', '--check']))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=python_env(), timeout=60
    )
    assert proc.returncode == 1 and proc.stdout == ""
    [line] = proc.stderr.splitlines()
    assert line.startswith("mdmem: error: the mdmem MCP server needs mdmem's mcp extra")
    assert line.endswith(f"install mdmem with it: {INSTALL_HINT}")
