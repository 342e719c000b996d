"""A batch of note writes and deletes that completes even if the process dies half-way.

Before a batch touching more than one file starts, its plan (every new file's
bytes, and the hash each file had before) is written to ``txn.json`` in the store's state folder.
If the process is killed in the middle, the next holder of the store's lock
finds the plan and finishes it. A file a person changed in between (its hash
is neither the old nor the new one) is left alone: redoing a batch must never
overwrite a hand edit.

A write of a note that did not exist when the batch was planned is a
*create*, made with ``files.create_new``: if a file of that name appeared
meanwhile (a person, git), the create is dropped and that file kept.
"""

from __future__ import annotations

import contextlib
import json
import os

from mdmem.errors import InvalidPath
from mdmem.store import _catalog, files
from mdmem.store import state as layout
from mdmem.store.paths import check_name
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Iterator

    from mdmem.store.note import Note

__all__ = ["TRASH_DIR", "Durable", "Plan", "commit", "recover", "syncing"]

TXN = layout.TXN
TRASH_DIR = layout.TRASH


class Plan:
    """The files a batch writes (name -> bytes) and moves to the trash (name -> trash name).

    A plain class (no ``dataclasses``: see :mod:`mdmem._record`); each mapping is the
    caller's or a new one.
    """

    __slots__ = ("actions", "before", "deletes", "notes", "renamable", "renamed", "writes")

    def __init__(
        self,
        *,
        writes: dict[str, bytes] | None = None,
        deletes: dict[str, str] | None = None,
        before: dict[str, str | None] | None = None,
        actions: dict[str, str] | None = None,
        notes: dict[str, Note] | None = None,
        renamable: set[str] | None = None,
    ) -> None:
        self.writes: dict[str, bytes] = {} if writes is None else writes
        self.deletes: dict[str, str] = {} if deletes is None else deletes
        #: The content hash of each touched file before the batch (None: it did not exist).
        self.before: dict[str, str | None] = {} if before is None else before
        #: How history names a write (default ``write``): ``restore``, ``rename`` ...
        self.actions: dict[str, str] = {} if actions is None else actions
        #: The notes the bytes of ``writes`` were rendered from, where the writer has them.
        self.notes: dict[str, Note] = {} if notes is None else notes
        #: Creates whose name mdmem chose: one taken at the final step gets ``-2``, ``-3`` ...
        self.renamable: set[str] = set() if renamable is None else renamable
        #: Set by :func:`commit`: the creates that took another name, old name -> new name.
        self.renamed: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"Plan(writes={sorted(self.writes)!r}, deletes={self.deletes!r})"

    def __bool__(self) -> bool:
        return bool(self.writes or self.deletes)


# Above any note mdmem writes (store.MAX_NOTE_BYTES): a larger file is nothing of ours.
_HASH_LIMIT = 1024 * 1024


def _hash_of(path: str) -> str | None:
    try:
        return _catalog.content_hash(files.read_bytes(path, _HASH_LIMIT))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "?"  # something that is no note of ours: never equal to a hash, never replaced


#: Past this many notes, a journaled batch makes its notes durable together (one sync)
#: instead of one fsync each: an import of 10,000 notes was half fsyncs.
TOGETHER = 16


def _write(
    root: str, name: str, data: bytes, private: bool, *, create: bool = False, durable: bool = True
) -> bool:
    """Write one note; a ``create`` is exclusive: False when it found the name taken."""
    path = os.path.join(root, name)
    if not create:
        files.atomic_write(path, data, private=private, durable=durable)
        return True
    try:
        files.create_new(path, data, private=private, durable=durable)
    except FileExistsError:
        return False
    return True


def _create_elsewhere(root: str, name: str, data: bytes, private: bool) -> str | None:
    """Create ``data`` under the first free name ``<stem>-2.md``, ``-3`` ... (None: none free).

    For a create whose name was taken by a file that appeared after the plan was
    made: that file is never overwritten, and the note is not lost either.
    """
    stem = name.removesuffix(".md")
    for n in range(2, 100):
        other = f"{stem}-{n}.md"
        try:
            check_name(other)
        except InvalidPath:
            return None
        if _write(root, other, data, private, create=True):
            return other
    return None


