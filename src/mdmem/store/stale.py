"""Staleness against the code: project notes that name files the workspace no longer has.

A note names a path when its body has it in backticks and it looks like one
(``internal/httpapi/routes.go``, ``src/app.py``): it contains a ``/`` or ends
with a file extension, and is not a URL, an option or an absolute path. Each
named path is checked against the working tree and, in a git repository,
against history since the note's ``updated``:

- ``renamed: a → b``: gone from the tree, and git saw it renamed (``-M``);
  ``mdmem stale --fix`` rewrites the note through :meth:`Store.apply`;
- ``path gone: a``: gone from the tree;
- ``changed since <date>: a``: a commit touched it after the note was written.

A note also names code symbols in backticks (``parse_config``, ``money.Cents``,
``parseConfig()``): in a git repository, a symbol that the tree had when the
oldest note was written (``git grep`` at that commit) and the working tree no
longer has is ``symbol gone: parseConfig``. A symbol the repository never had
(a library's) is never reported.

:func:`check` is incremental: its cache (``stale.json`` in the store's state)
is keyed by the tree's state (HEAD's commit, the git index's stat) and, per
note, by the note's content hash (``stale.rows``: one line per note, sorted by
name, read and written a line at a time, so a store of 100,000 notes costs
no more memory than a few), so a settled workspace costs no git call and
an edited note only re-checks itself. What a note names (its paths, its
symbols, its ``updated``) depends on its bytes alone, so a row outlives a
change of the tree: after a commit, a checkout or a ``git add`` only the
judgement is made again, from the row, and a note is read only when its
bytes are new; a note that names no path needs no judging at all.

It also writes ``stale.marks``, which the prompt block reads
(:func:`cached_marks`, no git, no parse): a mark is shown only while the tree
is in the state it was computed for.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass

from mdmem.store.marks import STALE_MARKS as MARKS
from mdmem.store.marks import cached_marks, tree_key

TYPE_CHECKING = False  # not typing's: cached_marks is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping
    from typing import Protocol

    from mdmem._kinds import Level
    from mdmem.store.note import IndexEntry, Note
    from mdmem.store.results import ApplyResult
    from mdmem.store.state import StateDir

    class Store(Protocol):
        """What this module needs of a store (``Store`` is one; not imported: no cycle)."""

        level: Level
        state: StateDir

        @property
        def path(self) -> str: ...

        def iter_entries(
            self, offset: int = ..., limit: int | None = ...
        ) -> Iterator[IndexEntry]: ...

        def read(self, filename: str) -> Note: ...

        def read_text(self, filename: str) -> str: ...

        def apply(
            self, ops: Iterable[Mapping[str, object]], now: None = None, *, source: str = ...
        ) -> ApplyResult: ...


__all__ = [
    "CACHE",
    "MARKS",
    "ROWS",
    "Stale",
    "cached_marks",
    "check",
    "fix_renames",
    "referenced_paths",
    "referenced_symbols",
    "tree_key",
]

CACHE = "stale.json"
ROWS = "stale.rows"
_CACHE_VERSION = 5
# A row: [name, sha, reasons, moved, symbols, paths, updated]; the last three are
# the note's (its bytes'), the two before them the tree's (None: judge again).
_ROW_LENGTH = 7
_TICKS = re.compile(r"`([^`\n]{1,300})`")
# A bare name (no folder) counts only with a file extension, in lower case, that
# code bases use: `Product.Price` and `money.Cents` are symbols, not files.
_EXTENSION = re.compile(
    r"\.(py|pyi|go|rs|ts|tsx|js|jsx|mjs|cjs|java|kt|kts|rb|php|cs|swift|dart|c|h|cc|cpp|hpp|m|"
    r"scala|sql|sh|bash|zsh|ps1|md|rst|txt|json|jsonc|yaml|yml|toml|ini|cfg|conf|env|lock|mod|"
    r"sum|xml|html|htm|css|scss|vue|svelte|proto|tf|gradle|properties|csv|ipynb|graphql|arb)$"
)
# `github.com/acme/x`: an import path or URL without a scheme, not a file of the workspace.
_DOMAIN = re.compile(r"^[\w-]+(\.[\w-]+)+/")


@dataclass(frozen=True)
class Stale:
    """A note that names paths the workspace no longer has as it had them."""

    filename: str
    reasons: tuple[str, ...]
    renames: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, object]:
        """JSON-ready."""
        return {
            "filename": self.filename,
            "reasons": list(self.reasons),
            "renames": [{"from": a, "to": b} for a, b in self.renames],
        }


def referenced_paths(body: str) -> list[str]:
    """The workspace paths a note's body names in backticks, in order, without repeats."""
    out: list[str] = []
    for match in _TICKS.finditer(body):
        token = match.group(1).strip().removeprefix("./")
        token = re.sub(r":\d+(:\d+)?$", "", token)  # path:line
        if (
            not token
            or any(c.isspace() for c in token)
            or "://" in token
            or token[0] in "-/~$<{*"
            or ".." in token.split("/")
            or any(c in token for c in "*?[]{}()<>|;=\"'")
        ):
            continue
        if _DOMAIN.match(token):
            continue
        if "/" in token.rstrip("/") or _EXTENSION.search(token):
            path = token.rstrip("/")
            if path not in out:
                out.append(path)
    return out


