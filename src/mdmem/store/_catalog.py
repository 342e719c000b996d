"""Derived state that makes a store cheap to read and to write: it changes by the note.

The notes are the truth; this module only remembers what it learnt from them,
in the store's state folder (outside the repository, see ``paths.state_dir``):

- ``catalog.sqlite`` (SQLite in WAL mode): one row per note, with its stat,
  content hash, index line and fields, plus what MEMORY.md was when mdmem last
  wrote it. A write changes the rows of the notes it touched, nothing else.
- ``fingerprint``: written only when the store is *settled*; a hash of every
  note's stat, and the stats of what the prompt block is made of (the store
  directory, MEMORY.md, the notes of its first lines).
- ``clock``: a file whose mtime is the file-system clock "now" (see below).

Deleting any of them at any moment loses nothing: the next read rebuilds them.

A settled ``load_index`` scans the directory, hashes the stats and compares
with ``fingerprint``; ``head`` (what ``mdmem index`` needs) checks only the
directory, MEMORY.md and the notes of the block's lines, then reads MEMORY.md
up to the block's limits. Neither imports ``sqlite3`` nor YAML. Anything else
goes through the catalog, which re-reads only files whose stat changed, and
re-parses only files whose bytes changed.

Like git's index, this must not be fooled by a file rewritten twice within one
tick of the file-system clock with the same size. Each row records ``at``, the
file-system time (the ``clock`` file touched) taken *before* its bytes were
read; the recorded stat proves the note unchanged only while the note's mtime
and ctime are strictly older than ``at``: any later change of the note gets an
mtime and ctime of at least ``at``, so a different stat. A note as new as its
row is hashed again next time, and while any is, no fingerprint is written.
"""

from __future__ import annotations

import contextlib
import os
import stat
from array import array

try:  # hashlib costs milliseconds to import (OpenSSL); blake2 alone is enough here
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b as _blake2b

from mdmem.errors import InvalidPath, MdmemError
from mdmem.store import files
from mdmem.store.paths import (
    INDEX_NAME,
    check_name,
    is_candidate_name,
    is_plain_name,
    note_path,
    printable_name,
)
from mdmem.store.state import CATALOG, CLOCK, FINGERPRINT, StateDir, ensure_state_dir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    import io
    import sqlite3
    from collections.abc import Callable, Collection, Iterable, Iterator
    from typing import Any, TypeVar

    _C = TypeVar("_C")

__all__ = [
    "Catalog",
    "CatalogError",
    "Entry",
    "Fingerprint",
    "Scan",
    "content_hash",
    "fs_now",
    "is_busy",
    "is_damage",
    "iter_listing",
    "listing",
    "load",
    "present",
    "read_fingerprint",
    "read_head",
    "stat_of",
    "type_counts",
    "updated_times",
]

# 6: the dedupe keys (store/_dedupe_keys.py), the index of marked rows; 7: changes;
# 8: each note's number key (``nums``), the dedupe keys grouped by it
_VERSION = 8
#: The most note names the fingerprint lists for the block's quick check.
HEAD_NAMES = 2_000

# ctime too, as git does: an edit that restores the old mtime (an editor, `touch -r`,
# a same-size rewrite within one clock tick then utime) still changes the ctime.
Stat = tuple[int, int, int, int]
# A note's row, as plain data (absent keys are None):
# {"st": [mtime_ns, size, ino, ctime_ns], "at": int, "sha": str, "line": str, "error": str,
#  "type": str, "title": str, "summary": str, "updated": str}
Entry = dict[str, object]
_FIELDS = ("sha", "line", "type", "title", "summary", "updated", "error", "nums")
_KNOWN = frozenset(("st", "at", *_FIELDS))


def _stat_of(st: os.stat_result) -> Stat:
    return (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)


def stat_of(path: str) -> Stat | None:
    """``lstat`` of ``path`` as a :data:`Stat`; None when it is gone."""
    try:
        return _stat_of(os.lstat(path))
    except FileNotFoundError:
        return None


#: Names :func:`is_plain_name` said yes to in this process (it depends on the name
#: alone): a later scan asks a set, not the check, for each of them. Bounded: the
#: first names seen are kept, the rest are checked each time (at 100,000 notes a set
#: of every name was 5 MiB of a first load's peak, for a process that scans once).
_PLAIN_NAMES: set[str] = set()
_PLAIN_NAMES_MAX = 25_000


def _plain_name(name: str) -> bool:
    if name in _PLAIN_NAMES:
        return True
    if not is_plain_name(name):
        return False
    if len(_PLAIN_NAMES) < _PLAIN_NAMES_MAX:
        _PLAIN_NAMES.add(name)
    return True


