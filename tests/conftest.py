"""Shared fixtures: every test runs with its stores, home and API settings inside tmp_path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests touch real files; keep them deterministic and bounded on a 2-core machine.
settings.register_profile(
    "mdmem",
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    derandomize=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "mdmem"))

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"

pytest_plugins = ["fake_anthropic", "fake_openai"]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test touches the real home, the real user store or a real API."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MDMEM_USER_DIR", str(home / ".PseudoClaude" / "memory"))
    for name in (
        "MDMEM_WORKSPACE",
        "MDMEM_MODEL",
        "MDMEM_PROVIDER",
        "MDMEM_REDACT_PATTERNS",
        "MDMEM_REVIEW",
        "MDMEM_LOCK_TIMEOUT",
        "MDMEM_QUIET",
        "MDMEM_VERBOSE",
        "MDMEM_STREAM",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "VISUAL",
        "EDITOR",
        "MDMEM_NESTED",
        "MDMEM_DISABLE",
        "MDMEM_SESSION_BUDGET",
        "MDMEM_DAILY_TOKENS",
        "MDMEM_TURN_TOKENS",
        "MDMEM_OPENAI_BASE_URL",
        "MDMEM_OPENAI_MODE",
        "MDMEM_CLAUDE_TIMEOUT",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(name, raising=False)
    # Searches with the semantic extra would start background embedders (one model load
    # each): only the tests of the embedder let them (mdmem.recall.embedder).
    monkeypatch.setenv("MDMEM_EMBED", "off")
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
    from mdmem.store import _catalog

    listed: list[str] = []
    real = _catalog.Scan

    class Counting(real):  # type: ignore[misc, valid-type]
        def __init__(self, path: str) -> None:
            listed.append(path)
            super().__init__(path)

    monkeypatch.setattr(_catalog, "Scan", Counting)
    return listed


def state(root: Path | str) -> Path:
    """mdmem's state folder for the store at ``root`` (outside the repository)."""
    from mdmem.store.paths import state_dir

    return Path(state_dir(str(root)))
