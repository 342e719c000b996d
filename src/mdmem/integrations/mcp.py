"""An MCP server over mdmem's two stores, for any MCP client (Claude Code, Claude Desktop, ...).

``mdmem mcp`` (or ``python -m mdmem.integrations.mcp``) serves it on stdio with the
official ``mcp`` SDK (mdmem's ``mcp`` extra)::

    memory_index()                          the merged index (the prompt block)   read-only
    memory_read(level, filename)            one note, front matter and text        read-only
    memory_search(query, level?, limit?)    ranked recall over the notes           read-only
    memory_write(level, type, title, content, filename?, summary?)
                                            create a note, or update one by name
    memory_delete(level, filename)          move a note to its store's trash       destructive
    memory_timeline(query?, since?, file?, limit?)
                                            past sessions: asks, files, commands   read-only

Resources: ``mdmem://index`` (both stores), ``mdmem://project/index`` and
``mdmem://user/index`` (one store's MEMORY.md).

Every write goes through :meth:`mdmem.Store.apply` (validation, redaction of
secrets, atomic files, MEMORY.md in step). A bad name or a missing note comes
back as a tool error whose text says what to do; the server keeps running.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Annotated, Any, Literal

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ResourceError, ToolError
    from mcp.types import ToolAnnotations
except ImportError as exc:  # no mcp, or mcp 1.x (FastMCP)
    raise ImportError("the mdmem MCP server needs mdmem's mcp extra (the mcp SDK 2.x)") from exc
from pydantic import Field, ValidationError
from typing_extensions import TypedDict

from mdmem import __version__
from mdmem.errors import InvalidNote, InvalidPath, MdmemError, NoteNotFound
from mdmem.recall import search
from mdmem.store import ledger
from mdmem.store.block import prompt_block
from mdmem.store.note import render
from mdmem.store.store import Store
from mdmem.store.workspace import resolve

__all__ = [
    "INSTRUCTIONS",
    "Hit",
    "SearchResult",
    "SessionEntry",
    "Timeline",
    "Written",
    "build_server",
    "main",
    "serve",
]

LevelName = Literal["project", "user"]
TypeName = Literal[
    "user_preference", "correction_feedback", "project_knowledge", "reference_material"
]

INSTRUCTIONS = (
    "Long-term memory kept as Markdown notes in two stores: 'project' (about this repository, "
    "shared with everyone who works on it) and 'user' (the user's own preferences, kept across "
    "projects). Call memory_index first: it lists every note as "
    "'- [type] Title — Summary (filename)'. Read a note with memory_read before relying on its "
    "details, and keep notes short, factual and durable: conventions, decisions, corrections, "
    "preferences; not chat logs or secrets."
)

_READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
# A write may replace a note's text, which MCP calls destructive; writing the same
# thing twice changes nothing the second time, which it calls idempotent.
_WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
_DELETE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

Level = Annotated[
    LevelName, Field(description="'project' (this repository) or 'user' (across projects)")
]
Filename = Annotated[
    str,
    Field(
        description="A note's file name as memory_index shows it, e.g. project_knowledge_build.md"
    ),
]


class Written(TypedDict):
    """What memory_write did: ``create``, ``update`` or ``unchanged``, and the note's name."""

    action: str
    level: str
    filename: str


class Hit(TypedDict):
    """One search result; ``updated`` is ISO 8601, or null for a note without a date."""

    level: str
    filename: str
    type: str
    title: str
    summary: str
    score: float
    updated: str | None
    snippet: str


class SearchResult(TypedDict):
    """The results of memory_search, best first."""

    results: list[Hit]


class SessionEntry(TypedDict):
    """One past session: when, what was asked, what changed; ``ended`` is null while open."""

    session_id: str
    started: str
    ended: str | None
    branch: str
    summary: str
    goals: list[str]
    files: list[str]
    commands: list[str]
    tests: list[str]
    notes: list[str]


class Timeline(TypedDict):
    """The sessions memory_timeline found, newest (or, for a query, best) first."""

    sessions: list[SessionEntry]


@contextmanager
def _translated() -> Iterator[None]:
    """mdmem errors -> MCP tool errors, whose text the model reads (a crash would say nothing)."""
    try:
        yield
    except ToolError:
        raise
    except InvalidPath as exc:
        raise ToolError(
            f"{exc}. Use a bare note file name as memory_index lists it, "
            "e.g. project_knowledge_build.md."
        ) from None
    except NoteNotFound as exc:
        raise ToolError(f"There is no note {exc.name!r}; memory_index lists the notes.") from None
    except MdmemError as exc:
        raise ToolError(str(exc)) from None
    except OSError as exc:
        raise ToolError(f"The memory store could not be read or written: {exc}") from None


