"""Session records: what an agent did in one session, one Markdown file per session.

A record says when the session ran, in which workspace and branch, what the
person asked, which files it changed, which commands and tests it ran (and how
the tests ended, as the assistant said), which notes it wrote, and a short
summary. It is built from tool *inputs* and the conversation's text
(:mod:`mdmem.extract.activity`), redacted; never from a tool's output.

Where (``MDMEM_SESSIONS``): ``private`` (the default) keeps the records in the
project store's state folder (``<state>/sessions/``), personal and never
committed; ``project`` writes them to the store's ``sessions/`` folder, to be
committed and shared. Both places are read, so a change of mode loses nothing.
The project folder comes from the repository and is read as hostile data: the
folder must be a real directory (not a symlink), only regular ``*.md`` files
are read, each within :data:`MAX_READ_BYTES`, at most :data:`MAX_LISTED` of them.

Bounded: a record holds at most :data:`MAX_RECORD_BYTES` (its lists are cut,
oldest commands first, and say how many were left out), and a record not
touched for ``MDMEM_SESSIONS_DAYS`` days (90 by default) is moved to
``<state>/sessions-trash/`` by ``mdmem prune`` (:func:`expire`), from where
``mdmem timeline --restore ID`` brings it back (:func:`restore`).

The caller holds the project store's lock around every write. Every function
takes the project store's state (``store.state``, which knows where its folder
is) or its root.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone

from mdmem._lines import clean_inline
from mdmem.store import files
from mdmem.store.state import StateDir

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from mdmem.extract.activity import Activity

__all__ = [
    "DEFAULT_DAYS",
    "FOLDER",
    "MAX_RECORD_BYTES",
    "Session",
    "changed",
    "expire",
    "folders",
    "keep_days",
    "list_sessions",
    "load",
    "mode",
    "parse",
    "record_activity",
    "record_end",
    "record_notes",
    "render",
    "resolve_id",
    "restore",
    "save",
    "since_stamp",
    "stamp_of",
    "timeline",
]

#: The sub-folder of a store (project mode) or of its state folder (private mode).
FOLDER = "sessions"
TRASH = "sessions-trash"
LINKS = "session-links"
DEFAULT_DAYS = 90
MAX_RECORD_BYTES = 48 * 1024
#: A file larger than this in a sessions folder is not read (a hostile clone's).
MAX_READ_BYTES = 2 * MAX_RECORD_BYTES
#: At most this many records are listed from one folder.
MAX_LISTED = 5_000
MAX_GOALS = 20
MAX_FILES = 200
MAX_COMMANDS = 100
MAX_TESTS = 50
MAX_NOTES = 100
_ID = re.compile(r"[^A-Za-z0-9_-]")
_SECTIONS = {
    "goals": "Goals",
    "files": "Files changed",
    "commands": "Commands",
    "tests": "Tests",
    "notes": "Notes written",
}
_HEADINGS = {v.casefold(): k for k, v in _SECTIONS.items()}


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def iso(stamp: str) -> str:
    """A timestamp as ISO 8601 in UTC to the second (``2026-12-01T09:12:00+00:00``); ``""``
    when it is not one."""
    try:
        moment = datetime.fromisoformat(stamp.strip().replace("Z", "+00:00"))
    except ValueError:
        return ""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc).isoformat(timespec="seconds")


def safe_id(session_id: str) -> str:
    """The part of a session id that may name a file: letters, digits, ``-``, ``_``; ≤ 64."""
    return _ID.sub("", session_id)[:64]


@dataclass
class Session:
    """One session's record (see the module's docstring)."""

    session_id: str
    started: str = ""
    ended: str | None = None
    updated: str = ""
    agent: str = ""
    workspace: str = ""
    branch: str = ""
    summary: str = ""
    ended_with: str = ""
    """The assistant's last words (redacted, one line): how the session ended."""
    goals: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    commands: list[str] = field(default_factory=list)
    tests: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    """``(level, filename)`` of each note the session's turns wrote."""
    aliases: list[str] = field(default_factory=list)
    """Later session ids that continued this one (``claude --resume`` gives a new id)."""
    first_message: str = ""
    turns: int = 0
    left_out: int = 0
    """Items the size cap left out."""
    restored: str = ""
    """When it was last brought back from the trash (expiry counts from then too)."""
    path: str = ""
    """The file it was read from (not written into it)."""

    @property
    def title(self) -> str:
        """The first ask, short: what the session was for."""
        return clean_inline(self.goals[0], 100) if self.goals else "(no request recorded)"

    def as_dict(self) -> dict[str, object]:
        """The record as ``mdmem timeline --json`` shows it."""
        return {
            "session_id": self.session_id,
            "started": self.started,
            "ended": self.ended,
            "updated": self.updated,
            "agent": self.agent,
            "workspace": self.workspace,
            "branch": self.branch,
            "title": self.title,
            "summary": self.summary or built_summary(self),
            "ended_with": self.ended_with,
            "goals": list(self.goals),
            "files": list(self.files),
            "commands": list(self.commands),
            "tests": [{"command": c, "outcome": o or None} for c, o in self.tests],
            "notes": [{"level": lv, "filename": n} for lv, n in self.notes],
            "aliases": list(self.aliases),
            "turns": self.turns,
            "left_out": self.left_out,
            "path": self.path,
        }


