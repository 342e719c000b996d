"""Team memory over git: the three-way merge of MEMORY.md, and the set-up that makes git use it.

MEMORY.md is one line per note, keyed by the note's file name, so two people
who each add, change or delete different notes touch different lines, often
adjacent ones, which git's line merge calls a conflict. :func:`merge_index`
merges by key instead::

    base  ours  theirs   result
    ----  ----  ------   ------
    any   X     X        X        (the same on both sides, including both deleted)
    B     B     T        T        (changed, added or deleted on their side only)
    B     O     B        O        (changed, added or deleted on our side only)
    B     -     T        -        (deleted on one side, changed on the other: dropped)
    B     O     T        O        (changed differently on both sides: ours)

The last two rows are arbitrary but deterministic, and cannot matter much: a
merge driver runs before the merged notes are in the working tree, so it cannot
reindex them, but the line it writes is derived state. The next
``Store.load_index`` after the merge sees that the note files changed and
re-derives every line from the notes; when git merged the note itself, the
line follows the merged note.

The driver (:func:`merge_files`) merges only what is a MEMORY.md index: a
``.gitattributes`` line such as ``*.md merge=mdmem-index`` (a plausible
mistake, or a hostile clone's) would otherwise route README.md through it and
keep only the lines that look like index lines. Anything else, judged by the
path git passes (``%P``) and by every side's content, is refused: the driver
leaves git's own text merge (conflict markers) in the file and exits non-zero,
so git reports a conflict and nothing is lost.

:func:`init_store` is what ``mdmem init`` does: the store directory, a
``.gitignore`` for a legacy ``.mdmem/`` folder, a ``.gitattributes`` line naming
the merge driver, and the driver in the repository's git config, naming this
mdmem by its absolute path (:func:`driver_problem` and :func:`repair_driver` are
``mdmem doctor``'s check and repair of it).
"""

from __future__ import annotations

import os
import shlex
import subprocess
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from mdmem.errors import InvalidPath, StoreError
from mdmem.store import files
from mdmem.store.note import parse_index_line
from mdmem.store.paths import INDEX_NAME, MAX_INDEX_BYTES, STATE_DIR, check_name

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = [
    "ATTRIBUTES_LINE",
    "DEFAULT_DRIVER",
    "DRIVER_ARGS",
    "DRIVER_NAME",
    "InitReport",
    "driver_problem",
    "index_lines",
    "index_problem",
    "init_store",
    "merge_files",
    "merge_index",
    "repair_driver",
    "this_driver",
]

DRIVER_NAME = "mdmem-index"
#: The driver as older mdmem wrote it: ``mdmem`` from git's PATH, which a merge may lack.
DEFAULT_DRIVER = "mdmem merge-index"
ATTRIBUTES_LINE = f"{INDEX_NAME} merge={DRIVER_NAME}"
#: What git substitutes after the driver's command: base, ours (the result), theirs, the path.
DRIVER_ARGS = "%O %A %B %P"
# The driver line of versions that did not pass the path; `mdmem init` adds %P to it.
_OLD_ARGS = " %O %A %B"
# Where a store's MEMORY.md sits in a repository (a workspace's project store, or a
# home directory's user store shared through a dotfiles repository).
_INDEX_TAIL = (".PseudoClaude", "memory", INDEX_NAME)
_IGNORE_LINE = f"{STATE_DIR}/"


def index_lines(text: str) -> dict[str, str]:
    """The index lines of a MEMORY.md text by note file name; other lines are dropped.

    A line whose file name is not a valid note name is dropped too, as a
    reindex would never write it; of two lines for one name the last wins.
    """
    lines: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.rstrip()
        entry = parse_index_line(line)
        if entry is None:
            continue
        try:
            check_name(entry.filename)
        except InvalidPath:
            continue
        lines[entry.filename] = line
    return lines


