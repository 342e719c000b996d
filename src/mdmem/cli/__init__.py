"""The ``mdmem`` command line: a thin layer over the public API; the top floor.

The frame (group, global options, error handling) is in ``_base``, the commands
in ``notes`` and ``agents``, assembled in ``main``; ``_fastpath`` answers the hot
commands without typer. May import every floor; only this package imports typer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: the fast path below this package avoids it
if TYPE_CHECKING:
    from mdmem.cli.main import app, run

__all__ = ["app", "run"]


def __getattr__(name: str) -> object:
    # Lazily: `mdmem index` and the hooks import `mdmem.cli._fastpath`, which
    # loads this file first; importing the typer app here would cost them ~60 ms.
    if name in __all__:
        from mdmem.cli import main as assembled

        return getattr(assembled, name)
    raise AttributeError(f"module 'mdmem.cli' has no attribute {name!r}")