def built_summary(session: Session) -> str:
    """A summary made from the record itself, without a model."""
    parts = []
    if session.files:
        shown = ", ".join(session.files[:3])
        more = f" and {len(session.files) - 3} more" if len(session.files) > 3 else ""
        parts.append(f"changed {shown}{more}")
    if session.commands:
        n = len(session.commands)
        parts.append(f"ran {n} command{'s' if n != 1 else ''}")
    if session.tests:
        outcome = session.tests[-1][1]
        parts.append(f"tests {outcome}" if outcome else "ran tests")
    if session.notes:
        n = len(session.notes)
        parts.append(f"wrote {n} note{'s' if n != 1 else ''}")
    what = "; ".join(parts)
    ask = clean_inline(session.goals[0], 160) if session.goals else ""
    if ask and what:
        return f"{ask} — {what[0].upper()}{what[1:]}."
    return ask or (what[0].upper() + what[1:] + "." if what else "")


# -- the Markdown --------------------------------------------------------------------------


def _code(text: str) -> str:
    """``text`` as one CommonMark code span, whatever backticks it holds."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _uncode(item: str) -> tuple[str, str]:
    """A code span at the start of ``item`` and what follows it; the item itself if none."""
    m = re.match(r"(`+)(.*?)\1(?!`)", item)
    if not m:
        return item.strip(), ""
    text = m.group(2)
    if len(text) > 1 and text.startswith(" ") and text.endswith(" "):
        text = text[1:-1]
    return text, item[m.end() :].strip()


def render(session: Session) -> str:
    """The record as Markdown: front matter (JSON values, so also YAML), then sections."""
    meta: dict[str, object] = {
        "session_id": session.session_id,
        "agent": session.agent,
        "started": session.started,
        "ended": session.ended,
        "updated": session.updated,
        "workspace": session.workspace,
        "branch": session.branch,
        "turns": session.turns,
    }
    if session.first_message:
        meta["first_message"] = session.first_message
    if session.aliases:
        meta["aliases"] = session.aliases
    if session.left_out:
        meta["left_out"] = session.left_out
    if session.summary:
        meta["summary"] = session.summary
    if session.restored:
        meta["restored"] = session.restored
    lines = ["---", *(f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in meta.items())]
    when = session.started[:16].replace("T", " ")
    lines += ["---", f"# {when} — {session.title}", ""]
    lines += [session.summary or built_summary(session), ""]
    if session.ended_with:
        lines += [f"How it ended: {session.ended_with}", ""]
    for key, heading in _SECTIONS.items():
        items: list[str]
        if key == "goals":
            items = [clean_inline(g) for g in session.goals]
        elif key in ("files", "commands"):
            items = [_code(x) for x in getattr(session, key)]
        elif key == "tests":
            items = [f"{_code(c)} — {o or 'outcome not said'}" for c, o in session.tests]
        else:
            items = [f"{_code(n)} ({lv})" for lv, n in session.notes]
        if items:
            lines += [f"## {heading}", *(f"- {x}" for x in items), ""]
    return "\n".join(lines)


def parse(text: str, path: str = "") -> Session | None:
    """Read a record back (leniently: a person may have edited it); None if it is not one."""
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return None
    meta: dict[str, object] = {}
    end = 0
    for n, line in enumerate(lines[1:200], start=1):
        if line.strip() == "---":
            end = n
            break
        key, sep, value = line.partition(":")
        if not sep:
            continue
        value = value.strip()
        try:
            meta[key.strip()] = json.loads(value) if value else ""
        except ValueError:
            meta[key.strip()] = value
    sid = meta.get("session_id")
    if not end or not isinstance(sid, str) or not safe_id(sid):
        return None

    def text_of(key: str) -> str:
        value = meta.get(key)
        return clean_inline(value, 4_000) if isinstance(value, str) else ""

    def strings(key: str) -> list[str]:
        value = meta.get(key)
        return (
            [clean_inline(v, 200) for v in value if isinstance(v, str)][:50]
            if isinstance(value, list)
            else []
        )

    def number(key: str) -> int:
        value = meta.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else 0

    ended = meta.get("ended")
    session = Session(
        session_id=clean_inline(sid, 100),
        started=text_of("started"),
        ended=clean_inline(ended, 40) if isinstance(ended, str) and ended else None,
        updated=text_of("updated"),
        agent=text_of("agent"),
        workspace=text_of("workspace"),
        branch=text_of("branch"),
        summary=text_of("summary"),
        first_message=text_of("first_message"),
        aliases=strings("aliases"),
        turns=number("turns"),
        left_out=number("left_out"),
        restored=text_of("restored"),
        path=path,
    )
    section: str | None = None
    for line in lines[end + 1 :]:
        if line.startswith("## "):
            section = _HEADINGS.get(line[3:].strip().casefold())
            continue
        if line.startswith("How it ended: ") and section is None:
            session.ended_with = clean_inline(line[len("How it ended: ") :], 400)
            continue
        if section is None or not line.startswith("- "):
            continue
        item = line[2:].strip()
        if section == "goals":
            session.goals.append(clean_inline(item, 400))
        elif section in ("files", "commands"):
            getattr(session, section).append(clean_inline(_uncode(item)[0], 400))
        elif section == "tests":
            command, rest = _uncode(item)
            outcome = rest.lstrip("—- ").strip()
            session.tests.append(
                (clean_inline(command, 400), outcome if outcome in ("passed", "failed") else "")
            )
        else:
            name, rest = _uncode(item)
            level = rest.strip("() ")
            session.notes.append((level if level in ("project", "user") else "project", name))
    return _fit(session)


def _fit(session: Session) -> Session:
    """The record within its caps (count of items, then :data:`MAX_RECORD_BYTES`)."""
    before = _items(session)
    session.goals = session.goals[:MAX_GOALS]
    session.files = session.files[:MAX_FILES]
    session.commands = session.commands[-MAX_COMMANDS:]  # the latest say how it ended
    session.tests = session.tests[-MAX_TESTS:]
    session.notes = session.notes[:MAX_NOTES]
    while len(render(session).encode()) > MAX_RECORD_BYTES:
        for name in ("commands", "files", "tests", "goals", "notes"):
            items = getattr(session, name)
            if len(items) > 1:
                cut = max(1, len(items) // 4)
                setattr(session, name, items[cut:] if name == "commands" else items[:-cut])
                break
        else:
            session.summary = session.summary[:200]
            session.ended_with = session.ended_with[:200]
            break
    session.left_out += before - _items(session)
    return session


def _items(session: Session) -> int:
    return sum(
        len(x)
        for x in (session.goals, session.files, session.commands, session.tests, session.notes)
    )


# -- where records live ----------------------------------------------------------------


def mode() -> str:
    """``MDMEM_SESSIONS``: ``project`` or ``private`` (the default, and for any other value)."""
    return (
        "project"
        if os.environ.get("MDMEM_SESSIONS", "").strip().lower() == "project"
        else "private"
    )


def keep_days() -> float:
    """``MDMEM_SESSIONS_DAYS`` (a positive number), else :data:`DEFAULT_DAYS`."""
    raw = os.environ.get("MDMEM_SESSIONS_DAYS", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_DAYS
    except ValueError:
        return DEFAULT_DAYS
    return value if value > 0 else DEFAULT_DAYS


def _private_folder(store_path: str | StateDir) -> str:
    return StateDir.of(store_path) / FOLDER


def _project_folder(store_path: str | StateDir) -> str:
    return os.path.join(StateDir.of(store_path).root, FOLDER)


def _real_dir(path: str) -> bool:
    """A directory, not a symlink to one (a clone's folder is never followed)."""
    import stat

    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def folders(store_path: str | StateDir) -> list[str]:
    """The folders that hold records for the store: the private one, then the project's."""
    return [f for f in (_private_folder(store_path), _project_folder(store_path)) if _real_dir(f)]


def _write_folder(store_path: str | StateDir, *, create: bool = True) -> str:
    """Where new records go, by :func:`mode` (created, private mode ``0700``).

    Raises:
        OSError: the project's ``sessions`` is not a real directory.
    """
    if mode() == "project":
        folder = _project_folder(store_path)
        if os.path.lexists(folder) and not _real_dir(folder):
            raise OSError(f"{folder}: not a directory (a symlink is never followed)")
        if create:
            files.ensure_dir(folder)
        return folder
    folder = _private_folder(store_path)
    if create:
        files.ensure_dir(folder, private=True)
    return folder


def _file_name(session: Session) -> str:
    day = session.started[:10] if re.match(r"\d{4}-\d\d-\d\d", session.started) else "undated"
    return f"{day}_{safe_id(session.session_id)}.md"


def _names(folder: str) -> Iterator[str]:
    try:
        with os.scandir(folder) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_LISTED * 2:
                    return
                if entry.name.endswith(".md") and not entry.name.startswith("."):
                    yield entry.name
    except OSError:
        return


def _read(path: str) -> Session | None:
    text = files.read_text(path, MAX_READ_BYTES)
    return parse(text, path) if text is not None else None


def _find(store_path: str | StateDir, sid: str) -> str | None:
    """The file of the record whose id is ``sid``, in either folder; None if there is none."""
    suffix = f"_{sid}.md"
    for folder in folders(store_path):
        for name in _names(folder):
            if name.endswith(suffix) or name == f"{sid}.md":
                return os.path.join(folder, name)
    return None


def _link_path(store_path: str | StateDir, key: str) -> str:
    return os.path.join(StateDir.of(store_path) / LINKS, safe_id(key) or "none")


def resolve_id(store_path: str | StateDir, session_id: str) -> str:
    """The id of the record that holds ``session_id`` (a resumed session's is the first's)."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    sid = safe_id(session_id)
    target = files.read_text(_link_path(store_path, sid), 200)
    target = safe_id(target.strip()) if target else ""
    return target or sid


def _link(store_path: str | StateDir, key: str, target: str) -> None:
    path = _link_path(store_path, key)
    files.ensure_dir(os.path.dirname(path), private=True)
    files.atomic_write(path, target.encode(), private=True, durable=False)


def load(store_path: str | StateDir, session_id: str) -> Session | None:
    """The record of ``session_id`` (through its links), or None."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    sid = resolve_id(store_path, session_id)
    if not sid:
        return None
    path = _find(store_path, sid)
    return _read(path) if path else None


def save(store_path: str | StateDir, session: Session) -> str:
    """Write the record (within its caps) where the mode says; return its path.

    A record read from the other folder moves with it: there is one file per session.

    Raises:
        OSError: it cannot be written.
    """
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    session = _fit(session)
    folder = _write_folder(store_path)
    if mode() == "project" and os.path.isabs(session.workspace):
        # A shared record is committed: not this machine's path, only the repository's name.
        session.workspace = os.path.basename(session.workspace.rstrip(os.sep))
    path = os.path.join(folder, _file_name(session))
    private = mode() != "project"  # a shared record is committed: the store's usual mode
    files.atomic_write(path, render(session).encode("utf-8"), private=private)
    if session.path and os.path.abspath(session.path) != os.path.abspath(path):
        with contextlib.suppress(OSError):
            os.unlink(session.path)
    session.path = path
    return path


def list_sessions(store_path: str | StateDir) -> list[Session]:
    """Every record of the store, newest first (by when it started); one per session id."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    found: dict[str, Session] = {}
    for folder in folders(store_path):
        for n, name in enumerate(sorted(_names(folder), reverse=True)):
            if n >= MAX_LISTED:
                break
            session = _read(os.path.join(folder, name))
            if session is not None and session.session_id not in found:
                found[session.session_id] = session
    return sorted(found.values(), key=lambda s: (s.started, s.session_id), reverse=True)


def since_stamp(text: str) -> float:
    """``--since DATE`` (``2026-11-30``, a date-time, or ``7d`` for seven days ago) as epoch
    seconds.

    Raises:
        ValueError: not a date.
    """
    text = text.strip()
    if re.fullmatch(r"\d+(?:\.\d+)?d", text):
        return time.time() - float(text[:-1]) * 86_400
    stamp = iso(text if "T" in text or " " in text else text + "T00:00:00")
    if not stamp:
        raise ValueError(f"{text!r} is not a date (2026-11-30, a date-time, or 7d)")
    return datetime.fromisoformat(stamp).timestamp()


def _same_file(recorded: str, wanted: str, workspace: str) -> bool:
    if os.path.isabs(os.path.expanduser(wanted)) and workspace:
        with contextlib.suppress(ValueError):
            wanted = os.path.relpath(os.path.expanduser(wanted), workspace)
    wanted = wanted.replace(os.sep, "/").strip("/")
    if wanted.startswith("./"):
        wanted = wanted[2:]
    return recorded == wanted or recorded.endswith("/" + wanted)


def changed(session: Session, file: str, workspace: str = "") -> bool:
    """Whether the session changed ``file`` (relative to the workspace, absolute, or a tail)."""
    return any(_same_file(f, file, workspace) for f in session.files)


def timeline(
    store_path: str | StateDir,
    *,
    limit: int | None = None,
    since: str | None = None,
    file: str | None = None,
    workspace: str = "",
) -> list[Session]:
    """The workspace's sessions, newest first: active on or after ``since``, that changed
    ``file`` (a path relative to the workspace, or its tail: ``retry.py``), at most ``limit``.

    Raises:
        ValueError: ``since`` is not a date.
    """
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    cutoff = since_stamp(since) if since else None
    out = []
    for session in list_sessions(store_path):
        if cutoff is not None and stamp_of(session) < cutoff:
            continue
        if file and not changed(session, file, workspace):
            continue
        out.append(session)
        if limit is not None and len(out) >= limit:
            break
    return out


# -- recording -----------------------------------------------------------------------------


def _merge(items: list[str], new: list[str], *, move: bool = False) -> list[str]:
    out = list(items)
    for item in new:
        if item in out:
            if not move:
                continue
            out.remove(item)
        out.append(item)
    return out


def record_activity(
    store_path: str | StateDir,
    session_id: str,
    activity: Activity,
    *,
    agent: str,
    workspace: str,
    branch: str = "",
    started: str = "",
    last: str = "",
    first_message: str = "",
    ended: bool = False,
) -> Session | None:
    """Add what a stretch of the session did to its record (created on first use).

    ``first_message`` (the id of the session's first message) ties a resumed
    session, which Claude Code gives a new id over the same history, to the
    record it continues. Merging is idempotent: a stretch seen twice adds nothing.
    Returns the record, or None when there was nothing to record.

    Raises:
        OSError: the record cannot be written.
    """
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    sid = safe_id(session_id)
    if not sid:
        return None
    started, last = iso(started), iso(last)
    session = load(store_path, sid)
    if session is None and first_message:
        first = resolve_id(store_path, "first-" + first_message)
        if first != safe_id("first-" + first_message):
            session = load(store_path, first)
            if session is not None and sid != session.session_id and sid not in session.aliases:
                session.aliases.append(sid)
                _link(store_path, sid, session.session_id)
    if session is None:
        if activity.empty() and not ended:
            return None
        stamp = started or last or _now()
        session = Session(session_id=sid, started=stamp, agent=agent, workspace=workspace)
        if first_message:
            session.first_message = first_message
            _link(store_path, "first-" + first_message, sid)
    session.goals = _merge(session.goals, activity.goals)
    session.files = _merge(session.files, activity.files)
    session.commands = _merge(session.commands, activity.commands, move=True)
    tests = [t for t in session.tests if t[0] not in {c for c, _ in activity.tests}]
    session.tests = tests + list(activity.tests)
    if activity.said:
        session.ended_with = activity.said
    if branch:
        session.branch = branch
    if activity.messages:
        session.turns += 1
    session.updated = last or _now()
    if ended:
        session.ended = last or _now()
    save(store_path, session)
    return session


def record_end(store_path: str | StateDir, session_id: str, when: str = "") -> Session | None:
    """Mark the session's record ended (SessionEnd with nothing new to add)."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    session = load(store_path, session_id)
    if session is None:
        return None
    session.ended = iso(when) or _now()
    save(store_path, session)
    return session


def record_notes(store_path: str | StateDir, session_id: str, notes: list[tuple[str, str]]) -> bool:
    """Add the notes a turn of the session wrote to its record; False if there is no record."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    session = load(store_path, session_id)
    if session is None:
        return False
    merged = list(session.notes)
    for note in notes:
        if note not in merged:
            merged.append(note)
    if merged == session.notes:
        return True
    session.notes = merged
    save(store_path, session)
    return True


def set_summary(store_path: str | StateDir, session_id: str, summary: str) -> bool:
    """Replace the record's summary (one line); False if there is no record."""
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    session = load(store_path, session_id)
    if session is None:
        return False
    save(store_path, replace(session, summary=clean_inline(summary, 600)))
    return True


# -- forgetting ------------------------------------------------------------------------------


def stamp_of(session: Session) -> float:
    """When the record was last touched (its last activity, or its restore), epoch seconds."""
    best = 0.0
    for value in (session.updated, session.ended or "", session.started, session.restored):
        with contextlib.suppress(ValueError):
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
            best = max(best, moment.timestamp())
    return best


def expire(
    store_path: str | StateDir,
    *,
    days: float | None = None,
    now: float | None = None,
    dry_run: bool = False,
) -> list[Session]:
    """Move the records not touched for ``days`` (default :func:`keep_days`) to the trash.

    Restorable with :func:`restore`. Returns the records moved (or, with
    ``dry_run``, that would be). A record with no date is judged by its file's
    modification time.
    """
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    moment = time.time() if now is None else now
    cutoff = moment - (keep_days() if days is None else days) * 86_400
    out = []
    for session in list_sessions(store_path):
        stamp = stamp_of(session)
        if not stamp:
            with contextlib.suppress(OSError):
                stamp = os.lstat(session.path).st_mtime
        if stamp >= cutoff:
            continue
        out.append(session)
        if dry_run:
            continue
        trash = StateDir.of(store_path) / TRASH
        files.ensure_dir(trash, private=True)
        data = render(session).encode("utf-8")
        files.atomic_write(os.path.join(trash, os.path.basename(session.path)), data, private=True)
        with contextlib.suppress(OSError):
            os.unlink(session.path)
    return out


def restore(store_path: str | StateDir, session_id: str) -> Session:
    """Bring a record back from the trash; returns it.

    Raises:
        FileNotFoundError: no record of that id in the trash.
    """
    store_path = StateDir.of(store_path)  # worked out once for the whole call
    sid = resolve_id(store_path, session_id)
    trash = StateDir.of(store_path) / TRASH
    for name in sorted(_names(trash)):
        if name.endswith(f"_{sid}.md"):
            session = _read(os.path.join(trash, name))
            if session is None:
                break
            session.path = os.path.join(trash, name)
            # Restored now: the next prune must not take it again at once.
            session.restored = _now()
            save(store_path, session)
            return session
    raise FileNotFoundError(f"no session {session_id!r} in the trash ({trash})")