# -- git history ---------------------------------------------------------------------


def _git(workspace: str, *args: str, stdin: str | None = None) -> str:
    import subprocess

    try:
        proc = subprocess.run(
            ["git", "-C", workspace, "-c", "core.quotepath=off", *args],
            input=stdin.encode("utf-8") if stdin is not None else None,
            capture_output=True,
            timeout=60,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return proc.stdout.decode("utf-8", "replace") if proc.returncode == 0 else ""


def _history(workspace: str, since: float) -> tuple[dict[str, float], dict[str, str], set[str]]:
    """Since ``since``: when each path was last modified, where renamed paths went, every path
    a commit touched."""
    changed: dict[str, float] = {}
    renames: dict[str, str] = {}
    seen: set[str] = set()
    out = _git(
        workspace, "log", "-M", "--name-status", "--format=%x00%ct", f"--since=@{int(since)}"
    )
    moment = 0.0
    for line in reversed(out.splitlines()):  # oldest first, so later renames win
        if line.startswith("\x00"):
            continue
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0].startswith("R"):
            renames[fields[1]] = fields[2]
    for line in out.splitlines():
        if line.startswith("\x00"):
            with contextlib.suppress(ValueError):
                moment = float(line[1:])
            continue
        fields = line.split("\t")
        if len(fields) >= 2 and fields[0]:
            seen.update(fields[1:])
        # Modified (or type-changed) only: a file added after the note was not changed by it.
        if len(fields) == 2 and fields[0][:1] in ("M", "T"):
            changed[fields[1]] = max(changed.get(fields[1], 0.0), moment)
    # Renames not yet committed (staged, or detectable against HEAD).
    for line in _git(workspace, "diff", "--name-status", "-M", "HEAD").splitlines():
        fields = line.split("\t")
        if len(fields) >= 3 and fields[0].startswith("R"):
            renames[fields[1]] = fields[2]
            seen.add(fields[1])
    return changed, renames, seen


_SYMBOL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")


def referenced_symbols(body: str) -> list[str]:
    """The code symbols a note names in backticks (``parse_config``, ``money.Cents``):
    the last name of each, when it looks like code (an ``_``, a camelCase hump or a
    dotted prefix) and has at least four characters."""
    out: list[str] = []
    for match in _TICKS.finditer(body):
        token = match.group(1).strip().removesuffix("()")
        if not _SYMBOL.match(token):
            continue
        name = token.rsplit(".", 1)[-1]
        if len(name) < 4 or not ("_" in name or re.search(r"[a-z][A-Z]", name) or "." in token):
            continue
        if name not in out:
            out.append(name)
    return out