_BOUNDS = {
    "greater_than_equal": ("ge", "at least"),
    "greater_than": ("gt", "above"),
    "less_than_equal": ("le", "at most"),
    "less_than": ("lt", "below"),
}


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic validation error in mdmem's words (no pydantic wording, no input echoed)."""
    loc = ".".join(str(part) for part in error.get("loc", ())) or "the arguments"
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"{loc} is required"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"{loc} must be one of: {expected}" if expected else f"{loc} is not allowed"
    if kind in ("string_type", "string_unicode"):
        return f"{loc} must be a string"
    if kind in ("int_type", "int_parsing", "int_from_float"):
        return f"{loc} must be a whole number"
    if kind in ("bool_type", "bool_parsing"):
        return f"{loc} must be true or false"
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        return f"{loc} must be {words} {ctx.get(key)}"
    if kind == "extra_forbidden":
        return f"{loc} is not an argument of this tool"
    if kind in ("string_too_long", "too_long"):
        return f"{loc} is too long"
    if kind in ("string_too_short", "too_short"):
        return f"{loc} is too short"
    return f"{loc} is not valid"


class _Server(MCPServer):
    """The SDK's server, with argument errors worded for the model, not in pydantic's words."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as exc:
            cause = exc.__cause__
            if not isinstance(cause, ValidationError):
                raise
            problems = "; ".join(_problem(error) for error in cause.errors())
            raise ToolError(f"Error executing tool {name}: {problems}") from cause


def _slug_for(filename: str, note_type: str) -> str:
    """The slug that makes a create of ``note_type`` land on ``filename``, when it can."""
    stem = filename[: -len(".md")]
    prefix = f"{note_type}_"
    return stem[len(prefix) :] if stem.startswith(prefix) else stem


def build_server(workspace: str | None = None, user_dir: str | None = None) -> MCPServer:
    """The MCP server over a workspace's project store and the user store (not yet running).

    ``workspace=None``: ``$MDMEM_WORKSPACE``, else found from the current directory,
    as the ``mdmem`` command does.
    """
    workspace_path, project, user = resolve(
        workspace or os.environ.get("MDMEM_WORKSPACE") or None, user_dir
    )
    stores = {"project": project, "user": user}

    def store_of(level: str) -> Store:
        store = stores.get(level)
        if store is None:
            raise ToolError(f"level must be 'project' or 'user', not {level!r}")
        return store

    server: MCPServer = _Server(
        name="mdmem", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )

    @server.tool(annotations=_READ_ONLY)
    def memory_index() -> str:
        """The index of both stores: one line per note, '- [type] Title — Summary (filename)'."""
        with _translated():
            return prompt_block(project, user, hint="mcp") or "(no notes yet)"

    @server.tool(annotations=_READ_ONLY)
    def memory_read(level: Level, filename: Filename) -> str:
        """One note: its YAML front matter (type, title, summary, dates) and its Markdown text."""
        with _translated():
            try:
                store = store_of(level)
                text = render(store.read(filename))
                ledger.record(store.path, "read", n=[filename], via="mcp")
                return text
            except InvalidNote as exc:
                raise ToolError(
                    f"{filename} cannot be read as a note ({exc.reason}); a person must fix it."
                ) from None

    @server.tool(annotations=_READ_ONLY)
    def memory_search(
        query: Annotated[
            str, Field(description="A question or keywords, in any language the notes use")
        ],
        level: Annotated[
            LevelName | None, Field(description="Search one store only; both by default")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="At most this many results")] = 10,
    ) -> SearchResult:
        """Find the notes that answer a question, best first (superseded, expired ones left out)."""
        with _translated():
            chosen = [store_of(level)] if level else [project, user]
            hits = search(chosen, query, limit=limit)
        return {
            "results": [
                Hit(
                    level=h.level.value,
                    filename=h.filename,
                    type=h.type,
                    title=h.title,
                    summary=h.summary,
                    score=h.score,
                    updated=h.updated.isoformat() if h.updated else None,
                    snippet=h.snippet,
                )
                for h in hits
            ]
        }

    @server.tool(annotations=_READ_ONLY)
    def memory_timeline(
        query: Annotated[
            str | None,
            Field(description="Find sessions about this ('did we fix the billing retry?')"),
        ] = None,
        since: Annotated[
            str | None, Field(description="Only sessions active since: 2026-11-30, or 7d")
        ] = None,
        file: Annotated[
            str | None, Field(description="Only sessions that changed this file (or path tail)")
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="At most this many sessions")] = 10,
    ) -> Timeline:
        """What the agent did in past sessions here: asks, files changed, commands, tests, notes.

        Never tool output. Newest first; with a query, the best matches first.
        """
        from mdmem.store import sessions as records

        with _translated():
            try:
                if query:
                    from mdmem.recall.sessions import search_sessions

                    found = [
                        h.session
                        for h in search_sessions(project.path, query, limit=50)
                        if not file or records.changed(h.session, file, workspace_path)
                    ]
                    if since:
                        cutoff = records.since_stamp(since)
                        found = [s for s in found if records.stamp_of(s) >= cutoff]
                    found = found[:limit]
                else:
                    found = records.timeline(
                        project.path, limit=limit, since=since, file=file, workspace=workspace_path
                    )
            except ValueError as exc:
                raise ToolError(str(exc)) from None
        return {
            "sessions": [
                SessionEntry(
                    session_id=s.session_id,
                    started=s.started,
                    ended=s.ended,
                    branch=s.branch,
                    summary=s.summary or records.built_summary(s),
                    goals=s.goals,
                    files=s.files,
                    commands=s.commands,
                    tests=[f"{c}: {o or 'outcome not said'}" for c, o in s.tests],
                    notes=[n for _, n in s.notes],
                )
                for s in found
            ]
        }

    @server.tool(annotations=_WRITE)
    def memory_write(
        level: Level,
        type: Annotated[TypeName, Field(description="What the note is about")],
        title: Annotated[str, Field(description="A short title, one line")],
        content: Annotated[str, Field(description="The note's Markdown text (no front matter)")],
        filename: Annotated[
            str | None,
            Field(description="Update this existing note; leave out to create a new one"),
        ] = None,
        summary: Annotated[
            str | None, Field(description="One line for the index; by default the first sentence")
        ] = None,
    ) -> Written:
        """Create a note, or replace the text of the note named by ``filename``; never overwrites.

        A new note is named <type>_<slug>.md, from ``filename`` (if given) or the
        title; writing the same note twice changes nothing.
        """
        with _translated():
            store = store_of(level)
            operation: dict[str, str | None] = {
                "level": level,
                "type": type,
                "title": title,
                "summary": summary,
                "content": content,
            }
            with store.lock():
                if filename is not None and store.exists(filename):
                    operation.update(action="update", filename=filename)
                else:
                    slug = _slug_for(filename, type) if filename is not None else None
                    operation.update(action="create", slug=slug)
                result = store.apply([operation], source="mcp")
        if result.rejected:
            raise ToolError(f"Nothing was written: {result.rejected[0].reason}")
        applied = result.applied[0]
        if applied.action in ("create", "update"):
            ledger.record(store.path, "write", n=[applied.filename], via="mcp")
        return Written(action=applied.action, level=level, filename=applied.filename)

    @server.tool(annotations=_DELETE)
    def memory_delete(level: Level, filename: Filename) -> str:
        """Delete a note: it moves to its store's trash; `mdmem restore` brings it back."""
        with _translated():
            store = store_of(level)
            if not store.exists(filename):
                raise NoteNotFound(filename, store.path)
            result = store.apply(
                [{"action": "delete", "level": level, "filename": filename}], source="mcp"
            )
        if result.rejected:
            raise ToolError(f"{filename} was not deleted: {result.rejected[0].reason}")
        return f"Deleted {filename} from the {level} store (restorable with `mdmem restore`)."

    @contextmanager
    def resource_errors() -> Iterator[None]:
        try:
            yield
        except (MdmemError, OSError) as exc:
            raise ResourceError(str(exc)) from None

    @server.resource("mdmem://index", name="index", mime_type="text/markdown")
    def index_resource() -> str:
        """The merged index of both stores: what an agent gets in its system prompt."""
        with resource_errors():
            return prompt_block(project, user, hint="mcp")

    @server.resource("mdmem://project/index", name="project-index", mime_type="text/markdown")
    def project_index_resource() -> str:
        """The project store's MEMORY.md."""
        with resource_errors():
            return project.load_index()

    @server.resource("mdmem://user/index", name="user-index", mime_type="text/markdown")
    def user_index_resource() -> str:
        """The user store's MEMORY.md."""
        with resource_errors():
            return user.load_index()

    return server


