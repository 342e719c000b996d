"""Turns validated operations into a plan of file writes, against the store as the batch leaves it.

Operations in one batch see each other: a note created by the first can be
updated by the second. The plan is carried out by :mod:`mdmem.store._txn`.
"""

from __future__ import annotations

import os

from mdmem._record import replace
from mdmem.errors import InvalidNote, InvalidOperation, InvalidPath, NoteNotFound
from mdmem.store import _dedupe_keys, _txn
from mdmem.store.dedupe import (
    Candidate,
    Duplicate,
    Index,
    candidate,
    find_duplicate,
    near_rows,
    number_key,
)
from mdmem.store.note import MAX_SUMMARY_CHARS, Note, clean_inline, first_sentence, render
from mdmem.store.operations import VALID, Create, Delete, Operation, Update, format_op, validate
from mdmem.store.paths import check_name, note_path, slugify
from mdmem.store.results import Applied, Rejected

TYPE_CHECKING = False  # not typing's: importing typing costs ~5 ms on the `mdmem add` path
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Mapping
    from datetime import datetime
    from typing import Protocol

    from mdmem._kinds import Level
    from mdmem.store.note import IndexEntry
    from mdmem.store.operations import ValidOperation
    from mdmem.store.state import StateDir

    Near = tuple[str, str, str]  # a dedupe candidate: name, title, summary
else:
    Protocol = object  # StoreView is only ever a type: the class alone at run time

__all__ = ["Planner", "StoreView"]


class StoreView(Protocol):
    """What a plan needs of its store (``Store`` is one): the planner never imports the store."""

    @property
    def path(self) -> str: ...

    level: Level
    state: StateDir

    def read(self, filename: str) -> Note:
        """The note ``filename``, parsed."""
        ...

    def name_taken(self, filename: str) -> bool:
        """Whether a note of that name, or of a name that differs only in case, exists."""
        ...

    def _near_titles(self, title: str, summary: str, numbers: str) -> list[Near] | None:
        """Dedupe's candidates from the catalog's keys (at most ``_dedupe_keys.LIMIT``);
        None when it has none (see ``Coherence.near``). Private to ``store/``, which the
        planner is part of."""
        ...

    def iter_entries(self, *, settle: bool = True) -> Iterator[IndexEntry]:
        """Every index entry as last recorded (``settle=False``): dedupe's fallback."""
        ...


_MAX_SUFFIX = 999
_TEXT_FIELDS = ("title", "summary", "slug", "content")


