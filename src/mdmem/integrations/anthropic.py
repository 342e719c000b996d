"""The Anthropic memory tool (``memory_20250818``), backed by mdmem's two stores.

Claude sees one directory tree::

    /memories/
    ├── project/            the project store: shared by everyone in this repository
    │   ├── MEMORY.md       the index, generated from the notes (read-only)
    │   └── <note>.md
    └── user/               the user store: this OS user's notes, in every workspace
        ├── MEMORY.md
        └── <note>.md

A note keeps exactly the name Claude gives it. Every write goes through the
store (:meth:`mdmem.Store.apply`, or :meth:`mdmem.Store.rename` within a
store), so it is validated, redacted for secrets, atomic, never overwrites a
note, and keeps MEMORY.md in step; a delete moves the note to the store's
trash. Views, listings and error texts follow the SDK's own
``BetaLocalFilesystemMemoryTool``, which is what Claude is used to; a request
mdmem cannot honour comes back as a :class:`ToolError` telling Claude what to do
instead. Paths, file parsing and wording live in the private
``_memory_files``; this module adds the SDK's classes.

Usage::

    tool = MemoryTool(workspace=".")
    client.beta.messages.tool_runner(model=..., max_tokens=..., tools=[tool], messages=[...])
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import TYPE_CHECKING

from anthropic.tools import BetaAbstractMemoryTool, BetaAsyncAbstractMemoryTool, ToolError
from anyio.to_thread import run_sync

from mdmem.errors import InvalidNote, MdmemError
from mdmem.integrations._memory_files import (
    ROOT,
    Refused,
    Target,
    body_update,
    check_free,
    directory_view,
    fields_of,
    file_view,
    not_found,
    note_target,
    numbered,
    read,
    shown,
    target,
    update_of,
    vpath,
)
from mdmem.store import ledger
from mdmem.store.workspace import resolve

if TYPE_CHECKING:
    from collections.abc import Iterator

    from anthropic.lib.tools import BetaFunctionToolResultType
    from anthropic.types.beta import (
        BetaCacheControlEphemeralParam,
        BetaMemoryTool20250818Command,
        BetaMemoryTool20250818CreateCommand,
        BetaMemoryTool20250818DeleteCommand,
        BetaMemoryTool20250818InsertCommand,
        BetaMemoryTool20250818RenameCommand,
        BetaMemoryTool20250818StrReplaceCommand,
        BetaMemoryTool20250818ViewCommand,
    )

    from mdmem.store.note import Note
    from mdmem.store.results import ApplyResult
    from mdmem.store.store import Store

__all__ = ["INSTRUCTIONS", "ROOT", "AsyncMemoryTool", "MemoryTool"]

INSTRUCTIONS = (
    "Your memory tool has two stores: /memories/project (notes about this repository, "
    "shared with everyone who works on it) and /memories/user (the user's own preferences, "
    "kept across projects). Each note is one Markdown file, /memories/<store>/<name>.md; "
    "each store's MEMORY.md is an index generated from the notes. A note may be plain "
    "Markdown: mdmem keeps its type, title and summary in front matter of its own. "
    "View /memories first."
)
_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")


@contextmanager
def _translated() -> Iterator[None]:
    """Turn refusals and mdmem's errors into ToolErrors, so Claude reads the reason."""
    try:
        yield
    except (Refused, MdmemError) as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"The memory store could not be read or written: {exc}") from None


def _rejected(result: ApplyResult, doing: str, store: Store | None = None) -> None:
    if result.rejected:
        raise Refused(f"{doing}: {result.rejected[0].reason}")
    if store is not None and result.applied:
        from mdmem.store import ledger

        ledger.record(
            store.path, "write", n=[a.filename for a in result.applied], via="memory-tool"
        )


def _replaced(content: str, old: str, new: str, path: str) -> tuple[str, int]:
    """``content`` with its one ``old`` replaced by ``new``, and the (0-based) line it was on.

    Raises:
        Refused: ``old`` is not there, or is there more than once.
    """
    count = content.count(old)
    if count == 0:
        raise Refused(
            f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}."
        )
    if count > 1:
        numbers, pos = [], content.find(old)
        while pos != -1:
            numbers.append(str(content[:pos].count("\n") + 1))
            pos = content.find(old, pos + 1)
        raise Refused(
            f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
            f"{', '.join(numbers)}. Please ensure it is unique"
        )
    return content.replace(old, new), content[: content.find(old)].count("\n")


def _snippet(final: str, line: int, new: str) -> str:
    """The reply to an edit: a few numbered lines of the note as stored, around the change."""
    where = final.find(new) if new else -1
    if where != -1:
        line = final[:where].count("\n")  # mdmem may have reformatted the front matter
    lines = final.split("\n")
    first, last = max(0, line - 2), min(len(lines), line + 3)
    return (
        "The memory file has been edited. Here is the snippet showing the change "
        "(with line numbers):\n" + numbered(lines[first:last], first + 1)
    )


