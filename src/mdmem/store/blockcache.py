"""A cache of the prompt block, so a session start costs what the block shows, not the store.

Ranking the block (which notes fit, see :mod:`mdmem.store.block`) needs every
note's line, type and date, and checking that a store is settled is a stat of
every note: at 10,000 notes that is most of a cold ``mdmem index``. So the
block is kept in the store's state folder with the key it was computed under,
and served again while the key holds:

* each store's directory (any create, delete or rename, which is how mdmem and
  most editors and git write, changes its mtime), its MEMORY.md, and the two
  marks files (superseded/expired, stale) are as they were;
* no note's ``expires`` time has come since (and at most an hour has passed);
* every note the block shows is as it was (one ``lstat`` each, at most 200).

A note edited in place that the block does not show is picked up at the next
full load (at once in a process that watches the store, ``store/watch.py``, or
when the user's watcher runs, ``store/watcher.py``: a note it names as changed
since the block was made is a miss), exactly as MEMORY.md itself is; any write changes the key (the
block made again then follows the store's change log, see
``Store.catalog_current``), and ``mdmem reindex`` refreshes everything. The
cache is derived state: a damaged or missing file is a miss, never an error.
Only ``os`` and ``mdmem._json`` (the C scanner, not the ``json`` package) are imported.
"""

from __future__ import annotations

import os

from mdmem import _json
from mdmem.store.paths import INDEX_NAME
from mdmem.store.state import MARKS, STALE_MARKS, StateDir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = ["cached", "latest"]

_VERSION = 1
_MAX_AGE = 3600.0
_MAX_BYTES = 256 * 1024
_HEADINGS = {"## Project Memory": 0, "## User Memory": 1}


def _stat(path: str) -> list[int] | None:
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return [st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns]


def _key(purpose: str, states: tuple[StateDir | None, ...]) -> list[object]:
    key: list[object] = [_VERSION, purpose]
    for state in states:
        if state is None:
            key.append(None)
            continue
        root, folder = state.root, state.path
        key.append(
            [
                root,
                _stat(root),
                _stat(os.path.join(root, INDEX_NAME)),
                _stat(os.path.join(folder, MARKS)),
                _stat(os.path.join(folder, STALE_MARKS)),
            ]
        )
    return key


def _next_expiry(states: tuple[StateDir | None, ...], now: float) -> float:
    until = now + _MAX_AGE
    for state in states:
        if state is None:
            continue
        try:
            with open(state.marks, encoding="utf-8") as f:
                text = f.read(_MAX_BYTES)
        except (OSError, UnicodeDecodeError):
            continue
        for line in text.splitlines():
            kind, _, rest = line.partition("\t")
            if kind != "E":
                continue
            try:
                ts = float(rest.partition("\t")[2])
            except ValueError:
                continue
            if now < ts < until:
                until = ts
    return until


def _shown(block: str, roots: tuple[str, str]) -> list[list[object]]:
    """``[root, name, stat]`` of every note line the block shows."""
    shown: list[list[object]] = []
    section = -1
    prefixes = [root.rstrip(os.sep) + os.sep for root in roots]  # os.path.join's work, once
    for line in block.splitlines():
        if line in _HEADINGS:
            section = _HEADINGS[line]
        elif line.startswith("- ") and line.endswith(".md)") and section >= 0 and roots[section]:
            name = line[line.rfind("(") + 1 : -1]
            if name and "/" not in name and name not in (".", ".."):
                shown.append([roots[section], name, _stat(prefixes[section] + name)])
    return shown


def _home(states: tuple[StateDir | None, ...]) -> str | None:
    """Where the cache file lives: the first store whose state folder already exists."""
    for state in states:
        if state is not None and os.path.isdir(folder := state.path):
            return folder
    return None


def _load(path: str, key: list[object], now: float, roots: tuple[str, str]) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = _json.loads(f.read(_MAX_BYTES * 4))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    until = data.get("until")
    block = data.get("block")
    notes = data.get("notes")
    if not isinstance(until, (int, float)) or now >= until or not isinstance(block, str):
        return None
    if not isinstance(notes, list):
        return None
    for item in notes:
        if not isinstance(item, list) or len(item) != 3:
            return None
        root, name, stat = item
        if not isinstance(root, str) or not isinstance(name, str):
            return None
        if _stat(os.path.join(root, name)) != stat:
            return None
    at = data.get("at")
    if isinstance(at, int) and _edited_since([r for r in roots if r], at):
        return None
    return block


