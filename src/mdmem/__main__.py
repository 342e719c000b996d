"""``python -m mdmem`` and the ``mdmem`` console script."""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def _is_hook(args: list[str]) -> bool:
    """Whether the command is ``mdmem [globals] hook ...``."""
    i = 0
    while i < len(args):
        if args[i] in ("--workspace", "--user-dir"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return args[i] == "hook"
    return False


def main(argv: list[str] | None = None) -> int:
    """Run the mdmem command line; return its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    if os.environ.get("MDMEM_DISABLE") and _is_hook(args):
        from mdmem.integrations.session_control import disabled_by_env

        if disabled_by_env():  # every hook off: answer before the store code is imported
            return 0
    from mdmem.cli._fastpath import try_fast

    status = try_fast(args)
    if status is not None:
        return status
    from mdmem.cli.main import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