class Scan:
    """What a directory listing says about a store, without opening a note.

    The listing is taken at once (one ``lstat`` per entry); which entries are
    notes, and which are rejected, is worked out only when asked, because a
    settled store is recognised by its fingerprint alone.
    """

    __slots__ = (
        "_classified",
        "_names",
        "_numbers",
        "_plain",
        "_rejected",
        "_root",
        "_stats",
        "dir_stat",
        "index_stat",
    )

    def __init__(self, root: str) -> None:
        self._root = root
        # Flat arrays, not a tuple per entry: at 100,000 notes this is the hot loop,
        # and what peak memory is made of.
        self._names: list[str] = []
        self._numbers = array("q")  # mtime_ns, size, inode, ctime_ns, mode for each name
        self._stats: dict[str, Stat] = {}  # links to notes, their targets' stats
        self._plain = bytearray()
        self._rejected: dict[str, str] = {}
        self._classified = False
        self.index_stat: Stat | None = None
        self.dir_stat: Stat | None = None
        try:
            # Before the listing: a change made while we list moves the directory's
            # mtime past what is recorded here.
            self.dir_stat = _stat_of(os.lstat(root))
            it = os.scandir(root)
        except (FileNotFoundError, NotADirectoryError):
            return
        names, numbers = self._names, self._numbers
        with it:
            for entry in it:
                name = entry.name
                if not name.endswith(".md") or name[0] == "." or not is_candidate_name(name):
                    if name == INDEX_NAME:
                        try:
                            self.index_stat = _stat_of(entry.stat(follow_symlinks=False))
                        except FileNotFoundError:
                            continue  # replaced while we looked
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while we looked
                names.append(name)
                numbers.extend((st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, st.st_mode))

    def __len__(self) -> int:
        return len(self._names)

    def fingerprint(self) -> str:
        """A hash of everything a stat pass can see; equal fingerprints mean an unchanged store.

        Entries are hashed in the order the directory lists them: an unchanged
        directory lists them in the same order, and a mere reordering only
        costs one slower load.
        """
        h = _blake2b(f"v{_VERSION}|{self.index_stat}|".encode(), digest_size=16)
        h.update("\0".join(self._names).encode("utf-8", "surrogatepass"))
        h.update(self._numbers.tobytes())
        return h.hexdigest()

    def classify(self, valid: Collection[str] | _ValidNames = ()) -> None:
        """Sort the listing into notes and rejected names; ``valid`` names passed the check before.

        A name is validated once, when it first appears: the catalog remembers
        which names passed, so a scan does not run the full validator again.
        Plain notes stay in the flat arrays (a tuple each would be most of the
        memory at 100,000 notes); links and odd entries are resolved here.
        """
        if self._classified:
            return
        self._classified = True
        numbers = self._numbers
        plain = bytearray(len(self._names))  # 1: a regular file with a valid name
        for position, name in enumerate(self._names):
            mode = numbers[5 * position + 4]
            if stat.S_ISREG(mode) and (_plain_name(name) or name in valid):
                plain[position] = 1
                continue
            try:
                check_name(name)
                if not stat.S_ISREG(mode):
                    # The one validator says why a link or an odd entry is not a note.
                    note_path(self._root, name, must_exist=True)
                    continue  # it became a regular file meanwhile: the next scan sees it
                name.encode("utf-8")
            except InvalidPath as exc:
                # Keyed by a printable name: a name that is not UTF-8 or holds a
                # newline must not break the catalog, a log line or a terminal.
                self._rejected[printable_name(name)] = exc.reason
                continue
            except UnicodeEncodeError:
                self._rejected[printable_name(name)] = "the name is not valid UTF-8"
                continue
            except FileNotFoundError:
                continue
            plain[position] = 1
        self._plain = plain

    def sorted_notes(self) -> Iterator[tuple[str, Stat]]:
        """:meth:`notes`, sorted by name (the catalog's order), without a tuple per note held."""
        self.classify()
        numbers, names = self._numbers, self._names
        plain = self._plain
        order = sorted((p for p in range(len(names)) if plain[p]), key=names.__getitem__)

        def flat() -> Iterator[tuple[str, Stat]]:
            for position in order:
                at = 5 * position
                yield (
                    names[position],
                    (numbers[at], numbers[at + 1], numbers[at + 2], numbers[at + 3]),
                )

        links = sorted(self._stats.items())
        if not links:
            yield from flat()
            return
        import heapq

        yield from heapq.merge(flat(), links)

    def notes(self) -> Iterator[tuple[str, Stat]]:
        """The notes (regular files only): (name, (mtime_ns, size, inode, ctime_ns))."""
        self.classify()
        numbers = self._numbers
        for position, name in enumerate(self._names):
            if self._plain[position]:
                yield (
                    name,
                    (
                        numbers[5 * position],
                        numbers[5 * position + 1],
                        numbers[5 * position + 2],
                        numbers[5 * position + 3],
                    ),
                )
        yield from self._stats.items()

    def count(self) -> int:
        """How many notes :meth:`notes` yields."""
        self.classify()
        return self._plain.count(1) + len(self._stats)

    @property
    def stats(self) -> dict[str, Stat]:
        """The notes as a dict (small stores and tests; large ones iterate :meth:`notes`)."""
        return dict(self.notes())

    @property
    def rejected(self) -> dict[str, str]:
        """Entries that look like notes but may not be: name -> why."""
        self.classify()
        return self._rejected


# -- the fingerprint: what the fast paths check -------------------------------------


class Fingerprint:
    """The settled store as last seen: a full hash, and what the prompt block rests on."""

    __slots__ = ("dir", "full", "head", "index", "lines")

    def __init__(
        self, full: str, dir: Stat, index: Stat, lines: int, head: list[tuple[str, Stat]] | None
    ) -> None:
        self.full = full
        self.dir = dir
        self.index = index
        self.lines = lines
        self.head = head  # None: too many names before the block's last line to list

    def dump(self) -> bytes:
        out = [
            f"mdmem-fingerprint {_VERSION}",
            self.full,
            " ".join(map(str, self.dir)),
            " ".join(map(str, (*self.index, self.lines))),
            "-" if self.head is None else str(len(self.head)),
        ]
        if self.head is not None:
            out += [f"{' '.join(map(str, st))} {name}" for name, st in self.head]
        return ("\n".join(out) + "\n").encode("utf-8", "surrogatepass")

    @classmethod
    def load(cls, data: bytes) -> Fingerprint | None:
        """Parse :meth:`dump`'s bytes; None when they are not a whole fingerprint."""
        try:
            lines = data.decode("utf-8", "surrogatepass").split("\n")
            if lines[0] != f"mdmem-fingerprint {_VERSION}" or lines[-1] != "":
                return None
            d = [int(x) for x in lines[2].split(" ")]
            i = [int(x) for x in lines[3].split(" ")]
            if len(d) != 4 or len(i) != 5:
                return None
            head: list[tuple[str, Stat]] | None = None
            if lines[4] != "-":
                head = []
                for line in lines[5:-1]:
                    m, s, n, c, name = line.split(" ", 4)
                    head.append((name, (int(m), int(s), int(n), int(c))))
                if len(head) != int(lines[4]):
                    return None
            return cls(lines[1], (d[0], d[1], d[2], d[3]), (i[0], i[1], i[2], i[3]), i[4], head)
        except (ValueError, IndexError):
            return None


