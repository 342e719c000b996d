"""Where mdmem keeps a store's own state, and its layout: the one owner of those paths.

A store's notes live in the repository; everything mdmem derives or keeps for
itself lives outside it, in one private folder per store
(:func:`mdmem.store.paths.locate_state` computes where; this module never does).
:class:`StateDir` is that folder as a value, made once per store
(``store.state``), and names every file and sub-folder in it, so no caller
joins a folder name of its own. It is also the one memory of where the folder
is: the store's value resolves it once and looks again at most once a second
(a re-clone at the same path gets a state of its own, and a long-lived process
must notice). A function of a lower floor that works on a store's state takes
``store.state`` (or, from a caller that holds only a path, the root:
``StateDir.of`` makes a value for it, which resolves afresh)::

    <state>/catalog.sqlite   the catalog (stat, hash and fields of every note)
    <state>/fingerprint      the catalog's settled stat of the store
    <state>/clock            the file-system clock probe
    <state>/txn.json         the batch journal of a write in progress
    <state>/lock             the store's write lock
    <state>/dedupe.lock      held by the background build of the catalog's dedupe keys
    <state>/trash/           deleted notes, restorable
    <state>/history/         earlier versions of notes
    <state>/turns/           the turn journal (project store only)
    <state>/proposals/       operations waiting for review
    <state>/rescued/         what ``mdmem doctor`` set aside
    <state>/provenance/      which turn wrote which note
    <state>/usage/           the token ledger
    <state>/marks            superseded/expired lines of the prompt block
    <state>/stale.marks      lines naming code the workspace no longer has
    <state>/recall.sqlite    the search index (derived, rebuildable)
    <state>/vectors.sqlite   the semantic extra's vectors (derived)
    <state>/feedback.json    disputed notes
    <state>/hooks.log        what the Claude Code hooks logged
    <state>/claude-code/     the hooks' ledgers (handed-over turns, recalled notes)

Nothing here creates a folder but :meth:`StateDir.ensure`.
"""

from __future__ import annotations

import os
import stat
from time import monotonic

from mdmem.store.paths import anchor_identity, locate_state, state_base

__all__ = [
    "CATALOG",
    "CLOCK",
    "FINGERPRINT",
    "HISTORY",
    "KEYS_LOCK",
    "MARKS",
    "PROPOSALS",
    "RESCUED",
    "STALE_MARKS",
    "TRASH",
    "TURNS",
    "TXN",
    "StateDir",
    "ensure_state_dir",
]

CATALOG = "catalog.sqlite"
FINGERPRINT = "fingerprint"
CLOCK = "clock"
TXN = "txn.json"
LOCK = "lock"
KEYS_LOCK = "dedupe.lock"
TRASH = "trash"
HISTORY = "history"
TURNS = "turns"
PROPOSALS = "proposals"
RESCUED = "rescued"
PROVENANCE = "provenance"
USAGE = "usage"
MARKS = "marks"
STALE_MARKS = "stale.marks"
LOGS = "hooks.log"