def _symbols_gone(
    workspace: str, since: float, symbols: set[str], then_cache: dict[str, object]
) -> set[str]:
    """Of ``symbols``, those git's tree had at ``since`` and the working tree no longer has.

    A symbol the repository never had (a library's, another project's) is never
    gone. What the tree had at that commit never changes: ``then_cache`` keeps
    it (``rev``, ``checked``, ``had``) across changes of the working tree.
    """
    if not symbols:
        return set()
    then = _git(workspace, "rev-list", "-1", f"--before=@{int(since)}", "HEAD").strip()
    if not then:
        return set()

    def found(names: set[str], *rev: str) -> set[str]:
        patterns = "\n".join(sorted(names)) + "\n"
        out = _git(workspace, "grep", "-I", "-F", "-w", "-o", "-h", "-f", "-", *rev, stdin=patterns)
        return {line.rsplit(":", 1)[-1] for line in out.splitlines()} & names

    if then_cache.get("rev") != then:
        then_cache.clear()
        then_cache.update(rev=then, checked=[], had=[])
    checked = {str(x) for x in then_cache.get("checked") or []}  # type: ignore[attr-defined]
    had = {str(x) for x in then_cache.get("had") or []}  # type: ignore[attr-defined]
    todo = symbols - checked
    if todo:
        had |= found(todo, then)
        then_cache["checked"] = sorted(checked | todo)
        then_cache["had"] = sorted(had)
    candidates = had & symbols
    return candidates - found(candidates) if candidates else set()


def _follow(path: str, renames: dict[str, str]) -> str | None:
    seen = {path}
    while path in renames:
        path = renames[path]
        if path in seen:
            return None
        seen.add(path)
    return path


def _judge(
    workspace: str,
    paths: list[str],
    updated: float | None,
    changed: dict[str, float],
    renames: dict[str, str],
    seen: set[str],
    git: bool,
) -> tuple[list[str], list[tuple[str, str]]]:
    reasons: list[str] = []
    moved: list[tuple[str, str]] = []
    for path in paths:
        full = os.path.join(workspace, path)
        if not os.path.lexists(full):
            # In git, gone means git saw it go since the note was written; a path it
            # never knew (another repository's, a typo) says nothing about this tree.
            # Without git, the tree is all there is, but a bare name may live anywhere.
            if (git and path not in seen) or ("/" not in path and not git):
                continue
            target = _follow(path, renames) if git else None
            if target and os.path.lexists(os.path.join(workspace, target)):
                reasons.append(f"renamed: {path} → {target}")
                moved.append((path, target))
            else:
                reasons.append(f"path gone: {path}")
        elif git and updated is not None and changed.get(path, 0.0) > updated:
            from datetime import datetime, timezone

            day = datetime.fromtimestamp(updated, timezone.utc).date().isoformat()
            reasons.append(f"changed since {day}: {path}")
    return reasons, moved


def _read_rows(
    path: str, key: str, workspace: str, *, any_tree: bool = False
) -> Iterator[tuple[str, list[object]]]:
    """The per-note rows of :data:`ROWS` (sorted by name), when computed for this tree.

    With ``any_tree``, the rows of another tree (or workspace) too, their judgement
    (reasons, moves) left out as ``None``: what a note names is its bytes', kept
    across trees; whether those paths are gone or moved is the tree's, judged again.
    """
    try:
        f = open(path, encoding="utf-8")  # noqa: SIM115 (read lazily, closed below)
    except OSError:
        return
    with f:
        try:
            head = json.loads(f.readline())
        except ValueError:
            return
        if not (isinstance(head, list) and len(head) == 3 and head[0] == _CACHE_VERSION):
            return  # another format (an older mdmem's): rebuilt from the notes
        same = head[1:] == [key, workspace]
        if not (same or any_tree):
            return
        previous = None
        for line in f:
            try:
                row = json.loads(line)
            except ValueError:
                return  # cut short (a crash): what follows is checked again
            if not (isinstance(row, list) and len(row) == _ROW_LENGTH and isinstance(row[0], str)):
                return
            if previous is not None and row[0] <= previous:
                return
            previous = row[0]
            if not same:
                row[2] = row[3] = None
            yield row[0], row


def _merged(
    listing: Iterator[tuple[str, str | None, str]], old: Iterator[tuple[str, list[object]]]
) -> Iterator[tuple[str, str, list[object] | None]]:
    """(name, sha, the cached row if its sha is the note's) for each note, both sorted by name."""
    prev = next(old, None)
    for name, _updated, sha in listing:
        while prev is not None and prev[0] < name:
            prev = next(old, None)
        row = prev[1] if prev is not None and prev[0] == name else None
        yield name, sha, row if row is not None and sha and row[1] == sha else None


