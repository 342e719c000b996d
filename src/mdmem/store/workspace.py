"""Which workspace a command runs in, and its two stores.

The project store may be *unavailable* (``Store.unavailable`` says why): when
the workspace is the home directory its ``.PseudoClaude/memory`` is the user
store, and a committed symlink in place of ``.PseudoClaude`` or its ``memory``
would lead writes out of the workspace. Such a workspace has no project store:
it reads as empty and refuses writes with a clear error.
"""

from __future__ import annotations

import os

from mdmem._kinds import Level
from mdmem.store.paths import (
    IN_HOME,
    IS_USER_STORE,
    discover_workspace,
    project_problem,
    project_root,
    user_root,
)
from mdmem.store.state import StateDir

TYPE_CHECKING = False  # not typing's: this module is on the per-prompt hook's path
if TYPE_CHECKING:
    from collections.abc import Collection, Iterator
    from contextlib import AbstractContextManager

    from mdmem.store._catalog import Catalog
    from mdmem.store.catalog import Scan
    from mdmem.store.note import Note
    from mdmem.store.store import Store

__all__ = ["ReadingStore", "refusal", "resolve", "resolve_reading"]


def _where(workspace: str | None, user_dir: str | None, start: str | None) -> tuple[str, str, str]:
    """The workspace, its project store's directory and the user store's directory."""
    user = os.path.abspath(os.path.expanduser(user_dir)) if user_dir else user_root()
    if workspace:
        ws = os.path.abspath(os.path.expanduser(workspace))
    else:
        ws = discover_workspace(start or os.getcwd(), user_store=user)
    return ws, project_root(ws), user


def resolve(
    workspace: str | None, user_dir: str | None, *, start: str | None = None
) -> tuple[str, Store, Store]:
    """The workspace and its two stores: ``workspace`` as given, else discovered from ``start``."""
    from mdmem.store.store import Store

    ws, project, user = _where(workspace, user_dir, start)
    return ws, Store(project, Level.PROJECT, user_store=user), Store(user, Level.USER)


def resolve_reading(
    workspace: str | None, user_dir: str | None, *, start: str | None = None
) -> tuple[str, ReadingStore, ReadingStore]:
    """:func:`resolve` for a command that only reads (the per-prompt hook): the two stores
    as :class:`ReadingStore`."""
    ws, project, user = _where(workspace, user_dir, start)
    return ws, ReadingStore(project, Level.PROJECT, user_store=user), ReadingStore(user, Level.USER)


class ReadingStore:
    """A store as a read sees it first: its directory, level, state folder and whether it
    is refused, without the store's code.

    The change log and the notes' hashes are read from the catalog alone; the
    :class:`~mdmem.store.store.Store` behind it is made on first use of anything
    else (a listing's hashes, the lock): a query on a settled store, or right
    after a write, never needs it, and the per-prompt hook, a fresh process at
    every prompt, does not import it (a sixth of its imports). What it says is the
    Store's: the same directory, state folder and refusal.
    """

    def __init__(self, root: str, level: Level | str, *, user_store: str | None = None) -> None:
        self._root = os.path.abspath(os.fspath(root))
        self.level = Level(level)
        self.private = self.level is Level.USER
        self._user_store = user_store
        #: Why the project store is refused, as Store.unavailable says.
        self.unavailable: str | None = (
            project_problem(self._root, user_store) if self.level is Level.PROJECT else None
        )
        self.state = StateDir.of(self._root)
        self._store: Store | None = None
        # The catalog alone, for the change log's reads (see _catalog_here); and its pid.
        self._catalog: tuple[Catalog, int] | None = None

    def __repr__(self) -> str:
        return f"ReadingStore({self._root!r}, {self.level.value!r})"

    @property
    def path(self) -> str:
        """The store's directory."""
        return self._root

    @property
    def store(self) -> Store:
        """The store itself (made, and its code imported, on first use)."""
        if self._store is None:
            from mdmem.store.store import Store

            self._store = Store(self._root, self.level, user_store=self._user_store)
        return self._store

    def lock(self, timeout: float | None = None) -> AbstractContextManager[object]:
        """Hold the store's write lock (:meth:`Store.lock`)."""
        return self.store.lock(timeout)

    def read(self, filename: str) -> Note:
        """Read one note (:meth:`Store.read`)."""
        return self.store.read(filename)

    def _settle_index(self) -> None:
        """The stat pass of :meth:`Store.load_index`, MEMORY.md not read (``marks``)."""
        self.store._settle_index()

    def read_text(self, filename: str) -> str:
        """A note's text as on disk (:meth:`Store.read_text`), without the store's code:
        the prompt hook re-reads a note edited by hand with it."""
        from mdmem.store.quicknote import read_note_text

        return read_note_text(self._root, filename)

    def _catalog_here(self) -> Catalog | None:
        """The catalog, when the store is there to read (``Coherence.here``), without the
        store's code: the prompt right after a write reads the change log, and only that.
        None when there is no store (or it is refused)."""
        if self.unavailable is not None or not os.path.isdir(self._root):
            return None
        if self._catalog is None or self._catalog[1] != os.getpid():
            # A forked child must not share its parent's SQLite connection.
            from mdmem.store._catalog import Catalog

            self._catalog = (
                Catalog(self._root, private=self.private, state=self.state),
                os.getpid(),
            )
        return self._catalog[0]

    def log_position(self) -> tuple[str, int] | None:
        """Where the change log stands (:meth:`Store.log_position`)."""
        from mdmem.store._catalog import log_position

        cat = self._catalog_here()
        return None if cat is None else log_position(cat)

    def changes_since(
        self, position: tuple[str, int], key: str
    ) -> tuple[tuple[str, int], str, set[str]] | None:
        """The notes changed since ``position`` (:meth:`Store.changes_since`)."""
        from mdmem.store._catalog import changes_since

        cat = self._catalog_here()
        return None if cat is None else changes_since(cat, self._root, position, key)

    def entry_versions(self, *, scan: Scan | None = None) -> dict[str, str]:
        """Every note's content hash (:meth:`Store.entry_versions`)."""
        return self.store.entry_versions(scan=scan)

    def iter_versions(self, *, scan: Scan | None = None) -> Iterator[tuple[str, str]]:
        """(name, content hash) of every note, streamed (:meth:`Store.iter_versions`)."""
        return self.store.iter_versions(scan=scan)

    def versions_of(self, names: Collection[str]) -> dict[str, str]:
        """The content hashes of ``names`` (:meth:`Store.versions_of`)."""
        cat = self._catalog_here() if names else None
        return {} if cat is None else cat.versions(names)


def refusal(project: Store) -> str | None:
    """One line saying why ``project`` is refused, for the CLI or a hook to show; None when
    it is usable, or when it is the home directory's (which is normal, not a refusal)."""
    why = project.unavailable
    if why is None or why in (IS_USER_STORE, IN_HOME):
        return None
    return f"mdmem: no project store at {project.path}: {why}; only the user store is used"
