"""The watcher: one long-lived process per user that short-lived ones ask what changed.

A note edited in place (VS Code's save, ``echo > note.md``) changes neither its
folder nor anything of mdmem's, and git and editors re-create files whose inode
numbers ext4 gives back: only each note's ctime tells what changed, one stat
per note. A store above ``fts.SWEEP_MAX`` notes is too large for a CLI command
or the per-prompt hook to stat every note at each call. So one process per user
watches the stores its clients name (inotify, read through ``ctypes``:
``store/_watcher_server.py``) and answers, for each store, "which note files
changed since the time T you name", in one round trip. The reader then stats and
parses only those names (``fts.Index.sync``, ``Store.catalog_current``,
the block cache).

**The answer** for a store and a time T (nanoseconds, wall clock; the reader's
last complete check) is one of:

- :data:`COMPLETE`: the watch has run since before T: every name created,
  deleted, renamed or written since T is among the names;
- :data:`IN_PLACE`: the watch began after T; the names are every file changed
  since it began plus every note whose ctime is T or later (a stat pass the
  watcher itself made when it began, off the reader's path): every note edited
  in place since T, but not a create, delete or rename from before the watch
  began. A reader takes it only when its own key (the folder's stat) shows none;
- :data:`UNKNOWN`: the watcher cannot vouch (it just began, its stat pass is not
  done, T is older than it keeps, the kernel's queue overflowed and the stat pass
  is redone, the folder was replaced, a network file system, more than
  :data:`MAX_NAMES` names): the reader does today's check. When the watcher
  vouches for the store from now on (:func:`vouches_from_now`), the reader's T is
  the reason and will stay so: a reader that would otherwise trust its rows for a
  while (the prompt block) does its full check now, for a T the watcher vouches for.

With each answer comes the watcher's time; a reader that used the answer records
it as its next T. **Never stale**: the watcher reads the kernel's queue after it
received the request, and inotify queues an event during the write system call
itself, so a write that returned before the reader asked is in the answer. The
reader trusts nothing it cannot check: it stats what is named, and compares.
A watcher that did not answer in :data:`TIMEOUT` is not asked again by that
process for :data:`QUIET_SECONDS`: a hung one costs a command one wait.

**Private**, as the resident embedder (``mdmem._unixsock``): a socket ``0600``
in ``<state>/watcher`` (``0700``), its owner and mode checked, ``SO_PEERCRED``
both ways; never a socket of another user. **Started on demand** through
``mdmem._spawn`` (by SessionStart and by a read of a large store that found
none), one at a time under an ``flock``; **stops** after
:data:`IDLE_SECONDS` without a request (``MDMEM_WATCHER_IDLE``) or when its
socket goes. Killed, its socket refuses connections and readers do today's
check. ``MDMEM_WATCHER=off``, another OS than Linux, or a kernel without
inotify: no watcher (``docs/how-to/hand-editing.md`` says what happens then).

Wire format: a request is :data:`MAGIC`, ``u32 count``, then per store ``u32
length``, the root's path (file-system bytes) and ``i64`` T (-1: none); a reply
is :data:`MAGIC`, ``u32 count``, then per store ``u8 kind``, ``i64`` the
watcher's time, ``u32 names`` and per name ``u32 length`` and its bytes. All
little-endian. Only ``os``, ``sys`` and ``_socket`` are imported at the top:
this is on the per-prompt hook's path.
"""

from __future__ import annotations

import os

from mdmem import _unixsock
from mdmem.store.paths import state_base

TYPE_CHECKING = False  # not typing's: on the per-prompt hook's path
if TYPE_CHECKING:
    import subprocess
    from collections.abc import Iterable, Sequence

__all__ = [
    "COMPLETE",
    "ENV",
    "FOLDER",
    "IDLE_SECONDS",
    "IN_PLACE",
    "MAGIC",
    "MAX_NAMES",
    "ROOTS_ENV",
    "UNKNOWN",
    "Answer",
    "ask",
    "enabled",
    "ensure",
    "folder",
    "is_note",
    "notes_since",
    "reap",
    "socket_path",
    "start",
    "vouches_from_now",
]

