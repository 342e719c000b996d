"""MEMORY.md as sorted lines: changed by the note, not rebuilt from scratch.

MEMORY.md holds one line per note, sorted by file name, each ending in
``(file name)``. A write that touches a few notes finds their lines by
bisection and replaces, inserts or drops just those. :func:`patch` does it on
bytes in memory; :func:`splice` on the file itself: it bisects with ``pread``
and writes the new file from ranges of the old one copied inside the kernel,
so a write at 100,000 notes never reads or renders the other lines. Either way
the new file replaces the old one atomically (a reader sees the old index or
the new one).
"""

from __future__ import annotations

import os
import stat

try:  # as _catalog.content_hash: blake2 without hashlib's OpenSSL import
    from _blake2 import blake2b as _blake2b
except ImportError:  # pragma: no cover - interpreters without the _blake2 module
    from hashlib import blake2b as _blake2b

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Mapping

__all__ = [
    "PATCH_LIMIT",
    "RELEASE_BYTES",
    "STREAM_BYTES",
    "IndexRecord",
    "chunks",
    "digest",
    "join",
    "name_of",
    "patch",
    "splice",
]

#: Past this many changed lines, rebuilding from the catalog is as cheap as patching.
PATCH_LIMIT = 1_000

#: From this size on (about 20,000 notes), the old MEMORY.md a splice swapped out is closed
#: on a thread of its own (:func:`_release`): below it, starting the thread costs more
#: than the kernel takes to free the file's pages.
RELEASE_BYTES = 4 * 1024 * 1024


def name_of(line: bytes) -> bytes:
    """The file name a MEMORY.md line ends with (``b""`` for a line that has none)."""
    start = line.rfind(b"(")
    if start < 0 or not line.endswith(b")"):
        return b""
    return line[start + 1 : -1]


def join(lines: Iterable[str]) -> bytes:
    """MEMORY.md's bytes for index lines already in order."""
    return b"".join(line.encode("utf-8") + b"\n" for line in lines)


def chunks(lines: Iterable[str], size: int = 1_000) -> Iterator[bytes]:
    """:func:`join`'s bytes, ``size`` lines at a time (a rebuild never holds the whole file)."""
    batch: list[bytes] = []
    for line in lines:
        batch.append(line.encode("utf-8") + b"\n")
        if len(batch) >= size:
            yield b"".join(batch)
            batch.clear()
    if batch:
        yield b"".join(batch)


def digest(parts: Iterable[bytes], limit: int | None = None) -> tuple[str, int, int]:
    """(content hash as the catalog records it, size, line count) of the bytes ``parts`` make;
    with ``limit``, of no more parts than reach it (the size then says it was reached)."""
    h = _blake2b(digest_size=16)
    size = count = 0
    for part in parts:
        h.update(part)
        size += len(part)
        count += part.count(b"\n")
        if limit is not None and size >= limit:
            break
    return h.hexdigest(), size, count


def _find(data: bytes, key: bytes) -> tuple[int, int, bool]:
    """Where the line of ``key`` is, or would go: (start, end past its newline, present).

    Bisects over the bytes themselves, looking only at the lines it lands in.
    """
    lo, hi = 0, len(data)
    while lo < hi:
        mid = (lo + hi) // 2
        start = data.rfind(b"\n", 0, mid) + 1
        end = data.find(b"\n", start)
        if end < 0:
            end = len(data)
        if name_of(data[start:end]) < key:
            lo = end + 1
        else:
            hi = start
    end = data.find(b"\n", lo)
    end = len(data) if end < 0 else end + 1
    present = lo < len(data) and name_of(data[lo:end].rstrip(b"\n")) == key
    return lo, end, present


def patch(data: bytes, changes: Mapping[str, str | None]) -> tuple[bytes, int] | None:
    """``data`` with the line of each changed note replaced, added, or (None) dropped,
    and how many lines that added (negative: removed).

    ``data`` must be what mdmem wrote (its hash was checked): lines sorted by
    file name. Only the lines a bisection lands in are looked at, and the new
    bytes are put together once (views of ``data`` between the changes), so at
    most one copy of the file is made whatever the number of changes. Returns
    None when what is there does not look like that: the caller rebuilds it.
    """
    if not changes:
        return data, 0
    if data and not data.endswith(b"\n"):
        return None
    view = memoryview(data)
    parts: list[bytes | memoryview] = []
    pos = delta = 0
    for name in sorted(changes):
        key = name.encode("utf-8")
        line = changes[name]
        start, end, present = _find(data, key)
        if start < pos:
            return None  # not sorted as mdmem writes it
        if line is None:
            if present:
                parts.append(view[pos:start])
                pos, delta = end, delta - 1
            continue
        encoded = line.encode("utf-8")
        if name_of(encoded) != key or b"\n" in encoded:
            return None
        parts += [view[pos:start], encoded + b"\n"]
        pos = end if present else start
        delta += 0 if present else 1
    parts.append(view[pos:])
    return b"".join(parts), delta


def _line_at(fd: int, size: int, pos: int) -> tuple[int, bytes]:
    """The line holding byte ``pos`` (a line starts after each newline): (its start, its bytes)."""
    start, step = pos, 256
    while start > 0:
        lo = max(0, start - step)
        back = os.pread(fd, start - lo, lo)
        cut = back.rfind(b"\n")
        if cut >= 0:
            start = lo + cut + 1
            break
        start, step = lo, step * 2
    chunks, end = [], start
    while end < size:
        chunk = os.pread(fd, min(step, size - end), end)
        if not chunk:
            break
        cut = chunk.find(b"\n")
        if cut >= 0:
            chunks.append(chunk[:cut])
            break
        chunks.append(chunk)
        end += len(chunk)
        step *= 2
    return start, b"".join(chunks)