def _trash(state: StateDir, name: str, trash_name: str) -> None:
    trash = state.trash
    files.ensure_dir(trash, private=True)  # the state tree is the user's own, whatever the level
    os.replace(os.path.join(state.root, name), os.path.join(trash, trash_name))


def _read_or_none(path: str) -> bytes | None:
    """The bytes history keeps of a file about to change; None for what is no note of ours.

    The store's one safe reader: a symlink or FIFO swapped in is never followed or
    waited on, and a file larger than any note (a 3 GB ``*.md``) is never read
    into memory: it goes to the trash whole, by a rename, so nothing is lost.
    """
    try:
        return files.read_bytes(path, _HASH_LIMIT)
    except (OSError, ValueError):  # absent, not a regular file, too large
        return None


def _remember(state: StateDir, plan: Plan) -> dict[str, bytes]:
    """Put what each touched file holds now into history, if history lacks it; return it."""
    from mdmem.store import history

    before: dict[str, bytes] = {}
    if not history.enabled:
        return before
    for name in (*plan.writes, *plan.deletes):
        data = _read_or_none(os.path.join(state.root, name))
        if data is not None:
            before[name] = data
            # A hand edit the catalog has not seen yet, or a note older than history.
            history.record_if_unknown(state, name, data)
    return before


class Durable:
    """The last directory syncs of an unjournaled commit, on a thread of their own.

    A single create or delete ends with an ``fsync`` of the store's folder (and of the
    trash first, for a delete): that makes the note's new name durable, and nothing
    the caller does next (history, the catalog's rows, MEMORY.md, all rebuildable from
    the notes) needs it done first. So it runs while the caller records the write,
    and the caller waits for it (:meth:`wait`) before it lets the lock go and returns:
    a write is as durable when ``apply`` returns as before, and at 100,000 notes the
    sync overlaps MEMORY.md's rewrite instead of adding to it.
    """

    __slots__ = ("_done", "_folders")

    def __init__(self, folders: list[str]) -> None:
        import _thread

        self._folders = folders
        self._done = _thread.allocate_lock()
        self._done.acquire()
        try:
            _thread.start_new_thread(self._run, ())
        except RuntimeError:  # no thread to be had: synced here
            self._run()

    def _run(self) -> None:
        try:
            for folder in self._folders:  # in order: the trash before the store
                files.fsync_dir(folder)
        finally:
            self._done.release()

    def wait(self) -> None:
        """Return once every folder is synced."""
        self._done.acquire()
        self._done.release()


@contextlib.contextmanager
def syncing() -> Iterator[list[Durable]]:
    """A list for :func:`commit`'s ``pending``, every sync in it waited for on the way out
    (an error included: no sync is left running once the caller lets the lock go)."""
    pending: list[Durable] = []
    try:
        yield pending
    finally:
        for durable in pending:
            durable.wait()


