"""How mdmem is installed: the words every hint uses.

mdmem is not on the package index yet, so no hint may install the name ``mdmem`` from it
(the name is unclaimed: following those words would install whatever someone
else uploads). Every hint installs from the repository with git instead;
:data:`REPOSITORY` is its placeholder, defined once in the README ("Use it"),
until the project has a public address of record. The plugin's launcher
(``plugins/mdmem/scripts/mdmem-run``) cannot import Python, so it repeats
:data:`INSTALL_LINE`; tests/test_release.py keeps every copy equal.

Imports nothing: the hooks and the command line's error messages use it. How to
run this mdmem again (a hook, the git merge driver) is :mod:`mdmem._spawn`'s.
"""

from __future__ import annotations

__all__ = [
    "EXTRAS",
    "FROM_CLONE",
    "INSTALL_HINT",
    "INSTALL_LINE",
    "REPOSITORY",
    "extra_hint",
]

#: The repository's git address, as the docs write it until it has a public one.
REPOSITORY = "<repository URL>"
#: The extras every install line names: ``mcp`` (the Claude Code plugin's MCP server and
#: slash commands) and ``dictionary`` (CC-CEDICT, so a question in Chinese finds an English
#: note and the reverse: held-out gold through the default hooks 0.88 -> 0.94).
EXTRAS = ("mcp", "dictionary")
_NAMED = ",".join(EXTRAS)
#: What installs mdmem with what it is meant to run with (:data:`EXTRAS`).
INSTALL_LINE = f"pipx install 'mdmem[{_NAMED}] @ git+{REPOSITORY}'"
#: The same from a clone of the repository, run at its top.
FROM_CLONE = f"pipx install '.[{_NAMED}]'"
#: The one-line hint every "mdmem is not installed" message gives (the launcher's too).
INSTALL_HINT = f"{INSTALL_LINE} (or, in a clone of mdmem: {FROM_CLONE})"


def extra_hint(extra: str) -> str:
    """How to add one optional extra (``openai``, ``semantic``, ``ui``) to mdmem, in one line.

    pipx's ``--force`` reinstalls with the extras named, so the line keeps
    :data:`EXTRAS` beside the one asked for.
    """
    if extra in EXTRAS:
        return INSTALL_HINT
    return (
        f"pipx install --force 'mdmem[{_NAMED},{extra}] @ git+{REPOSITORY}' "
        f"(or, in a clone of mdmem: pip install '.[{extra}]')"
    )