def merge_index(base: str, ours: str, theirs: str) -> str:
    """Merge three versions of MEMORY.md by note file name; see the module's table.

    The result is what a store writes: one line per note sorted by file name,
    a final newline, and the empty string when no line is left.
    """
    b, o, t = index_lines(base), index_lines(ours), index_lines(theirs)
    merged: dict[str, str] = {}
    for name in b.keys() | o.keys() | t.keys():
        mine, other, old = o.get(name), t.get(name), b.get(name)
        if mine == other or other == old:
            line = mine
        elif mine == old:
            line = other
        elif mine is None or other is None:
            line = None  # deleted on one side wins over a change on the other
        else:
            line = mine  # changed differently on both sides
        if line is not None:
            merged[name] = line
    return "".join(f"{merged[name]}\n" for name in sorted(merged))


def index_problem(text: str) -> str | None:
    """Why ``text`` is not a MEMORY.md index, or None when every line is one.

    An index is index lines (``- [type] Title — Summary (name.md)``, each naming
    a valid note once) and blank lines, nothing else: a merge by note name keeps
    only those, so any other line would be lost.
    """
    seen: set[str] = set()
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip()
        if not line:
            continue
        entry = parse_index_line(line)
        if entry is None:
            return f"line {number} is not an index line"
        try:
            check_name(entry.filename)
        except InvalidPath as exc:
            return f"line {number} names no valid note ({exc.reason})"
        if entry.filename in seen:
            return f"line {number} names {entry.filename} a second time"
        seen.add(entry.filename)
    return None


def _path_problem(path: str) -> str | None:
    parts = path.replace("\\", "/").split("/")
    if tuple(parts[-len(_INDEX_TAIL) :]) != _INDEX_TAIL:
        return f"{path} is not a store's {INDEX_NAME} (.PseudoClaude/memory/{INDEX_NAME})"
    return None


def _read(path: str) -> str:
    """A text file of the repository (MEMORY.md, .gitignore), read as hostile input.

    Raises:
        OSError: it is a symlink, a FIFO or a device (``files.NotRegularFile``), or unreadable.
        ValueError: larger than MEMORY.md may be.
    """
    return files.read_bytes(path, MAX_INDEX_BYTES).decode("utf-8", errors="replace")


def merge_files(base: str, ours: str, theirs: str, path: str | None = None) -> None:
    """Git's merge driver: merge the three files and write the result to ``ours``.

    ``path`` is the file's path in the repository (git's ``%P``); a driver line
    of an older ``mdmem init`` does not pass it, and then the content alone decides.

    Raises:
        StoreError: ``path`` is not a store's MEMORY.md, or a side is not an
            index (:func:`index_problem`), too large, or not a regular file.
            ``ours`` then holds git's text merge with conflict markers (when
            git can make one) or is left as it was: never shorter, never emptied.
    """
    problem = _path_problem(path) if path else None
    texts: list[str] = []
    if problem is None:
        for side, name in ((base, "the base"), (ours, "ours"), (theirs, "theirs")):
            try:
                text = _read(side)
            except (OSError, ValueError) as exc:
                problem = f"{name} cannot be read as an index ({exc})"
                break
            why = index_problem(text)
            if why is not None:
                problem = f"{name} is not a {INDEX_NAME} index: {why}"
                break
            texts.append(text)
    if problem is not None:
        _text_merge(base, ours, theirs)
        shown = path or ours
        raise StoreError(shown, f"{problem}; not merged by mdmem, left to git as a conflict")
    files.atomic_write(ours, merge_index(*texts).encode("utf-8"))


