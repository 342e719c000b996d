"""The ``mdmem`` command line: a thin layer over the public API.

Each command parses its arguments, calls the library, and echoes the result.
The frame (group, global options, error handling) is in ``cli_base``; the
commands are in ``cli_notes`` and ``cli_agents``, registered on import here.
"""

from __future__ import annotations

# Importing registers the commands, in this order: the order of `mdmem --help`.
# isort: off
from mdmem import cli_notes  # noqa: F401
from mdmem import cli_agents  # noqa: F401

# isort: on
from mdmem.cli_base import app, run

__all__ = ["app", "run"]
