"""Features the page shows only where this mdmem has them: history, review, more markers.

Each is looked up when it is used, by name (``getattr`` on the store, or on a
module of a lower floor, imported here like any other), so the page shows no
empty section for a feature a store does not have:

- a note's versions: ``store.history(name)`` and ``store.restore_version(name,
  version)`` (else ``store.restore(name, version=...)``);
- proposals waiting for review: ``pending(store)``, ``accept(store, id,
  op=None)`` and ``reject(store, id)`` of ``mdmem.manager.review`` (else the
  store's own ``proposals()``, ``accept([id])``, ``reject([id])``);
- stale notes: ``mdmem.store.marks.cached_marks(root)`` (always there), name -> reason;
- disputed notes: ``mdmem.recall.disputes.disputed(store)``, name -> details;
- any other marker: ``store.markers()``, name -> {marker: words};
- search: the recall engine, ``mdmem.recall.search(stores, query, ...)``.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from dataclasses import fields, is_dataclass
from typing import TYPE_CHECKING, Protocol

from mdmem import recall
from mdmem.errors import InvalidOperation, MdmemError, NoteNotFound
from mdmem.manager import review
from mdmem.recall import disputes, engine, semantic
from mdmem.store import history
from mdmem.store import marks as store_marks

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import datetime

    from mdmem._kinds import Level
    from mdmem.store.store import Store

__all__ = [
    "Hit",
    "can_edit_proposals",
    "decide",
    "describe",
    "dispute_of",
    "has_history",
    "has_review",
    "history_of",
    "markers",
    "proposal",
    "proposal_op",
    "proposals_of",
    "restorable",
    "restore_version",
    "search",
    "semantic_ready",
    "settle_dispute",
    "version_text",
    "warm_up",
]

_REVIEW = "mdmem.manager.review"


#: The lower floors' modules the page's features come from, by name (imported above, so
#: every reader of the imports sees these edges).
_MODULES: dict[str, object] = {
    "mdmem.manager.review": review,
    "mdmem.recall": recall,
    "mdmem.recall.disputes": disputes,
    "mdmem.recall.engine": engine,
    "mdmem.recall.semantic": semantic,
    "mdmem.store.history": history,
}


def _optional(module: str, name: str) -> Callable[..., object] | None:
    """``module.name`` if this mdmem has it, else None (a test may take a module away)."""
    value = getattr(_MODULES.get(module), name, None)
    return value if callable(value) else None


def _method(store: Store, name: str) -> Callable[..., object] | None:
    value = getattr(store, name, None)
    return value if callable(value) else None


def describe(item: object) -> dict[str, str]:
    """The public fields of a record (a dataclass, a mapping or an object), as text.

    A nested mapping (a proposal's operation) is flattened into the record.
    """
    if is_dataclass(item) and not isinstance(item, type):
        pairs = {f.name: getattr(item, f.name) for f in fields(item)}
    elif isinstance(item, dict):
        pairs = dict(item)
    else:
        pairs = {k: v for k, v in vars(item).items() if not k.startswith("_")}
    out: dict[str, str] = {}
    for key, value in pairs.items():
        if isinstance(value, dict):
            out.update({str(k): "" if v is None else str(v) for k, v in value.items()})
        else:
            out[str(key)] = "" if value is None else str(value)
    return out


# -- search ----------------------------------------------------------------------------


class Hit(Protocol):
    """What the page reads of a search hit (both search functions' hits have it)."""

    @property
    def filename(self) -> str: ...
    @property
    def level(self) -> Level | str: ...
    @property
    def title(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def score(self) -> float: ...
    @property
    def updated(self) -> datetime | None: ...
    @property
    def snippet(self) -> str: ...


def search(
    query: str, stores: Sequence[Store], *, note_type: str | None = None, limit: int = 200
) -> list[Hit]:
    """The notes of ``stores`` that best match ``query``, best first.

    Through the recall engine (``mdmem.recall.search(stores, query, limit=, types=)``).
    """
    search: Callable[..., object] = recall.search
    types = [note_type] if note_type else None
    extra: dict[str, object] = {}
    if not semantic_ready() and "semantic" in inspect.signature(search).parameters:
        # Loading the embedding model takes seconds: this search goes without it,
        # and the model loads afterwards, for the next ones.
        extra["semantic"] = False
    found = search(list(stores), query, limit=limit, types=types, **extra)
    if extra:
        warm_up()
    return list(found) if isinstance(found, list) else []


_warming: list[threading.Thread] = []


def semantic_ready() -> bool:
    """Whether semantic search can run now without loading a model (off, or loaded)."""
    mode = _optional("mdmem.recall.engine", "semantic_mode")
    if mode is None or not mode():
        return True
    try:
        from mdmem.recall import semantic
    except ImportError:
        return True
    return getattr(semantic, "_model", None) is not None


def warm_up() -> None:
    """Load the embedding model in the background (once per process), if semantic is on."""
    if _warming or semantic_ready():
        return
    encode = _optional("mdmem.recall.semantic", "encode")
    if encode is None:
        return

    def load() -> None:
        with contextlib.suppress(Exception):  # no model, no semantic: lexical search stays
            encode(["warm up"])

    thread = threading.Thread(target=load, name="mdmem-ui-model", daemon=True)
    _warming.append(thread)
    thread.start()


# -- markers -----------------------------------------------------------------------------


def markers(store: Store) -> dict[str, dict[str, str]]:
    """Markers other parts of mdmem keep about notes: stale, disputed, proposals waiting, ..."""
    out: dict[str, dict[str, str]] = {}
    # What the last staleness check found, while the tree is still as it was then.
    for note, why in store_marks.cached_marks(store.path).items():
        out.setdefault(note, {})["stale"] = f"stale: {why}"
    disputed = _optional("mdmem.recall.disputes", "disputed")
    if disputed is not None:
        found = disputed(store)
        if isinstance(found, dict):
            # A short marker: the correction's words are on the note's page.
            for name in found:
                out.setdefault(str(name), {})["disputed"] = "disputed"
    for item in proposals_of(store) or []:
        target = item.get("filename")
        if target:
            out.setdefault(target, {})["proposal"] = "a proposed change waits for review"
    more = _method(store, "markers")
    if more is not None:
        found = more()
        if isinstance(found, dict):
            for name, marks in found.items():
                if isinstance(marks, dict):
                    out.setdefault(str(name), {}).update({str(k): str(v) for k, v in marks.items()})
    return out


def dispute_of(store: Store) -> Callable[[str], tuple[str, dict[str, str]] | None]:
    """For a note name: ("disputed" or "dismissed", the dispute described), or None."""
    disputed = _optional("mdmem.recall.disputes", "disputed")
    gone = _optional("mdmem.recall.disputes", "dismissed")
    marks = disputed(store) if disputed is not None else {}
    dropped = gone(store) if gone is not None else {}

    def look(name: str) -> tuple[str, dict[str, str]] | None:
        for kind, found in (("disputed", marks), ("dismissed", dropped)):
            if isinstance(found, dict) and isinstance(found.get(name), dict):
                return kind, {str(k): str(v) for k, v in found[name].items()}
        return None

    return look


def settle_dispute(store: Store, name: str, verdict: str, at: str) -> bool:
    """Dismiss a note's dispute (``dismiss``) or bring a dismissed one back (``restore``).

    Raises:
        NoteNotFound: no such dispute, or an unknown verdict.
    """
    if verdict == "dismiss":
        function = _optional("mdmem.recall.disputes", "dismiss")
        done = function(store, name, at=at) if function is not None else False
    elif verdict == "restore":
        function = _optional("mdmem.recall.disputes", "undismiss")
        done = function(store, name) if function is not None else False
    else:
        raise NoteNotFound(f"a decision {verdict!r}", "dismiss or restore")
    if not done:
        raise NoteNotFound(f"a dispute of {name}", store.path)
    return True


# -- history -----------------------------------------------------------------------------


def has_history(store: Store) -> bool:
    """Whether the store keeps the versions of its notes."""
    return _method(store, "history") is not None


def history_of(store: Store, filename: str) -> list[dict[str, str]] | None:
    """A note's versions, newest first, each described by its fields; None without history."""
    history = _method(store, "history")
    if history is None:
        return None
    found = history(filename)
    versions = [describe(v) for v in found] if isinstance(found, (list, tuple)) else []

    def number(record: Mapping[str, str]) -> float:
        try:
            return float(record.get("version", ""))
        except ValueError:
            return 0.0

    if len(versions) > 1 and number(versions[0]) < number(versions[-1]):
        versions.reverse()  # oldest first as given: the page shows the newest first
    return versions


def version_text(store: Store, filename: str, version: str) -> str | None:
    """The text of one recorded version of a note; None when it has none (a deletion)."""
    read = _optional("mdmem.store.history", "read_version")
    if read is None or not (version.isascii() and version.isdigit()):
        return None
    try:
        data = read(store.path, filename, int(version))
    except (MdmemError, OSError):
        return None
    return data.decode("utf-8", "replace") if isinstance(data, bytes) else None


def restorable(store: Store) -> bool:
    """Whether the store can bring back one version of a note."""
    if _method(store, "restore_version") is not None:
        return True
    try:
        return "version" in inspect.signature(store.restore).parameters
    except (TypeError, ValueError):
        return False


def restore_version(store: Store, filename: str, version: str) -> object:
    """Bring back one version of a note through the store's own API.

    Raises:
        InvalidOperation: ``version`` is not a number in ASCII digits (``²`` or ``٣`` is not).
        NoteNotFound: the store has no such version (or no history at all).
    """
    if not (version.isascii() and version.isdigit()) or len(version) > 12:
        raise InvalidOperation(f"version: {version[:40]!r} is not a version number", "version")
    method = _method(store, "restore_version")
    if method is not None:
        return method(filename, int(version))
    if not restorable(store):
        raise NoteNotFound(f"{filename} version {version}", store.path)
    restore: Callable[..., object] = store.restore
    return restore(filename, version=version)


# -- review ------------------------------------------------------------------------------


def has_review(store: Store) -> bool:
    """Whether this mdmem has review mode (proposals a person accepts or rejects)."""
    return _optional(_REVIEW, "pending") is not None or _method(store, "proposals") is not None


def _raw_proposals(store: Store) -> list[object] | None:
    pending = _optional(_REVIEW, "pending")
    found = pending(store) if pending is not None else None
    if found is None:
        own = _method(store, "proposals")
        found = own() if own is not None else None
    if found is None:
        return None
    return list(found) if isinstance(found, (list, tuple)) else []


def proposals_of(store: Store) -> list[dict[str, str]] | None:
    """Proposals waiting for review, each described by its fields; None without review mode."""
    found = _raw_proposals(store)
    return None if found is None else [describe(item) for item in found]


def proposal(store: Store, ident: str) -> dict[str, str]:
    """One waiting proposal, described.

    Raises:
        NoteNotFound: no such proposal waits (or there is no review mode).
    """
    for item in proposals_of(store) or []:
        if item.get("id") == ident:
            return item
    raise NoteNotFound(f"proposal {ident}", store.path)


def proposal_op(store: Store, ident: str) -> dict[str, object]:
    """The operation a waiting proposal would apply, as the review API keeps it.

    Raises:
        NoteNotFound: no such proposal waits (or there is no review mode).
    """
    for item in _raw_proposals(store) or []:
        record = item if isinstance(item, dict) else vars(item)
        if record.get("id") == ident:
            op = record.get("op")
            return dict(op) if isinstance(op, dict) else dict(record)
    raise NoteNotFound(f"proposal {ident}", store.path)


def can_edit_proposals() -> bool:
    """Whether a proposal can be accepted with changes (``accept(store, id, op=...)``)."""
    accept = _optional(_REVIEW, "accept")
    if accept is None:
        return False
    try:
        return "op" in inspect.signature(accept).parameters
    except (TypeError, ValueError):
        return False


def decide(
    store: Store, ident: str, verdict: str, op: Mapping[str, object] | None = None
) -> object:
    """Accept (with ``op``: as edited) or reject one proposal, through the review API.

    Raises:
        NoteNotFound: no review mode, an unknown verdict, or no such proposal.
    """
    if verdict not in ("accept", "reject"):
        raise NoteNotFound(f"a decision {verdict!r}", "accept or reject")
    function = _optional(_REVIEW, verdict)
    if function is not None:
        if op is not None:
            return function(store, ident, op=dict(op))
        return function(store, ident)
    method = _method(store, verdict)
    if method is None:
        raise NoteNotFound(f"proposal {ident}", store.path)
    return method([ident])
