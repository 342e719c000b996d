"""The Anthropic memory tool over mdmem's stores: direct calls, and the real SDK's tool runner."""

from __future__ import annotations

import hashlib
import importlib.util
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import anyio
import pytest
from anthropic.tools import ToolError

from conftest import ROOT
from fake_anthropic import FakeAnthropic
from mdmem import Level, NoteType, Store
from mdmem.integrations.anthropic import AsyncMemoryTool, MemoryTool
from mdmem.store.note import parse

F = FakeAnthropic
MODEL = "claude-haiku-5-5"

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def user_dir(tmp_path: Path) -> Path:
    return tmp_path / "user"


@pytest.fixture
def tool(workspace: Path, user_dir: Path) -> MemoryTool:
    return MemoryTool(workspace=workspace, user_dir=user_dir)


@pytest.fixture
def project(workspace: Path) -> Path:
    return workspace / ".PseudoClaude" / "memory"


def call(tool: MemoryTool, command: str, **fields: Any) -> str:
    result = tool.call({"command": command, **fields})
    assert isinstance(result, str)
    return result


def error(tool: MemoryTool, command: str, **fields: Any) -> str:
    with pytest.raises(ToolError) as info:
        tool.call({"command": command, **fields})
    return str(info.value)


def tree(root: Path) -> dict[str, str]:
    """Every file under ``root`` (state under .mdmem/ left out) -> a hash of its bytes."""
    out = {}
    for path in sorted(root.rglob("*")):
        if {".mdmem", ".local"} & set(path.parts) or path.is_dir():
            continue
        data = path.read_bytes() if path.exists() else b"<dangling>"
        out[str(path.relative_to(root))] = hashlib.sha256(data).hexdigest()
    return out


NOTE = """---
type: project_knowledge
title: Build workflow
summary: Run Go tests before release.
---
Run `go test ./...` before tagging a release.
CI does not gate tags.
"""


# -- view ----------------------------------------------------------------------------


def test_view_of_an_empty_memory_lists_both_stores(tool: MemoryTool) -> None:
    assert call(tool, "view", path="/memories") == (
        "Here're the files and directories up to 2 levels deep in /memories, "
        "excluding hidden items:\n"
        "0B\t/memories\n0B\t/memories/project/\n0B\t/memories/user/"
    )


def test_view_lists_notes_with_sizes_in_the_sdk_format(tool: MemoryTool, project: Path) -> None:
    call(tool, "create", path="/memories/project/project_knowledge_build.md", file_text=NOTE)
    call(
        tool,
        "create",
        path="/memories/user/user_preference_lang.md",
        file_text="Answer in Chinese.",
    )
    (project / "notes.txt").write_text("not a note")
    (project / ".hidden.md").write_text("hidden")
    size = (project / "project_knowledge_build.md").stat().st_size
    index = (project / "MEMORY.md").stat().st_size

    root = call(tool, "view", path="/memories").splitlines()
    store = call(tool, "view", path="/memories/project/").splitlines()

    assert [line.split("\t")[1] for line in root[1:]] == [
        "/memories",
        "/memories/project/",
        "/memories/project/MEMORY.md",
        "/memories/project/project_knowledge_build.md",
        "/memories/user/",
        "/memories/user/MEMORY.md",
        "/memories/user/user_preference_lang.md",
    ]
    assert store[0].endswith("in /memories/project, excluding hidden items:")
    assert store[1:] == [
        f"{size + index}B\t/memories/project",
        f"{index}B\t/memories/project/MEMORY.md",
        f"{size}B\t/memories/project/project_knowledge_build.md",
    ]


def test_view_of_a_file_numbers_its_lines(tool: MemoryTool, project: Path) -> None:
    call(tool, "create", path="/memories/project/project_knowledge_build.md", file_text=NOTE)
    text = (project / "project_knowledge_build.md").read_text()
    lines = text.split("\n")

    shown = call(tool, "view", path="/memories/project/project_knowledge_build.md")
    ranged = call(
        tool, "view", path="/memories/project/project_knowledge_build.md", view_range=[2, 3]
    )
    tail = call(
        tool, "view", path="/memories/project/project_knowledge_build.md", view_range=[8, -1]
    )

    header = "Here's the content of /memories/project/project_knowledge_build.md with line numbers:"
    assert shown == header + "\n" + "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, 1))
    assert ranged == f"{header}\n     2\ttype: project_knowledge\n     3\ttitle: Build workflow"
    assert tail.splitlines()[1:] == [f"{n:>6}\t{lines[n - 1]}" for n in range(8, len(lines) + 1)]