def _text_merge(base: str, ours: str, theirs: str) -> None:
    """Leave git's line merge of the three files in ``ours`` (conflict markers included).

    A refused file is then what git would have made of it without the driver.
    Best effort: when git cannot merge them (binary files, no git, a side that is
    not a regular file), ``ours`` stays as it was.
    """
    try:
        before = files.read_bytes(ours, MAX_INDEX_BYTES)
        for side in (base, theirs):
            files.read_bytes(side, MAX_INDEX_BYTES)  # regular files only, bounded
        done = subprocess.run(
            [
                "git",
                "merge-file",
                "-p",
                "-L",
                "ours",
                "-L",
                "base",
                "-L",
                "theirs",
                ours,
                base,
                theirs,
            ],
            capture_output=True,
            check=False,
            timeout=60,
        )
    except (OSError, ValueError, subprocess.SubprocessError):
        return
    # 0: merged cleanly; 1..127: that many conflicts; otherwise an error (binary files).
    if not 0 <= done.returncode < 128 or (before and not done.stdout):
        return
    files.atomic_write(ours, done.stdout)


# -- mdmem init ----------------------------------------------------------------------


@dataclass
class InitReport:
    """What :func:`init_store` changed, and what it chose not to do and why."""

    changes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _ensure_line(path: str, line: str, header: str, report: InitReport) -> None:
    """Append ``line`` to the text file ``path`` unless it is already there."""
    try:
        text: str | None = _read(path)
    except FileNotFoundError:
        text = None
    if text is not None and line in (existing.strip() for existing in text.splitlines()):
        return
    if text is None:
        new = f"{header}\n{line}\n"
    else:
        new = text + ("" if not text or text.endswith("\n") else "\n") + f"{line}\n"
    files.atomic_write(path, new.encode("utf-8"))
    report.changes.append(f"{'wrote' if text is None else 'updated'} {path}")


def _git(workspace: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "-C", workspace, *args], capture_output=True, text=True, check=False
    )


def this_driver() -> str:
    """The driver's command for this mdmem, by absolute paths (``_spawn.console_command``).

    Git runs a merge driver with its own PATH (a GUI client, an IDE, a hook), where
    ``mdmem`` may be missing, and in the repository's top folder, where ``python -m
    mdmem`` would import a clone's own ``mdmem/``: the hooks' command avoids both.

    Raises:
        OSError: the interpreter's absolute path is unknown.
    """
    from mdmem import _spawn

    return _spawn.console_command("merge-index")


def _program_missing(driver: str) -> str | None:
    """The driver's program, or a file it names, when it is gone (stale), else None.

    Runs nothing: the program is looked up on PATH, and every absolute path among
    the words before ``merge-index`` (the interpreter, the console script) must exist.
    """
    import shutil

    try:
        words = shlex.split(driver)
    except ValueError:
        return driver
    if not words:
        return driver
    program = words[0]
    if os.sep not in program and not shutil.which(program):
        return program
    before = words[: words.index("merge-index")] if "merge-index" in words else words[:1]
    for word in before:
        if os.path.isabs(word) and not os.path.exists(word):
            return word
    return None


def _in_work_tree(workspace: str) -> str | None:
    """Why ``workspace`` has no git config of its own to hold a driver, or None."""
    try:
        inside = _git(workspace, "rev-parse", "--is-inside-work-tree")
    except FileNotFoundError:
        return "git is not installed"
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        return f"{workspace} is not in a git repository"
    return None


def driver_problem(workspace: str) -> str | None:
    """What is wrong with this clone's merge driver for MEMORY.md, or None when it works.

    Only asked where ``.gitattributes`` names the driver (``mdmem init`` ran):
    missing from the clone's git config (config is not committed), or naming a
    program that is no longer there (an uninstalled or moved mdmem).
    """
    if _in_work_tree(workspace) is not None:
        return None
    current = _git(workspace, "config", "--local", "--get", f"merge.{DRIVER_NAME}.driver")
    driver = current.stdout.strip()
    if not driver:
        return "not configured in this clone: MEMORY.md merges as plain text"
    missing = _program_missing(driver)
    if missing is not None:
        return f"stale: {missing} is not found, so git falls back to a text merge"
    return None


def repair_driver(workspace: str) -> str:
    """Write this mdmem's driver into the clone's git config; what was done.

    Raises:
        OSError: not in a git work tree, or ``git config`` failed.
    """
    why = _in_work_tree(workspace)
    if why is not None:
        raise OSError(f"{why}: no merge driver to repair")
    report = InitReport()
    _write_driver(workspace, f"{this_driver()} {DRIVER_ARGS}", report)
    return "; ".join(report.changes) or "merge driver already set"


