"""The demo behind ``mdmem demo``: the bundled example, with no API key and no network.

It copies the example project store into a scratch workspace, runs the
bundled example turn through a Manager with the offline provider (the whole
pipeline: journal, redaction, extraction, validation, atomic writes, index),
and returns what happened so the CLI can show it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from importlib import resources

from mdmem.extract.providers.offline import OfflineProvider
from mdmem.manager.manager import Manager, TurnResult
from mdmem.privacy import Redactor
from mdmem.store.paths import project_root

__all__ = ["DemoResult", "example_files", "remove", "run"]


@dataclass(frozen=True)
class DemoResult:
    """Where the demo ran, what the turn produced, and the prompt block afterwards."""

    workspace: str
    user_dir: str
    result: TurnResult
    block: str
    secrets: int
    """How many distinctive secrets (12 characters or more) the example turn carries."""
    secrets_on_disk: int
    """How many of them are in any file under the scratch workspace afterwards (0)."""


def example_files() -> tuple[str, str]:
    """The bundled example store and example turn (installed package data, or this checkout).

    Raises:
        FileNotFoundError: neither is available.
    """
    packaged = resources.files("mdmem").joinpath("_example")
    store = packaged.joinpath(".PseudoClaude").joinpath("memory")
    turn = packaged.joinpath("turn.json")
    if store.is_dir() and turn.is_file():
        return str(store), str(turn)
    # An editable install or a source checkout: the files are at the repository root.
    here = os.path.abspath(__file__)  # src/mdmem/manager/demo.py
    root = here.rsplit(os.sep, 4)[0]
    store_path = os.path.join(root, ".PseudoClaude.example", "memory")
    turn_path = os.path.join(root, "examples", "turn.json")
    if os.path.isdir(store_path) and os.path.isfile(turn_path):
        return store_path, turn_path
    raise FileNotFoundError("the bundled example is missing from this installation")


def run(directory: str | None = None) -> DemoResult:
    """Run the example turn into a scratch workspace (a new temporary one by default).

    Raises:
        FileNotFoundError: the bundled example is missing.
        FileExistsError: ``directory`` already holds a project store.
    """
    store, turn_file = example_files()
    workspace = directory or tempfile.mkdtemp(prefix="mdmem-demo-")
    target = project_root(workspace)
    if os.path.exists(target):
        raise FileExistsError(f"{target} already exists; pick an empty directory")
    shutil.copytree(store, target)
    os.makedirs(os.path.join(workspace, ".git"), exist_ok=True)  # mark it as a workspace
    user_dir = os.path.join(workspace, "user-memory")
    with open(turn_file, encoding="utf-8") as f:
        messages = json.load(f)
    with Manager(workspace, user_dir=user_dir, provider=OfflineProvider()) as manager:
        result = manager.update_async(messages).result(timeout=60)
        block = manager.index
    # Only distinctive secrets can be searched for: a short one ("shop", the
    # example database password) is a word the workspace uses everywhere.
    redactor = Redactor()
    secrets = {
        text[start:end]
        for text in _strings(messages)
        for _, start, end in redactor.findings(text)
        if end - start >= 12
    }
    on_disk = sum(1 for secret in secrets if _anywhere(workspace, secret.encode()))
    return DemoResult(workspace, user_dir, result, block, len(secrets), on_disk)


def remove(outcome: DemoResult) -> None:
    """Delete a demo's scratch workspace and the state mdmem kept for its two stores.

    The state lives outside the workspace (mdmem's private state folder, keyed by
    each store's path), so deleting the workspace alone would leave it behind.
    """
    from mdmem.store.paths import state_dir

    for root in (project_root(outcome.workspace), outcome.user_dir):
        shutil.rmtree(state_dir(root), ignore_errors=True)
    shutil.rmtree(outcome.workspace, ignore_errors=True)


def _strings(value: object) -> list[str]:
    """Every string in a JSON value."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in _strings(item)]
    if isinstance(value, list):
        return [s for item in value for s in _strings(item)]
    return []


def _anywhere(folder: str, needle: bytes) -> bool:
    """Whether any file under ``folder`` holds ``needle``."""
    for parent, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(parent, name), "rb") as f:
                if needle in f.read():
                    return True
    return False