def test_view_of_the_index(tool: MemoryTool) -> None:
    call(tool, "create", path="/memories/project/project_knowledge_build.md", file_text=NOTE)

    shown = call(tool, "view", path="/memories/project/MEMORY.md")

    assert shown.splitlines()[1] == (
        "     1\t- [project_knowledge] Build workflow — Run Go tests before release. "
        "(project_knowledge_build.md)"
    )


@pytest.mark.parametrize(
    ("asked", "meant"),
    [
        ("/memories/project/Progress.md", "/memories/project/progress.md"),
        ("/memories/project/build.md", "/memories/project/project_knowledge_build.md"),
        (
            "/memories/project/reference_material_build.md",
            "/memories/project/project_knowledge_build.md",
        ),
    ],
)
def test_view_of_a_missing_note_points_at_a_near_name(
    tool: MemoryTool, project: Path, asked: str, meant: str
) -> None:
    call(tool, "create", path="/memories/project/progress.md", file_text="# Progress\nStep 2.")
    # A note the Manager wrote from a conversation: it names notes <type>_<slug>.md.
    Store(project, Level.PROJECT).apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Build",
                "content": "Run make.",
            }
        ]
    )
    if asked.endswith("/Progress.md") and (project / "Progress.md").exists():
        pytest.skip("a case-insensitive file system finds Progress.md")

    message = error(tool, "view", path=asked)
    other = error(tool, "view", path="/memories/user/nothing.md")

    assert message == (
        f"The path {asked} does not exist. Please provide a valid path. Did you mean {meant}?"
    )
    assert other == (
        "The path /memories/user/nothing.md does not exist. Please provide a valid path. "
        "View /memories/user to see its notes."
    )


# -- create --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "text", "note_type", "title"),
    [
        (
            "/memories/project/progress.md",
            "# Release checklist\nTag after CI is green.",
            NoteType.PROJECT_KNOWLEDGE,
            "Release checklist",
        ),
        ("/memories/user/tone.md", "Keep answers short.", NoteType.USER_PREFERENCE, "Tone"),
        (
            "/memories/project/Release_Notes.md",
            "Tag on Fridays.",
            NoteType.PROJECT_KNOWLEDGE,
            "Release Notes",
        ),
        (
            "/memories/project/reference_material_api-contract.md",
            "The API returns RFC 3339 times.",
            NoteType.REFERENCE_MATERIAL,
            "Api contract",
        ),
        (
            "/memories/project/project_knowledge_build.md",
            NOTE,
            NoteType.PROJECT_KNOWLEDGE,
            "Build workflow",
        ),
        (
            "/memories/project/fix.md",
            "---\ntype: correction_feedback\n---\n# Never mock the DB\nUse the test container.",
            NoteType.CORRECTION_FEEDBACK,
            "Never mock the DB",
        ),
    ],
)
def test_create_stores_the_exact_name_and_fills_in_what_the_file_leaves_out(
    tool: MemoryTool,
    workspace: Path,
    user_dir: Path,
    path: str,
    text: str,
    note_type: NoteType,
    title: str,
) -> None:
    level, stored = path.split("/")[2:]
    root = (workspace / ".PseudoClaude" / "memory") if level == "project" else user_dir

    message = call(tool, "create", path=path, file_text=text)

    assert message == f"File created successfully at: {path}"
    assert sorted(p.name for p in root.glob("*.md")) == sorted(["MEMORY.md", stored])
    note = parse((root / stored).read_text(), stored)
    assert (note.type, note.title) == (note_type, title)
    assert note.summary and "#" not in note.summary
    assert note.created is not None and note.created == note.updated
    assert f"({stored})" in (root / "MEMORY.md").read_text()


def test_create_never_overwrites(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)
    before = tree(project)

    again = error(tool, "create", path=path, file_text=NOTE)
    other = error(tool, "create", path=path, file_text="Other text.")
    case = error(tool, "create", path="/memories/project/Project_Knowledge_Build.md", file_text="x")

    assert again == other == f"File {path} already exists"
    assert case == (f"File /memories/project/Project_Knowledge_Build.md already exists (as {path})")
    assert tree(project) == before


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("---\ntype: project_knowledge\ntitle: [unclosed\n---\nbody", "bad YAML"),
        ("---\ntype: gossip\ntitle: T\n---\nbody", "'gossip' is not one of"),
        ("---\ntype: project_knowledge\ntitle: T\nno closing fence", "not closed"),
        ("", "a note needs some text"),
        ("---\ntype: project_knowledge\ntitle: T\n---\n", "a note needs some text"),
    ],
)
def test_create_with_a_bad_file_writes_nothing(
    tool: MemoryTool, project: Path, text: str, fragment: str
) -> None:
    message = error(tool, "create", path="/memories/project/project_knowledge_x.md", file_text=text)

    assert fragment in message
    assert not list(project.glob("*.md"))


