"""A batch of note writes and deletes that completes even if the process dies half-way.

Before a batch touching more than one file starts, its plan (every new file's
bytes, and the hash each file had before) is written to ``txn.json`` in the store's state folder.
If the process is killed in the middle, the next holder of the store's lock
finds the plan and finishes it. A file a person changed in between (its hash
is neither the old nor the new one) is left alone: redoing a batch must never
overwrite a hand edit.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from mdmem.store import _catalog, _fs
from mdmem.store.paths import state_dir

__all__ = ["TRASH_DIR", "Plan", "commit", "recover"]

TXN = "txn.json"
TRASH_DIR = "trash"


@dataclass
class Plan:
    """The files a batch writes (name -> bytes) and moves to the trash (name -> trash name)."""

    writes: dict[str, bytes] = field(default_factory=dict)
    deletes: dict[str, str] = field(default_factory=dict)
    before: dict[str, str | None] = field(default_factory=dict)
    """The content hash of each touched file before the batch (None: it did not exist)."""

    def __bool__(self) -> bool:
        return bool(self.writes or self.deletes)


def _hash_of(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return _catalog.content_hash(f.read())
    except FileNotFoundError:
        return None


def _write(root: str, name: str, data: bytes, private: bool) -> None:
    _fs.atomic_write(os.path.join(root, name), data, private=private)


def _trash(root: str, name: str, trash_name: str, private: bool) -> None:
    trash = os.path.join(state_dir(root), TRASH_DIR)
    _fs.ensure_dir(trash, private=private)
    os.replace(os.path.join(root, name), os.path.join(trash, trash_name))


def commit(root: str, plan: Plan, *, private: bool) -> None:
    """Carry out a plan; the caller holds the store's lock."""
    journal = os.path.join(state_dir(root), TXN)
    journaled = len(plan.writes) + len(plan.deletes) > 1
    if journaled:
        payload = {
            "writes": {n: d.decode("utf-8") for n, d in plan.writes.items()},
            "deletes": plan.deletes,
            "before": plan.before,
        }
        _fs.atomic_write(
            journal, json.dumps(payload, ensure_ascii=False).encode("utf-8"), private=private
        )
    for name, data in plan.writes.items():
        _write(root, name, data, private)
    for name, trash_name in plan.deletes.items():
        _trash(root, name, trash_name, private)
    _fs.fsync_dir(root)
    if journaled:
        os.unlink(journal)


def recover(root: str, *, private: bool) -> list[str]:
    """Finish a batch a dead process left half done; return what was skipped and why."""
    journal = os.path.join(state_dir(root), TXN)
    try:
        with open(journal, encoding="utf-8") as f:
            payload = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        # A journal that cannot be read was never completely written (it is
        # written atomically), so no note was touched yet.
        os.unlink(journal)
        return ["an unreadable batch journal was discarded before any note was written"]
    skipped: list[str] = []
    before: dict[str, str | None] = payload.get("before", {})
    for name, text in payload.get("writes", {}).items():
        data = text.encode("utf-8")
        current = _hash_of(os.path.join(root, name))
        if current == _catalog.content_hash(data):
            continue
        if current == before.get(name):
            _write(root, name, data, private)
        else:
            skipped.append(f"{name}: changed by someone else since the batch began; left as is")
    for name, trash_name in payload.get("deletes", {}).items():
        current = _hash_of(os.path.join(root, name))
        if current is None:
            continue
        if current == before.get(name):
            _trash(root, name, trash_name, private)
        else:
            skipped.append(f"{name}: changed by someone else since the batch began; not deleted")
    _fs.fsync_dir(root)
    os.unlink(journal)
    return skipped