def _unchanged(root: str, path: str, key: str, workspace: str, named: set[str], git: bool) -> bool:
    """Whether the cached rows at ``path`` are exactly the notes', for this tree (the same
    names, each with its note's content hash); the symbols they name are added to ``named``
    meanwhile."""
    from mdmem.store import _catalog_reads

    if not os.path.exists(path):
        return False
    old = _read_rows(path, key, workspace)
    prev = next(old, None)
    for name, _updated, sha in _catalog_reads.iter_listing(root):
        if prev is None or prev[0] != name or not sha or prev[1][1] != sha:
            return False  # a note new, changed or gone since, or rows of another tree
        if git:
            named.update(_strings(prev[1][4]))
        prev = next(old, None)
    return prev is None  # a row left over is a note gone since


def _oldest(root: str) -> float:
    """The oldest ``updated`` among the notes (a timestamp), 0 without any."""
    from mdmem.store import _catalog_reads
    from mdmem.store.note import parse_time

    oldest: float | None = None
    for _, when, _ in _catalog_reads.iter_listing(root):
        moment = parse_time(when) if when else None
        if moment is not None:
            stamp = moment.timestamp()
            oldest = stamp if oldest is None else min(oldest, stamp)
    return oldest or 0.0


def _strings(value: object) -> list[str]:
    return [str(x) for x in value] if isinstance(value, list) else []


def _names(
    store: Store, filename: str, prev: list[object] | None
) -> tuple[list[str], list[str], float | None] | None:
    """What a note names (its paths, its symbols) and its ``updated`` (a timestamp): from
    its row of another tree if it has one (the same bytes), else read; None if unreadable."""
    if prev is not None:
        stamp = prev[6] if isinstance(prev[6], (int, float)) else None
        return _strings(prev[5]), _strings(prev[4]), stamp
    from mdmem.store import quicknote

    try:
        # A note mdmem wrote without YAML (a tenth of the time: a first check after a
        # clone reads every note), as Store.read would read it.
        note = quicknote.parse(store.read_text(filename), filename)
    except (KeyError, ValueError):
        return None
    return referenced_paths(note.body), referenced_symbols(note.body), quicknote.updated_at(note)


