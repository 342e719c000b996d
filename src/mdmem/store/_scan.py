"""What a directory listing says about a store, and the fingerprint of a settled one.

The fast paths' half of the catalog (``_catalog``): it imports neither ``sqlite3``
nor YAML. A settled ``load_index`` lists the directory (:class:`Scan`, one
``lstat`` per entry), hashes the stats and compares with the ``fingerprint``
file (:class:`Fingerprint`), written only when the store was seen *settled*;
``head_is_current`` (what ``mdmem index`` needs) checks only the directory,
MEMORY.md and the notes of the block's lines, and ``read_head`` reads MEMORY.md
up to the block's limits.

``fs_now`` is the file-system clock (the ``clock`` file touched) behind the
racy-stat rule (see ``_catalog``): a recorded stat proves a note unchanged only
while its times are older than the time taken before its bytes were read.
"""

from __future__ import annotations

import contextlib
import os
import stat
from array import array
from time import time as _time

try:  # hashlib costs milliseconds to import (OpenSSL); blake2 alone is enough here
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b as _blake2b

from mdmem.errors import InvalidPath
from mdmem.store import files
from mdmem.store.paths import (
    INDEX_NAME,
    check_name,
    is_candidate_name,
    is_plain_name,
    note_path,
    printable_name,
)
from mdmem.store.state import CLOCK, StateDir

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    import io
    from collections.abc import Container, Iterator

__all__ = [
    "HEAD_NAMES",
    "Fingerprint",
    "Scan",
    "Stat",
    "fs_now",
    "head_is_current",
    "key_of",
    "open_regular",
    "read_fingerprint",
    "read_head",
    "stat_of",
    "store_key",
    "write_fingerprint",
]

# 6: the dedupe keys (store/_dedupe_keys.py), the index of marked rows; 7: changes;
# 8: each note's number key (``nums``), the dedupe keys grouped by it; 9: notes_type;
# 10: the dedupe keys are words and whole titles, capped a key (not title trigrams)
_VERSION = 10
#: The most note names the fingerprint lists for the block's quick check.
HEAD_NAMES = 2_000

# ctime too, as git does: an edit that restores the old mtime (an editor, `touch -r`,
# a same-size rewrite within one clock tick then utime) still changes the ctime.
Stat = tuple[int, int, int, int]


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
        "started",
    )

    def __init__(self, root: str) -> None:
        self._root = root
        #: The wall clock before the listing: a reader asking the watcher what changed
        #: since this listing names this time (``Coherence.catalog_current``).
        self.started = _time()
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

    def classify(self, valid: Container[str] = ()) -> None:
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


def _fp_path(root: str | StateDir) -> str:
    return StateDir.of(root).fingerprint


def read_fingerprint(root: str | StateDir) -> Fingerprint | None:
    """The fingerprint saved when the store was last seen settled, if any.

    ``root`` is the store's state (``store.state``) or its root, as for
    :func:`write_fingerprint` and :func:`fs_now`.
    """
    try:
        with open(_fp_path(root), "rb") as f:
            return Fingerprint.load(f.read())
    except OSError:
        return None


def write_fingerprint(root: str | StateDir, fp: Fingerprint | None, *, private: bool) -> None:
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


def fs_now(root: str | StateDir, *, private: bool) -> int:
    """The file-system clock's "now": touch the ``clock`` file and read its times back.

    The same clock that stamps notes' mtimes, whatever its granularity; 0 when
    the state folder cannot be written (then no stat is ever trusted).
    """
    try:
        del private  # the state tree is the user's own, 0700 whatever the level
        path = os.path.join(StateDir.of(root).ensure(), CLOCK)
        try:
            os.utime(path)
        except FileNotFoundError:
            os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
        st = os.stat(path)
    except OSError:
        return 0
    return min(st.st_mtime_ns, st.st_ctime_ns)