def serve(workspace: str | None, user_dir: str | None) -> None:
    """Serve the stores of ``workspace`` (None: discovered) over stdio until the client leaves.

    With the ``watch`` extra (Linux), the stores are watched while it serves: a note
    edited, created or renamed by hand is seen by the next call, at any store size.
    A session of an MCP client starts here: like Claude Code's SessionStart, it
    builds the dictionary's file in the background when it is missing (searches
    use the glossary until it is there; :mod:`mdmem.store.cedict`).
    """
    import threading

    from mdmem.store import cedict, watch

    server = build_server(workspace, user_dir)
    _, project, user = resolve(workspace or os.environ.get("MDMEM_WORKSPACE") or None, user_dir)
    child = cedict.start_build()
    if child is not None:  # reaped when it ends, not left a zombie for the server's life
        threading.Thread(target=child.wait, daemon=True).start()
    watch.start([project.path, user.path])
    try:
        server.run("stdio")
    finally:
        watch.stop()


def main(argv: list[str] | None = None) -> int:
    """``python -m mdmem.integrations.mcp [--workspace W] [--user-dir U]``."""
    parser = argparse.ArgumentParser(
        prog="python -m mdmem.integrations.mcp",
        description="Serve mdmem's stores over MCP (stdio).",
    )
    parser.add_argument(
        "--workspace",
        default=None,
        help="the workspace (default: $MDMEM_WORKSPACE, else found from the current directory)",
    )
    parser.add_argument(
        "--user-dir",
        default=None,
        help="the user store (default: $MDMEM_USER_DIR, else ~/.PseudoClaude/memory)",
    )
    args = parser.parse_args(argv)
    serve(args.workspace, args.user_dir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