def _state(root: str) -> str:
    return StateDir.of(root).path


def _fp_path(root: str) -> str:
    return os.path.join(_state(root), FINGERPRINT)


def read_fingerprint(root: str) -> Fingerprint | None:
    """The fingerprint saved when the store was last seen settled, if any."""
    try:
        with open(_fp_path(root), "rb") as f:
            return Fingerprint.load(f.read())
    except OSError:
        return None


def write_fingerprint(root: str, fp: Fingerprint | None, *, private: bool) -> None:
    """Save (or, with None, remove) the fingerprint; derived, so failures are ignored."""
    try:
        if fp is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(_fp_path(root))
        else:
            # 0600 whatever the level: the state tree is the user's own.
            files.atomic_write(_fp_path(root), fp.dump(), private=True, durable=False)
    except OSError:
        pass


def open_regular(path: str) -> io.BufferedReader:
    """Open a regular file for reading, never through a symlink, never blocking on a FIFO.

    Raises:
        OSError: absent, a link, a FIFO, a device or a directory.
    """
    fd = os.open(path, files.READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise files.NotRegularFile(22, "not a regular file", path)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_head(path: str, max_lines: int, max_bytes: int) -> tuple[list[str], bool]:
    """The first non-blank lines of MEMORY.md, enough to fill a block; and whether that is all.

    Reads in small chunks and stops once more than ``max_lines`` lines or
    ``max_bytes`` bytes are in hand: no block can show more than that.
    """
    lines: list[str] = []
    size = 0
    rest = b""
    with open_regular(path) as f:
        while True:
            chunk = f.read(8192)
            if not chunk:
                if rest.strip():
                    lines.append(rest.decode("utf-8").rstrip())
                return lines, True
            parts = (rest + chunk).split(b"\n")
            rest = parts.pop()
            for raw in parts:
                if raw.strip():
                    lines.append(raw.decode("utf-8").rstrip())
                    size += len(raw) + 1
                    if len(lines) > max_lines or size > max_bytes:
                        return lines, False


def head_is_current(root: str, fp: Fingerprint) -> bool:
    """Whether the block's part of MEMORY.md is still what the notes say: a few ``lstat``.

    The directory's own stat shows that no note was added, removed or renamed
    (it changes with every entry, and was older than the fingerprint when
    recorded); the notes of the first lines show they were not edited.
    Notes further down cannot change the block's lines, only, when one turns
    valid or invalid by hand, the count of notes left out, until the next full
    load catches up.
    """
    if fp.head is None:
        return False
    try:
        if _stat_of(os.lstat(root)) != fp.dir:
            return False
        if _stat_of(os.lstat(os.path.join(root, INDEX_NAME))) != fp.index:
            return False
        for name, st in fp.head:
            # Followed, as the scan does for a note that is a link (validated then).
            if _stat_of(os.stat(os.path.join(root, name))) != st:
                return False
    except OSError:
        return False
    return True


def store_key(root: str) -> str:
    """The store's key: the stats of its directory and of MEMORY.md, as text.

    Every create, delete and rename in the directory (how mdmem, most editors
    and git write) changes it; an in-place edit of a note does not.
    """
    parts = []
    for path in (root, os.path.join(root, INDEX_NAME)):
        st = stat_of(path)
        parts.append("" if st is None else " ".join(map(str, st)))
    return "|".join(parts)


def key_of(dir_stat: Stat | None, index_stat: Stat | None) -> str:
    """:func:`store_key` from stats already taken."""
    return "|".join("" if st is None else " ".join(map(str, st)) for st in (dir_stat, index_stat))


def fs_now(root: str, *, private: bool) -> int:
    """The file-system clock's "now": touch the ``clock`` file and read its times back.

    The same clock that stamps notes' mtimes, whatever its granularity; 0 when
    the state folder cannot be written (then no stat is ever trusted).
    """
    try:
        path = os.path.join(ensure_state_dir(root, private=private), CLOCK)
        try:
            os.utime(path)
        except FileNotFoundError:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        st = os.stat(path)
    except OSError:
        return 0
    return min(st.st_mtime_ns, st.st_ctime_ns)


# -- the catalog: SQLite, one row per note ------------------------------------------------

_SCHEMA = """
CREATE TABLE IF NOT EXISTS notes (
    name TEXT PRIMARY KEY,
    folded TEXT NOT NULL,
    mtime INTEGER, size INTEGER, ino INTEGER, ctime INTEGER,
    at INTEGER NOT NULL DEFAULT 0,
    sha TEXT, line TEXT, type TEXT, title TEXT, summary TEXT, updated TEXT, error TEXT,
    nums TEXT, extra TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS notes_folded ON notes (folded);
-- The rows of notes with supersedes/expires: every write reads them (marks), never all rows.
CREATE INDEX IF NOT EXISTS notes_marked ON notes (name) WHERE extra IS NOT NULL;
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT) WITHOUT ROWID;
-- The prompt block's order (ranked_lines): its first lines without sorting every row.
CREATE INDEX IF NOT EXISTS notes_rank ON notes (
    CASE type WHEN 'correction_feedback' THEN 0 WHEN 'user_preference' THEN 0
    WHEN 'project_knowledge' THEN 1 WHEN 'reference_material' THEN 2 ELSE 3 END,
    COALESCE(updated, '') DESC, name
) WHERE line IS NOT NULL;
-- The change log (see Catalog.log): what each pass that changed rows changed, between
-- which store keys. names is a JSON list, or NULL: "too much to list, catch up in full".
CREATE TABLE IF NOT EXISTS changes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    before TEXT NOT NULL, after TEXT NOT NULL, names TEXT
);
"""
#: The orders :meth:`Catalog.select` sorts by (``title``: ASCII letters folded, as NOCASE).
ORDERS = {
    "updated": "COALESCE(updated, '') DESC, name",
    "oldest": "COALESCE(updated, '') ASC, name",
    "title": "title COLLATE NOCASE, name",
    "name": "name",
}
#: How many change-log entries are kept; a reader further behind catches up in full.
LOG_KEEP = 512
#: Past this many names, a pass logs "catch up in full" instead of the names.
LOG_NAMES = 1_000
_COLUMNS = (
    "name, mtime, size, ino, ctime, at, sha, line, type, title, summary, updated, error, nums,"
    " extra"
)


def is_damage(exc: BaseException) -> bool:
    """Whether ``exc`` says the catalog file is damaged or unusable (then it is rebuilt).

    For this module's own code, where SQLite is called; above it, a catalog call
    raises :class:`CatalogError` and nothing else of SQLite's.
    """
    if isinstance(exc, CatalogError):
        return True
    import sys

    sqlite3 = sys.modules.get("sqlite3")
    return sqlite3 is not None and isinstance(exc, sqlite3.Error)


def _log_damage(root: str, exc: BaseException) -> None:
    import logging

    logging.getLogger("mdmem").warning(
        "%s: the catalog was unusable (%s); rebuilding it from the notes", root, exc
    )


def check(root: str) -> str | None:
    """What is wrong with the store's catalog file (None: nothing, or there is none yet).

    Read-only (a damaged catalog is reported, not repaired, by the caller): for
    ``mdmem doctor``, which must see the damage every other command repairs.
    """
    import sqlite3

    path = os.path.join(_state(root), CATALOG)
    if not os.path.isfile(path):
        return None
    from pathlib import Path

    # Without a WAL the file is the whole catalog: opened immutable, SQLite creates no
    # -wal or -shm file (a look changes nothing). With one, a reader shares its -shm.
    live = os.path.exists(path + "-wal")
    if not live and (short := _cut_short(path)) is not None:
        return short
    try:
        con = sqlite3.connect(
            Path(path).as_uri() + ("?mode=ro" if live else "?immutable=1"), uri=True, timeout=1
        )
    except sqlite3.Error as exc:
        return str(exc)
    try:
        rows = con.execute("PRAGMA quick_check(1)").fetchall()
    except sqlite3.Error as exc:
        return None if is_busy(exc) else str(exc)
    finally:
        con.close()
    return None if rows == [("ok",)] else str(rows[0][0])


def _cut_short(path: str) -> str | None:
    """Why a catalog file without a WAL is shorter than its header says (None: it is not).

    Opened immutable, SQLite takes the file's size as it finds it; a file cut short
    can then pass ``quick_check``, which a normal open would have refused.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError as exc:
        return exc.strerror or str(exc)
    if not head:
        return None  # SQLite takes an empty file for an empty database
    if len(head) < 100 or not head.startswith(b"SQLite format 3\0"):
        return "file is not a database"
    page = int.from_bytes(head[16:18], "big")
    page = 65_536 if page == 1 else page
    pages = int.from_bytes(head[28:32], "big")
    # The header's page count is valid while its two change counters agree.
    if pages and head[24:28] == head[92:96] and pages * page > size:
        return f"the file is cut short ({size} bytes of {pages * page})"
    return None


def is_busy(exc: BaseException) -> bool:
    """Whether ``exc`` only says another connection holds the catalog right now.

    Such a catalog is not damaged: it must never be thrown away (unlinking a WAL
    database's files under a live connection of another thread or process can
    make SQLite map a different -shm file, and a later truncation of it is a
    SIGBUS), only worked around for this call.
    """
    if isinstance(exc, CatalogError):
        return exc.busy
    import sys

    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is None or not isinstance(exc, sqlite3.OperationalError):
        return False
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _row_entry(row: tuple[object, ...]) -> Entry:
    entry: Entry = {}
    if row[1] is not None:
        entry["st"] = [row[1], row[2], row[3], row[4]]
    entry["at"] = row[5]
    for key, value in zip(_FIELDS, row[6:14], strict=True):
        if value is not None:
            entry[key] = value
    if row[14]:
        import json

        # Whatever else the note's entry holds (supersedes, expires, ...), as JSON.
        entry.update(json.loads(str(row[14])))
    return entry


_PUT = (
    f"INSERT OR REPLACE INTO notes (folded, {_COLUMNS}) "
    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def _put_row(name: str, entry: Entry) -> tuple[object, ...]:
    st = entry.get("st") or (None, None, None, None)
    assert isinstance(st, (list, tuple))
    others = {k: v for k, v in entry.items() if k not in _KNOWN}
    extra = None
    if others:
        import json

        extra = json.dumps(others, ensure_ascii=False, sort_keys=True)
    return (
        name.casefold(),
        name,
        *st,
        entry.get("at", 0),
        *(entry.get(k) for k in _FIELDS),
        extra,
    )


class _ValidNames:
    """``name in`` the rows recorded as valid notes: one indexed look-up per question."""

    __slots__ = ("_con",)

    def __init__(self, con: sqlite3.Connection) -> None:
        self._con = con

    def __contains__(self, name: object) -> bool:
        try:
            row = self._con.execute(
                "SELECT 1 FROM notes WHERE name = ? AND mtime IS NOT NULL", (name,)
            ).fetchone()
        except UnicodeEncodeError:  # not UTF-8: never recorded as valid
            return False
        return row is not None


class CatalogError(MdmemError):
    """The one error a catalog call raises for SQLite's (internal to ``store/``).

    An ``MdmemError``, so that one that gets past the store (it catches them all
    where it can rebuild or fall back) is shown as one line, not a traceback.

    The file is damaged or unusable (the store rebuilds it from the notes), or,
    when :attr:`busy`, another connection holds it right now (the store answers
    from a catalog in memory this once, and never throws a live one away). The
    SQLite error is its ``__cause__``.
    """

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"the catalog: {cause}")
        self.busy = is_busy(cause)


class _Translated:
    """Where SQLite's errors become :class:`CatalogError`: every public method of
    :class:`Catalog` runs inside it (httpx's ``map_httpcore_exceptions``), so the
    store catches one named error instead of asking each exception what it is."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        if exc is not None and not isinstance(exc, CatalogError) and is_damage(exc):
            raise CatalogError(exc) from exc


translated = _Translated()
_CO_GENERATOR = 0x20  # inspect.CO_GENERATOR, without importing inspect on the fast path


def _at_the_edge(cls: type[_C]) -> type[_C]:
    """Run every public method of ``cls`` (generators too) inside :data:`translated`."""

    def wrap(method: Callable[..., Any]) -> Callable[..., Any]:
        if method.__code__.co_flags & _CO_GENERATOR:

            def generator(*args: Any, **kwargs: Any) -> Any:
                with translated:
                    yield from method(*args, **kwargs)

            wrapped = generator
        else:

            def call(*args: Any, **kwargs: Any) -> Any:
                with translated:
                    return method(*args, **kwargs)

            wrapped = call
        wrapped.__name__ = method.__name__
        wrapped.__qualname__ = method.__qualname__
        wrapped.__doc__ = method.__doc__
        wrapped.__wrapped__ = method  # type: ignore[attr-defined]
        return wrapped

    for name, value in list(vars(cls).items()):
        if not name.startswith("_") and callable(value) and hasattr(value, "__code__"):
            setattr(cls, name, wrap(value))
    return cls


@_at_the_edge
class Catalog:
    """The store's rows, in SQLite; opened on first use, rebuilt when damaged.

    One connection per store object and process. All writes happen in one
    transaction per refresh (:meth:`begin` ... :meth:`commit`).
    """

    def __init__(self, root: str, *, private: bool, memory: bool = False) -> None:
        self._root = root
        self._private = private
        self._con: sqlite3.Connection | None = None
        self._ino: int | None = None
        self.memory = memory  # True when the state folder cannot hold the catalog
        self._keys: bool | None = None  # whether the dedupe keys are kept (this transaction)

    @property
    def path(self) -> str:
        return os.path.join(_state(self._root), CATALOG)

    def _open(self) -> sqlite3.Connection:
        import sqlite3

        con = self._con
        if con is None and self.memory:
            con = self._con = sqlite3.connect(
                ":memory:", isolation_level=None, check_same_thread=False
            )
            self._setup(con)
            return con
        if con is not None:
            if self.memory:
                return con
            try:
                if os.stat(self.path).st_ino == self._ino:
                    return con
            except OSError:
                pass
            # Deleted or replaced behind our back: start again from what is on disk.
            self.close()
        try:
            ensure_state_dir(self._root, private=self._private)
            try:
                con = self._connect()
            except sqlite3.Error as exc:
                if is_busy(exc):
                    raise
                # Not a database, or a damaged one: the catalog is derived from the
                # notes, so it is thrown away and rebuilt, never a reason to fail.
                _log_damage(self._root, exc)
                self.reset()
                con = self._connect()
            self._ino = os.stat(self.path).st_ino
            self.memory = False
        except sqlite3.Error:
            raise
        except OSError:
            con = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
            self._setup(con)
            self.memory = True
        self._con = con
        return con

    def _connect(self) -> sqlite3.Connection:
        import sqlite3

        con = sqlite3.connect(self.path, timeout=0, isolation_level=None, check_same_thread=False)
        try:
            # Only when it differs: a chmod changes the file's ctime, which the recall
            # index's freshness key holds, so a chmod on every open made every later
            # query distrust (and re-commit) the index.
            if stat.S_IMODE(os.stat(self.path).st_mode) != 0o600:
                os.chmod(self.path, 0o600)
            self._setup(con)
        except BaseException:
            con.close()
            raise
        return con

    @staticmethod
    def _setup(con: sqlite3.Connection) -> None:
        # Derived state: no fsync (synchronous=OFF). A catalog lost or damaged by a
        # power cut is noticed (it is checksummed in WAL mode, or fails to open)
        # and rebuilt from the notes; stale rows only cost a re-read.
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=OFF")
        version = con.execute("PRAGMA user_version").fetchone()[0]
        if version != _VERSION:
            from mdmem.store import _dedupe_keys

            con.executescript(
                "DROP TABLE IF EXISTS notes; DROP TABLE IF EXISTS meta;"
                "DROP TABLE IF EXISTS dedupe_notes; DROP TABLE IF EXISTS dedupe_grams;"
                "DROP TABLE IF EXISTS dedupe_df; DROP TABLE IF EXISTS changes;"
            )
            con.executescript(_SCHEMA + _dedupe_keys.SCHEMA)
            # Which catalog this is: a reader's place in the log means nothing in another.
            con.execute("INSERT OR REPLACE INTO meta VALUES ('epoch', ?)", (os.urandom(8).hex(),))
            con.execute(f"PRAGMA user_version={_VERSION}")

    def close(self) -> None:
        if self._con is not None:
            with contextlib.suppress(Exception):
                self._con.close()
        self._con = None
        self._ino = None
        self._keys = None

    def reset(self) -> None:
        """Throw the catalog away (it is damaged); the next use starts an empty one."""
        self.close()
        if self.memory:
            return
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(self.path + suffix)

    # -- transactions -------------------------------------------------------------

    def begin(self, timeout: float) -> bool:
        """Start the write transaction; False if another process holds it past ``timeout``."""
        import sqlite3

        con = self._open()
        con.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        self._keys = None
        try:
            con.execute("BEGIN IMMEDIATE")
        except sqlite3.OperationalError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                return False
            raise
        return True

    def commit(self) -> None:
        con = self._open()
        if con.in_transaction:
            con.execute("COMMIT")

    def rollback(self) -> None:
        self._keys = None
        if self._con is not None and self._con.in_transaction:
            self._con.execute("ROLLBACK")

    # -- reading ------------------------------------------------------------------

    def stats(self) -> dict[str, tuple[int, int, int, int, int] | None]:
        """name -> (mtime, size, ino, ctime, at) for every row; None for a rejected name."""
        rows = self._open().execute("SELECT name, mtime, size, ino, ctime, at FROM notes")
        return {
            name: None if mtime is None else (mtime, size, ino, ctime, at)
            for name, mtime, size, ino, ctime, at in rows
        }

    def iter_stats(self, page: int = 2_000) -> Iterator[tuple[str, Stat | None, int]]:
        """(name, stat or None for a rejected name, at) of every row, sorted by name.

        A page at a time, each fetched whole before it is handed out: rows the
        caller writes meanwhile (names up to the last one handed out) are never
        read back, and no more than a page is held.
        """
        con = self._open()
        after = ""
        first = True
        while True:
            rows = con.execute(
                "SELECT name, mtime, size, ino, ctime, at FROM notes"
                f" WHERE {'1' if first else 'name > ?'} ORDER BY name LIMIT ?",
                (page,) if first else (after, page),
            ).fetchall()
            first = False
            for name, mtime, size, ino, ctime, at in rows:
                yield name, None if mtime is None else (mtime, size, ino, ctime), at
            if len(rows) < page:
                return
            after = rows[-1][0]

    def valid_names(self) -> _ValidNames:
        """The names recorded as valid notes, asked one at a time (see :meth:`Scan.classify`)."""
        return _ValidNames(self._open())

    def get(self, name: str) -> Entry | None:
        row = (
            self._open().execute(f"SELECT {_COLUMNS} FROM notes WHERE name = ?", (name,)).fetchone()
        )
        return None if row is None else _row_entry(row)

    def rows(
        self,
        *,
        where: str = "line IS NOT NULL",
        offset: int = 0,
        limit: int | None = None,
        after: str | None = None,
    ) -> Iterator[tuple[str, Entry]]:
        """(name, entry) sorted by name, for the rows ``where`` selects (names past ``after``)."""
        clause = where if after is None else f"({where}) AND name > ?"
        params: tuple[object, ...] = () if after is None else (after,)
        cursor = self._open().execute(
            f"SELECT {_COLUMNS} FROM notes WHERE {clause} ORDER BY name LIMIT ? OFFSET ?",
            (*params, -1 if limit is None else limit, offset),
        )
        while True:
            batch = cursor.fetchmany(500)
            if not batch:
                return
            for row in batch:
                yield str(row[0]), _row_entry(row)

    def select(
        self, *, type: str | None, order: str, offset: int, limit: int
    ) -> tuple[int, list[tuple[str, Entry]]]:
        """(how many valid notes of ``type`` there are, one page of them in ``order``).

        ``order`` is a key of :data:`ORDERS`. Filtered, counted and sorted by
        SQLite: a page costs the same whatever the store's size (but the sort).
        """
        where = "line IS NOT NULL" + ("" if type is None else " AND type = ?")
        params: tuple[object, ...] = () if type is None else (type,)
        con = self._open()
        (total,) = con.execute(f"SELECT COUNT(*) FROM notes WHERE {where}", params).fetchone()
        rows = con.execute(
            f"SELECT {_COLUMNS} FROM notes WHERE {where} ORDER BY {ORDERS[order]} LIMIT ? OFFSET ?",
            (*params, limit, offset),
        ).fetchall()
        return int(total), [(str(row[0]), _row_entry(row)) for row in rows]

    def keys(self, *, type: str | None, order: str, limit: int) -> list[tuple[str, str]]:
        """(name, what ``order`` sorts by) of the first ``limit`` valid notes of ``type`` in
        that order: two columns, no entry decoded (to merge the pages of two stores)."""
        column = {"updated": "COALESCE(updated, '')", "oldest": "COALESCE(updated, '')"}
        key = column.get(order, "title" if order == "title" else "name")
        where = "line IS NOT NULL" + ("" if type is None else " AND type = ?")
        params: tuple[object, ...] = () if type is None else (type,)
        rows = self._open().execute(
            f"SELECT name, {key} FROM notes WHERE {where} ORDER BY {ORDERS[order]} LIMIT ?",
            (*params, limit),
        )
        return [(str(name), str(value or "")) for name, value in rows]

    def lines(self) -> Iterator[str]:
        """Every index line, sorted by note name."""
        cursor = self._open().execute("SELECT line FROM notes WHERE line IS NOT NULL ORDER BY name")
        while True:
            batch = cursor.fetchmany(1000)
            if not batch:
                return
            for (line,) in batch:
                yield line

    def taken(self, folded: str) -> bool:
        """Whether a note whose case-folded name is ``folded`` is known."""
        row = self._open().execute("SELECT 1 FROM notes WHERE folded = ? LIMIT 1", (folded,))
        return row.fetchone() is not None

    def versions(self, names: Collection[str] | None = None) -> dict[str, str]:
        """name -> content hash of every valid note (one with an index line), or of those
        of ``names`` that are."""
        valid = "sha IS NOT NULL AND line IS NOT NULL"
        con = self._open()
        if names is None:
            return dict(con.execute(f"SELECT name, sha FROM notes WHERE {valid}"))
        out: dict[str, str] = {}
        wanted = sorted(names)
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            query = f"SELECT name, sha FROM notes WHERE name IN ({marks}) AND {valid}"
            out.update(con.execute(query, chunk))
        return out

    def meta(self, key: str) -> str | None:
        row = self._open().execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    # -- writing (inside begin/commit) -----------------------------------------------

    def put(self, name: str, entry: Entry) -> None:
        self._open().execute(_PUT, _put_row(name, entry))

        self._keep_keys([(name, entry)])

    def put_many(self, items: Iterable[tuple[str, Entry]]) -> None:
        """:meth:`put` for many rows: one statement, run for each (a bulk load's batch)."""
        items = list(items)
        if not items:
            return  # nothing to write, and no dedupe module to import
        self._open().executemany(_PUT, [_put_row(name, entry) for name, entry in items])
        self._keep_keys(items)

    def _keep_keys(self, items: list[tuple[str, Entry]]) -> None:
        if items and self._keeps_keys():
            from mdmem.store import _dedupe_keys

            for name, entry in items:
                title = entry.get("title") if entry.get("line") is not None else None
                numbers = entry.get("nums")
                _dedupe_keys.put(
                    self._open(),
                    name,
                    None if title is None else str(title),
                    None if numbers is None else str(numbers),
                )

    def marked(self) -> dict[str, Entry]:
        """The rows with more than the usual fields (supersedes, expires), by name."""
        cursor = self._open().execute(
            f"SELECT {_COLUMNS} FROM notes INDEXED BY notes_marked WHERE extra IS NOT NULL"
        )
        return {str(row[0]): _row_entry(row) for row in cursor}

    def present(self, names: Collection[str]) -> set[str]:
        """Which of ``names`` are notes with an index line."""
        con = self._open()
        out: set[str] = set()
        for name in names:
            row = con.execute(
                "SELECT 1 FROM notes WHERE name = ? AND line IS NOT NULL", (name,)
            ).fetchone()
            if row is not None:
                out.add(name)
        return out

    def remove(self, names: Collection[str]) -> None:
        self._open().executemany("DELETE FROM notes WHERE name = ?", [(n,) for n in names])
        if self._keeps_keys():
            from mdmem.store import _dedupe_keys

            _dedupe_keys.remove(self._open(), names)

    def clear(self) -> None:
        from mdmem.store import _dedupe_keys

        con = self._open()
        con.execute("DELETE FROM notes")
        con.execute("DELETE FROM meta WHERE key != 'epoch'")
        _dedupe_keys.clear(con)
        self._keys = False

    # -- the change log ---------------------------------------------------------------

    def log(self, before: str, after: str, names: Collection[str] | None) -> None:
        """Record, in the open transaction, that the rows of ``names`` (None: of any
        note) changed while the store's key (:func:`store_key`) went from ``before`` to
        ``after``.

        Derived readers (the recall index, the prompt block) that were in step
        at ``before`` catch up by those names alone (:meth:`changes_after`),
        instead of listing the store. Only the last :data:`LOG_KEEP` entries are kept.
        """
        import json

        listed = None
        if names is not None and len(names) <= LOG_NAMES:
            listed = json.dumps(sorted(names), ensure_ascii=False)
        con = self._open()
        cur = con.execute(
            "INSERT INTO changes (before, after, names) VALUES (?, ?, ?)", (before, after, listed)
        )
        if cur.lastrowid is not None and cur.lastrowid % 64 == 0:
            con.execute("DELETE FROM changes WHERE seq <= ?", (cur.lastrowid - LOG_KEEP,))

    def position(self) -> tuple[str, int]:
        """Where the log is now: (this catalog's epoch, the last entry's number)."""
        con = self._open()
        row = con.execute("SELECT MAX(seq) FROM changes").fetchone()
        return self.meta("epoch") or "", int(row[0] or 0)

    def changes_after(
        self, position: tuple[str, int], key: str, now_key: str
    ) -> tuple[tuple[str, int], set[str]] | None:
        """What changed since ``position``, when the store's key was ``key``: (the log's
        position now, the names whose rows changed); None when the log cannot say.

        The log can say when its entries since then follow each other from
        ``key`` to ``now_key`` (the store's key now): each entry starts at the
        key the one before ended at, and none says "catch up in full". A change
        the log does not hold (a note created, deleted or renamed behind mdmem's
        back moves the directory, hence the key) breaks that chain.
        """
        import json

        epoch, seq = position
        if epoch != (self.meta("epoch") or "") or not epoch:
            return None
        con = self._open()
        rows = con.execute(
            "SELECT seq, before, after, names FROM changes WHERE seq > ? ORDER BY seq", (seq,)
        ).fetchall()
        if rows:
            first = con.execute("SELECT MIN(seq) FROM changes").fetchone()[0]
            if first is None or first > seq + 1:
                return None  # entries since then were pruned
        names: set[str] = set()
        at = key
        for number, before, after, listed in rows:
            if before != at or listed is None:
                return None
            names.update(json.loads(listed))
            at, seq = after, number
        if at != now_key:
            return None
        return (epoch, seq), names

    # -- the dedupe keys (see store/_dedupe_keys.py) ---------------------------------

    def _keeps_keys(self) -> bool:
        """Whether this transaction must keep the dedupe keys up to date (they were built)."""
        if self._keys is None:
            from mdmem.store import _dedupe_keys

            self._keys = _dedupe_keys.is_built(self._open())
        return self._keys

    def near(
        self, title: str, timeout: float, numbers: str | None = None
    ) -> list[tuple[str, str, str]] | None:
        """(name, title, summary) of the valid notes of number key ``numbers`` (None: any)
        whose title may be near ``title``.

        Builds the keys first if they are not there (once; later writes keep
        them); None when they cannot be built now (another process holds the
        catalog past ``timeout``).
        """
        from mdmem.store import _dedupe_keys

        con = self._open()
        if not _dedupe_keys.is_built(con):
            if not self.begin(timeout):
                return None
            try:
                if not _dedupe_keys.is_built(con):
                    _dedupe_keys.build(con)
                self.commit()
            except BaseException:
                self.rollback()
                raise
        return _dedupe_keys.near(con, title, numbers)

    def set_meta(self, key: str, value: str | None) -> None:
        con = self._open()
        if value is None:
            con.execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))


