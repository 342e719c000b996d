"""Where a note came from: one front-matter line in the note, the details in mdmem's state.

Every note the worker creates or changes carries one front-matter key::

    source: turn 20261201…-1a2b3c4d · anthropic/claude-haiku-4-5 · 2026-12-01T09:33Z · git 2d611e2

(fields joined by `` · ``: the turn, the provider and model, when, the
repository's commit, and ``session <id>`` when the agent's session is known).
One line, because it travels with the note (through renames, git merges and
teammates' clones) and reads as plain text; it changes only when the worker
changes the note, so it merges like the body does. The long part, the redacted
excerpt of the turn, stays in the store's state folder (``provenance/<turn>.json``),
kept for :data:`KEEP_DAYS` days and at most :data:`KEEP_TURNS` turns: it is
conversation text, which must neither be committed nor kept forever.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone

from mdmem.store import files
from mdmem.store import state as layout
from mdmem.store.state import StateDir

__all__ = [
    "FIELDS",
    "KEEP_DAYS",
    "KEEP_TURNS",
    "SOURCE_KEY",
    "Source",
    "git_head",
    "load_turn",
    "parse_source",
    "record_turn",
]

SOURCE_KEY = "source"
FIELDS = ("turn", "at", "model", "git", "session")
KEEP_DAYS = 30
KEEP_TURNS = 500
EXCERPT_BYTES = 4_000
_DIR = layout.PROVENANCE
_SEP = " · "
_MAX_READ = 64 * 1024


@dataclass(frozen=True)
class Source:
    """The provenance of one worker write."""

    turn: str
    at: str
    model: str = ""
    git: str = ""
    session: str = ""

    def line(self) -> str:
        """The front-matter value: compact, one line."""
        parts = [f"turn {self.turn}", self.model or "unknown model", self.at]
        if self.git:
            parts.append(f"git {self.git[:7]}")
        if self.session:
            parts.append(f"session {self.session[:36]}")
        return _SEP.join(parts)

    def as_dict(self) -> dict[str, str]:
        return {
            "turn": self.turn,
            "at": self.at,
            "model": self.model,
            "git": self.git,
            "session": self.session,
        }


def parse_source(value: object) -> Source | None:
    """Read a ``source:`` value back; None when it is missing or not one of ours."""
    if not isinstance(value, str) or not value.startswith("turn "):
        return None
    parts = value.split(_SEP)
    fields = {"turn": parts[0][5:].strip(), "model": "", "at": "", "git": "", "session": ""}
    rest = parts[1:]
    if rest:
        fields["model"] = rest.pop(0).strip()
    if rest:
        fields["at"] = rest.pop(0).strip()
    for part in rest:
        key, _, val = part.strip().partition(" ")
        if key in ("git", "session"):
            fields[key] = val.strip()
    return Source(**fields)


def now_stamp() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%MZ")


def git_head(workspace: str) -> str:
    """The commit checked out in ``workspace``, or ``""``: read from ``.git`` files, else git."""
    git = os.path.join(workspace, ".git")
    try:
        if os.path.isdir(git) and not os.path.islink(git):
            head = _read_small(os.path.join(git, "HEAD")).strip()
            if not head.startswith("ref: "):
                return head if _is_sha(head) else ""
            ref = head[5:].strip()
            if ".." not in ref and ref.startswith("refs/"):
                with contextlib.suppress(OSError, ValueError):
                    sha = _read_small(os.path.join(git, *ref.split("/"))).strip()
                    if _is_sha(sha):
                        return sha
                with contextlib.suppress(OSError, ValueError):
                    for line in _read_small(os.path.join(git, "packed-refs")).splitlines():
                        sha, _, name = line.partition(" ")
                        if name.strip() == ref and _is_sha(sha):
                            return sha
                return ""  # a branch with no commit yet
        elif not os.path.lexists(git):
            return ""
    except (OSError, ValueError):
        return ""
    # A worktree or submodule (".git" is a file): ask git, briefly.
    try:
        out = subprocess.run(
            ["git", "-C", workspace, "rev-parse", "--verify", "-q", "HEAD"],
            capture_output=True,
            text=True,
            timeout=2,
            check=False,
            env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"},
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    sha = out.stdout.strip()
    return sha if out.returncode == 0 and _is_sha(sha) else ""


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def _read_small(path: str) -> str:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        data = os.read(fd, _MAX_READ)
    finally:
        os.close(fd)
    return data.decode("utf-8", "replace")


def _folder(store_path: str | StateDir) -> str:
    return StateDir.of(store_path).provenance


def record_turn(
    store_path: str | StateDir,
    source: Source,
    excerpt: str,
    notes: list[tuple[str, str]],
    *,
    private: bool,
) -> None:
    """Keep the redacted excerpt of a turn and what it did to which notes, then prune old turns.

    ``store_path`` is the store's state (``store.state``) or its root.
    """
    state = StateDir.of(store_path)
    state.ensure()
    folder = state.provenance
    files.ensure_dir(folder, private=True)
    data = excerpt.encode("utf-8", "replace")
    if len(data) > EXCERPT_BYTES:
        excerpt = data[:EXCERPT_BYTES].decode("utf-8", "ignore") + " […]"
    entries = [[action, name] for action, name in notes]
    old = load_turn(state, source.turn)
    if old is not None:  # the same turn again (after a crash, or a proposal accepted)
        before = old.get("notes")
        if isinstance(before, list):
            entries = [n for n in before if n not in entries] + entries
    record = {**source.as_dict(), "excerpt": excerpt, "notes": entries}
    path = os.path.join(folder, f"{_safe(source.turn)}.json")
    payload = json.dumps(record, ensure_ascii=False).encode("utf-8")
    files.atomic_write(path, payload, private=True, durable=False)
    _prune(folder)


def load_turn(store_path: str | StateDir, turn: str) -> dict[str, object] | None:
    """The kept record of a turn, or None once it is pruned (or never was)."""
    path = os.path.join(_folder(store_path), f"{_safe(turn)}.json")
    try:
        data = json.loads(_read_small(path))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _safe(turn: str) -> str:
    return "".join(c for c in turn if c.isalnum() or c == "-")[:64] or "unknown"


#: When each folder was last checked for records past KEEP_DAYS (in this process).
_AGED: dict[str, float] = {}


def _prune(folder: str) -> None:
    """Keep at most KEEP_TURNS records, and none older than KEEP_DAYS.

    The count is checked on every record (a listing); the age, a stat of each
    record, at most once an hour per folder: a turn does not pay for 500 stats.
    """
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return
    now = time.time()
    aged = now - _AGED.get(folder, 0.0) >= 3600
    if aged:
        _AGED[folder] = now
    cutoff = now - KEEP_DAYS * 86400
    for n, name in enumerate(names):
        old = n < len(names) - KEEP_TURNS
        if not old and not aged:
            continue
        path = os.path.join(folder, name)
        with contextlib.suppress(OSError):
            if old or os.lstat(path).st_mtime < cutoff:
                os.unlink(path)
