"""Claude Code's own memory into mdmem: auto-memory notes, and ``CLAUDE.md`` sections on request.

Claude Code's auto memory keeps one Markdown file per memory in
``~/.claude/projects/<project>/memory/`` (``<project>`` is the workspace path with
every character that is not a letter or digit replaced by ``-``), each with
front matter ``name``, ``description`` and ``type`` (``user``, ``feedback``,
``project``, ``reference``), plus a ``MEMORY.md`` index that is not imported.
Each becomes a note of the matching type; ``user`` memories go to the user
store, the others to the project store. A memory whose text is already in
the target store (compared after normalising case and spaces) is skipped;
every write goes through :meth:`mdmem.Store.apply`, so secrets are redacted.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mdmem._kinds import Level, NoteType
from mdmem.store import files

if TYPE_CHECKING:
    from mdmem.store.store import Store

__all__ = ["TYPES", "Candidate", "auto_memory_dir", "candidates", "import_notes", "project_key"]

#: Claude Code's memory types onto mdmem's.
TYPES = {
    "user": NoteType.USER_PREFERENCE,
    "feedback": NoteType.CORRECTION_FEEDBACK,
    "project": NoteType.PROJECT_KNOWLEDGE,
    "reference": NoteType.REFERENCE_MATERIAL,
}
_MAX_FILE = 256 * 1024
_MAX_FILES = 2_000
_FENCE = re.compile(r"^-{3,}\s*$")
_HEADING2 = re.compile(r"^##[ \t]+(.+?)[ \t#]*$")


@dataclass(frozen=True)
class Candidate:
    """One memory that could become a note, and what importing does with it."""

    source: str
    level: Level
    type: NoteType
    title: str
    summary: str
    body: str
    outcome: str = "import"
    """``import``, ``duplicate``, or ``imported as <file name>`` once done."""


def project_key(workspace: str) -> str:
    """Claude Code's directory name for a project: its path, non-alphanumerics as ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", os.path.abspath(workspace))


def auto_memory_dir(workspace: str, claude_dir: str | None = None) -> str:
    """``<claude_dir>/projects/<project key>/memory`` (``claude_dir``: ``~/.claude``)."""
    base = claude_dir or os.path.join(os.path.expanduser("~"), ".claude")
    projects = os.path.join(base, "projects")
    strict = os.path.join(projects, project_key(workspace), "memory")
    slashes = os.path.join(projects, os.path.abspath(workspace).replace(os.sep, "-"), "memory")
    return slashes if not os.path.isdir(strict) and os.path.isdir(slashes) else strict


def _read(path: str) -> str | None:
    try:
        if not os.path.isfile(path) or os.path.islink(path):
            return None
        return files.read_bytes(path, _MAX_FILE).decode("utf-8")
    except (OSError, ValueError):
        return None


def _front_matter(text: str) -> tuple[dict[str, str], str]:
    """Flat ``key: value`` front matter and the body; no YAML needed for three keys."""
    lines = text.lstrip("\ufeff").split("\n")
    if not lines or not _FENCE.match(lines[0]):
        return {}, text
    for end in range(1, len(lines)):
        if _FENCE.match(lines[end]):
            fields = {}
            for line in lines[1:end]:
                key, sep, value = line.partition(":")
                if sep and key.strip() and not key.startswith((" ", "\t")):
                    fields[key.strip()] = value.strip().strip("'\"")
            return fields, "\n".join(lines[end + 1 :]).strip("\n")
    return {}, text


def _clean(text: str, limit: int) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[: limit - 1].rstrip() + "…"


def _auto_memories(directory: str) -> list[Candidate]:
    try:
        names = sorted(os.listdir(directory))[:_MAX_FILES]
    except OSError:
        return []
    found = []
    for name in names:
        if not name.endswith(".md") or name == "MEMORY.md" or name.startswith("."):
            continue
        text = _read(os.path.join(directory, name))
        if text is None:
            continue
        fields, body = _front_matter(text)
        if not body.strip():
            continue
        note_type = TYPES.get(fields.get("type", "").lower(), NoteType.PROJECT_KNOWLEDGE)
        level = Level.USER if note_type is NoteType.USER_PREFERENCE else Level.PROJECT
        title = fields.get("name") or name[: -len(".md")].replace("_", " ").replace("-", " ")
        found.append(
            Candidate(
                source=os.path.join(directory, name),
                level=level,
                type=note_type,
                title=_clean(title, 120),
                summary=_clean(fields.get("description", ""), 200),
                body=body.strip() + "\n",
            )
        )
    return found


def _claude_md_sections(workspace: str) -> list[Candidate]:
    found = []
    for rel in ("CLAUDE.md", os.path.join(".claude", "CLAUDE.md")):
        path = os.path.join(workspace, rel)
        text = _read(path)
        if text is None:
            continue
        title, lines = "", list[str]()
        sections: list[tuple[str, list[str]]] = []
        for line in text.split("\n"):
            match = _HEADING2.match(line)
            if match:
                if title:
                    sections.append((title, lines))
                title, lines = match.group(1), []
            elif title:
                lines.append(line)
        if title:
            sections.append((title, lines))
        for heading, body_lines in sections:
            body = "\n".join(body_lines).strip()
            if body:
                found.append(
                    Candidate(
                        source=f"{path}#{heading}",
                        level=Level.PROJECT,
                        type=NoteType.PROJECT_KNOWLEDGE,
                        title=_clean(heading, 120),
                        summary="",
                        body=body + "\n",
                    )
                )
    return found


def _normal(text: str) -> str:
    return " ".join(text.casefold().split())


def candidates(
    workspace: str,
    stores: dict[Level, Store],
    *,
    claude_dir: str | None = None,
    claude_md: bool = False,
) -> list[Candidate]:
    """What an import would do: each auto-memory note (and CLAUDE.md section), with its outcome."""
    from dataclasses import replace

    from mdmem.privacy import redact

    found = _auto_memories(auto_memory_dir(workspace, claude_dir))
    if claude_md:
        found += _claude_md_sections(workspace)
    known = {
        level: {_normal(note.body) for note in store.notes()} for level, store in stores.items()
    }
    result = []
    for candidate in found:
        # Compared as it would be stored: a note kept with a secret redacted is a duplicate.
        text = _normal(redact(candidate.body))
        if text in known[candidate.level]:
            result.append(replace(candidate, outcome="duplicate"))
            continue
        known[candidate.level].add(text)
        result.append(candidate)
    return result


def import_notes(items: list[Candidate], stores: dict[Level, Store]) -> list[Candidate]:
    """Create a note for each candidate to import; returns them with their outcome.

    Raises:
        StoreError, LockTimeout: a store cannot be written.
    """
    from dataclasses import replace

    done = []
    for item in items:
        if item.outcome != "import":
            done.append(item)
            continue
        operation = {
            "action": "create",
            "level": item.level.value,
            "type": item.type.value,
            "title": item.title,
            "summary": item.summary or None,
            "content": item.body,
        }
        result = stores[item.level].apply([operation])
        if result.applied:
            done.append(replace(item, outcome=f"imported as {result.applied[0].filename}"))
        else:
            reason = result.rejected[0].reason if result.rejected else "not applied"
            done.append(replace(item, outcome=f"rejected: {reason}"))
    return done