def _edited_since(roots: list[str], at: int) -> bool:
    """Whether the user's watcher (``store/watcher.py``) names a note of ``roots`` changed
    since ``at`` (ns): one edited in place, which no key above sees. False when no
    watcher answers (the cache's contract without one, see the module docstring)."""
    from mdmem.store import watcher

    if not roots or not watcher.enabled():
        return False
    answers = watcher.ask([(root, at) for root in roots])
    if isinstance(answers, str):
        return False
    for root, answer in zip(roots, answers, strict=True):  # as many, or ask failed
        if any(n.endswith(".md") and n != INDEX_NAME for n in answer.names):
            return True
        if answer.kind == watcher.UNKNOWN and watcher.vouches_from_now(root):
            return True  # it never will for ``at`` (see Store.catalog_current): made again
    return False


def cached(
    purpose: str,
    project: str | StateDir,
    user: str | StateDir,
    compute: Callable[[], str],
    *,
    now: float | None = None,
) -> str:
    """The block ``compute()`` makes for stores ``project`` and ``user``.

    Each is the store's state (``store.state``, which knows where its folder is),
    its root, or ``""`` for none. ``purpose`` names the variant (its limits and
    hint), so the CLI's block and a hook's smaller one are cached apart.
    """
    import time

    moment = time.time() if now is None else now
    states = tuple(StateDir.of(where) if where else None for where in (project, user))
    roots = (states[0].root if states[0] else "", states[1].root if states[1] else "")
    home = _home(states)
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in purpose)[:60]
    path = os.path.join(home, f"block-{safe}.json") if home else None
    before = _key(purpose, states)
    if path is not None:
        hit = _load(path, before, moment, roots)
        if hit is not None:
            return hit
    at = time.time_ns()  # a note edited after this may not be in the block
    block = compute()
    after = _key(purpose, states)
    home = home or _home(states)  # a first load may have made the state folder
    if home is None or after != before:
        # Something changed while the block was computed (or the load itself
        # rewrote MEMORY.md): the next call computes again, with a stable key.
        return block

    from mdmem.store import files

    record = {
        "key": after,
        "until": _next_expiry(states, moment),
        "at": at,
        "block": block,
        "notes": _shown(block, roots),
    }
    try:
        data = _json.dumps(record, ensure_ascii=False).encode("utf-8")
        target = os.path.join(home, f"block-{safe}.json")
        files.atomic_write(target, data, private=True, durable=False)
    except OSError:
        pass
    return block


def latest(purpose: str, project: str | StateDir, user: str | StateDir) -> str | None:
    """The block last cached for these two stores under a purpose that starts with
    ``purpose``, whether or not it still holds; None when there is none.

    For a reader that wants what an earlier process showed, not what the stores
    hold now: the per-prompt hook of a session whose SessionStart left no record
    (its block came from this cache, when the session began: a block made again
    now would be a guess no better, at the cost of ranking every note after a
    write). One listing of the cache's folder and one read.
    """

    states = tuple(StateDir.of(where) if where else None for where in (project, user))
    home = _home(states)
    if home is None:
        return None
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in purpose)[:60]
    roots = [state.root if state else None for state in states]
    found: list[tuple[int, str]] = []
    try:
        with os.scandir(home) as entries:
            for entry in entries:
                if entry.name.startswith(f"block-{safe}") and entry.name.endswith(".json"):
                    found.append((entry.stat(follow_symlinks=False).st_mtime_ns, entry.path))
    except OSError:
        return None
    for _, path in sorted(found, reverse=True):
        try:
            with open(path, encoding="utf-8") as f:
                data = _json.loads(f.read(_MAX_BYTES * 4))
            key, block = data["key"], data["block"]
            same = [part[0] if isinstance(part, list) else None for part in key[2:4]]
        except (OSError, ValueError, TypeError, KeyError, IndexError):
            continue
        if key[0] == _VERSION and same == roots and isinstance(block, str):
            return block
    return None