def commit(
    where: str | StateDir,
    plan: Plan,
    *,
    private: bool,
    source: str = "api",
    pending: list[Durable] | None = None,
) -> list[str]:
    """Carry out a plan, recording every version in history; the caller holds the store's lock.

    ``source`` says who asked (``worker``, ``cli``, ``memory-tool``, ``mcp`` ...).
    Returns the creates that were dropped because a file of that name
    appeared after the plan was made (that file is left as it is). ``where``
    is the store's state (``store.state``) or its root. With ``pending``, an
    unjournaled commit leaves its last folder syncs running (a :class:`Durable`
    appended to it) for the caller to wait on before it returns.
    """
    from mdmem.store import history

    state = StateDir.of(where)
    root = state.root
    before = _remember(state, plan)
    journal = state.txn
    journaled = len(plan.writes) + len(plan.deletes) > 1
    if journaled:
        payload = {
            "writes": {n: d.decode("utf-8") for n, d in plan.writes.items()},
            "deletes": plan.deletes,
            "before": plan.before,
        }
        files.atomic_write(
            journal, json.dumps(payload, ensure_ascii=False).encode("utf-8"), private=private
        )
        # The journal must be on disk (its name too) before any note changes: after a
        # power cut, a batch half on disk is finished from it, not left half done.
        files.fsync_dir(state.path)
    lost: list[str] = []
    # Many notes: written without an fsync each, then made durable together before the
    # journal goes. Until then the journal (durable, every note's bytes in it) is what a
    # power cut leaves, and the next write finishes the batch from it.
    together = journaled and len(plan.writes) > TOGETHER
    for name, data in list(plan.writes.items()):
        create = name in plan.before and plan.before[name] is None
        if _write(root, name, data, private, create=create, durable=not together):
            continue
        other = _create_elsewhere(root, name, data, private) if name in plan.renamable else None
        if other is None:
            lost.append(name)
            continue
        plan.renamed[name] = other
        del plan.writes[name]
        plan.writes[other] = data
        plan.before[other] = None
        if name in plan.actions:
            plan.actions[other] = plan.actions.pop(name)
        note = plan.notes.pop(name, None)
        if note is not None:
            plan.notes[other] = note.with_changes(filename=other)
    for name, trash_name in plan.deletes.items():
        _trash(state, name, trash_name)
    # A deleted note must be in the trash before it is durably gone from the store; then
    # one fsync of the directory makes every rename of the batch durable.
    folders = [state.trash, root] if plan.deletes else [root]
    if pending is not None and not journaled:
        # No journal waits on them: they run while the caller records the write.
        pending.append(Durable(folders))
    else:
        if together:
            files.sync_all([os.path.join(root, name) for name in plan.writes])
        for folder in folders:
            files.fsync_dir(folder)
    if journaled:
        with contextlib.suppress(FileNotFoundError):  # the state folder was removed meanwhile
            os.unlink(journal)
    for name, data in plan.writes.items():
        if name not in lost:
            action = plan.actions.get(name, "write")
            history.record(state, name, data, source=source, action=action)
    for name in plan.deletes:
        if name in before:
            history.record(state, name, before[name], source=source, action="delete")
    return lost


def recover(where: str | StateDir, *, private: bool) -> list[str]:
    """Finish a batch a dead process left half done; return what was skipped and why.

    ``where`` is the store's state (``store.state``) or its root.
    """
    state = StateDir.of(where)
    root = state.root
    journal = state.txn
    try:
        with open(journal, encoding="utf-8") as f:
            payload = json.load(f)
    except FileNotFoundError:
        return []
    except (OSError, ValueError):
        # A journal that cannot be read was never completely written (it is
        # written atomically), so no note was touched yet.
        with contextlib.suppress(FileNotFoundError):
            os.unlink(journal)
        return ["an unreadable batch journal was discarded before any note was written"]
    if not isinstance(payload, dict):
        payload = {}
    skipped: list[str] = []
    before = payload.get("before")
    before = before if isinstance(before, dict) else {}
    for name, text in _items(payload.get("writes"), skipped):
        data = text.encode("utf-8")
        current = _hash_of(os.path.join(root, name))
        if current == _catalog.content_hash(data):
            continue
        if current == before.get(name):
            if not _write(root, name, data, private, create=current is None):
                skipped.append(f"{name}: created by someone else meanwhile; left as is")
            else:
                from mdmem.store import history

                history.record(state, name, data, source="recovery")
        else:
            skipped.append(f"{name}: changed by someone else since the batch began; left as is")
    for name, trash_name in _items(payload.get("deletes"), skipped):
        if os.path.basename(trash_name) != trash_name or trash_name in ("", ".", ".."):
            skipped.append(f"{name}: a trash name that is not a bare name; not deleted")
            continue
        current = _hash_of(os.path.join(root, name))
        if current is None:
            continue
        if current == before.get(name):
            _trash(state, name, trash_name)
        else:
            skipped.append(f"{name}: changed by someone else since the batch began; not deleted")
    files.fsync_dir(root)
    with contextlib.suppress(FileNotFoundError):
        os.unlink(journal)
    return skipped


def _items(mapping: object, skipped: list[str]) -> list[tuple[str, str]]:
    """A journal's name -> text pairs, names checked by the one validator (defence in depth:
    the journal lives in the user's private state, but a name is never trusted unchecked)."""
    out: list[tuple[str, str]] = []
    if not isinstance(mapping, dict):
        return out
    for name, value in mapping.items():
        try:
            check_name(name)
        except InvalidPath:
            skipped.append(f"{name!r}: not a note name; ignored")
            continue
        if isinstance(value, str):
            out.append((name, value))
    return out