def test_create_redacts_secrets_through_the_store(tool: MemoryTool, project: Path) -> None:
    key = "sk-ant-api03-" + "a1B2c3D4" * 5
    call(tool, "create", path="/memories/project/keys.md", file_text=f"The key is {key}.")

    text = (project / "keys.md").read_text()

    assert key not in text
    assert "[REDACTED:anthropic_key]" in text


# -- str_replace and insert ----------------------------------------------------------


def test_str_replace_edits_through_the_store(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)
    before = parse((project / "project_knowledge_build.md").read_text())
    os.utime(project / "project_knowledge_build.md", (0, 0))

    snippet = call(
        tool, "str_replace", path=path, old_str="title: Build workflow", new_str="title: Releases"
    )
    call(tool, "str_replace", path=path, old_str="CI does not gate tags.", new_str="CI gates tags.")

    after = parse((project / "project_knowledge_build.md").read_text())
    assert snippet.splitlines()[0] == (
        "The memory file has been edited. "
        "Here is the snippet showing the change (with line numbers):"
    )
    assert "     3\ttitle: Releases" in snippet.splitlines()
    assert after.title == "Releases"
    assert after.body == "Run `go test ./...` before tagging a release.\nCI gates tags."
    assert after.created == before.created
    assert "] Releases — Run Go tests" in (project / "MEMORY.md").read_text()


def test_str_replace_needs_exactly_one_match(tool: MemoryTool) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)

    none = error(tool, "str_replace", path=path, old_str="make", new_str="x")
    many = error(tool, "str_replace", path=path, old_str="release", new_str="x")

    assert none == (
        "No replacement was performed, old_str `make` did not appear verbatim in " + path + "."
    )
    assert many == (
        "No replacement was performed. Multiple occurrences of old_str `release` in lines: "
        "4, 8. Please ensure it is unique"
    )


@pytest.mark.parametrize(
    ("old", "new", "fragment"),
    [
        ("type: project_knowledge", "type: trivia", "'trivia' is not one of"),
        ("title: Build workflow\n", "", "missing field 'title'"),
        ("---\ntype", "type", "no YAML front matter"),
        ("summary: Run Go tests before release.", "summary: [", "bad YAML"),
        (
            "Run `go test ./...` before tagging a release.\nCI does not gate tags.",
            "",
            "no text below its front matter",
        ),
    ],
)
def test_an_edit_that_breaks_the_note_writes_nothing(
    tool: MemoryTool, project: Path, old: str, new: str, fragment: str
) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)
    before = tree(project)

    message = error(tool, "str_replace", path=path, old_str=old, new_str=new)

    assert message.startswith("No replacement was performed: ")
    assert fragment in message
    assert tree(project) == before


def test_insert_adds_a_line(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)
    lines = (project / "project_knowledge_build.md").read_text().split("\n")[:-1]

    done = call(tool, "insert", path=path, insert_line=len(lines), insert_text="- lint too\n")
    out_of_range = error(tool, "insert", path=path, insert_line=99, insert_text="x")
    top = call(tool, "insert", path=path, insert_line=0, insert_text="First of all:")

    assert done == f"The file {path} has been edited."
    assert parse((project / "project_knowledge_build.md").read_text()).body.endswith(
        "CI does not gate tags.\n- lint too"
    )
    assert out_of_range == (
        f"Invalid `insert_line` parameter: 99. It should be within the range [0, {len(lines) + 1}]."
    )
    # Line 0 is the top of the note's text: above its front matter would break it.
    assert top == f"The file {path} has been edited."
    stored = parse((project / "project_knowledge_build.md").read_text())
    assert stored.title == "Build workflow"
    assert stored.body.startswith("First of all:\nRun `go test ./...`")


PLAIN = "# Deploy steps\n\nRun make deploy from main. Then watch the dashboard.\n"