def _inserted(content: str, at: int, text: str) -> str:
    """``content`` with ``text`` as a new line after line ``at`` (0: before the first).

    Raises:
        Refused: ``at`` is outside the file.
    """
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    if at < 0 or at > len(lines):
        raise Refused(
            f"Invalid `insert_line` parameter: {at}. "
            f"It should be within the range [0, {len(lines)}]."
        )
    lines.insert(at, text.rstrip("\n"))
    return "\n".join(lines) + "\n"


def _opens_front_matter(content: str) -> bool:
    return content.lstrip("\ufeff").startswith("---")


def _front_matter_lines(content: str) -> int:
    """How many lines the front matter takes, its two '---' lines included (0: none)."""
    lines = content.lstrip("\ufeff").split("\n")
    for i in range(1, len(lines)):
        if lines[i].strip().startswith("---") and not lines[i].strip("-").strip():
            return i + 1
    return 0


class MemoryTool(BetaAbstractMemoryTool):
    """The Anthropic memory tool over a workspace's project store and the user store.

    ``workspace=None`` finds the workspace as the ``mdmem`` command does
    (``$MDMEM_WORKSPACE``, else the nearest ancestor of the current directory
    with ``.PseudoClaude/`` or ``.git``); ``user_dir=None`` means
    ``$MDMEM_USER_DIR`` or ``~/.PseudoClaude/memory``.
    """

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        user_dir: str | os.PathLike[str] | None = None,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        if workspace is None:
            workspace = os.environ.get("MDMEM_WORKSPACE") or None
        self.workspace, self.project, self.user = resolve(
            os.fspath(workspace) if workspace is not None else None,
            os.fspath(user_dir) if user_dir is not None else None,
        )

    def execute(self, command: BetaMemoryTool20250818Command) -> BetaFunctionToolResultType:
        """Run one command; an unknown one is a ToolError (the SDK would log a traceback)."""
        name = getattr(command, "command", None)
        if name not in _COMMANDS:
            raise ToolError(f"Unknown command {name!r}: use one of {', '.join(_COMMANDS)}.")
        return super().execute(command)

    def _target(self, path: object) -> Target:
        return target(path, (self.project, self.user))

    def _note(self, path: object, doing: str) -> tuple[Target, Store, str]:
        return note_target(path, (self.project, self.user), doing)

    # -- reading -------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """List ``/memories`` or a store (with sizes), or show a file with line numbers."""
        with _translated():
            found = self._target(getattr(command, "path", None))
            if found.name is None:
                return directory_view(found, (self.project, self.user))
            text = read(found)
            if not found.is_index and found.store is not None and found.name is not None:
                text = shown(text, found.name, found.store.level).text
                ledger.record(found.store.path, "read", n=[found.name], via="memory-tool")
            return file_view(found, text, getattr(command, "view_range", None))

    # -- writing -------------------------------------------------------------------

    @staticmethod
    def _create_in(store: Store, name: str, note: Note, path: str) -> None:
        """Create note ``name`` exactly as given, never overwriting one.

        The caller holds the store's lock, so the name cannot be taken in between.
        """
        if not note.body.strip():
            raise Refused(f"Nothing was created at {path}: a note needs some text.")
        check_free(store, name, f"File {path} already exists")
        operation = {
            "action": "create",
            "level": store.level.value,
            "type": note.type.value,
            "title": note.title,
            "summary": note.summary or None,
            "content": note.body,
            "filename": name,
        }
        _rejected(
            store.apply([operation], source="memory-tool"), f"Nothing was created at {path}", store
        )

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """Create a note under exactly the given name, from a whole Markdown file.

        The front matter is optional; an existing note is never overwritten.
        """
        with _translated():
            found, store, name = self._note(getattr(command, "path", None), "create")
            text = getattr(command, "file_text", None)
            if not isinstance(text, str):
                raise Refused("file_text is required: the whole Markdown text of the note.")
            note = fields_of(text, name, store.level)
            with store.lock():
                self._create_in(store, name, note, found.path)
            return f"File created successfully at: {found.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """Replace the one occurrence of ``old_str`` in a note, as ``view`` shows it.

        A note whose front matter only holds what mdmem derives is shown, and
        edited, as its body; its front matter follows the edit.
        """
        with _translated():
            found, store, name = self._note(getattr(command, "path", None), "edit")
            old, new = getattr(command, "old_str", None), getattr(command, "new_str", "")
            if not isinstance(old, str) or not isinstance(new, str):
                raise Refused("old_str and new_str must be text.")
            doing = "No replacement was performed"
            with store.lock():
                content = read(found)
                seen = shown(content, name, store.level)
                after, line = _replaced(seen.text, old, new, found.path)
                if seen.note is not None:
                    update = body_update(store.level, name, seen.note, after, doing)
                else:
                    update = update_of(store.level, name, content, after, doing, found.path)
                _rejected(store.apply([update], source="memory-tool"), doing, store)
                final = shown(read(found), name, store.level).text
            return _snippet(final, line, new)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """Insert text at a line of a note as ``view`` shows it (0 = at the top of its text)."""
        with _translated():
            found, store, name = self._note(getattr(command, "path", None), "edit")
            text, at = getattr(command, "insert_text", None), getattr(command, "insert_line", None)
            if not isinstance(text, str) or not isinstance(at, int) or isinstance(at, bool):
                raise Refused("insert_line must be a line number and insert_text text.")
            doing = "No insertion was performed"
            with store.lock():
                content = read(found)
                seen = shown(content, name, store.level)
                if seen.note is not None:
                    after = _inserted(seen.text, at, text)
                    update = body_update(store.level, name, seen.note, after, doing)
                else:
                    if at == 0 and _opens_front_matter(content):
                        # Above the front matter would break the note: the top of
                        # a note is the first line of its text.
                        at = _front_matter_lines(content)
                    after = _inserted(content, at, text)
                    update = update_of(store.level, name, content, after, doing, found.path)
                _rejected(store.apply([update], source="memory-tool"), doing, store)
            return f"The file {found.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """Move a note to its store's trash (``mdmem restore`` brings it back)."""
        with _translated():
            found = self._target(getattr(command, "path", None))
            if found.store is None:
                raise Refused(
                    f"Cannot delete the {ROOT} directory itself; delete notes one at a time."
                )
            if found.name is None:
                raise Refused(
                    f"Deleting a whole store is not allowed: delete notes one at a time, "
                    f"e.g. {found.path}/<name>.md."
                )
            found, store, name = self._note(found.path, "delete")
            if not store.exists(name):
                raise not_found(found, f"The path {found.path} does not exist.")
            result = store.apply(
                [{"action": "delete", "level": store.level.value, "filename": name}],
                source="memory-tool",
            )
            _rejected(result, f"{found.path} was not deleted", store)
            return f"Successfully deleted {found.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """Rename a note within a store, or move it into the other one; never overwrites.

        Within a store the file keeps its bytes: front matter, ``created`` and keys
        a person added. Into the other store it is created anew (the same type,
        title, summary and text), then the old one goes to its store's trash.
        """
        with _translated():
            old_path, new_path = (
                getattr(command, "old_path", None),
                getattr(command, "new_path", None),
            )
            where = self._target(old_path)
            if where.name is None:
                raise Refused(
                    f"Cannot rename {where.path}: the stores are fixed; rename notes one at a time."
                )
            old, old_store, old_name = self._note(old_path, "rename")
            new, new_store, new_name = self._note(new_path, "rename to")
            if old.path == new.path:
                raise Refused(f"{old.path} and {new.path} are the same file.")
            # Not the lenient check: a symlink out of the store is refused, not "missing".
            if not old_store.exists(old_name):
                raise not_found(old, f"The path {old.path} does not exist")
            destination = f"The destination {new.path} already exists"
            if new_store is old_store:
                with old_store.lock():
                    check_free(old_store, new_name, destination, moving=old_name)
                    old_store.rename(old_name, new_name, source="memory-tool")
                return f"Successfully renamed {old.path} to {new.path}"
            try:
                note = old_store.read(old_name)
            except InvalidNote as exc:
                raise Refused(
                    f"Cannot move {old.path} to another store: it is not a valid note "
                    f"({exc.reason}). Fix it first (view it, then edit it), or delete it and "
                    "create it again."
                ) from None
            # Create first, then delete: if anything fails in between, the note
            # exists twice rather than not at all.
            with new_store.lock():
                check_free(new_store, new_name, destination)
                self._create_in(new_store, new_name, note, new.path)
            delete = {"action": "delete", "level": old_store.level.value, "filename": old_name}
            result = old_store.apply([delete], source="memory-tool")
            if result.rejected:
                raise Refused(
                    f"{new.path} was created, but {old.path} could not be removed: "
                    f"{result.rejected[0].reason}"
                )
            return f"Successfully renamed {old.path} to {vpath(new_store, new_name)}"


class AsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """:class:`MemoryTool` for ``AsyncAnthropic``: each command runs in a worker thread."""

    def __init__(
        self,
        workspace: str | os.PathLike[str] | None = None,
        user_dir: str | os.PathLike[str] | None = None,
        *,
        cache_control: BetaCacheControlEphemeralParam | None = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        self.tool = MemoryTool(workspace, user_dir)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        """See :meth:`MemoryTool.view`."""
        return await run_sync(self.tool.view, command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        """See :meth:`MemoryTool.create`."""
        return await run_sync(self.tool.create, command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        """See :meth:`MemoryTool.str_replace`."""
        return await run_sync(self.tool.str_replace, command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        """See :meth:`MemoryTool.insert`."""
        return await run_sync(self.tool.insert, command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        """See :meth:`MemoryTool.delete`."""
        return await run_sync(self.tool.delete, command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        """See :meth:`MemoryTool.rename`."""
        return await run_sync(self.tool.rename, command)
