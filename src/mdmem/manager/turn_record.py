"""The journaled turn as a typed record: what a turn file holds, read once, written once.

:class:`Turn` is what the worker carries from the moment a turn is accepted to
the moment its operations are on disk; :meth:`Turn.parse` reads a turn file
(the journal, :mod:`mdmem.manager._journal`, only moves files) and
:meth:`Turn.format` writes one. A turn file is a JSON object::

    {"v": 2, "id": "…", "accepted": "2026-12-02T01:00:00+00:00", "workspace": "/…",
     "session": "…", "messages": [["user", "…"], ["assistant", "…"]],
     "attempts": 0, "errors": [{"at": "…", "error": "…", "raw_answer": "…"}],
     "answer": {"project": [op, …], "user": [op, …],
                "invalid": [["project", item, "why"], …], "rejected": [[item, "why"], …]},
     "applied": ["project"], "skipped": false, "held": "2026-12-02",
     "source": {"turn": "…", "at": "…", "model": "…", "git": "…", "session": "…"}}

The model's operations are checked once, where its answer is read
(:func:`sort_answer`): ``project`` and ``user`` hold checked operations
(:func:`mdmem.store.operations.format_op`), ``invalid`` those meant for a store that
failed the check, ``rejected`` those that never reached one (no level, not an
object, over the cap). Reading a file checks its operations again: it is a
boundary like any other (what is on disk is never trusted unchecked), and a
turn is read from disk only when it is resumed.

Version 1 (no ``"v"``) was written before operations were checked at the
answer: its ``project`` and ``user`` lists hold the model's operations as sent
(redacted); they are checked here, and those that fail land in ``invalid``, as
the store would have refused them. Older files lack keys a later version has;
every key but ``id`` has a default. A file of a newer version is refused
(``ValueError``): its meaning is not this code's to guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem._kinds import Level
from mdmem.errors import InvalidOperation, InvalidPath
from mdmem.manager.provenance import FIELDS, Source
from mdmem.store.operations import Operation, ValidOperation, format_op, validate

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable

__all__ = [
    "LEVELS",
    "MAX_OPERATIONS",
    "VERSION",
    "Answer",
    "Dropped",
    "Failure",
    "Turn",
    "sort_answer",
]

#: The version :meth:`Turn.format` writes; :meth:`Turn.parse` reads it and every earlier one.
VERSION = 2
LEVELS = ("project", "user")
#: A model answer is capped: a runaway answer must not flood the stores.
MAX_OPERATIONS = 100


@dataclass(frozen=True)
class Dropped:
    """An operation the turn will not write, and why; ``level`` is the store it was meant for
    (``""``: it never reached one)."""

    operation: object
    reason: str
    level: str = ""


@dataclass(frozen=True)
class Answer:
    """The model's answer to a turn, sorted: checked operations per store, and what was dropped."""

    project: tuple[ValidOperation, ...] = ()
    user: tuple[ValidOperation, ...] = ()
    invalid: tuple[Dropped, ...] = ()
    """Operations meant for a store (``Dropped.level``) that failed the check."""
    rejected: tuple[Dropped, ...] = ()
    """Operations that never reached a store (no level, not an object, over the cap)."""

    def ops(self, level: str) -> tuple[ValidOperation, ...]:
        """The checked operations for the store of ``level`` (``project`` or ``user``)."""
        return self.project if level == "project" else self.user if level == "user" else ()

    def refused(self, level: str) -> tuple[Dropped, ...]:
        """The operations meant for the store of ``level`` that failed the check."""
        return tuple(d for d in self.invalid if d.level == level)

    def format(self) -> dict[str, object]:
        """The answer as its turn file holds it."""
        return {
            "project": [format_op(op) for op in self.project],
            "user": [format_op(op) for op in self.user],
            "invalid": [[d.level, d.operation, d.reason] for d in self.invalid],
            "rejected": [[d.operation, d.reason] for d in self.rejected],
        }

    @classmethod
    def parse(cls, data: object) -> Answer:
        """Read an answer from a turn file, any version; its operations are checked again.

        Raises:
            ValueError: not an answer (not an object, a list that is not a list).
        """
        if not isinstance(data, dict):
            raise ValueError("a turn's answer must be a JSON object")
        ops: dict[str, list[ValidOperation]] = {level: [] for level in LEVELS}
        invalid: list[Dropped] = []
        for level in LEVELS:
            for item in _list(data.get(level, []), level):
                try:
                    valid = validate(Operation.from_dict(item), Level(level))
                except (InvalidOperation, InvalidPath) as exc:
                    invalid.append(Dropped(item, str(exc), level))
                    continue
                if valid is not None:
                    ops[level].append(valid)
        for entry in _list(data.get("invalid", []), "invalid"):
            if isinstance(entry, list) and len(entry) == 3 and entry[0] in LEVELS:
                invalid.append(Dropped(entry[1], str(entry[2]), str(entry[0])))
        rejected = [
            Dropped(entry[0], str(entry[1]))
            for entry in _list(data.get("rejected", []), "rejected")
            if isinstance(entry, list) and len(entry) == 2
        ]
        return cls(tuple(ops["project"]), tuple(ops["user"]), tuple(invalid), tuple(rejected))