def load(root: str) -> tuple[dict[str, Entry], int]:
    """Every row of the catalog by note name, and 0: for passes over the whole store.

    Call ``Store.entries()`` (or another read) first to bring it up to date.
    """
    cat = Catalog(root, private=True)
    try:
        return dict(cat.rows(where="1")), 0
    except Exception as exc:
        if is_damage(exc):
            return {}, 0
        raise
    finally:
        cat.close()


def updated_times(root: str) -> dict[str, str]:
    """Each valid note's ``updated`` time, by name: one query, no entry decoded."""
    cat = Catalog(root, private=True)
    try:
        rows = cat._open().execute(
            "SELECT name, updated FROM notes WHERE line IS NOT NULL AND updated IS NOT NULL"
        )
        return {str(name): str(when) for name, when in rows}
    except Exception as exc:
        if is_damage(exc):
            return {}
        raise
    finally:
        cat.close()


#: The prompt block's order (see mdmem.store.index): behaviour rules, then project
#: knowledge, then references, newest first, then by name.
_RANK = (
    "CASE type WHEN 'correction_feedback' THEN 0 WHEN 'user_preference' THEN 0 "
    "WHEN 'project_knowledge' THEN 1 WHEN 'reference_material' THEN 2 ELSE 3 END, "
    "COALESCE(updated, '') DESC, name"
)