#: ``MDMEM_WATCHER=off`` (or ``0``, ``no``): never ask a watcher nor start one.
ENV = "MDMEM_WATCHER"
#: How :func:`start` hands the stores to watch to the child (newline-separated): never argv.
ROOTS_ENV = "MDMEM_WATCHER_ROOTS"
#: The folder of the socket and lock, under mdmem's state base (``0700``).
FOLDER = "watcher"
MAGIC = b"MDW1"
#: The wire format's version, part of the socket's name.
PROTOCOL = 1
#: The watcher stops after this many seconds without a request (``MDMEM_WATCHER_IDLE``).
IDLE_SECONDS = 3600.0
#: An answer of more names than this is UNKNOWN (the reader's own check costs as much).
MAX_NAMES = 2_000
#: How long a reader waits for an answer before it does its own check.
TIMEOUT = 0.5
#: After a watcher failed to answer (in time, or at all), this process asks it nothing for
#: this long: a command asks it several times (each store, the hook's block, its search),
#: and a hung watcher (stopped, swapped out) must cost one TIMEOUT, not one each.
QUIET_SECONDS = 60.0
#: The kinds of answer (see the module docstring).
UNKNOWN, COMPLETE, IN_PLACE = 0, 1, 2
#: Stores in one request, at most; bytes of one root's path.
MAX_STORES = 16
MAX_PATH = 4096
#: A watcher that could not watch writes this file; readers start none for this long.
UNAVAILABLE = "unavailable"
RETRY_SECONDS = 3600.0

_ENTRY = "mdmem.store._watcher_server:serve"
_started = False  # this process started one already: never twice
_failed_at: float | None = None  # time.monotonic() when it last failed to answer
_CHILDREN: list[subprocess.Popen[bytes]] = []


class Answer:
    """What the watcher says of one store: its kind, its time, the file names."""

    __slots__ = ("kind", "names", "now")

    def __init__(self, kind: int, now: int, names: frozenset[str]) -> None:
        self.kind, self.now, self.names = kind, now, names

    def __repr__(self) -> str:
        return f"Answer({self.kind}, {self.now}, {sorted(self.names)!r})"

    def vouches(self, same_key: bool) -> bool:
        """Whether a reader in step at T may take this answer for a listing: COMPLETE
        whatever changed (all of it is named), IN_PLACE only while its key (the folder's
        stat) is the one it recorded at T (no create, delete or rename since, which an
        IN_PLACE answer may not name). The age of T does not matter."""
        return self.kind == COMPLETE or (self.kind == IN_PLACE and same_key)


#: The file-system clock is coarser than the wall clock: names changed this much before
#: the time a reader names are in its answer too.
MARGIN_NS = 2_000_000_000


def enabled() -> bool:
    """Whether readers ask a watcher: Linux, Unix sockets, and ``MDMEM_WATCHER`` not off."""
    return _unixsock.enabled(ENV)


def folder() -> str:
    """Where the socket and the lock live: ``<state base>/watcher``."""
    return os.path.join(state_base(), FOLDER)


def _name() -> str:
    return f"watch-v{PROTOCOL}"


def socket_path() -> str:
    """The watcher's socket."""
    return os.path.join(folder(), _name() + ".sock")


def _i64(value: int) -> bytes:
    return value.to_bytes(8, "little", signed=True)


def _u32(value: int) -> bytes:
    return value.to_bytes(4, "little")


def _request(queries: Sequence[tuple[str, int]]) -> bytes:
    parts = [MAGIC, _u32(len(queries))]
    for root, since in queries:
        path = os.fsencode(root)
        parts += [_u32(len(path)), path, _i64(since)]
    return b"".join(parts)


def ask(queries: Sequence[tuple[str, int]], timeout: float = TIMEOUT) -> list[Answer] | str:
    """The watcher's answers for ``(root, T)`` pairs, in order; or why there are none:
    ``"off"``, ``"absent"`` (no watcher runs), ``"refused"`` (its socket or folder is
    not this user's own, or another user serves it) or ``"failed"`` (it did not answer
    within ``timeout``, or not well; then, for :data:`QUIET_SECONDS`, at once and without
    asking). Starts nothing."""
    if not enabled():
        return "off"
    global _failed_at
    import time

    if _failed_at is not None:
        if 0 <= time.monotonic() - _failed_at < QUIET_SECONDS:
            return "failed"
        _failed_at = None
    try:
        sock = _unixsock.connect(folder(), _name() + ".sock", timeout)
        if isinstance(sock, str):
            return sock
        try:
            sock.sendall(_request(queries))
            return _reply(sock, len(queries))
        finally:
            sock.close()
    except (OSError, ValueError, UnicodeError):  # TimeoutError among them
        _failed_at = time.monotonic()
        return "failed"