def test_a_plain_markdown_note_is_viewed_and_edited_as_claude_wrote_it(
    tool: MemoryTool, project: Path
) -> None:
    path = "/memories/project/deploy.md"
    call(tool, "create", path=path, file_text=PLAIN)
    on_disk = (project / "deploy.md").read_text()
    assert on_disk.startswith("---\ntype: project_knowledge\ntitle: Deploy steps\n")

    view = call(tool, "view", path=path)
    assert view == (
        f"Here's the content of {path} with line numbers:\n"
        "     1\t# Deploy steps\n     2\t\n"
        "     3\tRun make deploy from main. Then watch the dashboard.\n     4\t"
    )
    # The summary mdmem derived repeats the first sentence: the edit still finds it once.
    call(
        tool,
        "str_replace",
        path=path,
        old_str="Run make deploy from main.",
        new_str="Run make ship.",
    )
    call(tool, "insert", path=path, insert_line=0, insert_text="Owner: the platform team.")
    call(tool, "insert", path=path, insert_line=4, insert_text="Never on Fridays.")
    snippet = call(tool, "str_replace", path=path, old_str="# Deploy steps", new_str="# Shipping")

    assert "     2\t# Shipping" in snippet.splitlines()
    assert call(tool, "view", path=path).split("\n", 1)[1] == (
        "     1\tOwner: the platform team.\n     2\t# Shipping\n     3\t\n"
        "     4\tRun make ship. Then watch the dashboard.\n     5\tNever on Fridays.\n     6\t"
    )
    note = parse((project / "deploy.md").read_text())
    assert note.title == "Shipping"  # the title follows the heading it came from
    assert note.type is NoteType.PROJECT_KNOWLEDGE
    assert "] Shipping" in (project / "MEMORY.md").read_text()


def test_a_note_with_its_own_front_matter_is_shown_whole(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)
    view = call(tool, "view", path=path)
    assert "     2\ttype: project_knowledge" in view.splitlines()
    assert "     4\tsummary: Run Go tests before release." in view.splitlines()