def ranked_lines(
    root: str, limit: int, hidden: Collection[str] = (), *, count: int | None = None
) -> tuple[int, list[tuple[str, str, str | None]]] | None:
    """How many notes not in ``hidden`` have an index line, and the first ``limit`` of
    those in the prompt block's order.

    ``(name, line, updated)`` each; one query on the ``notes_rank`` index, which
    reads only those rows, instead of ranking every line in Python. ``count``:
    how many notes have an index line, when the caller knows (counting them is a
    pass over every row). None when the catalog cannot answer (the caller ranks).
    """
    cat = Catalog(root, private=True)
    try:
        con = cat._open()
        if count is None:
            (count,) = con.execute("SELECT COUNT(*) FROM notes WHERE line IS NOT NULL").fetchone()
        shown_hidden = len(cat.present(hidden))
        rows = con.execute(
            f"SELECT name, line, updated FROM notes WHERE line IS NOT NULL ORDER BY {_RANK} "
            "LIMIT ?",
            (limit + len(hidden),),
        ).fetchall()
        kept = [(str(n), str(line), str(u) if u else None) for n, line, u in rows]
        kept = [row for row in kept if row[0] not in hidden][:limit]
        return int(count or 0) - shown_hidden, kept
    except Exception as exc:
        if is_damage(exc):
            return None
        raise
    finally:
        cat.close()