@dataclass(frozen=True)
class Failure:
    """One failed attempt at a turn: when, what went wrong, and what the model said."""

    at: str
    error: str
    raw_answer: str | None = None

    def format(self) -> dict[str, object]:
        """The attempt as its turn file holds it."""
        out: dict[str, object] = {"at": self.at, "error": self.error}
        if self.raw_answer is not None:
            out["raw_answer"] = self.raw_answer
        return out


@dataclass(frozen=True)
class Turn:
    """One accepted turn and what has become of it so far (see the module docstring)."""

    id: str
    messages: tuple[tuple[str, str], ...] = ()
    """(role, text) pairs, redacted when the turn was accepted."""
    accepted: str = ""
    workspace: str = ""
    session: str = ""
    attempts: int = 0
    errors: tuple[Failure, ...] = ()
    answer: Answer | None = None
    """None until the model has answered (the answer is kept, so a retry does not ask again)."""
    applied: tuple[str, ...] = ()
    """The levels whose store has the answer's operations already."""
    skipped: bool = False
    """Nothing in the turn was worth a model call."""
    held: str = ""
    """The UTC day the daily budget first held the turn ("" when it never did)."""
    source: Source | None = None
    """The provenance of the turn's writes, fixed at its first application."""

    def format(self) -> dict[str, object]:
        """The turn as a JSON-ready object, for its turn file."""
        out: dict[str, object] = {"v": VERSION, "id": self.id}
        if self.accepted:
            out["accepted"] = self.accepted
        if self.workspace:
            out["workspace"] = self.workspace
        if self.session:
            out["session"] = self.session
        out["messages"] = [[role, text] for role, text in self.messages]
        out["attempts"] = self.attempts
        out["errors"] = [e.format() for e in self.errors]
        if self.answer is not None:
            out["answer"] = self.answer.format()
        if self.applied:
            out["applied"] = list(self.applied)
        if self.skipped:
            out["skipped"] = True
        if self.held:
            out["held"] = self.held
        if self.source is not None:
            out["source"] = {key: getattr(self.source, key) for key in FIELDS}
        return out

    @classmethod
    def parse(cls, data: object) -> Turn:
        """Read a turn file's object, of this version or an earlier one.

        Raises:
            ValueError: not a turn record (no id, messages that are not pairs of
                text, a newer version).
        """
        if not isinstance(data, dict) or not isinstance(data.get("id"), str):
            raise ValueError("a turn file must hold a JSON object with its id")
        version = data.get("v", 1)
        if not isinstance(version, int) or isinstance(version, bool) or version > VERSION:
            raise ValueError(f"a turn file of version {version!r}: newer than this mdmem reads")
        messages = []
        for pair in _list(data.get("messages", []), "messages"):
            if not (isinstance(pair, list) and len(pair) == 2 and all(_text(x) for x in pair)):
                raise ValueError("a turn's messages must be [role, text] pairs")
            messages.append((pair[0], pair[1]))
        errors = tuple(
            Failure(
                str(e.get("at", "")),
                str(e.get("error", "")),
                str(e["raw_answer"]) if e.get("raw_answer") is not None else None,
            )
            for e in _list(data.get("errors", []), "errors")
            if isinstance(e, dict)
        )
        raw_answer = data.get("answer")
        raw_source = data.get("source")
        attempts = data.get("attempts", 0)
        return cls(
            id=data["id"],
            messages=tuple(messages),
            accepted=str(data.get("accepted") or ""),
            workspace=str(data.get("workspace") or ""),
            session=str(data.get("session") or ""),
            attempts=attempts if isinstance(attempts, int) and attempts >= 0 else 0,
            errors=errors,
            answer=Answer.parse(raw_answer) if raw_answer is not None else None,
            applied=tuple(
                level for level in _list(data.get("applied", []), "applied") if level in LEVELS
            ),
            skipped=data.get("skipped") is True,
            held=data["held"] if isinstance(data.get("held"), str) else "",
            source=(
                Source(**{key: str(raw_source.get(key, "")) for key in FIELDS})
                if isinstance(raw_source, dict)
                else None
            ),
        )