def _reply(sock: object, count: int) -> list[Answer]:
    recv = _unixsock.Reader(sock).exact  # type: ignore[arg-type]
    head = recv(len(MAGIC) + 4)
    if head[: len(MAGIC)] != MAGIC or int.from_bytes(head[len(MAGIC) :], "little") != count:
        raise ValueError("not an mdmem watcher's answer")
    out = []
    for _ in range(count):
        part = recv(13)
        kind = part[0]
        now = int.from_bytes(part[1:9], "little", signed=True)
        n = int.from_bytes(part[9:13], "little")
        if kind not in (UNKNOWN, COMPLETE, IN_PLACE) or n > MAX_NAMES:
            raise ValueError("a malformed answer")
        names = []
        for _ in range(n):
            size = int.from_bytes(recv(4), "little")
            if size > MAX_PATH:
                raise ValueError("a malformed answer")
            names.append(os.fsdecode(recv(size)))
        out.append(Answer(kind, now, frozenset(names)))
    return out


def is_note(name: str) -> bool:
    """Whether a name the watcher reports can be a note (not MEMORY.md, a hidden or temp file)."""
    return name.endswith(".md") and name != "MEMORY.md" and not name.startswith(".")


def notes_since(root: str, since: int) -> Answer | str:
    """:func:`ask` for one store, its names narrowed to the notes (:func:`is_note`)."""
    answers = ask([(root, since)])
    if isinstance(answers, str):
        return answers
    told = answers[0]
    return Answer(told.kind, told.now, frozenset(filter(is_note, told.names)))


def vouches_from_now(root: str) -> bool:
    """Whether the watcher vouches for ``root`` from now on (its stat pass of it done, no
    overflow to make up): asked after an UNKNOWN answer for a reader's T. Then that T is
    why (more than :data:`MAX_NAMES` notes changed since it, a clone's or a checkout's,
    or older than the watcher keeps), and no later answer for it will be better: only
    the reader's own full check gets it a T the watcher vouches for. False: the watcher
    is the reason (it catches up by itself) or does not answer."""
    import time

    answers = ask([(root, time.time_ns())])
    return not isinstance(answers, str) and answers[0].kind != UNKNOWN


def start(roots: Sequence[str] = ()) -> bool:
    """Start a watcher (it exits at once if one runs), at most once per process, watching
    ``roots`` (store folders) from its start; False when none could be started or one
    could not watch in the last hour."""
    global _started
    if _started or not enabled():
        return False
    _started = True
    directory = folder()
    try:
        import time

        stamp = os.stat(os.path.join(directory, UNAVAILABLE)).st_mtime
        if 0 <= time.time() - stamp < RETRY_SECONDS:
            return False  # no inotify here (or no room for a watch): not again for a while
    except OSError:
        pass
    from mdmem import _spawn

    try:
        os.close(_unixsock.private_folder(directory, create=True))
        # The stores' paths go in the child's environment, not its argv: any local user
        # can read a process's command line, only its owner its environment.
        named = "\n".join(r for r in roots if r and "\n" not in r)
        env = {**os.environ, ROOTS_ENV: named}
        _CHILDREN.append(_spawn.start([directory], cwd=directory, entry=_ENTRY, env=env))
    except OSError:
        return False
    return True


def reap() -> int:
    """Collect the watchers this process started that have ended; how many still run."""
    for child in list(_CHILDREN):
        if child.poll() is not None:
            _CHILDREN.remove(child)
    return len(_CHILDREN)


def ensure(roots: Iterable[str]) -> None:
    """Have the watcher watch ``roots`` from now on (SessionStart: so that its stat pass is
    done before the first prompt); start one if none runs. Never raises, never waits."""
    queries = [(os.path.abspath(r), -1) for r in roots if r and os.path.isdir(r)]
    if not queries or not enabled():
        return
    if ask(queries[:MAX_STORES]) == "absent":
        start([root for root, _ in queries[:MAX_STORES]])