def dates_of(root: str, names: Collection[str]) -> dict[str, tuple[str | None, str | None]]:
    """``(updated, expires)`` of the named notes that have an index line."""
    if not names:
        return {}
    import json

    cat = Catalog(root, private=True)
    out: dict[str, tuple[str | None, str | None]] = {}
    wanted = sorted(set(names))
    try:
        con = cat._open()
        for start in range(0, len(wanted), 500):  # one statement for a block's names
            chunk = wanted[start : start + 500]
            marks = ",".join("?" * len(chunk))
            rows = con.execute(
                f"SELECT name, updated, extra FROM notes WHERE name IN ({marks})"
                " AND line IS NOT NULL",
                chunk,
            )
            for name, updated, extra in rows:
                expires = None
                if extra:
                    with contextlib.suppress(ValueError, TypeError, AttributeError):
                        value = json.loads(str(extra)).get("expires")
                        expires = str(value) if value else None
                out[str(name)] = (str(updated) if updated else None, expires)
        return out
    except Exception as exc:
        if is_damage(exc):
            return {}
        raise
    finally:
        cat.close()


def listing(root: str) -> list[tuple[str, str | None, str]]:
    """(name, ``updated``, content hash) of every valid note, sorted by name: one query.

    For passes over the whole store that need no more of each entry (a row
    decoded whole costs ten times the memory at 100,000 notes).
    """
    return list(iter_listing(root))


