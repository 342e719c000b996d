"""MEMORY.md as sorted lines: changed by the note, not rebuilt from scratch.

MEMORY.md holds one line per note, sorted by file name, each ending in
``(file name)``. A write that touches a few notes finds their lines by
bisection and replaces, inserts or drops just those; the file is then written
whole (atomically: a reader sees the old index or the new one).
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

__all__ = ["PATCH_LIMIT", "join", "name_of", "patch"]

#: Past this many changed lines, rebuilding from the catalog is as cheap as patching.
PATCH_LIMIT = 1_000


def name_of(line: bytes) -> bytes:
    """The file name a MEMORY.md line ends with (``b""`` for a line that has none)."""
    start = line.rfind(b"(")
    if start < 0 or not line.endswith(b")"):
        return b""
    return line[start + 1 : -1]


def join(lines: Iterable[str]) -> bytes:
    """MEMORY.md's bytes for index lines already in order."""
    return b"".join(line.encode("utf-8") + b"\n" for line in lines)


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
    file name. Only the lines a bisection lands in are looked at. Returns None
    when what is there does not look like that: the caller rebuilds it instead.
    """
    if not changes:
        return data, 0
    if data and not data.endswith(b"\n"):
        return None
    delta = 0
    for name in sorted(changes):
        key = name.encode("utf-8")
        line = changes[name]
        start, end, present = _find(data, key)
        if line is None:
            if present:
                data = data[:start] + data[end:]
                delta -= 1
            continue
        encoded = line.encode("utf-8")
        if name_of(encoded) != key or b"\n" in encoded:
            return None
        data = data[:start] + encoded + b"\n" + data[end if present else start :]
        delta += 0 if present else 1
    return data, delta