def test_emptying_a_plain_note_is_refused(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/deploy.md"
    call(tool, "create", path=path, file_text=PLAIN)
    before = tree(project)
    message = error(tool, "str_replace", path=path, old_str=PLAIN, new_str="")
    assert "no text left" in message and "use delete" in message
    assert tree(project) == before


def test_editing_a_note_broken_on_disk_says_how_to_recover(tool: MemoryTool, project: Path) -> None:
    project.mkdir(parents=True)
    (project / "broken.md").write_text("---\ntitle: [\n---\nbody text\n")

    shown = call(tool, "view", path="/memories/project/broken.md")
    message = error(
        tool,
        "str_replace",
        path="/memories/project/broken.md",
        old_str="title: [",
        new_str="type: project_knowledge\ntitle: Fixed",
    )

    assert "     2\ttitle: [" in shown
    assert "is not a valid note on disk" in message
    assert "delete it, and create it again" in message


# -- delete and rename ---------------------------------------------------------------


def test_delete_moves_the_note_to_the_trash(tool: MemoryTool, project: Path) -> None:
    path = "/memories/project/project_knowledge_build.md"
    call(tool, "create", path=path, file_text=NOTE)

    done = call(tool, "delete", path=path)
    again = error(tool, "delete", path=path)

    assert done == f"Successfully deleted {path}"
    assert again.startswith(f"The path {path} does not exist.")
    assert not (project / "project_knowledge_build.md").exists()
    assert (project / "MEMORY.md").read_text() == ""
    (item,) = Store(project, Level.PROJECT).trash()
    assert item.filename == "project_knowledge_build.md"


@pytest.mark.parametrize(
    ("path", "fragment"),
    [
        ("/memories", "Cannot delete the /memories directory itself"),
        ("/memories/", "Cannot delete the /memories directory itself"),
        ("/memories/project", "Deleting a whole store is not allowed"),
        ("/memories/user/", "Deleting a whole store is not allowed"),
        ("/memories/project/MEMORY.md", "is generated from the notes"),
    ],
)
def test_delete_of_a_store_or_the_index_is_refused(
    tool: MemoryTool, project: Path, path: str, fragment: str
) -> None:
    call(tool, "create", path="/memories/project/project_knowledge_build.md", file_text=NOTE)
    before = tree(project)

    assert fragment in error(tool, "delete", path=path)
    assert tree(project) == before


def test_rename_within_a_store_keeps_the_file_as_it_is(tool: MemoryTool, project: Path) -> None:
    call(tool, "create", path="/memories/project/build.md", file_text=NOTE)
    # As a person might have left it: an old created date and a key of their own.
    text = (project / "build.md").read_text()
    created = next(line for line in text.splitlines() if line.startswith("created: "))
    text = text.replace(created, "created: 2024-01-02T03:04:05+00:00\nowner: alice")
    (project / "build.md").write_text(text)

    done = call(
        tool,
        "rename",
        old_path="/memories/project/build.md",
        new_path="/memories/project/reference_material_release.md",
    )

    assert done == (
        "Successfully renamed /memories/project/build.md to "
        "/memories/project/reference_material_release.md"
    )
    assert not (project / "build.md").exists()
    assert (project / "reference_material_release.md").read_text() == text
    note = parse(text, "reference_material_release.md")
    assert note.type is NoteType.PROJECT_KNOWLEDGE  # a name is only a name
    assert note.created is not None and note.created.year == 2024
    assert note.extra == {"owner": "alice"}
    assert (project / "MEMORY.md").read_text() == (
        "- [project_knowledge] Build workflow — Run Go tests before release. "
        "(reference_material_release.md)\n"
    )


def test_rename_may_change_only_the_case(tool: MemoryTool, project: Path) -> None:
    call(tool, "create", path="/memories/project/build.md", file_text=NOTE)
    text = (project / "build.md").read_text()
    if (project / "Build.md").exists():
        pytest.skip("a case-insensitive file system cannot tell build.md from Build.md")

    call(
        tool, "rename", old_path="/memories/project/build.md", new_path="/memories/project/Build.md"
    )

    assert [p.name for p in project.glob("*uild.md")] == ["Build.md"]
    assert (project / "Build.md").read_text() == text
    assert "(Build.md)" in (project / "MEMORY.md").read_text()


def test_a_note_broken_on_disk_can_be_renamed_but_not_moved(
    tool: MemoryTool, project: Path, tmp_path: Path
) -> None:
    project.mkdir(parents=True)
    (project / "broken.md").write_text("---\ntitle: [\n---\nbody text\n")

    call(tool, "rename", old_path="/memories/project/broken.md", new_path="/memories/project/b.md")
    before = tree(tmp_path)
    moved = error(tool, "rename", old_path="/memories/project/b.md", new_path="/memories/user/b.md")

    assert (project / "b.md").read_text() == "---\ntitle: [\n---\nbody text\n"
    assert moved.startswith(
        "Cannot move /memories/project/b.md to another store: it is not a valid note"
    )
    assert tree(tmp_path) == before


def test_rename_across_stores(tool: MemoryTool, project: Path, user_dir: Path) -> None:
    call(tool, "create", path="/memories/project/style.md", file_text="# Style\nPrefer tabs.")
    old = parse((project / "style.md").read_text())

    done = call(
        tool,
        "rename",
        old_path="/memories/project/style.md",
        new_path="/memories/user/style.md",
    )

    assert done == "Successfully renamed /memories/project/style.md to /memories/user/style.md"
    assert not (project / "style.md").exists()
    assert [item.filename for item in Store(project, Level.PROJECT).trash()] == ["style.md"]
    note = parse((user_dir / "style.md").read_text())
    assert (note.type, note.title, note.summary, note.body) == (
        old.type,
        old.title,
        old.summary,
        old.body,
    )
    assert (user_dir / "MEMORY.md").read_text() == (
        "- [project_knowledge] Style — Prefer tabs. (style.md)\n"
    )
    assert (project / "MEMORY.md").read_text() == ""


def test_rename_never_overwrites(tool: MemoryTool, project: Path, tmp_path: Path) -> None:
    call(tool, "create", path="/memories/project/project_knowledge_a.md", file_text="A.")
    call(tool, "create", path="/memories/project/project_knowledge_b.md", file_text="B.")
    call(tool, "create", path="/memories/user/project_knowledge_a.md", file_text="User A.")
    before = tree(tmp_path)

    taken = error(
        tool,
        "rename",
        old_path="/memories/project/project_knowledge_a.md",
        new_path="/memories/project/project_knowledge_b.md",
    )
    missing = error(
        tool,
        "rename",
        old_path="/memories/project/project_knowledge_c.md",
        new_path="/memories/project/project_knowledge_d.md",
    )
    same = error(
        tool,
        "rename",
        old_path="/memories/project/project_knowledge_a.md",
        new_path="/memories/project/project_knowledge_a.md",
    )
    case = error(
        tool,
        "rename",
        old_path="/memories/project/project_knowledge_a.md",
        new_path="/memories/project/Project_Knowledge_B.md",
    )
    across = error(
        tool,
        "rename",
        old_path="/memories/project/project_knowledge_a.md",
        new_path="/memories/user/project_knowledge_a.md",
    )

    assert taken == "The destination /memories/project/project_knowledge_b.md already exists"
    assert missing.startswith("The path /memories/project/project_knowledge_c.md does not exist")
    assert "are the same file" in same
    assert case == (
        "The destination /memories/project/Project_Knowledge_B.md already exists "
        "(as /memories/project/project_knowledge_b.md)"
    )
    assert across == "The destination /memories/user/project_knowledge_a.md already exists"
    assert tree(tmp_path) == before


# -- hostile paths -------------------------------------------------------------------

HOSTILE: list[tuple[dict[str, Any], str]] = [
    ({"command": "view", "path": "/etc/passwd"}, "Path must start with /memories"),
    ({"command": "view", "path": "/memories/../etc/passwd"}, "'.' and '..' are not allowed"),
    ({"command": "view", "path": "/memories/project/../../secret.md"}, "are not allowed"),
    (
        {"command": "create", "path": "/memories/project/../../../evil.md", "file_text": "x"},
        "are not allowed",
    ),
    ({"command": "create", "path": "memories/project/a.md", "file_text": "x"}, "must start with"),
    ({"command": "create", "path": "/memoriesX/a.md", "file_text": "x"}, "must start with"),
    ({"command": "create", "path": "/memories/project/.env.md", "file_text": "x"}, "hidden"),
    ({"command": "create", "path": "/memories/project/MEMORY.md", "file_text": "x"}, "generated"),
    (
        {
            "command": "str_replace",
            "path": "/memories/user/MEMORY.md",
            "old_str": "-",
            "new_str": "",
        },
        "generated",
    ),
    ({"command": "create", "path": "/memories/project/a/b.md", "file_text": "x"}, "subdirectories"),
    ({"command": "create", "path": "/memories/team/x.md", "file_text": "x"}, "two stores are"),
    (
        {"command": "create", "path": "/memories/notes.md", "file_text": "x"},
        "/memories/project/notes.md",
    ),
    ({"command": "create", "path": "/memories/project/a\x00b.md", "file_text": "x"}, "U+0000"),
    ({"command": "create", "path": "/memories/project/a\nb.md", "file_text": "x"}, "U+000A"),
    ({"command": "create", "path": "/memories/project/\u202egpj.md", "file_text": "x"}, "U+202E"),
    ({"command": "create", "path": "/memories/project/a\\..\\b.md", "file_text": "x"}, "not '\\'"),
    (
        {"command": "create", "path": "/memories/project/notes.txt", "file_text": "x"},
        "end in '.md'",
    ),
    ({"command": "create", "path": "/memories/project/CON.md", "file_text": "x"}, "device name"),
    ({"command": "create", "path": "/memories/project", "file_text": "x"}, "is a directory"),
    ({"command": "view", "path": "/memories/project/escape.md"}, "outside the store"),
    (
        {
            "command": "str_replace",
            "path": "/memories/project/escape.md",
            "old_str": "s",
            "new_str": "t",
        },
        "outside the store",
    ),
    (
        {
            "command": "insert",
            "path": "/memories/project/escape.md",
            "insert_line": 0,
            "insert_text": "x",
        },
        "outside the store",
    ),
    ({"command": "delete", "path": "/memories/project/escape.md"}, "outside the store"),
    (
        {
            "command": "rename",
            "old_path": "/memories/project/escape.md",
            "new_path": "/memories/project/ok.md",
        },
        "outside the store",
    ),
    (
        {
            "command": "rename",
            "old_path": "/memories/project/project_knowledge_keep.md",
            "new_path": "/memories/../keep.md",
        },
        "are not allowed",
    ),
    (
        {"command": "rename", "old_path": "/memories/project", "new_path": "/memories/elsewhere"},
        "the stores are fixed",
    ),
    ({"command": "view", "path": None}, "A path is required"),
    ({"command": "clear_all_memory"}, "Unknown command 'clear_all_memory'"),
    (
        {
            "command": "view",
            "path": "/memories/project/project_knowledge_keep.md",
            "view_range": ["1", "x"],
        },
        "view_range",
    ),
]


@pytest.fixture
def hostile_setup(tool: MemoryTool, tmp_path: Path, project: Path) -> Path:
    """A project note to aim at, and a symlink in the store that leads out of it."""
    call(tool, "create", path="/memories/project/project_knowledge_keep.md", file_text="Keep me.")
    outside = tmp_path / "outside.md"
    outside.write_text("---\ntype: project_knowledge\ntitle: secret\n---\nsecret\n")
    (project / "escape.md").symlink_to(outside)
    return outside


@pytest.mark.parametrize(
    ("command", "fragment"), HOSTILE, ids=[str(i) for i in range(len(HOSTILE))]
)
def test_a_hostile_path_is_a_tool_error(
    tool: MemoryTool, tmp_path: Path, hostile_setup: Path, command: dict[str, Any], fragment: str
) -> None:
    before = tree(tmp_path)

    with pytest.raises(ToolError) as info:
        tool.call(command)

    assert fragment in str(info.value)
    assert tree(tmp_path) == before


def test_hostile_paths_come_back_as_error_results_under_the_tool_runner(
    fake_anthropic: FakeAnthropic, tool: MemoryTool, tmp_path: Path, hostile_setup: Path
) -> None:
    before = tree(tmp_path)
    blocks = [
        F.tool_use_block("memory", command, id=f"toolu_{i}")
        for i, (command, _) in enumerate(HOSTILE)
    ]
    results: list[dict[str, Any]] = []

    def model(request: dict[str, Any]) -> Any:
        results.extend(F.tool_results(request))
        return F.text("Understood.")

    fake_anthropic.enqueue(F.message(*blocks), model)
    with anthropic.Anthropic(
        api_key="test-key", base_url=fake_anthropic.url, max_retries=0
    ) as client:
        client.beta.messages.tool_runner(
            model=MODEL, max_tokens=64, tools=[tool], messages=[{"role": "user", "content": "go"}]
        ).until_done()

    by_id = {r["tool_use_id"]: r for r in results}
    assert len(by_id) == len(HOSTILE)
    for i, (_, fragment) in enumerate(HOSTILE):
        assert by_id[f"toolu_{i}"]["is_error"] is True
        assert fragment in by_id[f"toolu_{i}"]["content"]
    assert tree(tmp_path) == before


# -- the real SDK's tool runner ------------------------------------------------------


def scripted(
    steps: list[dict[str, Any]], seen: list[dict[str, Any]]
) -> Callable[[dict[str, Any]], Any]:
    """A "model" that issues ``steps`` one by one, recording every tool result it is sent."""

    def model(request: dict[str, Any]) -> Any:
        seen.extend(F.tool_results(request))
        if steps:
            return F.tool_use("memory", steps.pop(0))
        return F.text("I will remember that.")

    return model


@pytest.fixture
def client(fake_anthropic: FakeAnthropic) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(
        api_key="test-key", base_url=fake_anthropic.url, max_retries=0, timeout=5.0
    ) as sdk:
        yield sdk


def test_a_session_under_the_tool_runner(
    fake_anthropic: FakeAnthropic,
    client: anthropic.Anthropic,
    tool: MemoryTool,
    project: Path,
    user_dir: Path,
) -> None:
    note = "/memories/project/build.md"
    steps: list[dict[str, Any]] = [
        {"command": "view", "path": "/memories"},
        {
            "command": "create",
            "path": note,
            "file_text": "# Build\nRun `make test` before pushing.\n",
        },
        {
            "command": "str_replace",
            "path": note,
            "old_str": "# Build\nRun `make test`",
            "new_str": "# Build\nRun `make check`",
        },
        # Claude sees (and edits) the file as it wrote it: two lines, no front matter.
        {"command": "insert", "path": note, "insert_line": 2, "insert_text": "CI runs it too."},
        {
            "command": "rename",
            "old_path": note,
            "new_path": "/memories/project/checks.md",
        },
        {"command": "create", "path": "/memories/user/tone.md", "file_text": "Be terse."},
        {"command": "delete", "path": "/memories/user/tone.md"},
        {"command": "view", "path": "/memories"},
    ]
    count = len(steps)
    seen: list[dict[str, Any]] = []
    fake_anthropic.enqueue(*[scripted(steps, seen)] * (count + 1))

    final = client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=256,
        tools=[tool],
        messages=[{"role": "user", "content": "Remember how we build."}],
    ).until_done()

    assert final.content[0].type == "text"
    assert fake_anthropic.requests[0].body["tools"] == [
        {"type": "memory_20250818", "name": "memory"}
    ]
    assert [r.get("is_error", False) for r in seen] == [False] * count, seen
    assert seen[1]["content"] == f"File created successfully at: {note}"
    assert "     2\tRun `make check` before pushing." in seen[2]["content"]
    assert seen[4]["content"] == f"Successfully renamed {note} to /memories/project/checks.md"
    assert seen[5]["content"] == "File created successfully at: /memories/user/tone.md"
    assert seen[6]["content"] == "Successfully deleted /memories/user/tone.md"
    assert seen[-1]["content"].splitlines()[1:] == [
        seen[-1]["content"].splitlines()[1].split("\t")[0] + "\t/memories",
        *[
            line
            for line in seen[-1]["content"].splitlines()[2:]
            if line.split("\t")[1]
            in (
                "/memories/project/",
                "/memories/project/MEMORY.md",
                "/memories/project/checks.md",
                "/memories/user/",
                "/memories/user/MEMORY.md",
            )
        ],
    ]
    assert sorted(p.name for p in project.glob("*.md")) == ["MEMORY.md", "checks.md"]
    checks = parse((project / "checks.md").read_text())
    assert checks.title == "Build"
    assert checks.body == "# Build\nRun `make check` before pushing.\nCI runs it too."
    assert (project / "MEMORY.md").read_text() == (
        "- [project_knowledge] Build — Run `make check` before pushing. (checks.md)\n"
    )
    assert (user_dir / "MEMORY.md").read_text() == ""
    assert [item.filename for item in Store(user_dir, Level.USER).trash()] == ["tone.md"]