def iter_listing(root: str) -> Iterator[tuple[str, str | None, str]]:
    """:func:`listing`, a row at a time (the query's cursor, never the whole result held)."""
    cat = Catalog(root, private=True)
    try:
        rows = cat._open().execute(
            "SELECT name, updated, coalesce(sha, '') FROM notes"
            " WHERE line IS NOT NULL ORDER BY name"
        )
        for name, when, sha in rows:
            yield str(name), None if when is None else str(when), str(sha)
    except Exception as exc:
        if is_damage(exc):
            return
        raise
    finally:
        cat.close()


def type_counts(root: str) -> dict[str, int]:
    """How many valid notes (those with an index line) there are of each type: one query."""
    cat = Catalog(root, private=True)
    try:
        rows = cat._open().execute(
            "SELECT type, COUNT(*) FROM notes WHERE line IS NOT NULL GROUP BY type"
        )
        return {str(kind): int(n) for kind, n in rows}
    except Exception as exc:
        if is_damage(exc):
            return {}
        raise
    finally:
        cat.close()


def present(root: str, names: Collection[str]) -> set[str]:
    """Which of ``names`` are valid notes (an indexed look-up each, not a pass)."""
    if not names:
        return set()
    cat = Catalog(root, private=True)
    try:
        return cat.present(names)
    except Exception as exc:
        if is_damage(exc):
            return set()
        raise
    finally:
        cat.close()


def content_hash(data: bytes) -> str:
    """The hash the catalog records for a note's bytes."""
    return _blake2b(data, digest_size=16).hexdigest()
