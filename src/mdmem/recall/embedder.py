"""Embedding a store's notes for semantic recall: in chunks, resumable, one process at a time.

A query that finds at most :data:`INLINE` notes without a vector, in a store
whose other notes have one (a note just written, or edited) or, with the
resident embedder (:mod:`mdmem.recall.resident`), in any store, embeds them
before it answers (:func:`embed_inline`, through the resident embedder when it
runs: milliseconds, no model load): a fresh note is found by its meaning at
the very next query. Anything more (a first build, a bulk import) goes to the
background embedder below, which loads the model itself at low priority, so a
query never waits for more than a few notes.

Beyond those few, a query never embeds notes (see :mod:`mdmem.recall.semantic`).
When it finds more notes without a vector it calls :func:`request`, which starts this module as a
detached process (:func:`background`, at low priority, its output
discarded) unless one already runs for the store or one
was started in the last minute. ``mdmem embed`` runs :func:`embed` in the
foreground, with a progress bar on a terminal.

- **One at a time**: an embedder holds ``embed.lock`` in the store's state
  folder (an ``flock``, which the kernel releases when the process dies, however
  it dies). A background embedder that finds it held exits; ``mdmem embed``
  waits for it.
- **Resumable**: vectors are committed chunk by chunk (:data:`CHUNK` notes per
  transaction), so a killed embedder loses at most the chunk it was on, and the
  next one embeds only the notes still without a vector.
- **Incremental**: notes are embedded by content hash; a changed note is
  embedded again, an unchanged one never, and vectors of content no note has
  any more are dropped.

``MDMEM_EMBED=off`` stops queries from embedding, inline or in the background
(the vectors that exist are still used; ``mdmem embed`` still works).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem import _spawn

if TYPE_CHECKING:
    import subprocess
    from collections.abc import Callable, Iterator

    from mdmem.recall import semantic
    from mdmem.recall.index import Index
    from mdmem.recall.view import StoreView as Store

__all__ = [
    "CHUNK",
    "LOCK",
    "EmbedReport",
    "background_enabled",
    "busy",
    "describe",
    "embed",
    "embed_inline",
    "reap",
    "request",
    "status",
]

#: The lock file, in the store's state folder.
LOCK = "embed.lock"
#: Notes embedded (and committed) at a time.
CHUNK = 32
#: At most this many notes without a vector are embedded by the query that finds them
#: (about 4 ms a note with the model loaded, which the query needs anyway).
INLINE = 16
#: A process starts at most one background embedder per store in this many seconds.
RETRY_SECONDS = 60.0

#: What a background embedder process runs (``_child([ROOT, LEVEL])``, see :mod:`mdmem._spawn`):
#: in the command line's fast path, which makes the store, so that recall never imports
#: the store class (see view.py).
_ENTRY = "mdmem.cli._fastpath:embedder_child"

_REQUESTED: dict[str, float] = {}
_CHILDREN: list[subprocess.Popen[bytes]] = []


@dataclass(frozen=True)
class EmbedReport:
    """What one :func:`embed` did."""

    #: Notes embedded by this run.
    embedded: int
    #: Notes indexed, and how many of them have a vector now.
    notes: int
    with_vectors: int
    #: Another embedder held the lock and this one did not wait: nothing was done.
    busy: bool
    seconds: float


def background_enabled() -> bool:
    """Whether queries may start a background embedder (``MDMEM_EMBED``, default on)."""
    setting = os.environ.get("MDMEM_EMBED", "background").strip().lower()
    return setting not in ("off", "0", "no", "false", "never")


@contextlib.contextmanager
def _locked(store: Store, wait: bool) -> Iterator[bool]:
    folder = store.state.ensure()
    fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        with contextlib.suppress(OSError):  # who holds it, for a person looking
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        yield True
    finally:
        os.close(fd)


def busy(store: Store) -> bool:
    """Whether an embedder is running for this store now."""
    try:
        with _locked(store, wait=False) as got:
            return not got
    except OSError:
        return False


def embed(
    store: Store,
    *,
    progress: Callable[[int, int], None] | None = None,
    wait: bool = True,
    chunk: int = CHUNK,
) -> EmbedReport:
    """Embed the store's notes that have no vector yet; return what was done.

    ``progress(done, total)`` is called after each committed chunk. With
    ``wait`` False, return at once (``busy``) when another embedder runs.

    Raises:
        ImportError: the ``semantic`` extra is not installed.
    """
    from mdmem.recall import semantic
    from mdmem.recall.index import Index

    started = time.perf_counter()
    with _locked(store, wait) as got:
        if not got:
            return EmbedReport(0, 0, 0, True, time.perf_counter() - started)
        index = Index(store)
        vectors = semantic.Vectors(store.path)
        done = 0
        try:
            # Notes may change while embedding: look again, a few times at most.
            for _ in range(3):
                index.sync(full=True)  # every note: not the key's shortcut (recall.index)
                versions = index.versions()
                current = {sha for _, sha, _ in versions}
                have = vectors.shas()
                if not have and current:
                    _adopt_legacy(index, vectors, current)
                    have = vectors.shas()
                name_of: dict[str, str] = {}
                for name, sha, _ in sorted(versions):
                    if sha not in have:
                        name_of.setdefault(sha, name)
                if not name_of:
                    break
                total = done + len(name_of)
                names = sorted(name_of.values())
                for start in range(0, len(names), max(1, chunk)):
                    rows = index.rows(names[start : start + max(1, chunk)])
                    rows = [r for r in rows if name_of.get(r.sha) == r.name]
                    if rows:
                        texts = [semantic.note_text(r.title, r.summary, r.body) for r in rows]
                        # A bulk build loads the model here, at this process's priority
                        # (low in the background), not through the resident embedder.
                        encoded = semantic.encode(texts, resident=False)
                        vectors.put(
                            (r.sha, v.tobytes()) for r, v in zip(rows, encoded, strict=True)
                        )
                    done += min(len(names) - start, max(1, chunk))
                    if progress is not None:
                        progress(done, total)
            versions = index.versions()
            # One chunk again (and no vectors of content gone), for the next process's load.
            vectors.compact({sha for _, sha, _ in versions})
            have = vectors.shas()
            with_vectors = sum(1 for _, sha, _ in versions if sha in have)
        finally:
            vectors.close()
            index.close()
    return EmbedReport(done, len(versions), with_vectors, False, time.perf_counter() - started)


def embed_inline(index: Index, most: int = INLINE) -> bool:
    """Embed the notes of ``index`` without a vector now, if there are at most ``most``.

    True when every note has a vector afterwards. False, with nothing done, when
    there are more (a bulk build: :func:`request`'s job), when ``MDMEM_EMBED`` is
    off, when another embedder holds the store's lock (it will embed them), or
    when the vectors cannot be written. ``index`` must be synced (the query's).
    """
    import sqlite3

    from mdmem.recall import semantic

    if not background_enabled():
        return False
    try:
        vectors = semantic.Vectors(index.store.path)
    except (OSError, sqlite3.Error):
        return False
    try:
        have = vectors.shas()
        name_of: dict[str, str] = {}
        for name, sha, _ in sorted(index.versions()):
            if sha not in have:
                name_of.setdefault(sha, name)
        if not name_of:
            return True
        if len(name_of) > most:
            return False
        with _locked(index.store, wait=False) as got:
            if not got:
                return False
            rows = [r for r in index.rows(sorted(name_of.values())) if name_of.get(r.sha) == r.name]
            if rows:
                # Through the resident embedder, as bytes: no model, nor numpy, loaded here.
                encoded = semantic.encode_blobs(
                    [semantic.note_text(r.title, r.summary, r.body) for r in rows]
                )
                vectors.put((r.sha, blob) for r, blob in zip(rows, encoded, strict=True))
        return True
    except (OSError, sqlite3.Error):
        return False  # the query answers with what exists; the background embedder may follow
    finally:
        vectors.close()


def _adopt_legacy(index: Index, vectors: semantic.Vectors, current: set[str]) -> None:
    """Take over the vectors an earlier version cached in the search index (no re-embedding)."""
    import sqlite3

    from mdmem.recall import semantic

    try:
        old = index.legacy_vectors(semantic.MODEL_ID)
    except sqlite3.Error:  # an old table that cannot be read is simply not used
        return
    size = 4 * semantic.DIM
    items = [(sha, blob) for sha, blob in old.items() if sha in current and len(blob) == size]
    if items:
        vectors.put(items)
    with contextlib.suppress(sqlite3.Error):
        index.drop_legacy_vectors()


def status(store: Store) -> dict[str, object] | None:
    """How far the store's notes are embedded: None without the extra or with semantic off.

    ``{"notes": indexed notes, "with_vectors": how many have a vector,
    "running": whether an embedder runs now, "model": the model's id}``, over
    the notes as the search index last saw them: nothing is read from the store,
    nor written (``mdmem doctor`` without ``--fix`` writes nothing).
    """
    from mdmem.recall import semantic
    from mdmem.recall.index import Index

    setting = os.environ.get("MDMEM_SEMANTIC", "auto").strip().lower()
    if setting in ("0", "off", "no", "false") or not semantic.available():
        return None
    index = Index(store)
    if not os.path.exists(index.path) or not os.path.exists(semantic.Vectors(store.path).path):
        total = 0
        if os.path.exists(index.path):
            total = index.count()
            index.close()
        return {"notes": total, "with_vectors": 0, "running": False, "model": semantic.MODEL_ID}
    try:
        have, total = semantic.coverage(index)
    finally:
        index.close()
    return {
        "notes": total,
        "with_vectors": have,
        "running": busy(store),
        "model": semantic.MODEL_ID,
    }


def describe(state: dict[str, object]) -> str:
    """One line for a person about :func:`status`'s answer."""
    notes, have = int(str(state["notes"])), int(str(state["with_vectors"]))
    line = f"{have} of {notes} notes have a vector ({state['model']})"
    if state["running"]:
        return line + "; embedding in the background"
    if have < notes:
        return line + "; the rest are matched by their words until `mdmem embed` or a search"
    return line


def _reap() -> None:
    for child in list(_CHILDREN):
        if child.poll() is not None:
            _CHILDREN.remove(child)


def reap() -> int:
    """Collect the background embedders of this process that have ended; how many still run.

    A long-running process (``mdmem ui``) calls it now and then, so an ended
    embedder does not stay a zombie until the next :func:`request`.
    """
    _reap()
    from mdmem.recall import resident

    resident.reap()  # the resident embedder this process started, once it has stopped
    return len(_CHILDREN)


def request(store: Store) -> bool:
    """Start a background embedder for ``store``; False when none was started.

    None is started when ``MDMEM_EMBED`` is off, when one already runs for the
    store, or when this process started one in the last :data:`RETRY_SECONDS`.
    """
    if not background_enabled():
        return False
    _reap()
    now = time.monotonic()
    last = _REQUESTED.get(store.path)
    if last is not None and now - last < RETRY_SECONDS:
        return False
    _REQUESTED[store.path] = now
    if busy(store):
        return False
    try:
        folder = store.state.ensure()
        # This installed mdmem, isolated, in the state folder (see mdmem._spawn).
        child = _spawn.start([store.path, store.level.value], cwd=folder, entry=_ENTRY)
    except OSError:
        return False
    _CHILDREN.append(child)
    return True


def background(store: Store) -> EmbedReport:
    """What a background embedder process runs (see :data:`_ENTRY`): at low priority, no wait."""
    with contextlib.suppress(OSError):
        os.nice(10)  # a background job: the person's own work comes first
    return embed(store, wait=False)