class StateDir:
    """The state folder of one store (see the module docstring for its layout).

    A plain value: equal for equal store roots, cheap to pass, and made once per
    store (``Store.state``). It remembers where the folder is, and looks at the
    store's anchor again (:func:`~mdmem.store.paths.anchor_identity`) at most once
    a second, so it notices a re-clone at the same path, whose state is a new
    folder. ``state / "name"`` joins a name of a higher floor's own (the search
    index, the hooks' ledgers) onto it.
    """

    __slots__ = ("_found", "root")

    #: How long an answer is taken on trust before the anchor is looked at again.
    RECHECK_SECONDS = 1.0

    def __init__(self, root: str) -> None:
        self.root = root
        # (the variables state_base reads, anchor, identity, folder, when last checked)
        self._found: tuple[tuple[str, str, str], str, str, str, float] | None = None

    @classmethod
    def of(cls, where: str | StateDir) -> StateDir:
        """The state folder of the store at ``where`` (a root), or ``where`` itself if it is one.

        A caller that holds a store passes ``store.state``, which has resolved
        its folder already; a root gets a new value, which resolves it afresh.
        """
        return where if isinstance(where, StateDir) else cls(where)

    @property
    def path(self) -> str:
        """The folder itself (it may not exist yet)."""
        env = os.environ
        base = (env.get("MDMEM_STATE_DIR", ""), env.get("XDG_STATE_HOME", ""), env.get("HOME", ""))
        now = monotonic()
        found = self._found
        if found is not None and found[0] == base:
            _, anchor, identity, folder, checked = found
            if now - checked < self.RECHECK_SECONDS:
                return folder
            if anchor_identity(anchor)[0] == identity:
                self._found = (base, anchor, identity, folder, now)
                return folder
        folder, anchor, identity, seen = locate_state(self.root)
        # A missing anchor is looked at again next time.
        self._found = (base, anchor, identity, folder, now) if seen else None
        return folder

    def __repr__(self) -> str:
        return f"StateDir.of({self.root!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StateDir) and other.root == self.root

    def __hash__(self) -> int:
        return hash(self.root)

    def __fspath__(self) -> str:
        return self.path

    def __truediv__(self, name: str) -> str:
        return os.path.join(self.path, name)

    @property
    def catalog(self) -> str:
        """The catalog database."""
        return os.path.join(self.path, CATALOG)

    @property
    def fingerprint(self) -> str:
        """The catalog's settled stat of the store."""
        return os.path.join(self.path, FINGERPRINT)

    @property
    def txn(self) -> str:
        """The batch journal of a write in progress."""
        return os.path.join(self.path, TXN)

    @property
    def trash(self) -> str:
        """Deleted notes, restorable."""
        return os.path.join(self.path, TRASH)

    @property
    def history(self) -> str:
        """Earlier versions of notes."""
        return os.path.join(self.path, HISTORY)

    @property
    def turns(self) -> str:
        """The turn journal."""
        return os.path.join(self.path, TURNS)

    @property
    def proposals(self) -> str:
        """Operations waiting for review."""
        return os.path.join(self.path, PROPOSALS)

    @property
    def rescued(self) -> str:
        """What ``mdmem doctor`` set aside."""
        return os.path.join(self.path, RESCUED)

    @property
    def provenance(self) -> str:
        """Which turn wrote which note."""
        return os.path.join(self.path, PROVENANCE)

    @property
    def usage(self) -> str:
        """The token ledger."""
        return os.path.join(self.path, USAGE)

    @property
    def marks(self) -> str:
        """Superseded and expired lines of the prompt block."""
        return os.path.join(self.path, MARKS)

    @property
    def stale_marks(self) -> str:
        """Lines that name code the workspace no longer has."""
        return os.path.join(self.path, STALE_MARKS)

    @property
    def logs(self) -> str:
        """What the Claude Code hooks logged."""
        return os.path.join(self.path, LOGS)

    def exists(self) -> bool:
        """Whether the folder has been made (reads need not make it)."""
        return os.path.isdir(self.path)

    def ensure(self) -> str:
        """Make the folder (``0700``, with its parents under the state base) and return its path.

        Raises:
            OSError: the path is taken by something that is not a directory.
        """
        path = self.path
        if not os.path.isdir(path):
            base = state_base()
            # Every folder made here is 0700, ~/.local/state included (as XDG asks), whatever
            # the umask: os.makedirs would make the parents 0777 under umask 000.
            missing = [base, os.path.dirname(path), path]
            above = os.path.dirname(base)
            while above and not os.path.isdir(above) and os.path.dirname(above) != above:
                missing.insert(0, above)
                above = os.path.dirname(above)
            for folder in missing:
                try:
                    os.mkdir(folder, 0o700)
                except FileExistsError:
                    continue
                os.chmod(folder, 0o700)  # exact, even under a umask that takes the owner's bits
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            raise OSError(f"{path} is not a directory")
        if stat.S_IMODE(st.st_mode) != 0o700:
            os.chmod(path, 0o700)
        return path


def ensure_state_dir(root: str, *, private: bool = True) -> str:
    """Create the state folder of the store at ``root`` and return it.

    ``StateDir.of(root).ensure()``, for callers that hold a path, not a store.

    The whole state tree is the user's own, ``0700`` whatever the store's level:
    it holds turns, trash and logs of private conversations. ``private`` is kept
    for the callers' sake and changes nothing.
    """
    del private
    return StateDir.of(root).ensure()