def test_editing_what_it_wrote_under_the_tool_runner(
    fake_anthropic: FakeAnthropic, client: anthropic.Anthropic, tool: MemoryTool, project: Path
) -> None:
    """The reported friction: a plain file, then edits of its first sentence and at line 0."""
    note = "/memories/project/deploy.md"
    steps: list[dict[str, Any]] = [
        {"command": "create", "path": note, "file_text": "Deploys run from main. Ask first.\n"},
        {"command": "view", "path": note},
        # The derived summary repeats this sentence; the edit still finds it once.
        {
            "command": "str_replace",
            "path": note,
            "old_str": "Deploys run from main.",
            "new_str": "Deploys run from release branches.",
        },
        {"command": "insert", "path": note, "insert_line": 0, "insert_text": "# Deploys"},
        {"command": "view", "path": note},
    ]
    count = len(steps)
    seen: list[dict[str, Any]] = []
    fake_anthropic.enqueue(*[scripted(steps, seen)] * (count + 1))

    client.beta.messages.tool_runner(
        model=MODEL,
        max_tokens=256,
        tools=[tool],
        messages=[{"role": "user", "content": "Remember how we deploy."}],
    ).until_done()

    assert [r.get("is_error", False) for r in seen] == [False] * count, seen
    assert seen[1]["content"].splitlines()[1:] == [
        "     1\tDeploys run from main. Ask first.",
        "     2\t",
    ]
    assert seen[-1]["content"].splitlines()[1:] == [
        "     1\t# Deploys",
        "     2\tDeploys run from release branches. Ask first.",
        "     3\t",
    ]
    stored = parse((project / "deploy.md").read_text())
    assert (stored.title, stored.summary) == ("Deploys", "Deploys run from release branches.")


