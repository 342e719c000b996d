"""Review mode: the worker's operations become proposals that a person accepts or rejects.

The setting, per store level, is one of ``off`` (write at once, the default),
``all``, ``project`` or ``user`` (review only that level's notes; a list such as
``project,user`` is ``all``). The first of these that is set wins:

1. ``Manager(review=...)``;
2. the environment variable ``MDMEM_REVIEW``;
3. the project's committed ``.PseudoClaude/mdmem.json``: ``{"review": "project"}``.
   It is read as hostile input: a regular file (never through a symlink), at
   most 4 KiB, a JSON object whose only known key is ``review``; anything else
   is ignored with a warning, and the setting stays ``off``.

A proposal is one validated, redacted operation, kept in the store's state
folder as ``proposals/<id>.json`` (written atomically, like turns, so it
survives a crash; its id is derived from the turn, so a turn replayed after a
crash writes the same proposals again, not new ones). Proposals are never in
MEMORY.md, the prompt block or recall. Deciding one first claims it: under the
store's lock its file is renamed to ``proposals/claimed/``, which only one
process can do; then it is applied (or not) and moved to ``proposals/done/``,
kept for :data:`KEEP_DONE` decisions. A claim left by a killed process goes back
to waiting the next time the store's proposals are listed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import stat
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from mdmem import _json
from mdmem.errors import InvalidOperation, InvalidPath, MdmemError, NoteNotFound
from mdmem.store import files, waiting
from mdmem.store.operations import VALID, Operation, format_op, validate
from mdmem.store.paths import control_problem

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

    from mdmem.store.operations import ValidOperation
    from mdmem.store.results import ApplyResult
    from mdmem.store.store import Store

__all__ = [
    "CONFIG_FILE",
    "ENV_VAR",
    "KEEP_DONE",
    "MODES",
    "Proposal",
    "accept",
    "levels",
    "pending",
    "pending_count",
    "pending_line",
    "propose",
    "reject",
]

log = logging.getLogger("mdmem")

ENV_VAR = "MDMEM_REVIEW"
CONFIG_FILE = "mdmem.json"
MODES = ("off", "all", "project", "user")
KEEP_DONE = 200
_DIR = waiting.PROPOSALS_DIR
_CLAIMED = "claimed"
_DONE = "done"
_MAX_CONFIG = 4096
_MAX_PROPOSAL = 512 * 1024


class ProposalGone(MdmemError, LookupError):
    """The proposal was decided already (perhaps by another process), or never existed."""

    def __init__(self, proposal: str) -> None:
        super().__init__(f"no waiting proposal {proposal!r} (decided already, or unknown)")
        self.proposal = proposal


# -- the setting -------------------------------------------------------------------------


def parse_mode(value: str) -> frozenset[str]:
    """The levels a mode reviews: ``off`` -> none, ``all`` -> both, ``project,user``...

    Raises:
        ValueError: not a known mode.
    """
    words = {w.strip().lower() for w in value.replace(" ", ",").split(",") if w.strip()}
    if not words or words == {"off"}:
        return frozenset()
    if not words <= set(MODES) - {"off"}:
        raise ValueError(f"review mode {value!r}: expected one of {', '.join(MODES)}")
    return frozenset(("project", "user")) if "all" in words else frozenset(words)


def levels(workspace: str, explicit: str | None = None) -> frozenset[str]:
    """The levels under review for ``workspace``: argument, else ``$MDMEM_REVIEW``, else its file.

    Raises:
        ValueError: the argument or the environment variable is not a known mode.
    """
    if explicit is not None:
        return parse_mode(explicit)
    env = os.environ.get(ENV_VAR)
    if env is not None and env.strip():
        return parse_mode(env)
    if control_problem(os.path.realpath(workspace)) is not None:
        return frozenset()  # someone else's folder: its settings are not the user's
    return _from_file(os.path.join(workspace, ".PseudoClaude", CONFIG_FILE))


def _from_file(path: str) -> frozenset[str]:
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    flags |= getattr(os, "O_NONBLOCK", 0)  # a FIFO must not hang us
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return frozenset()
    except OSError as exc:
        log.warning("ignoring %s: %s", path, exc.strerror)
        return frozenset()
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > _MAX_CONFIG:
            log.warning("ignoring %s: not a small regular file", path)
            return frozenset()
        raw = os.read(fd, _MAX_CONFIG + 1)
    finally:
        os.close(fd)
    try:
        data = _json.loads(raw.decode("utf-8"))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        unknown = sorted(str(k)[:40] for k in data if k != "review")
        if unknown:
            log.warning("%s: ignoring unknown keys %s", path, ", ".join(unknown))
        value = data.get("review", "off")
        if not isinstance(value, str):
            raise ValueError("review: expected a string")
        return parse_mode(value[:100])
    except (ValueError, UnicodeDecodeError) as exc:
        log.warning("ignoring %s: %s", path, str(exc)[:200])
        return frozenset()


# -- proposals ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Proposal:
    """One waiting operation, as the worker validated and redacted it."""

    id: str
    level: str
    op: dict[str, object]
    created: str
    turn: str = ""
    source: str = ""
    excerpt: str = ""
    extra: dict[str, object] = field(default_factory=dict)

    def as_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "level": self.level,
            "action": self.op.get("action"),
            "filename": self.op.get("filename"),
            "title": self.op.get("title"),
            "op": self.op,
            "created": self.created,
            "turn": self.turn,
            "source": self.source,
            "excerpt": self.excerpt,
        }


def _folder(store: Store, *sub: str) -> str:
    return os.path.join(store.state.path, _DIR, *sub)


def pending_count(store: Store) -> int:
    """How many proposals wait in ``store`` (a directory listing: cheap enough for a hook)."""
    return waiting.pending_count(store.path)


def pending_line(stores: Iterable[Store]) -> str:
    """One line for the session-start block, or ``""`` when nothing waits."""
    return waiting.pending_line([s.path for s in stores])


def _proposal_id(turn: str, position: int, level: str) -> str:
    return hashlib.sha256(f"{turn}\0{level}\0{position}".encode()).hexdigest()[:10]


def propose(
    store: Store,
    ops: Iterable[Operation | ValidOperation | Mapping[str, object]],
    *,
    turn: str,
    source: str = "",
    excerpt: str = "",
    redact: object = None,
) -> tuple[list[str], ApplyResult]:
    """Keep each valid operation for ``store`` as a proposal; return (ids, the rejected ones).

    Operations are validated as :meth:`Store.apply` would and redacted (by
    ``redact``, a ``str -> str`` function, else the default filter).
    """
    from mdmem.privacy import redact as default_redact
    from mdmem.privacy import redact_data
    from mdmem.store.results import ApplyResult, Rejected

    fn = redact if callable(redact) else default_redact
    store.state.ensure()
    folder = _folder(store)
    files.ensure_dir(folder, private=True)
    ids: list[str] = []
    rejected: list[Rejected] = []
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    for position, raw in enumerate(ops):
        given = format_op(raw) if isinstance(raw, VALID) else raw
        try:
            clean = redact_data(Operation.from_dict(given).to_dict(), fn)
            op = Operation.from_dict(clean)
            # One checked where the model's answer was read is not checked again.
            if validate(raw if isinstance(raw, VALID) else op, store.level) is None:
                continue
        except (InvalidOperation, InvalidPath) as exc:
            rejected.append(Rejected(given, str(exc)))
            continue
        pid = _proposal_id(turn, position, store.level.value)
        if os.path.lexists(_folder(store, _DONE, f"{pid}.json")):
            ids.append(pid)  # decided already: a replayed turn does not bring it back
            continue
        record = Proposal(pid, store.level.value, dict(op.to_dict()), now, turn, source, excerpt)
        payload = json.dumps(record.as_dict(), ensure_ascii=False).encode("utf-8")
        files.atomic_write(os.path.join(folder, f"{pid}.json"), payload, private=True)
        ids.append(pid)
    return ids, ApplyResult((), tuple(rejected))


def _load(path: str) -> Proposal | None:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read(_MAX_PROPOSAL))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("op"), dict):
        return None
    return Proposal(
        id=str(data.get("id", "")),
        level=str(data.get("level", "")),
        op=dict(data["op"]),
        created=str(data.get("created", "")),
        turn=str(data.get("turn", "")),
        source=str(data.get("source", "")),
        excerpt=str(data.get("excerpt", "")),
    )


def pending(store: Store) -> list[Proposal]:
    """The proposals waiting in ``store``, oldest first (claims left by dead processes return)."""
    _recover(store)
    try:
        names = os.listdir(_folder(store))
    except OSError:
        return []
    found = [_load(os.path.join(_folder(store), n)) for n in names if n.endswith(".json")]
    return sorted((p for p in found if p is not None), key=lambda p: (p.created, p.id))


def _recover(store: Store) -> None:
    claimed = _folder(store, _CLAIMED)
    try:
        names = os.listdir(claimed)
    except OSError:
        return
    if not names:
        return
    # Whoever claims holds the store's lock until the proposal is decided: a
    # claim we can see while holding it was left by a process that died.
    from mdmem.errors import LockTimeout

    try:
        with store.lock(timeout=0):
            for name in os.listdir(claimed):
                pid = name.split(".", 1)[0]
                with contextlib.suppress(OSError):
                    os.rename(os.path.join(claimed, name), _folder(store, f"{pid}.json"))
    except (LockTimeout, OSError):
        return


def _claim(store: Store, pid: str) -> tuple[Proposal, str]:
    """Take proposal ``pid`` for deciding; the caller holds the store's lock."""
    if not pid or not all(c in "0123456789abcdef" for c in pid):
        raise ProposalGone(pid)
    claimed = _folder(store, _CLAIMED)
    files.ensure_dir(claimed, private=True)
    target = os.path.join(claimed, f"{pid}.{os.getpid()}.json")
    try:
        os.rename(_folder(store, f"{pid}.json"), target)
    except FileNotFoundError:
        raise ProposalGone(pid) from None
    proposal = _load(target)
    if proposal is None:
        os.unlink(target)
        raise ProposalGone(pid)
    return proposal, target


