"""The MCP server, driven by the official MCP client: over stdio, and in-process for details."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult, TextContent, TextResourceContents

from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.integrations.mcp import build_server
from mdmem.store.block import PREAMBLE
from mdmem.store.note import parse

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    return tmp_path / "user"


@pytest.fixture
def project(workspace: Path) -> Path:
    return workspace / ".PseudoClaude" / "memory"


def text_of(result: CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, TextContent))


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (but store state and the server's log) -> a hash of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not {".mdmem", ".local"} & set(p.parts) and p.name != "server.log"
    }


@asynccontextmanager
async def stdio_session(workspace: Path, user_dir: Path, log: Path) -> AsyncIterator[ClientSession]:
    """The server as an MCP client starts it: a child process speaking JSON-RPC on stdio."""
    params = StdioServerParameters(
        command=PYTHON,
        args=[
            "-m",
            "mdmem.integrations.mcp",
            "--workspace",
            str(workspace),
            "--user-dir",
            str(user_dir),
        ],
        env=python_env(),
        cwd=str(workspace),
    )
    with log.open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            yield session


def over_stdio(
    workspace: Path,
    user_dir: Path,
    tmp_path: Path,
    body: Callable[[ClientSession], Awaitable[None]],
) -> None:
    async def run() -> None:
        async with stdio_session(workspace, user_dir, tmp_path / "server.log") as session:
            await body(session)

    anyio.run(run)


# -- over stdio ------------------------------------------------------------------------


def test_tools_and_their_annotations(workspace: Path, user_dir: Path, tmp_path: Path) -> None:
    listed: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        listed.update({tool.name: tool for tool in (await session.list_tools()).tools})

    over_stdio(workspace, user_dir, tmp_path, body)

    assert sorted(listed) == [
        "memory_delete",
        "memory_index",
        "memory_read",
        "memory_search",
        "memory_timeline",
        "memory_write",
    ]
    for name in ("memory_index", "memory_read", "memory_search", "memory_timeline"):
        hints = listed[name].annotations
        assert (hints.read_only_hint, hints.open_world_hint) == (True, False), name
    for name in ("memory_write", "memory_delete"):
        hints = listed[name].annotations
        assert (hints.read_only_hint, hints.destructive_hint) == (False, True), name
    assert listed["memory_write"].input_schema["properties"]["type"]["enum"] == [
        "user_preference",
        "correction_feedback",
        "project_knowledge",
        "reference_material",
    ]
    assert listed["memory_read"].input_schema["properties"]["level"]["enum"] == ["project", "user"]
    assert sorted(listed["memory_write"].input_schema["required"]) == [
        "content",
        "level",
        "title",
        "type",
    ]
    assert all(tool.description for tool in listed.values())


def test_write_read_search_delete_and_the_index(
    workspace: Path, user_dir: Path, project: Path, tmp_path: Path
) -> None:
    seen: dict[str, Any] = {}

    async def body(session: ClientSession) -> None:
        seen["empty"] = text_of(await session.call_tool("memory_index", {}))
        written = await session.call_tool(
            "memory_write",
            {
                "level": "project",
                "type": "project_knowledge",
                "title": "Build workflow",
                "content": "Run `go test ./...` before tagging a release.",
            },
        )
        seen["written"] = written.structured_content
        await session.call_tool(
            "memory_write",
            {
                "level": "user",
                "type": "user_preference",
                "title": "Language",
                "content": "Answer in Chinese.",
                "summary": "中文回答",
            },
        )
        seen["read"] = text_of(
            await session.call_tool(
                "memory_read",
                {"level": "project", "filename": "project_knowledge_build-workflow.md"},
            )
        )
        seen["search"] = (
            await session.call_tool("memory_search", {"query": "release tests"})
        ).structured_content
        seen["index"] = text_of(await session.call_tool("memory_index", {}))
        resources = await session.list_resources()
        seen["resources"] = sorted(str(r.uri) for r in resources.resources)
        for uri in ("mdmem://index", "mdmem://project/index", "mdmem://user/index"):
            contents = (await session.read_resource(uri)).contents
            assert isinstance(contents[0], TextResourceContents)
            seen[uri] = contents[0].text
        deleted = await session.call_tool(
            "memory_delete", {"level": "user", "filename": "user_preference_language.md"}
        )
        seen["deleted"] = (deleted.is_error, text_of(deleted))
        seen["after"] = text_of(await session.call_tool("memory_index", {}))

    over_stdio(workspace, user_dir, tmp_path, body)

    assert seen["empty"] == "(no notes yet)"
    assert seen["written"] == {
        "action": "create",
        "level": "project",
        "filename": "project_knowledge_build-workflow.md",
    }
    on_disk = (project / "project_knowledge_build-workflow.md").read_text()
    assert seen["read"] == on_disk
    assert parse(on_disk).body == "Run `go test ./...` before tagging a release."
    (hit,) = seen["search"]["results"]
    assert hit["filename"] == "project_knowledge_build-workflow.md"
    assert hit["level"] == "project"
    assert hit["score"] > 0
    assert "release" in hit["snippet"]
    assert seen["index"] == (
        f"{PREAMBLE}\n\n"
        "## Project Memory\n"
        "- [project_knowledge] Build workflow — Run `go test ./...` before tagging a release. "
        "(project_knowledge_build-workflow.md)\n\n"
        "## User Memory\n"
        "- [user_preference] Language — 中文回答 (user_preference_language.md)"
    )
    assert seen["resources"] == ["mdmem://index", "mdmem://project/index", "mdmem://user/index"]
    assert seen["mdmem://index"] == seen["index"]
    assert seen["mdmem://project/index"] == (project / "MEMORY.md").read_text()
    assert seen["mdmem://user/index"] == (
        "- [user_preference] Language — 中文回答 (user_preference_language.md)\n"
    )
    assert seen["deleted"] == (
        False,
        "Deleted user_preference_language.md from the user store "
        "(restorable with `mdmem restore`).",
    )
    assert "User Memory" not in seen["after"]
    assert [i.filename for i in Store(user_dir, Level.USER).trash()] == [
        "user_preference_language.md"
    ]


HOSTILE_NAMES = [
    "../escape.md",
    "../../etc/passwd",
    "/etc/passwd",
    "sub/note.md",
    "..\\evil.md",
    ".hidden.md",
    "MEMORY.md",
    "note\x00.md",
    "note\n.md",
    "notes.txt",
    "link.md",  # a symlink in the store that leads outside it
]


def test_hostile_names_are_rejected_and_nothing_is_written(
    workspace: Path, user_dir: Path, project: Path, tmp_path: Path
) -> None:
    project.mkdir(parents=True)
    outside = tmp_path / "outside.md"
    outside.write_text("---\ntype: project_knowledge\ntitle: Secret\n---\nsecret\n")
    (project / "link.md").symlink_to(outside)
    before = tree(tmp_path)
    results: list[tuple[str, str, bool, str]] = []

    async def body(session: ClientSession) -> None:
        for name in HOSTILE_NAMES:
            calls = {
                "memory_read": {"level": "project", "filename": name},
                "memory_delete": {"level": "project", "filename": name},
                "memory_write": {
                    "level": "project",
                    "type": "project_knowledge",
                    "title": "Evil",
                    "content": "overwritten",
                    "filename": name,
                },
            }
            for tool, arguments in calls.items():
                result = await session.call_tool(tool, arguments)
                results.append((tool, name, result.is_error, text_of(result)))
        # The server is still serving after all of that.
        results.append(
            ("memory_index", "", False, text_of(await session.call_tool("memory_index", {})))
        )

    over_stdio(workspace, user_dir, tmp_path, body)

    for tool, name, is_error, text in results[:-1]:
        assert is_error, (tool, name, text)
        assert "invalid note name" in text or "outside the store" in text, (tool, name, text)
        assert "Use a bare note file name" in text
    assert tree(tmp_path) == before
    assert outside.read_text().endswith("secret\n")


# -- in process: the details -------------------------------------------------------------


def in_process(workspace: Path, user_dir: Path, body: Callable[[Client], Awaitable[None]]) -> None:
    async def run() -> None:
        async with Client(build_server(str(workspace), str(user_dir))) as client:
            await body(client)

    anyio.run(run)


WRITE = {"level": "project", "type": "project_knowledge", "title": "Tests", "content": "make test"}


def test_write_updates_by_filename_and_never_overwrites(
    workspace: Path, user_dir: Path, project: Path
) -> None:
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool("memory_write", WRITE))
        out.append(await client.call_tool("memory_write", WRITE))
        out.append(await client.call_tool("memory_write", {**WRITE, "content": "make check"}))
        out.append(
            await client.call_tool(
                "memory_write",
                {**WRITE, "content": "make test -j4", "filename": "project_knowledge_tests.md"},
            )
        )
        out.append(
            await client.call_tool(
                "memory_write", {**WRITE, "filename": "project_knowledge_ci-notes.md"}
            )
        )

    in_process(workspace, user_dir, body)

    assert [(r.structured_content or {}).get("action") for r in out] == [
        "create",
        "unchanged",
        "create",
        "update",
        "create",
    ]
    assert [(r.structured_content or {}).get("filename") for r in out] == [
        "project_knowledge_tests.md",
        "project_knowledge_tests.md",
        "project_knowledge_tests-2.md",
        "project_knowledge_tests.md",
        "project_knowledge_ci-notes.md",
    ]
    assert parse((project / "project_knowledge_tests.md").read_text()).body == "make test -j4"
    assert parse((project / "project_knowledge_tests-2.md").read_text()).body == "make check"


@pytest.mark.parametrize(
    ("tool", "arguments", "fragment"),
    [
        ("memory_read", {"level": "project", "filename": "nothing.md"}, "There is no note"),
        ("memory_delete", {"level": "user", "filename": "nothing.md"}, "There is no note"),
        ("memory_write", {**WRITE, "content": "   "}, "content: missing"),
        ("memory_write", {**WRITE, "title": "\x01\x02"}, "title"),
        ("memory_write", {**WRITE, "type": "gossip"}, "type must be one of: user_preference"),
        ("memory_write", {**WRITE, "level": "team"}, "level must be one of: project, user"),
        ("memory_read", {"level": "project"}, "filename is required"),
        ("memory_search", {"query": "x", "limit": 0}, "limit must be at least 1"),
        ("memory_search", {"query": 5}, "query must be a string"),
        ("memory_delete", {}, "level is required; filename is required"),
    ],
)
def test_bad_calls_are_tool_errors(
    workspace: Path, user_dir: Path, tool: str, arguments: dict[str, Any], fragment: str
) -> None:
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(await client.call_tool(tool, arguments))
        out.append(await client.call_tool("memory_index", {}))

    in_process(workspace, user_dir, body)

    assert out[0].is_error
    assert fragment in text_of(out[0])
    assert not out[1].is_error


PYDANTIC_WORDING = ("validation error", "pydantic", "Input should", "input_value", "[type=")
GARBAGE: list[Any] = [None, 5, -1, 2.5, True, [], ["a"], {}, {"a": 1}, "", "x" * 300]


def test_argument_errors_never_speak_pydantic(workspace: Path, user_dir: Path) -> None:
    """Every argument of every tool given every wrong kind of value: mdmem's words, no crash."""
    base = {
        "memory_index": {},
        "memory_read": {"level": "project", "filename": "a.md"},
        "memory_search": {"query": "x", "limit": 3},
        "memory_write": dict(WRITE),
        "memory_delete": {"level": "project", "filename": "a.md"},
    }
    errors: list[str] = []

    async def body(client: Client) -> None:
        for tool, good in base.items():
            for field in [*good, "unexpected"]:
                for value in GARBAGE:
                    result = await client.call_tool(tool, {**good, field: value})
                    if result.is_error:
                        errors.append(text_of(result))
        assert not (await client.call_tool("memory_index", {})).is_error

    in_process(workspace, user_dir, body)

    assert len(errors) > 40
    for text in errors:
        assert not any(word in text for word in PYDANTIC_WORDING), text
        assert text.startswith("Error executing tool memory_") or "note" in text, text


