"""Derived state that makes a settled store cheap to read: a stat pass, not a parse.

The notes are the truth; this module only remembers what it learnt from them,
in the store's state folder (outside the repository, see ``paths.state_dir``):

- ``catalog.json``: per note, its stat, content hash, index line and fields;
- ``fingerprint``: a hash of every note's (name, mtime, size, inode) and of
  MEMORY.md's, written only when the store is *settled*.

A warm ``load_index`` scans the directory, hashes the stats and compares with
``fingerprint``: equal means MEMORY.md is exactly what the notes say, and no
JSON or YAML is read. Anything else falls back to the catalog, which re-reads
only files whose stat changed, and re-parses only files whose bytes changed.

Like git's index, this must not be fooled by a file rewritten twice within one
tick of the file-system clock with the same size. Git's rule does it: a stat
recorded in the catalog is trusted only if the file's mtime is strictly older
than the catalog file's own mtime (both from the same file-system clock, so
whatever its granularity). A note changed since has a newer mtime, so a
different stat; one written in the same tick as the catalog is hashed again
next time. While any note is that fresh, no fingerprint is written.
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

from mdmem.errors import InvalidPath
from mdmem.store import _fs
from mdmem.store.paths import (
    INDEX_NAME,
    check_name,
    is_candidate_name,
    is_plain_name,
    note_path,
    printable_name,
    state_base,
    state_dir,
)

TYPE_CHECKING = False  # not typing's: this module is on the `mdmem index` path
if TYPE_CHECKING:
    from collections.abc import Callable

__all__ = [
    "Entry",
    "Scan",
    "content_hash",
    "ensure_state_dir",
    "load",
    "read_fingerprint",
    "save",
]

_VERSION = 4
CATALOG = "catalog.json"
FINGERPRINT = "fingerprint"

# ctime too, as git does: an edit that restores the old mtime (an editor, `touch -r`,
# a same-size rewrite within one clock tick then utime) still changes the ctime.
Stat = tuple[int, int, int, int]
# An entry of the catalog, as plain JSON-ready data:
# {"st": [mtime_ns, size, ino, ctime_ns], "sha": str, "line": str | None, "error": str | None,
#  "type": str, "title": str, "summary": str, "updated": str | None,
#  "supersedes": [str] (optional), "expires": str (optional), "expires_ts": float (optional)}
Entry = dict[str, object]


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
        "_rejected",
        "_root",
        "_stats",
        "index_stat",
    )

    def __init__(self, root: str) -> None:
        self._root = root
        # Flat lists, not a tuple per entry: at 10,000 notes this is the hot loop.
        self._names: list[str] = []
        self._numbers: list[int] = []  # mtime_ns, size, inode, ctime_ns, mode for each name
        self._stats: dict[str, Stat] = {}
        self._rejected: dict[str, str] = {}
        self._classified = False
        self.index_stat: Stat | None = None
        try:
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
                            st = entry.stat(follow_symlinks=False)
                        except FileNotFoundError:
                            continue  # replaced while we looked
                        self.index_stat = (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns)
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed while we looked
                names.append(name)
                numbers += (st.st_mtime_ns, st.st_size, st.st_ino, st.st_ctime_ns, st.st_mode)

    def fingerprint(self) -> str:
        """A hash of everything a stat pass can see; equal fingerprints mean an unchanged store.

        Entries are hashed in the order the directory lists them: an unchanged
        directory lists them in the same order, and a mere reordering only
        costs one slower load.
        """
        h = _blake2b(f"v{_VERSION}|{self.index_stat}|".encode(), digest_size=16)
        h.update("\0".join(self._names).encode("utf-8", "surrogatepass"))
        # mtimes in nanoseconds need 64 bits; "q" is a signed 64-bit C integer.
        h.update(array("q", self._numbers).tobytes())
        return h.hexdigest()

    def _classify(self) -> None:
        if self._classified:
            return
        self._classified = True
        numbers = self._numbers
        for position, name in enumerate(self._names):
            mtime, size, ino, ctime, mode = numbers[5 * position : 5 * position + 5]
            if stat.S_ISREG(mode) and is_plain_name(name):
                self._stats[name] = (mtime, size, ino, ctime)
                continue
            try:
                check_name(name)
                if not stat.S_ISREG(mode):
                    # The one validator says why a link or an odd entry is not a note.
                    note_path(self._root, name, must_exist=True)
                    continue  # it became a regular file meanwhile: the next scan sees it
            except InvalidPath as exc:
                # Keyed by a printable name: a name that is not UTF-8 or holds a
                # newline must not break the catalog, a log line or a terminal.
                self._rejected[printable_name(name)] = exc.reason
                continue
            except FileNotFoundError:
                continue
            self._stats[name] = (mtime, size, ino, ctime)

    @property
    def stats(self) -> dict[str, Stat]:
        """The notes (regular files only): name -> (mtime_ns, size, inode, ctime_ns)."""
        self._classify()
        return self._stats

    @property
    def rejected(self) -> dict[str, str]:
        """Entries that look like notes but may not be: name -> why."""
        self._classify()
        return self._rejected


def read_fingerprint(root: str) -> str | None:
    """The fingerprint saved when the store was last seen settled, if any."""
    try:
        with open(os.path.join(state_dir(root), FINGERPRINT), encoding="ascii") as f:
            return f.read().strip()
    except (OSError, ValueError):
        return None


def load(root: str) -> tuple[dict[str, Entry], int]:
    """The catalog's entries by note name, and the catalog file's mtime (0 when there is none).

    A stat recorded here proves a note unchanged only if the note's mtime is
    older than that mtime (see the module docstring).
    """
    import json

    try:
        with open(os.path.join(state_dir(root), CATALOG), encoding="utf-8") as f:
            written = os.fstat(f.fileno()).st_mtime_ns
            data = json.load(f)
    except (OSError, ValueError):
        return {}, 0
    if not isinstance(data, dict) or data.get("version") != _VERSION:
        return {}, 0
    entries = data.get("entries")
    return (entries, written) if isinstance(entries, dict) else ({}, 0)


def save(
    root: str,
    entries: dict[str, Entry],
    fingerprint: Callable[[int], str | None],
    *,
    private: bool,
) -> None:
    """Save the catalog, then the fingerprint ``fingerprint(catalog mtime)`` (None: remove it).

    Derived state: failures are ignored, and it is not fsynced (it can always
    be rebuilt from the notes).
    """
    import json

    try:
        state = ensure_state_dir(root, private=private)
        payload = json.dumps(
            {"version": _VERSION, "entries": entries}, ensure_ascii=False, separators=(",", ":")
        )
        catalog = os.path.join(state, CATALOG)
        _fs.atomic_write(catalog, payload.encode("utf-8"), private=private, durable=False)
        value = fingerprint(os.stat(catalog).st_mtime_ns)
        fp_path = os.path.join(state, FINGERPRINT)
        if value is None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(fp_path)
        else:
            _fs.atomic_write(fp_path, value.encode("ascii"), private=private, durable=False)
    except OSError:
        pass


def ensure_state_dir(root: str, *, private: bool = True) -> str:
    """Create the store's state folder (see :func:`mdmem.store.paths.state_dir`) and return it.

    The whole state tree is the user's own, ``0700`` whatever the store's level:
    it holds turns, trash and logs of private conversations. ``private`` is kept
    for the callers' sake and no longer changes anything.
    """
    state = state_dir(root)
    if not os.path.isdir(state):
        base = state_base()
        os.makedirs(os.path.dirname(base), exist_ok=True)
        for folder in (base, os.path.dirname(state), state):
            with contextlib.suppress(FileExistsError):
                os.mkdir(folder, 0o700)
    st = os.lstat(state)
    if not stat.S_ISDIR(st.st_mode):
        raise OSError(f"{state} is not a directory")
    if stat.S_IMODE(st.st_mode) != 0o700:
        os.chmod(state, 0o700)
    return state


def content_hash(data: bytes) -> str:
    """The hash the catalog records for a note's bytes."""
    return _blake2b(data, digest_size=16).hexdigest()
