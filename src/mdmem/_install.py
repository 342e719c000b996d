"""How mdmem is installed, and how to run this mdmem again: the words every hint uses.

mdmem is not on the package index yet, so no hint may install the name ``mdmem`` from it
(the name is unclaimed: following those words would install whatever someone
else uploads). Every hint installs from the repository with git instead;
:data:`REPOSITORY` is its placeholder, defined once in the README ("Use it"),
until the project has a public address of record. The plugin's launcher
(``plugins/mdmem/scripts/mdmem-run``) cannot import Python, so it repeats
:data:`INSTALL_LINE`; tests/test_release.py keeps every copy equal.

Imports only the standard library: the hooks, ``mdmem init`` and the launcher's
check use it.
"""

from __future__ import annotations

import os
import shlex
import sys

__all__ = [
    "FROM_CLONE",
    "INSTALL_HINT",
    "INSTALL_LINE",
    "REPOSITORY",
    "extra_hint",
    "mdmem_command",
]

#: The repository's git address, as the docs write it until it has a public one.
REPOSITORY = "<repository URL>"
#: What installs mdmem with what the Claude Code plugin needs (its MCP server: the ``mcp`` extra).
INSTALL_LINE = f"pipx install 'mdmem[mcp] @ git+{REPOSITORY}'"
#: The same from a clone of the repository, run at its top.
FROM_CLONE = "pipx install '.[mcp]'"
#: The one-line hint every "mdmem is not installed" message gives (the launcher's too).
INSTALL_HINT = f"{INSTALL_LINE} (or, in a clone of mdmem: {FROM_CLONE})"


def extra_hint(extra: str) -> str:
    """How to add one optional extra (``openai``, ``semantic``, ``ui``) to mdmem, in one line.

    pipx's ``--force`` reinstalls with the extras named, so the line keeps ``mcp``
    (what the Claude Code plugin needs) beside the one asked for.
    """
    if extra == "mcp":
        return INSTALL_HINT
    return (
        f"pipx install --force 'mdmem[mcp,{extra}] @ git+{REPOSITORY}' "
        f"(or, in a clone of mdmem: pip install '.[{extra}]')"
    )


def mdmem_command() -> str:
    """This mdmem as a shell command that works whatever ``PATH`` is: ``<abs python> -m mdmem``.

    The interpreter running now is the one whose environment holds this mdmem
    (a pipx venv, a project's .venv), so naming it by its absolute path runs the
    same mdmem from git, from a hook or from a shell without that venv on PATH.
    """
    return f"{shlex.quote(os.path.abspath(sys.executable))} -m mdmem"