def test_async_memory_tool(workspace: Path, user_dir: Path) -> None:
    tool = AsyncMemoryTool(workspace=workspace, user_dir=user_dir)

    async def session() -> tuple[Any, Any]:
        created = await tool.call(
            {"command": "create", "path": "/memories/user/tone.md", "file_text": "Be terse."}
        )
        listing = await tool.call({"command": "view", "path": "/memories/user"})
        return created, listing

    created, listing = anyio.run(session)

    assert created == "File created successfully at: /memories/user/tone.md"
    assert listing.splitlines()[-1].endswith("\t/memories/user/tone.md")
    assert parse((user_dir / "tone.md").read_text()).body == "Be terse."


def test_workspace_is_discovered_like_the_cli(
    workspace: Path, user_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (workspace / "src" / "pkg").mkdir(parents=True)
    monkeypatch.chdir(workspace / "src" / "pkg")
    monkeypatch.setenv("MDMEM_USER_DIR", str(user_dir))

    tool = MemoryTool()

    assert tool.workspace == str(workspace)
    assert tool.project.path == str(workspace / ".PseudoClaude" / "memory")
    assert tool.user.path == str(user_dir)


# -- the example ---------------------------------------------------------------------


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location(
        "memory_tool_agent", ROOT / "examples" / "memory_tool_agent.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_example_does_nothing_at_import_and_needs_a_key(
    capsys: pytest.CaptureFixture[str],
) -> None:
    example = load_example()

    assert example.main(["hello"]) == 2
    assert "ANTHROPIC_API_KEY" in capsys.readouterr().err


def test_the_example_runs_against_the_api(
    fake_anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    workspace: Path,
    project: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    seen: list[dict[str, Any]] = []
    steps: list[dict[str, Any]] = [
        {"command": "create", "path": "/memories/project/tests.md", "file_text": "Run make test."}
    ]
    fake_anthropic.enqueue(scripted(steps, seen), scripted(steps, seen))

    status = load_example().main(["--workspace", str(workspace), "Tests run with make test"])

    assert status == 0
    assert capsys.readouterr().out.strip() == "I will remember that."
    assert fake_anthropic.requests[0].body["system"].startswith("Your memory tool has two stores")
    assert parse((project / "tests.md").read_text()).body == "Run make test."