def _text(value: object) -> bool:
    return isinstance(value, str)


def _list(value: object, key: str) -> list[object]:
    if not isinstance(value, list):
        raise ValueError(f"a turn's {key!r} must be a list")
    return value


def sort_answer(items: Iterable[object], redact: Callable[[str], str]) -> Answer:
    """Check a model's operations once, where its answer is read, and sort them by store.

    Each is redacted whole first (a secret cut in half by the title's limit would
    survive in halves), then checked (:func:`mdmem.store.operations.validate`);
    no-ops are left out. What has no valid level, is not an object or is over
    :data:`MAX_OPERATIONS` never reaches a store; what fails the check is kept
    with its reason, for the store it was meant for.
    """
    from mdmem.privacy import redact_data

    ops: dict[str, list[ValidOperation]] = {level: [] for level in LEVELS}
    invalid: list[Dropped] = []
    rejected: list[Dropped] = []
    for position, item in enumerate(items):
        if position >= MAX_OPERATIONS:
            rejected.append(Dropped(item, f"more than {MAX_OPERATIONS} operations in one turn"))
            continue
        try:
            op = Operation.from_dict(item)
        except InvalidOperation as exc:
            rejected.append(Dropped(item, str(exc)))
            continue
        if op.action in ("", "noop"):
            continue
        level = str(op.level.value if isinstance(op.level, Level) else op.level)
        if level not in LEVELS:
            rejected.append(
                Dropped(op.to_dict(), f"level: {op.level!r} is not 'project' or 'user'")
            )
            continue
        raw = op.to_dict()
        if _has_lone_surrogate(raw):
            # JSON's "\ud800" decodes to text no file can hold: this operation only
            # is dropped; the turn (journaled as UTF-8) and the others go on.
            rejected.append(Dropped(raw, "not valid Unicode (a lone surrogate)"))
            continue
        clean = redact_data(raw, redact)
        try:
            valid = validate(Operation.from_dict(clean), Level(level))
        except (InvalidOperation, InvalidPath) as exc:
            invalid.append(Dropped(clean, str(exc), level))
            continue
        if valid is not None:
            ops[level].append(valid)
    kept = [
        Dropped(redact_data(_without_surrogates(d.operation), redact), d.reason) for d in rejected
    ]
    return Answer(tuple(ops["project"]), tuple(ops["user"]), tuple(invalid), tuple(kept))


def _has_lone_surrogate(value: object) -> bool:
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return True
        return False
    if isinstance(value, dict):
        return any(_has_lone_surrogate(k) or _has_lone_surrogate(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return any(_has_lone_surrogate(v) for v in value)
    return False


def _without_surrogates(value: object) -> object:
    """``value`` with every lone surrogate replaced by U+FFFD, so it can be journaled."""
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
    if isinstance(value, dict):
        return {_without_surrogates(k): _without_surrogates(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_without_surrogates(v) for v in value]
    return value