def _finish(store: Store, claimed: str, pid: str, decision: str) -> None:
    done = _folder(store, _DONE)
    files.ensure_dir(done, private=True)
    try:
        with open(claimed, "rb") as f:
            data = json.loads(f.read(_MAX_PROPOSAL))
    except (OSError, ValueError):
        data = {}
    data["decision"] = decision
    data["decided"] = datetime.now(timezone.utc).isoformat(timespec="seconds")
    files.atomic_write(
        os.path.join(done, f"{pid}.json"),
        json.dumps(data, ensure_ascii=False).encode(),
        private=True,
    )
    os.unlink(claimed)
    with contextlib.suppress(OSError):
        names = sorted(os.listdir(done), key=lambda n: os.lstat(os.path.join(done, n)).st_mtime)
        for name in names[:-KEEP_DONE]:
            os.unlink(os.path.join(done, name))


def accept(store: Store, pid: str, op: Mapping[str, object] | None = None) -> ApplyResult:
    """Apply proposal ``pid`` (or ``op``, its edited form) with its provenance; once only.

    A proposal the store rejects now (say, its name was taken meanwhile) stays waiting.

    Raises:
        InvalidOperation: the edited ``op`` is not a valid operation.
        ProposalGone: no such waiting proposal (another process may have decided it).
        LockTimeout: the store is locked by someone else.
    """
    if op is not None:
        validate(Operation.from_dict(dict(op)), store.level)  # an edit that cannot apply
    with store.lock():
        proposal, claimed = _claim(store, pid)
        chosen = dict(op) if op is not None else proposal.op
        result = store.apply([chosen], source="review", provenance=proposal.source or None)
        if result.rejected:  # the store moved on (a name taken meanwhile): keep it waiting
            os.rename(claimed, _folder(store, f"{pid}.json"))
            return result
        _finish(store, claimed, pid, "accepted")
    _after_accept(store, proposal, result)
    return result


