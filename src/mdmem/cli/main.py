"""The typer application, with every command registered in the order of ``mdmem --help``."""

from __future__ import annotations

# Importing registers the commands, in this order: the order of `mdmem --help`.
# isort: off
from mdmem.cli import notes  # noqa: F401
from mdmem.cli import recall  # noqa: F401
from mdmem.cli import agents  # noqa: F401
from mdmem.cli import stats  # noqa: F401
from mdmem.cli import truth  # noqa: F401
from mdmem.cli import review  # noqa: F401
from mdmem.cli import ui  # noqa: F401

# isort: on
from mdmem.cli._base import app, run

__all__ = ["app", "run"]
