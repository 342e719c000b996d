"""Disputed notes: notes a user's correction contradicted, ranked lower until confirmed again.

The marks live in the store's state folder, ``feedback.json`` (never in the
repository: a dispute is one user's experience, and a repository must not be
able to plant or clear one)::

    {"disputed": {"<filename>": {"at": "...", "turn": "...", "count": 1, "reason": "..."}},
     "dismissed": {"<filename>": {... the dispute ..., "dismissed_at": "..."}}}

A person who finds a dispute false dismisses it (:func:`dismiss`, the web
page's button): it moves to ``dismissed``, recorded, and :func:`undismiss`
brings it back.

:func:`dispute_penalty` is what ranking multiplies a note's score by. The
manager's feedback module writes the marks (:func:`mark`, :func:`clear`);
recall, ``mdmem why``, ``mdmem stats`` and ``mdmem review`` read them.
"""

from __future__ import annotations

import contextlib
import os

from mdmem import _json
from mdmem.store import files

TYPE_CHECKING = False  # not typing's: this module is on the cold `mdmem search` path
if TYPE_CHECKING:
    from collections.abc import Iterable

    from mdmem.recall.view import StoreView as Store

__all__ = [
    "FEEDBACK_FILE",
    "PENALTY",
    "clear",
    "dismiss",
    "dismissed",
    "dispute_penalty",
    "disputed",
    "mark",
    "undismiss",
]

FEEDBACK_FILE = "feedback.json"
#: A disputed note's score is multiplied by this once, and again per further dispute.
PENALTY = 0.5
_FLOOR = 0.1
_MAX_BYTES = 1024 * 1024
_MAX_NOTES = 5_000
_cache: dict[
    str,
    tuple[tuple[int, int], tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]],
] = {}


def _path(store: Store) -> str:
    return store.state / FEEDBACK_FILE


def disputed(store: Store) -> dict[str, dict[str, object]]:
    """Every disputed note of ``store``: file name -> ``{"at", "turn", "count", "reason"}``."""
    return _read(store)[0]


def dismissed(store: Store) -> dict[str, dict[str, object]]:
    """The disputes a person dismissed: file name -> the dispute and ``dismissed_at``."""
    return _read(store)[1]


def _read(store: Store) -> tuple[dict[str, dict[str, object]], dict[str, dict[str, object]]]:
    path = _path(store)
    try:
        st = os.stat(path)
    except OSError:
        return {}, {}
    key = (st.st_mtime_ns, st.st_size)
    cached = _cache.get(path)
    if cached is not None and cached[0] == key:
        return dict(cached[1][0]), dict(cached[1][1])
    try:
        with open(path, "rb") as f:
            data = _json.loads(f.read(_MAX_BYTES))
    except (OSError, ValueError):
        return {}, {}
    found = []
    for section in ("disputed", "dismissed"):
        marks = data.get(section) if isinstance(data, dict) else None
        found.append(
            {
                str(k): dict(v)
                for k, v in (marks if isinstance(marks, dict) else {}).items()
                if isinstance(v, dict) and isinstance(k, str)
            }
        )
    _cache[path] = (key, (found[0], found[1]))
    return dict(found[0]), dict(found[1])


def dispute_penalty(store: Store, name: str) -> float:
    """What ranking multiplies note ``name``'s score by: 1.0, or less while it is disputed."""
    info = disputed(store).get(name)
    if info is None:
        return 1.0
    count = info.get("count", 1)
    n = count if isinstance(count, int) and count > 0 else 1
    return max(PENALTY**n, _FLOOR)


def _bounded(marks: dict[str, dict[str, object]]) -> dict[str, dict[str, object]]:
    if len(marks) > _MAX_NOTES:  # bounded: the oldest marks go first
        keep = sorted(marks.items(), key=lambda kv: str(kv[1].get("at", "")))[-_MAX_NOTES:]
        return dict(keep)
    return marks


def _save(
    store: Store,
    marks: dict[str, dict[str, object]],
    gone: dict[str, dict[str, object]] | None = None,
) -> None:
    store.state.ensure()
    record: dict[str, object] = {"disputed": _bounded(marks)}
    gone = dismissed(store) if gone is None else gone
    if gone:
        record["dismissed"] = _bounded(gone)
    import json  # indented: the package (a write, never the hook's path)

    data = json.dumps(record, ensure_ascii=False, indent=1).encode("utf-8")
    files.atomic_write(_path(store), data, private=True)
    _cache.pop(_path(store), None)


def mark(store: Store, names: Iterable[str], *, turn: str, at: str, reason: str) -> list[str]:
    """Mark notes disputed (again: the count grows); return the names marked.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    names = list(names)
    if not names:
        return []
    with store.lock():
        marks = disputed(store)
        for name in names:
            old = marks.get(name, {})
            count = old.get("count", 0)
            marks[name] = {
                "at": at,
                "turn": turn,
                "count": (count if isinstance(count, int) else 0) + 1,
                "reason": reason[:300],
            }
        _save(store, marks)
    return names


def clear(store: Store, names: Iterable[str]) -> list[str]:
    """A note confirmed again recovers: forget its dispute; return the names cleared.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    names = [n for n in names if n in disputed(store)]
    if not names:
        return []
    with store.lock():
        marks = disputed(store)
        for name in names:
            marks.pop(name, None)
        _save(store, marks)
    with contextlib.suppress(KeyError):
        _cache.pop(_path(store))
    return names


def dismiss(store: Store, name: str, *, at: str) -> bool:
    """A person says the dispute of ``name`` is false: it no longer counts, and is recorded
    as dismissed (:func:`undismiss` brings it back). False when it was not disputed.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    with store.lock():
        marks, gone = _read(store)
        mark_ = marks.pop(name, None)
        if mark_ is None:
            return False
        gone[name] = {**mark_, "dismissed_at": at}
        _save(store, marks, gone)
    return True


def undismiss(store: Store, name: str) -> bool:
    """Bring back a dismissed dispute of ``name``; False when none was dismissed.

    Raises:
        LockTimeout: the store is locked by someone else.
    """
    with store.lock():
        marks, gone = _read(store)
        mark_ = gone.pop(name, None)
        if mark_ is None:
            return False
        mark_.pop("dismissed_at", None)
        marks[name] = mark_
        _save(store, marks, gone)
    return True
