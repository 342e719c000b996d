"""The journal of accepted turns: a turn is on disk before ``update_async`` returns.

Layout, under the project store's state folder, ``turns/`` (private: ``0700``/``0600``,
since turns hold conversation text)::

    owners/<owner>.lock     held (flock) by a live Manager for its whole life
    <owner>/<turn>.json     turns that owner has claimed
    pending/<turn>.json     turns nobody has claimed yet (written by hooks)
    failed/<turn>.json      turns that kept failing, with their errors, for a person
    damaged/<turn>.json     turn files that could not be read at all (set aside, never retried)

A turn file is in exactly one of those places at a time, and moves only by
``os.rename``, which is atomic: a claim is a rename, so two processes never
both claim a turn. An owner whose lock can be taken is dead (the kernel drops
flocks with their process, whatever killed it), so its turns may be adopted.

The journal moves turn files and reads them as JSON objects; what a turn file
holds, and its versions, is :mod:`mdmem.manager.turn_record`'s (``Turn.format``
writes the object, ``Turn.parse`` reads it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time

from mdmem.store import files

__all__ = ["Journal", "new_turn_id"]

OWNERS = "owners"
PENDING = "pending"
FAILED = "failed"
DAMAGED = "damaged"
_RESERVED = {OWNERS, PENDING, FAILED, DAMAGED}


def new_turn_id() -> str:
    """A unique id that sorts in the order turns were accepted."""
    return f"{time.time_ns():020d}-{os.urandom(4).hex()}"


class Journal:
    """One Manager's view of the journal: its own claimed turns, and the power to adopt others."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.owner = os.urandom(8).hex()
        self._fd: int | None = None

    @property
    def mine(self) -> str:
        """This owner's directory of claimed turns."""
        return os.path.join(self.root, self.owner)

    def open(self) -> None:
        """Become a live owner: hold the owner lock from now until :meth:`close`."""
        if self._fd is not None:
            return
        for sub in (OWNERS, PENDING, FAILED, self.owner):
            files.ensure_dir(os.path.join(self.root, sub), private=True)
        final = os.path.join(self.root, OWNERS, f"{self.owner}.lock")
        # Lock under a temporary name, then rename: nobody can ever see the lock
        # file unlocked and take us for dead.
        tmp = f"{final}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, f"{os.getpid()}\n".encode())
        os.replace(tmp, final)
        self._fd = fd

    def close(self) -> None:
        """Stop being an owner; turns left in our directory become adoptable."""
        if self._fd is None:
            return
        with contextlib.suppress(OSError):
            os.rmdir(self.mine)  # only when empty: leftover turns stay for adoption
        if not os.path.isdir(self.mine):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(self.root, OWNERS, f"{self.owner}.lock"))
        os.close(self._fd)
        self._fd = None

    # -- this owner's turns ----------------------------------------------------------

    def _path(self, turn_id: str) -> str:
        return os.path.join(self.mine, f"{turn_id}.json")

    def add(self, turn: dict[str, object], *, durable: bool = True) -> str:
        """Write a new turn as claimed by this owner; return its id.

        Without ``durable`` the turn is renamed into place but not fsynced: it
        survives the process exiting or being killed (the kernel holds it), and
        :meth:`sync` makes it survive a power loss too.
        """
        turn_id = str(turn["id"])
        files.atomic_write(self._path(turn_id), _dump(turn), private=True, durable=durable)
        return turn_id

    def sync(self, turn_id: str) -> None:
        """Make a turn written without ``durable`` survive a power loss."""
        try:
            fd = os.open(self._path(turn_id), os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        files.fsync_dir(self.mine)

    def save(self, turn: dict[str, object], *, durable: bool = True) -> None:
        """Record progress on a claimed turn (its answer, attempts, errors)."""
        files.atomic_write(self._path(str(turn["id"])), _dump(turn), private=True, durable=durable)

    def load(self, turn_id: str) -> dict[str, object]:
        """Read a claimed turn.

        Raises:
            OSError, ValueError: the file is gone or damaged.
        """
        with open(self._path(turn_id), encoding="utf-8") as f:
            data = json.load(f)
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ValueError("a turn file must hold a JSON object with its id")
        return data

    def remove(self, turn_id: str) -> None:
        """Forget a turn whose operations are on disk."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._path(turn_id))

    def fail(self, turn: dict[str, object]) -> str:
        """Move a turn aside, with its errors, for a person to look at; return where."""
        turn_id = str(turn["id"])
        target = os.path.join(self.root, FAILED, f"{turn_id}.json")
        files.atomic_write(target, _dump(turn), private=True)
        self.remove(turn_id)
        return target

    def set_aside(self, turn_id: str) -> str:
        """Move a claimed turn file that cannot be read to ``damaged/``; return where.

        Kept for a person (it may hold text worth reading), but never retried: a
        file that does not parse would fail every worker that adopts it.
        """
        return set_aside(self.root, self._path(turn_id))

    def owned(self) -> list[str]:
        """The ids of the turns this owner holds, oldest first."""
        return _ids(self.mine)

    # -- adopting turns nobody is working on ----------------------------------------------

    def adopt(self) -> list[str]:
        """Claim dead owners' turns and unclaimed ones; return all our turns, oldest first."""
        owners = os.path.join(self.root, OWNERS)
        for entry in _listdir(owners):
            owner, dot, ext = entry.partition(".")
            if ext != "lock" or not dot or owner == self.owner:
                continue
            self._adopt_from(owner, os.path.join(owners, entry))
        self._claim_all(os.path.join(self.root, PENDING))
        return self.owned()

    def _adopt_from(self, owner: str, lock_path: str) -> None:
        try:
            fd = os.open(lock_path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return  # alive
            self._claim_all(os.path.join(self.root, owner))
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(self.root, owner))
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock_path)
        finally:
            os.close(fd)

    def _claim_all(self, folder: str) -> None:
        for name in _listdir(folder):
            if name.endswith(".json") and not name.startswith("."):
                with contextlib.suppress(FileNotFoundError):  # someone else was faster
                    os.rename(os.path.join(folder, name), os.path.join(self.mine, name))