def _find_in(fd: int, size: int, key: bytes) -> tuple[int, int, bytes | None]:
    """:func:`_find` on the file: (start, end past its newline, the line or None if absent)."""
    lo, hi = 0, size
    while lo < hi:
        start, line = _line_at(fd, size, (lo + hi) // 2)
        if name_of(line) < key:
            lo = start + len(line) + 1
        else:
            hi = start
    if lo >= size:
        return size, size, None
    _, line = _line_at(fd, size, lo)
    return lo, min(size, lo + len(line) + 1), line if name_of(line) == key else None


def splice(
    path: str, changes: Mapping[str, str | None], *, private: bool, dry: bool = False
) -> tuple[int, bool] | None:
    """Apply ``changes`` to the file at ``path`` as :func:`patch` does, writing a new file.

    Returns how many lines that added (negative: removed) and whether the file
    was rewritten (not when no line actually changes), or None when the file
    does not look like what mdmem writes (the caller rebuilds it). ``dry``: only
    say so, writing nothing (whether it would be rewritten, by the same bisection).
    """
    from mdmem.store import files

    fd = os.open(path, files.READ_FLAGS)
    rewrote = False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return None
        size = st.st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            return None
        parts: list[tuple[int, int] | bytes] = []
        pos, delta, changed = 0, 0, False
        for name in sorted(changes):
            key = name.encode("utf-8")
            start, end, old = _find_in(fd, size, key)
            if start < pos:
                return None  # not sorted as mdmem writes it
            line = changes[name]
            if line is None:
                if old is not None:
                    parts.append((pos, start))
                    pos, delta, changed = end, delta - 1, True
                continue
            encoded = line.encode("utf-8")
            if name_of(encoded) != key or b"\n" in encoded:
                return None
            if old == encoded:
                continue
            parts += [(pos, start), encoded + b"\n"]
            pos, changed = (end if old is not None else start), True
            delta += 0 if old is not None else 1
        if not changed or dry:
            return delta, changed
        parts.append((pos, size))
        files.atomic_write_parts(path, fd, parts, private=private)
        rewrote = True
        return delta, True
    finally:
        if rewrote and size >= RELEASE_BYTES:
            _release(fd)
        else:
            os.close(fd)


def _release(fd: int) -> None:
    """Close ``fd``, the old MEMORY.md that a splice just swapped out, off the write path.

    Its name is gone, so this close is its last reference: the kernel frees its
    pages then (1.5-3 ms for the 18 MB of 100,000 notes, a quarter of a create),
    and nothing the write promises waits for that. A thread of its own does it;
    ``_thread``, not ``threading``, which costs milliseconds to import on the
    ``mdmem add`` path. Where no thread can be started, it is closed here.
    """
    try:
        import _thread

        _thread.start_new_thread(os.close, (fd,))
    except (ImportError, RuntimeError):
        os.close(fd)


#: From this size on (about 10,000 notes), MEMORY.md is never read whole to be checked or
#: patched: it is hashed in chunks and spliced (a copy to patch would double it in memory).
STREAM_BYTES = 2 * 1024 * 1024


class IndexRecord:
    """What the catalog keeps of MEMORY.md as mdmem last wrote it (its ``index`` meta).

    ``stat`` is the file's (mtime_ns, size, inode, ctime_ns) after the write,
    ``digest`` its content hash (``-`` when only the stat vouches for it),
    ``lines`` its line count, and ``trusted_before``: while the file's times are
    below it, its stat alone proves its bytes (git's racy-clean rule). Stored as
    one line of seven space-separated fields (:meth:`format`, :meth:`parse`).
    Immutable; a plain slotted class, since this module is on the ``mdmem index``
    path and ``dataclasses`` costs milliseconds to import.
    """

    __slots__ = ("digest", "lines", "stat", "trusted_before")

    stat: tuple[int, int, int, int]
    digest: str
    lines: int
    trusted_before: int

    def __init__(
        self, stat: tuple[int, int, int, int], digest: str, lines: int, trusted_before: int
    ) -> None:
        object.__setattr__(self, "stat", stat)
        object.__setattr__(self, "digest", digest)
        object.__setattr__(self, "lines", lines)
        object.__setattr__(self, "trusted_before", trusted_before)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"IndexRecord is immutable: {name}")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IndexRecord) and self.format() == other.format()

    def __hash__(self) -> int:
        return hash(self.format())

    def __repr__(self) -> str:
        return f"IndexRecord({self.format()!r})"

    @classmethod
    def parse(cls, text: str | None) -> IndexRecord | None:
        """The record :meth:`format` wrote; None for none, or for anything else."""
        parts = (text or "").split(" ")
        if len(parts) != 7:
            return None
        try:
            m, s, n, c, lines, when = (int(parts[i]) for i in (0, 1, 2, 3, 5, 6))
        except ValueError:
            return None
        return cls((m, s, n, c), parts[4], lines, when)

    def format(self) -> str:
        """The one line the catalog stores."""
        stat_text = " ".join(map(str, self.stat))
        return f"{stat_text} {self.digest} {self.lines} {self.trusted_before}"

    def same_stat(self, st: tuple[int, int, int, int] | None) -> bool:
        """Whether MEMORY.md's stat now is the one recorded."""
        return st is not None and tuple(st) == self.stat

    def stat_proves(self, st: tuple[int, int, int, int] | None) -> bool:
        """Whether that stat alone proves the bytes are the ones recorded."""
        return st is not None and self.same_stat(st) and max(st[0], st[3]) < self.trusted_before
