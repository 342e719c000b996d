"""How much people read each note, for ranking: the usage ledger's read counts, kept.

Notes people actually read rank a little higher (:func:`use_bonus`, at most
:data:`USE_BONUS`), as the seed's score does with hit counts and recency. The
counts come from the usage ledger (:mod:`mdmem.store.ledger`), folded from up to
256 KiB of events; a fresh process (the per-prompt hook) would fold them at every
prompt, so they are kept in this process and in the store's search index, and
brought up to date from what was appended since (``ledger.read_counts``).
"""

from __future__ import annotations

import contextlib
import os
import time

from mdmem import _json

TYPE_CHECKING = False  # typing costs milliseconds on the hook path
if TYPE_CHECKING:
    from mdmem.recall.fts import Index
    from mdmem.recall.view import StoreView as Store

__all__ = ["USE_BONUS", "reads", "use_bonus"]

USE_BONUS = 0.10
_READS: dict[str, tuple[str, dict[str, tuple[int, float]]]] = {}


def use_bonus(reads: int, last_read: float, now: float | None = None) -> float:
    """The factor a note's score is multiplied by for being read: 1.0 to ``1 + USE_BONUS``.

    Half for how often (up to 10 reads), half for how recently (fading over 30 days).
    """
    moment = time.time() if now is None else now
    often = min(max(reads, 0), 10) / 10
    age_days = max(0.0, moment - last_read) / 86_400
    recent = max(0.0, 1 - age_days / 30) if last_read > 0 else 0.0
    return 1 + USE_BONUS * (often + recent) / 2


def reads(store: Store, index: Index | None = None) -> dict[str, tuple[int, float]]:
    """Read counts and last read times by note, cached while the ledger's files are unchanged.

    In this process, and in the store's search index (``index``): the ledger is
    folded from up to 256 KiB of events, which a fresh process (the per-prompt
    hook) would otherwise parse at every prompt, for a map of a few notes.
    """
    base = store.state.usage  # the ledger's folder (mdmem.store.ledger.folder)
    try:
        with os.scandir(base) as entries:
            seen = sorted(
                f"{e.name}:{st.st_size}:{st.st_mtime_ns}:{st.st_ino}"
                for e in entries
                for st in (e.stat(follow_symlinks=False),)
            )
        key = f"{os.stat(base).st_mtime_ns} {' '.join(seen)}"
    except OSError:
        return {}
    cached = _READS.get(store.path)
    if cached is not None and cached[0] == key:
        return cached[1]
    kept = index.derived("reads", key) if index is not None else None
    if kept is not None:
        with contextlib.suppress(ValueError, TypeError, KeyError, AttributeError):
            record = _json.loads(kept)
            out = {str(n): (int(r), float(t)) for n, (r, t) in record["reads"].items()}
            _READS[store.path] = (key, out)
            return out
    from mdmem.store import ledger  # only where there is a ledger: a hook's import less

    # The ledger grew since the kept record (SessionStart's line, a turn's writes): only
    # what was appended is folded (ledger.read_counts says when that is exact).
    earlier = index.derived("reads") if index is not None else None
    out, record_text = ledger.read_counts(store.state, earlier)
    _READS[store.path] = (key, out)
    if index is not None:
        index.keep("reads", key, record_text)
    return out