def put_pending(root: str, turn: dict[str, object]) -> str:
    """Leave a turn for any Manager to claim (as a hook does, before a worker starts)."""
    folder = os.path.join(root, PENDING)
    files.ensure_dir(folder, private=True)
    path = os.path.join(folder, f"{turn['id']}.json")
    files.atomic_write(path, _dump(turn), private=True)
    return path


def set_aside(root: str, path: str) -> str:
    """Move the turn file at ``path`` into the journal's ``damaged/`` folder; return where."""
    folder = os.path.join(root, DAMAGED)
    files.ensure_dir(folder, private=True)
    target = os.path.join(folder, os.path.basename(path))
    os.replace(path, target)
    return target


def listing(root: str) -> dict[str, list[str]]:
    """Every turn file in the journal by place (owner id, ``pending`` or ``failed``), for doctor.

    Damaged files set aside (``damaged/``) are not turns: :func:`damaged` lists them.
    """
    out: dict[str, list[str]] = {}
    for entry in _listdir(root):
        if entry not in (OWNERS, DAMAGED) and os.path.isdir(os.path.join(root, entry)):
            ids = _ids(os.path.join(root, entry))
            if ids:
                out[entry] = ids
    return out


def damaged(root: str) -> list[str]:
    """The paths of the turn files set aside as unreadable, oldest first."""
    folder = os.path.join(root, DAMAGED)
    return [os.path.join(folder, n) for n in _listdir(folder) if not n.startswith(".")]


def owner_alive(root: str, owner: str) -> bool:
    """Whether the owner of a directory of claimed turns still holds its lock."""
    path = os.path.join(root, OWNERS, f"{owner}.lock")
    try:
        fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # closing drops a lock we may have taken
    return False


def _dump(turn: dict[str, object]) -> bytes:
    return json.dumps(turn, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _listdir(folder: str) -> list[str]:
    try:
        return sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _ids(folder: str) -> list[str]:
    return [n[:-5] for n in _listdir(folder) if n.endswith(".json") and not n.startswith(".")]