def check(
    store: Store, workspace: str, *, use_cache: bool = True, refresh: bool = True
) -> list[Stale]:
    """The stale notes of ``store`` (a project store of ``workspace``), updating the caches.

    Only notes whose bytes are new or changed are read again; when the tree moved,
    the others are judged again from their rows (the paths and symbols they name),
    unread. Git runs once per tree state, never for a settled cache. Without
    ``refresh``, the store's catalog is taken as it is (MEMORY.md is not
    brought up to date first: ``mdmem doctor`` looks without writing).

    Nothing is held per note: the catalog's listing and the cached rows
    (:data:`ROWS`, one line per note, sorted by name) are walked side by side
    and the new rows written as they come; only the distinct symbols named,
    and the stale notes, are kept.
    """
    from mdmem.store import _catalog_reads, files

    if getattr(store, "unavailable", None) is not None:
        return []  # not used as a project store: nothing to check, nothing to cache
    state = store.state.path
    key = tree_key(workspace)
    cache: dict[str, object] = {}
    if use_cache:
        with contextlib.suppress(OSError, ValueError):
            with open(os.path.join(state, CACHE), encoding="utf-8") as f:
                loaded = json.load(f)
            if isinstance(loaded, dict) and loaded.get("version") == _CACHE_VERSION:
                cache = loaded
    same_tree = cache.get("key") == key and cache.get("workspace") == workspace
    if refresh:
        for _ in store.iter_entries(limit=1):
            pass
    git = key != "none"
    history: tuple[dict[str, float], dict[str, str], set[str]] | None = None
    named: set[str] = set()  # every symbol the notes name (a vocabulary, not a note count)
    since: list[float] = []  # the oldest note's time, read once, when needed

    def oldest() -> float:
        if not since:
            since.append(_oldest(store.path))
        return since[0]

    def rows() -> Iterator[bytes]:
        nonlocal history
        yield json.dumps([_CACHE_VERSION, key, workspace], ensure_ascii=False).encode() + b"\n"
        old = (
            _read_rows(os.path.join(state, ROWS), key, workspace, any_tree=True)
            if use_cache
            else iter(())
        )
        for filename, sha, prev in _merged(_catalog_reads.iter_listing(store.state), old):
            row: list[object]
            if prev is not None and prev[2] is not None:
                row = prev  # the same bytes, judged for this tree
            else:
                names = _names(store, filename, prev)
                if names is None:  # a broken note is doctor's business, not ours
                    continue
                paths, symbols, stamp = names
                reasons: list[str] = []
                moved: list[tuple[str, str]] = []
                if paths:
                    if history is None:
                        history = _history(workspace, oldest()) if git else ({}, {}, set())
                    reasons, moved = _judge(workspace, paths, stamp, *history, git)
                row = [filename, sha, reasons, [list(m) for m in moved], symbols, paths, stamp]
            if git:  # without git no symbol is ever gone: none is looked for
                named.update(_strings(row[4]))
            yield json.dumps(row, ensure_ascii=False).encode("utf-8") + b"\n"

    rows_path = os.path.join(state, ROWS)
    kept: Iterable[tuple[str, list[object]]]
    if use_cache and _unchanged(store.path, rows_path, key, workspace, named, git):
        # Every row is the note's as cached: nothing to write (a look, as `mdmem doctor`
        # takes, leaves the state folder as it found it).
        kept = _read_rows(rows_path, key, workspace)
    else:
        named.clear()
        with contextlib.suppress(OSError):
            store.state.ensure()
        try:
            files.atomic_write(rows_path, rows(), private=True, durable=False)
            kept = _read_rows(rows_path, key, workspace)
        except OSError:  # no state folder to write in: checked again, in memory
            named.clear()
            kept = [(r[0], r) for r in (json.loads(b) for b in list(rows())[1:])]
    known: dict[str, bool] = {}  # symbol -> gone, for this tree state and this "then"
    then_data = cache.get("then") if use_cache else None
    then_cache: dict[str, object] = then_data if isinstance(then_data, dict) else {}
    stamp_since = cache.get("since")
    if named:
        stamp_since = oldest()
        cached = cache.get("symbols") if same_tree and cache.get("since") == stamp_since else None
        known = {k: bool(v) for k, v in cached.items()} if isinstance(cached, dict) else {}
        todo = named - set(known)
        gone = _symbols_gone(workspace, stamp_since, todo, then_cache)
        known.update({s: s in gone for s in todo})
    out: list[Stale] = []
    for _name, row in kept:
        lost = [f"symbol gone: {s}" for s in _strings(row[4]) if known.get(s)]
        found = _strings(row[2]) + lost
        if found:
            renames = row[3] if isinstance(row[3], list) else []
            pairs = tuple(
                (str(p[0]), str(p[1]))
                for p in renames
                if isinstance(p, (list, tuple)) and len(p) == 2
            )
            out.append(Stale(str(row[0]), tuple(found), pairs))
    payload = {
        "version": _CACHE_VERSION,
        "key": key,
        "workspace": workspace,
        "since": stamp_since,
        "symbols": known if named else (cache.get("symbols") if same_tree else {}),
        "then": then_cache,
    }
    with contextlib.suppress(OSError):
        lines = [f"{key}\t{workspace}"]
        for item in out:
            short = "; ".join(item.reasons[:2])
            lines.append(f"{item.filename}\t{short[:160]}")
        for name, data in (
            (CACHE, json.dumps(payload, ensure_ascii=False).encode("utf-8")),
            (MARKS, ("\n".join(lines) + "\n").encode("utf-8")),
        ):
            # Only what changed: the marks file's stat is in the recall index's and the
            # block cache's keys, so an unchanged rewrite (every `mdmem doctor`) made the
            # next query and session start do a full check.
            path = os.path.join(state, name)
            with contextlib.suppress(OSError), open(path, "rb") as existing:
                if existing.read(len(data) + 1) == data:
                    continue
            files.atomic_write(path, data, private=True, durable=False)
    return out


def fix_renames(store: Store, stale: list[Stale], *, source: str = "cli") -> list[str]:
    """Rewrite renamed paths in the notes' bodies, through :meth:`Store.apply`; return the notes."""
    ops = []
    for item in stale:
        if not item.renames:
            continue
        note = store.read(item.filename)
        body = note.body
        for old, new in item.renames:
            body = body.replace(f"`{old}`", f"`{new}`").replace(f"`./{old}`", f"`./{new}`")
        if body != note.body:
            ops.append(
                {
                    "action": "update",
                    "level": store.level.value,
                    "filename": item.filename,
                    "content": body,
                }
            )
    result = store.apply(ops, source=source)
    return [a.filename for a in result.applied if a.action == "update"]
