"""``python -m mdmem`` and the ``mdmem`` console script."""

from __future__ import annotations

import os
import sys

__all__ = ["main"]


def _command(args: list[str]) -> str | None:
    """The command of ``mdmem [globals] COMMAND ...`` (``hook``, ``add``...), if any."""
    i = 0
    while i < len(args):
        if args[i] in ("--workspace", "--user-dir"):
            i += 2
        elif args[i].startswith("-"):
            i += 1
        else:
            return args[i]
    return None


def _is_hook(args: list[str]) -> bool:
    """Whether the command is ``mdmem [globals] hook ...``."""
    return _command(args) == "hook"


def _end_quickly(status: int) -> None:
    """End this process, once it exits, without tearing the interpreter down.

    The per-prompt hook runs at every prompt; freeing its ~100 modules and their
    objects at exit costs a tenth of its run (of ``mdmem add``'s too). By then its
    files are written and closed (an open SQLite connection to a derived index keeps
    its WAL, which the next one reads; a note is durable before ``apply`` returns);
    only the standard streams are left to flush. Registered last,
    the handler runs first at exit; only for the process's own command line (never
    when ``main`` is called in-process, as tests do).
    """
    import atexit

    def end() -> None:
        for stream in (sys.stdout, sys.stderr):
            try:  # noqa: SIM105 (contextlib: ~4 ms of a relayed prompt)
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)

    atexit.register(end)


def main(argv: list[str] | None = None) -> int:
    """Run the mdmem command line; return its exit status."""
    args = sys.argv[1:] if argv is None else list(argv)
    # The prompt hook (every prompt) and `mdmem add` (a script's or a person's note):
    # processes that live ~50 ms and allocate little, the cyclic collector's passes over
    # the objects imports create are a tenth of their time, and find nothing.
    quick = argv is None and (
        args[-2:] == ["hook", "user-prompt-submit"] or _command(args) == "add"
    )
    if quick:
        import gc

        gc.disable()
    if os.environ.get("MDMEM_DISABLE") and _is_hook(args):
        from mdmem.integrations.session_control import disabled_by_env

        if disabled_by_env():  # every hook off: answer before the store code is imported
            return 0
    if quick and args[-2:] == ["hook", "user-prompt-submit"]:
        from mdmem.integrations.prompt_server import relay

        status = relay(args)  # a warm process of this user answers, when one runs
        if status is not None:
            _end_quickly(status)
            return status
    from mdmem.cli._fastpath import try_fast

    status = try_fast(args)
    if status is not None:
        if quick:
            _end_quickly(status)
        return status
    if quick:  # the full CLI handles it (an error): an ordinary process again
        import gc

        gc.enable()
    from mdmem.cli.main import run

    return run(args)


if __name__ == "__main__":
    sys.exit(main())