def _setup_driver(workspace: str, command: str | None, report: InitReport) -> None:
    why = _in_work_tree(workspace)
    if why is not None:
        report.notes.append(f"{why}: the merge driver is not configured")
        return
    key = f"merge.{DRIVER_NAME}.driver"
    wanted = f"{command or this_driver()} {DRIVER_ARGS}"
    current = _git(workspace, "config", "--local", "--get", key).stdout.strip()
    # An older mdmem's bare `mdmem merge-index`, or a driver whose program is gone, is
    # replaced; any other driver someone set is theirs to keep.
    replace = current in (f"{DEFAULT_DRIVER}{_OLD_ARGS}", f"{DEFAULT_DRIVER} {DRIVER_ARGS}") or (
        bool(current) and _program_missing(current) is not None
    )
    if current and command is None and current != wanted and not replace:
        if current.endswith(_OLD_ARGS):
            # An older init's line: git must pass the path, so the driver can refuse
            # a file that is not MEMORY.md.
            wanted = f"{current} %P"
        else:
            report.notes.append(f"kept {key} = {current!r} (--driver-command replaces it)")
            wanted = current
    _write_driver(workspace, wanted, report)


def _write_driver(workspace: str, wanted: str, report: InitReport) -> None:
    key = f"merge.{DRIVER_NAME}.driver"
    settings = {f"merge.{DRIVER_NAME}.name": "mdmem: merge MEMORY.md by note", key: wanted}
    for name, value in settings.items():
        if _git(workspace, "config", "--local", "--get", name).stdout.strip() == value:
            continue
        done = _git(workspace, "config", "--local", name, value)
        if done.returncode != 0:
            raise OSError(f"git config {name} failed: {done.stderr.strip()}")
        report.changes.append(f"git config {name} {shlex.quote(value)}")


def init_store(store: Store, workspace: str, driver_command: str | None = None) -> InitReport:
    """Prepare a project store for sharing through git; safe to run again.

    Creates the store and an empty MEMORY.md, ``.gitignore`` (keeping a legacy
    ``.mdmem/`` folder of older mdmem out of git; mdmem's state lives outside the
    repository), ``.gitattributes`` (``MEMORY.md merge=mdmem-index``) and, inside
    a git work tree, the driver in the repository's config: ``<driver_command>
    %O %A %B %P``, this mdmem by absolute paths (:func:`this_driver`) unless given.
    An existing, different driver is kept unless ``driver_command`` is given, or
    it is older mdmem's bare ``mdmem merge-index``, or its program is gone (an
    older init's line gets ``%P`` added).

    Raises:
        StoreError: ``store`` is not used as a project store (``Store.unavailable``:
            the home directory, a symlinked ``.PseudoClaude``): nothing is written.
        OSError: a file could not be written, or ``git config`` failed.
    """
    if store.unavailable is not None:
        raise StoreError(store.path, f"not used as a project store: {store.unavailable}")
    report = InitReport()
    if not os.path.isdir(store.path):
        files.ensure_dir(store.path, private=store.private)
        report.changes.append(f"created {store.path}")
    index = os.path.join(store.path, INDEX_NAME)
    if not os.path.exists(index) and not store.load_index():
        files.atomic_write(index, b"", private=store.private)
        report.changes.append(f"wrote {index}")
    _ensure_line(
        os.path.join(store.path, ".gitignore"),
        _IGNORE_LINE,
        "# derived state of mdmem (safe to delete, rebuilt on demand)",
        report,
    )
    _ensure_line(
        os.path.join(store.path, ".gitattributes"),
        ATTRIBUTES_LINE,
        "# merge the index note by note, never as text (mdmem merge-index)",
        report,
    )
    _setup_driver(workspace, driver_command, report)
    return report