class Planner:
    """Collects the effect of a batch of operations on one store."""

    def __init__(
        self,
        store: StoreView,
        now: datetime,
        redact: Callable[[str], str] | None,
        *,
        provenance: str | None = None,
    ) -> None:
        self.store = store
        # The provenance line of the worker's writes (front-matter key "source").
        self._extra: dict[str, object] = {"source": provenance} if provenance else {}
        self.now = now
        self.plan = _txn.Plan()
        self.applied: list[Applied] = []
        self.rejected: list[Rejected] = []
        if redact is None:
            from mdmem.privacy import redact as default_redact

            redact = default_redact
        self._redact = _remembering(redact)
        self._notes: dict[str, Note] = {}
        self._keys: dict[str, tuple[Note, str]] = {}  # a batch note's number key
        self._batch = _dedupe_keys.Batch()  # this batch's notes, for dedupe
        # Names this batch wrote, case-folded, because a name that differs only in
        # case is the same file on macOS and Windows, where teammates check the
        # store out. Others are asked of the store one by one: listing a large
        # store for every write would cost what the store holds.
        self._taken: set[str] = set()
        self._deleted: set[str] = set()
        self._sources: dict[str, Operation | Mapping[str, object]] = {}
        self._detail = ""
        self._known: Index | None = None

    def add(self, op: Operation | ValidOperation | Mapping[str, object]) -> None:
        """Validate one operation and add its effect to the plan, or record why not.

        An operation checked already (the worker's, validated where the model's
        answer was read) is not checked again; a rejection shows it as the JSON
        object it came from.
        """
        given = format_op(op) if isinstance(op, VALID) else op
        try:
            valid = validate(self._redacted(op), self.store.level)
            if valid is None:
                return
            self._detail = ""
            action, filename = self._apply(valid)
        except (InvalidOperation, InvalidPath, InvalidNote, NoteNotFound) as exc:
            self.rejected.append(Rejected(given, str(exc)))
            return
        self.applied.append(Applied(action, filename, self.store.level, self._detail))
        self._sources[filename] = given

    def renamed(self, name: str, new: str) -> None:
        """A create found its name taken at the final step and took ``new`` instead."""
        self.applied = [
            replace(a, filename=new, detail=f"{name} appeared meanwhile: written as {new}")
            if a.filename == name and a.action == "create"
            else a
            for a in self.applied
        ]
        if name in self._sources:
            self._sources[new] = self._sources.pop(name)

    def lost_race(self, name: str) -> None:
        """A create found its name taken at the final step: it becomes a rejection."""
        self.plan.writes.pop(name, None)
        self.applied = [a for a in self.applied if a.filename != name]
        reason = (
            f"a file named {name!r} appeared while the note was being written; "
            "it was left as is and nothing was written"
        )
        self.rejected.append(Rejected(self._sources.get(name, {}), reason))

    def _redacted(
        self, op: Operation | ValidOperation | Mapping[str, object]
    ) -> Operation | ValidOperation | Mapping[str, object]:
        """``op`` with its texts redacted whole, before validation cuts a title or summary:
        a secret across the cut would otherwise survive in halves. (A checked operation
        was redacted before it was checked; its fields are redacted again when planned.)"""
        if isinstance(op, Operation):
            changes = {
                key: self._redact(value)
                for key in _TEXT_FIELDS
                if isinstance(value := getattr(op, key), str)
            }
            return replace(op, **changes) if changes else op
        if isinstance(op, dict):
            return {
                key: self._redact(value)
                if key in _TEXT_FIELDS and isinstance(value, str)
                else value
                for key, value in op.items()
            }
        return op

    def _apply(self, op: ValidOperation) -> tuple[str, str]:
        if isinstance(op, Create):
            return self._create(op)
        if isinstance(op, Update):
            return self._update(op)
        return self._delete(op)

    # -- the batch's view of the store --------------------------------------------

    def _exists(self, name: str) -> bool:
        if name in self._deleted:
            return False
        return name.casefold() in self._taken or self.store.name_taken(name)

    def _current(self, name: str) -> Note:
        if name in self._deleted or not self._exists(name):
            raise NoteNotFound(name, self.store.path)
        if name in self._notes:
            return self._notes[name]
        try:
            return self.store.read(name)
        except InvalidNote as exc:
            raise InvalidOperation(
                f"{name} is not a valid note ({exc.reason}); fix it by hand first", "filename"
            ) from None

    def _write(self, note: Note, *, new: bool = False, renamable: bool = False) -> None:
        path = note_path(self.store.path, note.filename)
        if new:
            # The name was free when planned: the final step must be an exclusive create,
            # whatever appeared there since (hashing it now would make it an overwrite).
            self.plan.before[note.filename] = None
            if renamable:
                self.plan.renamable.add(note.filename)
        elif note.filename not in self.plan.before:
            self.plan.before[note.filename] = _hash_or_none(path)
        self._notes[note.filename] = note
        self._batch.put(note.filename, note.title, note.summary, self._numbers_of(note))
        if self._known is not None:
            self._known.add(candidate(note.filename, note.title, note.summary))
        self.plan.writes[note.filename] = render(note).encode("utf-8")
        self.plan.notes[note.filename] = note
        self._taken.add(note.filename.casefold())

    # -- the three actions ---------------------------------------------------------

    def _same(self, name: str, note_type: object, title: str, body: str) -> bool:
        """Whether ``name`` already holds this very note (a create sent twice)."""
        try:
            existing = self._current(name)
        except (InvalidOperation, NoteNotFound):
            return False
        return existing.type is note_type and existing.title == title and existing.body == body

    # -- supersession, expiry and dedupe (see mdmem.store.dedupe) ----------------

    def _truth_keys(
        self,
        extra: Mapping[str, object],
        supersedes: tuple[str, ...],
        expires: datetime | None,
        name: str | None,
    ) -> dict[str, object]:
        out = dict(extra)
        if supersedes:
            names = out.get("supersedes")
            known = (
                [names]
                if isinstance(names, str)
                else list(names)
                if isinstance(names, list)
                else []
            )
            for target in supersedes:
                if target == name:
                    raise InvalidOperation("a note cannot supersede itself", "supersedes")
                if not self._exists(target):
                    raise InvalidOperation(
                        f"there is no note {target!r} in this store", "supersedes"
                    )
                if target not in known:
                    known.append(target)
            out["supersedes"] = known[0] if len(known) == 1 else known
        if expires is not None:
            out["expires"] = expires
        return out

    def _near(self, title: str, summary: str, numbers: str) -> list[Candidate]:
        """The few notes that share the most with ``title`` and ``summary`` among those
        that name ``numbers`` (``dedupe.number_key``: a duplicate names what the note names)
        and whose title is near ``title``: the store's, as the catalog recorded them
        (without a stat pass: a candidate is read from its file before it counts), and this
        batch's own writes; at most ``_dedupe_keys.LIMIT`` of each (see there)."""
        rows = self.store._near_titles(title, summary, numbers)
        if rows is None:  # every entry, as before the catalog kept dedupe keys
            if self._known is None:
                self._known = Index()
                for e in self.store.iter_entries(settle=False):
                    if not e.superseded_by:
                        self._known.add(candidate(e.filename, e.title, e.summary))
                for note in self._notes.values():
                    self._known.add(candidate(note.filename, note.title, note.summary))
            return self._known.near(title)
        # The catalog's keys give the candidates; the title test is made here, as
        # Index.near makes it. A note this batch wrote is taken as written, not as the
        # catalog still has it.
        found = [row for row in rows if row[0] not in self._notes]
        for name in self._batch.near(title, summary, numbers):
            note = self._notes[name]
            found.append((name, note.title, note.summary))
        return near_rows(title, found)

    def _numbers_of(self, note: Note) -> str:
        """A note of this batch's number key (``dedupe.number_key``), worked out once."""
        key = self._keys.get(note.filename)
        if key is None or key[0] is not note:
            key = (note, number_key(note.title, note.summary, note.body))
            self._keys[note.filename] = key
        return key[1]

    def _duplicate(
        self, title: str, summary: str, body: str, numbers: str | None = None
    ) -> Duplicate | None:
        """An existing note of this store that says what a create says (see ``dedupe``)."""

        def read(name: str) -> tuple[str, str, str] | None:
            try:
                note = self._current(name)
            except (InvalidOperation, NoteNotFound, InvalidPath):
                return None
            return note.title, note.summary, note.body

        # Whether each candidate still exists is asked by ``read`` (None when it is gone, or
        # deleted by this batch), for the few the cheap tests leave: not an lstat each.
        if numbers is None:
            numbers = number_key(title, summary, body)
        near = self._near(title, summary, numbers)
        return find_duplicate(title, summary, body, near, read)

    def _create(self, op: Create) -> tuple[str, str]:
        title = clean_inline(self._redact(op.title))
        body = self._redact(op.content).strip()
        summary = clean_inline(self._redact(op.summary)) or first_sentence(body, MAX_SUMMARY_CHARS)
        numbers: str | None = None  # its number key, when dedupe worked it out
        if op.filename is None and not op.supersedes:
            numbers = number_key(title, summary, body)
            dup = self._duplicate(title, summary, body, numbers)
            if dup is not None and dup.exact:
                self._detail = f"the same note as {dup.filename}"
                return "unchanged", dup.filename
            if dup is not None:
                old = self._current(dup.filename)
                merged = old.with_changes(
                    body=body,
                    summary=summary,
                    extra={
                        **self._truth_keys(old.extra, (), op.expires, dup.filename),
                        **self._extra,
                    },
                )
                self._write(merged.with_changes(created=old.created or self.now, updated=self.now))
                self._detail = (
                    f"a near-duplicate of {dup.filename} (similarity {dup.score:.2f}): updated it"
                )
                return "update", dup.filename
        if op.filename is not None:
            name = check_name(self._clean_name(op.filename))  # the same name: not checked again
            note_path(self.store.path, name)
            if name in self._deleted or self._exists(name):
                if self._same(name, op.type, title, body):
                    return "unchanged", name
                raise InvalidOperation(
                    f"a note named {name!r} already exists; update it", "filename"
                )
        else:
            # From the redacted title (or slug): a file name reaches MEMORY.md and git.
            base = f"{op.type.value}_{slugify(self._redact(op.slug) if op.slug else title)}"
            for n in range(1, _MAX_SUFFIX + 1):
                name = check_name(f"{base}.md" if n == 1 else f"{base}-{n}.md")
                note_path(self.store.path, name)
                if name in self._deleted:
                    continue  # never reuse a name freed earlier in the same batch
                if not self._exists(name):
                    break
                if self._same(name, op.type, title, body):
                    return "unchanged", name  # the same note again: nothing to do
            else:
                raise InvalidOperation(f"too many notes named {base}*.md", "title")
        note = Note(
            filename=name,
            type=op.type,
            title=title,
            summary=summary,
            body=body,
            created=self.now,
            updated=self.now,
            extra={**self._truth_keys({}, op.supersedes, op.expires, name), **self._extra},
        )
        if numbers is not None:
            self._keys[name] = (note, numbers)  # the same text: the same key, not made again
        # A name the caller gave is theirs: taken at the last moment, the create is
        # rejected. A name mdmem chose becomes the next free one instead.
        self._write(note, new=True, renamable=op.filename is None)
        return "create", name

    def _clean_name(self, name: str) -> str:
        """A name a caller asked for (the memory tool), without a secret in it."""
        for _ in range(3):
            stem = name.removesuffix(".md")
            # Rules want a secret to start a word; in a name, words are joined by _ - .
            starts = [0] + [i + 1 for i, c in enumerate(stem) if c in "_-."]
            found = next((i for i in starts if self._redact(stem[i:]) != stem[i:]), None)
            if found is None:
                return name
            prefix, rest = stem[:found].rstrip("_-."), slugify(self._redact(stem[found:]))
            name = f"{prefix}_{rest}.md" if prefix else f"{rest}.md"
        return name

    def _update(self, op: Update) -> tuple[str, str]:
        if not self._exists(op.filename):
            raise InvalidOperation(f"there is no note {op.filename!r} to update", "filename")
        note_path(self.store.path, op.filename)
        old = self._current(op.filename)
        new = old.with_changes(
            body=self._redact(op.content).strip(),
            title=clean_inline(self._redact(op.title)) if op.title else old.title,
            summary=clean_inline(self._redact(op.summary)) if op.summary else old.summary,
            type=op.type or old.type,
            extra=self._truth_keys(old.extra, op.supersedes, op.expires, op.filename),
        )
        if new == old:
            return "unchanged", op.filename
        if self._extra:
            new = new.with_changes(extra={**new.extra, **self._extra})
        self._write(new.with_changes(created=old.created or self.now, updated=self.now))
        return "update", op.filename

    def _delete(self, op: Delete) -> tuple[str, str]:
        if not self._exists(op.filename):
            raise InvalidOperation(f"there is no note {op.filename!r} to delete", "filename")
        path = note_path(self.store.path, op.filename)
        if op.filename in self.plan.writes and self.plan.before.get(op.filename) is None:
            # Created earlier in this batch: simply never write it.
            del self.plan.writes[op.filename]
            del self.plan.before[op.filename]
        else:
            self.plan.writes.pop(op.filename, None)
            self.plan.before.setdefault(op.filename, _hash_or_none(path))
            self.plan.deletes[op.filename] = self._trash_name(op.filename)
        self._notes.pop(op.filename, None)
        self._batch.put(op.filename, None)
        self._deleted.add(op.filename)
        return "delete", op.filename

    def _trash_name(self, name: str) -> str:
        stamp = self.now.strftime("%Y%m%dT%H%M%SZ")
        folder = self.store.state.trash
        planned = set(self.plan.deletes.values())
        candidate, n = f"{stamp}~{name}", 1
        while candidate in planned or os.path.lexists(os.path.join(folder, candidate)):
            n += 1
            candidate = f"{stamp}-{n:03d}~{name}"
        return candidate


def _remembering(redact: Callable[[str], str]) -> Callable[[str], str]:
    """``redact`` that keeps each answer for the batch (a pure function, asked twice a text).

    Each text is redacted whole before validation and its cleaned fields again
    after it; a text without a secret comes back unchanged, so its second pass
    is the same question, answered from here. A text that did change is asked
    afresh: nothing assumes that a redaction redacted once needs no second pass.
    """
    answers: dict[str, str] = {}

    def remembered(text: str) -> str:
        out = answers.get(text)
        if out is None:
            out = answers[text] = redact(text)
        return out

    return remembered


def _hash_or_none(path: str) -> str | None:
    from mdmem.store._catalog import content_hash
    from mdmem.store.files import read_bytes

    try:
        return content_hash(read_bytes(path, 1024 * 1024))
    except FileNotFoundError:
        return None
    except (OSError, ValueError):
        return "?"  # not a note of ours (a FIFO, a device): no batch may replace it
