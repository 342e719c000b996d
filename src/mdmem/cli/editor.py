"""Writing a note in $VISUAL or $EDITOR, for ``mdmem add`` and ``mdmem edit``.

What a person typed is never lost: a text that cannot be saved is offered
back for editing, or kept aside under the store's state folder (``rescued/``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, TypeVar

import typer

from mdmem._kinds import Level, NoteType
from mdmem.errors import InvalidNote, MdmemError

if TYPE_CHECKING:
    from collections.abc import Callable

    from mdmem.store.store import Store

from mdmem.cli._fastpath import add_note, redacted_line

_T = TypeVar("_T")


def interactive() -> bool:
    return sys.stdin.isatty()


def run_editor(text: str, filename: str) -> tuple[int, str]:
    """Open ``text`` in ``$VISUAL``/``$EDITOR`` (else vi) as ``filename``; (status, text after)."""
    import shlex
    import subprocess
    import tempfile

    command = shlex.split(os.environ.get("VISUAL") or os.environ.get("EDITOR") or "") or ["vi"]
    with tempfile.TemporaryDirectory(prefix="mdmem-") as folder:
        path = os.path.join(folder, filename)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        try:
            status = subprocess.run([*command, path], check=False).returncode
        except OSError as exc:
            raise OSError(
                f"cannot run the editor {command[0]!r} ({exc.strerror}); set $VISUAL or $EDITOR"
            ) from None
        with open(path, encoding="utf-8", errors="replace") as f:
            return status, f.read()


def ask_what_next() -> str:
    while True:
        answer = str(
            typer.prompt("[e]dit again, [k]eep the text aside, or [a]bort?", "e", err=True)
        )
        if answer.strip()[:1].lower() in ("e", "k", "a"):
            return answer.strip()[:1].lower()


def edit_until_saved(
    store: Store, filename: str, text: str, save: Callable[[str], _T]
) -> _T | None:
    """Edit ``text`` until ``save`` accepts it; None when left unchanged. Never loses typed text.

    When ``save`` finds the text invalid, say why and ask: edit again, keep the
    text aside under the store's state folder (``rescued/``), or abort. Without a terminal to ask
    on, or when saving fails otherwise, the text is kept aside.
    """
    from mdmem.manager.doctor import rescue

    original = text
    while True:
        status, text = run_editor(text, filename)
        if status != 0 or text == original:
            if text != original:
                typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            if status != 0:
                typer.echo(f"mdmem: error: the editor exited with status {status}", err=True)
                raise typer.Exit(1)
            return None
        try:
            return save(text)
        except InvalidNote as exc:
            typer.echo(f"mdmem: {exc}", err=True)
            choice = ask_what_next() if interactive() else "k"
            if choice == "e":
                continue
            if choice == "k":
                typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            typer.echo("mdmem: nothing was saved", err=True)
            raise typer.Exit(1) from None
        except MdmemError:
            typer.echo(f"mdmem: your text is kept in {rescue(store, filename, text)}", err=True)
            raise


DEFAULT_TYPE = {Level.PROJECT: NoteType.PROJECT_KNOWLEDGE, Level.USER: NoteType.USER_PREFERENCE}
TEMPLATE = """\
---
# A new {level} note. Fill in the title (the summary may stay empty: the first
# sentence is used), write the note below the closing '---', save and quit.
# Leave the file as it is to add nothing.
type: {type}
title: {title}
summary: {summary}
---

"""


def note_template(level: Level, kind: NoteType, title: str | None, summary: str | None) -> str:
    """What `mdmem add` opens in the editor; JSON strings are valid YAML scalars."""
    return TEMPLATE.format(
        level=level.value,
        type=kind.value,
        title=json.dumps(title, ensure_ascii=False) if title else "",
        summary=json.dumps(summary, ensure_ascii=False) if summary else "",
    )


def tell_redacted(*texts: str) -> None:
    """Say on stderr, in one line, what redaction takes out of a person's own text."""
    line = redacted_line(*texts)
    if line:
        typer.echo(line, err=True)


def create_note(store: Store, kind: NoteType, title: str, summary: str, body: str) -> str:
    """Create a note through the store; its file name. A rejected one is an InvalidNote."""
    return add_note(store, kind.value, title, summary, body)


# -- commands --------------------------------------------------------------------------
# Each is a few lines: parse arguments -> call the public API -> echo. New ones go last.
