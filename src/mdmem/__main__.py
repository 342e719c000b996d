"""``python -m mdmem`` and the ``mdmem`` console script."""

from __future__ import annotations

import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """Run the mdmem command line; return its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    from mdmem.cli._fastpath import try_fast

    status = try_fast(args)
    if status is not None:
        return status
    from mdmem.cli.main import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