def _after_accept(store: Store, proposal: Proposal, result: ApplyResult) -> None:
    from mdmem.manager import provenance
    from mdmem.recall.disputes import clear

    written = [(a.action, a.filename) for a in result.applied]
    source = provenance.parse_source(proposal.source)
    if source is not None and written:
        with contextlib.suppress(OSError):
            provenance.record_turn(
                store.path, source, proposal.excerpt, written, private=store.private
            )
    with contextlib.suppress(MdmemError, OSError):
        clear(store, [name for action, name in written if action != "delete"])


def reject(store: Store, pid: str) -> None:
    """Drop proposal ``pid``: nothing is written to the store.

    Raises:
        ProposalGone: no such waiting proposal.
        LockTimeout: the store is locked by someone else.
    """
    with store.lock():
        _, claimed = _claim(store, pid)
        _finish(store, claimed, pid, "rejected")


def find(stores: Iterable[Store], pid: str) -> Store:
    """The store where proposal ``pid`` waits.

    Raises:
        ProposalGone: none does.
    """
    if pid and all(c in "0123456789abcdef" for c in pid):
        for store in stores:
            if os.path.exists(_folder(store, f"{pid}.json")):
                return store
    raise ProposalGone(pid)


def preview(store: Store, proposal: Proposal) -> tuple[str, str, str]:
    """(file name, the note's text now, its text once accepted) for a diff; ``""`` if none."""
    from mdmem.store.note import Note, NoteType, render

    op = proposal.op
    action = str(op.get("action"))
    name = str(op.get("filename") or "")
    before = ""
    current = None
    if name:
        try:
            before = store.read_text(name)
            current = store.read(name)
        except (NoteNotFound, MdmemError):
            current = None
    if action == "delete":
        return name, before, ""
    body = str(op.get("content") or "").strip()
    extra = {"source": proposal.source} if proposal.source else {}
    if action == "update" and current is not None:
        after_note = current.with_changes(
            body=body,
            title=str(op.get("title") or current.title),
            summary=str(op.get("summary") or current.summary),
            extra={**current.extra, **extra},
        )
    else:
        kind = NoteType(str(op.get("type") or "project_knowledge"))
        after_note = Note(
            filename=name or "(new note)",
            type=kind,
            title=str(op.get("title") or ""),
            summary=str(op.get("summary") or ""),
            body=body,
            extra=extra,
        )
        name = name or f"{kind.value}_… (new)"
    return name, before, render(after_note)


def op_from_note_text(proposal: Proposal, text: str) -> dict[str, object]:
    """The operation an edited proposal stands for (the text is a whole note).

    Raises:
        InvalidNote: the text is not a valid note.
    """
    from mdmem.store.note import parse

    note = parse(text, str(proposal.op.get("filename") or "proposal.md"))
    op = dict(proposal.op)
    if op.get("action") == "delete":
        return op
    op.update(
        type=note.type.value, title=note.title, summary=note.summary, content=note.body or " "
    )
    return op