def test_a_broken_note_is_reported_not_crashed_on(
    workspace: Path, user_dir: Path, project: Path
) -> None:
    project.mkdir(parents=True)
    (project / "broken.md").write_text("---\ntitle: [\n---\nbody\n")
    out: list[CallToolResult] = []

    async def body(client: Client) -> None:
        out.append(
            await client.call_tool("memory_read", {"level": "project", "filename": "broken.md"})
        )

    in_process(workspace, user_dir, body)

    assert out[0].is_error
    assert "broken.md cannot be read as a note" in text_of(out[0])


def test_search_by_level_and_limit(workspace: Path, user_dir: Path) -> None:
    out: list[Any] = []

    async def body(client: Client) -> None:
        for i in range(4):
            await client.call_tool(
                "memory_write", {**WRITE, "title": f"Cache {i}", "content": "redis cache"}
            )
        await client.call_tool(
            "memory_write", {**WRITE, "level": "user", "type": "user_preference", "title": "Cache"}
        )
        for arguments in ({"query": "cache", "limit": 2}, {"query": "CACHE", "level": "user"}):
            result = await client.call_tool("memory_search", arguments)
            out.append(json.loads(text_of(result)))

    in_process(workspace, user_dir, body)

    two, user_only = out
    assert len(two["results"]) == 2
    assert [(h["level"], h["filename"]) for h in user_only["results"]] == [
        ("user", "user_preference_cache.md")
    ]


def test_the_workspace_comes_from_the_environment_or_the_current_directory(
    workspace: Path, user_dir: Path, project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "src").mkdir()
    monkeypatch.chdir(workspace / "src")
    other = tmp_path / "other"
    (other / ".git").mkdir(parents=True)

    async def write(client: Client) -> None:
        assert not (await client.call_tool("memory_write", WRITE)).is_error

    async def run(server_workspace: str | None) -> None:
        async with Client(build_server(server_workspace, str(user_dir))) as client:
            await write(client)

    anyio.run(run, None)
    monkeypatch.setenv("MDMEM_WORKSPACE", str(other))
    anyio.run(run, None)

    assert (project / "project_knowledge_tests.md").exists()
    assert (other / ".PseudoClaude" / "memory" / "project_knowledge_tests.md").exists()
