"""Shared fixtures: every test runs with its stores, home and API settings inside tmp_path."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import HealthCheck, settings

if TYPE_CHECKING:
    from builders import Page
    from mdmem import Store

# Property tests touch real files; keep them deterministic and bounded on a 2-core machine.
settings.register_profile(
    "mdmem",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mdmem"))

#: Where things are, for test files in any folder below ``tests/`` (never ``__file__`` there).
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SRC = ROOT / "src"
#: Shared test data: recorded transcripts and model answers, labelled pairs, golden files.
FIXTURES = TESTS / "fixtures"
DATA = TESTS / "data"
GOLDEN = TESTS / "golden"
CLAUDE_CODE_FIXTURES = FIXTURES / "claude_code"
#: The example store shipped beside the code (``mdmem demo`` and the tutorial use it).
EXAMPLE = ROOT / ".PseudoClaude.example"

pytest_plugins = ["fake_anthropic", "fake_openai"]


#: Every variable with one of these prefixes is cleared before each test: a developer's own
#: settings (a state folder, a model, an API key, an XDG folder) must never reach a test,
#: nor a git hook's (``GIT_DIR``, ``GIT_INDEX_FILE``: git in a test would act on this checkout).
CLEARED_PREFIXES = ("MDMEM_", "ANTHROPIC_", "OPENAI_", "XDG_", "GIT_")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """No test touches the real home, the real state folder, the user store or a real API.

    The environment is cleared by prefix (httpx's ``clean_environ``), then pointed into
    ``tmp_path``: the home, the user store, mdmem's state folder and this process's
    temporary folder (so state machines that make their own folders with ``tempfile``
    stay inside too). The fixture has its own ``MonkeyPatch``, not the test's: a test that
    calls ``monkeypatch.undo()`` undoes what it set itself, never the isolation.
    """
    monkeypatch = pytest.MonkeyPatch()
    request.addfinalizer(monkeypatch.undo)
    for name in list(os.environ):
        if name.startswith(CLEARED_PREFIXES) or name in ("VISUAL", "EDITOR"):
            monkeypatch.delenv(name)
    # All under one folder (tests that list tmp_path leave "home" out): the state folder is
    # where it would be by default for this home, but named, so nothing else can move it.
    home = tmp_path / "home"
    scratch = home / "tmp"
    scratch.mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MDMEM_USER_DIR", str(home / ".PseudoClaude" / "memory"))
    monkeypatch.setenv("MDMEM_STATE_DIR", str(home / ".local" / "state" / "mdmem"))
    # Git's global config is the home's (empty); its system config (/etc/gitconfig) is not read.
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    # In this process only: a child's TMPDIR stays, since Chromium puts its singleton
    # socket there and a socket path under a long test name passes AF_UNIX's 108 bytes.
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    # Searches with the semantic extra would start background embedders (one model load
    # each): only the tests of the embedder let them (mdmem.recall.embedder).
    monkeypatch.setenv("MDMEM_EMBED", "off")
    # The model loads in the process that asks, not in a resident embedder per test (each
    # would hold the model for minutes): only the resident embedder's own tests start one.
    monkeypatch.setenv("MDMEM_EMBEDDER", "in-process")
    # No watcher per test either (each would outlive its test by an hour): only the
    # watcher's own tests start one (store/watcher.py).
    monkeypatch.setenv("MDMEM_WATCHER", "off")
    # Nor a prompt server per test (each prompt hook would start one): only its own tests
    # and the attack suite's start one (integrations/prompt_server.py).
    monkeypatch.setenv("MDMEM_PROMPT_SERVER", "off")
    # CC-CEDICT (the dictionary extra) takes seconds to read into each state folder: the
    # glossary here; the dictionary's tests name a small file of their own.
    monkeypatch.setenv("MDMEM_DICTIONARY", "off")
    # A real `claude` on the machine must never be chosen, nor run, by a test.
    monkeypatch.setenv("MDMEM_CLAUDE", str(tmp_path / "no-claude-here"))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """A fresh workspace: a directory marked by ``.git``, with no store yet."""
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    return ws


def python_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python process that imports mdmem from this checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(SRC) + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


PYTHON = sys.executable


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every full listing of a store (``_catalog.Scan``) from now on, by store path."""
    from mdmem.store import _catalog, catalog

    listed: list[str] = []
    real = _catalog.Scan

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: str) -> None:
            listed.append(path)
            super().__init__(path)

    monkeypatch.setattr(_catalog, "Scan", Counting)
    monkeypatch.setattr(catalog, "Scan", Counting)  # the face the floors above use
    return listed


def state(root: Path | str) -> Path:
    """mdmem's state folder for the store at ``root`` (outside the repository)."""
    from mdmem.store.paths import state_dir

    return Path(state_dir(str(root)))


@pytest.fixture
def store(tmp_path: Path) -> Store:
    """An empty project store at ``tmp_path/mem``; a test file may override it."""
    from builders import new_store

    return new_store(tmp_path / "mem")


@pytest.fixture
def page(workspace: Path) -> Page:
    """A logged-in client of the web page over ``workspace``'s stores (``builders.Page``)."""
    from builders import Page, ui_settings
    from mdmem.store.workspace import resolve
    from mdmem.ui.model import Stores

    ws, project, user = resolve(str(workspace), None)
    return Page(Stores(ws, project, user), ui_settings())


#: The browser of the web page's tests (Debian's; Playwright's own download is never used).
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="session")
def chromium() -> str:
    """The path of Debian's Chromium, installed first if missing and possible, for every
    browser test (``tests/ui/``): skipped, saying why, only where it cannot be installed."""
    import shutil
    import subprocess

    if not os.path.exists(CHROMIUM):
        if not hasattr(os, "geteuid") or os.geteuid() != 0 or shutil.which("apt-get") is None:
            pytest.skip(
                f"{CHROMIUM} is missing and cannot be installed here (needs root and apt-get): "
                "run scripts/install-browser.sh as root to run the browser tests"
            )
        proc = subprocess.run(
            ["sh", str(ROOT / "scripts" / "install-browser.sh")],
            capture_output=True,
            text=True,
            timeout=840,
            check=False,
        )
        if proc.returncode != 0 or not os.path.exists(CHROMIUM):
            pytest.fail(f"scripts/install-browser.sh failed ({proc.returncode}):\n{proc.stderr}")
    return CHROMIUM
