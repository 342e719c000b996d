"""Starting mdmem as a child process: always this installed mdmem, never the current directory's.

``python -m mdmem`` and ``python -c ...`` put the current directory first on
``sys.path``, and an empty entry in ``PYTHONPATH`` does the same even with
``-P``. A hook runs with a cloned repository as its current directory, so a
repository that commits ``mdmem/__init__.py`` (or ``typer.py``, ``yaml.py``,
any module mdmem imports) would run its code in every child mdmem started
that way. Every child of mdmem is therefore started here, and only here:

* :func:`argv` runs ``sys.executable`` (an absolute path) with ``-I``
  (isolated: no current directory, no ``PYTHON*`` variables, no user site) and
  hands the child this process's own import path, absolute entries only and
  never the current directory, so the child imports exactly the mdmem (and
  typer, yaml, ...) this process imported: an editable install, a user-site
  install and a test's ``PYTHONPATH`` all keep working.
* :func:`start` requires the child's working directory (the callers pass a
  private state folder), closes its stdin and starts it in its own session.
* :func:`hook_command` is the shell command a settings file names: this
  interpreter by absolute path, with ``-E`` (so ``PYTHONPATH`` cannot add the
  current directory either), running :data:`HOOK_BOOT`, where an ``mdmem``
  console script shows that mdmem is installed for it; without one, the
  :func:`argv` form. :func:`console_command` names the console script itself
  (git's merge driver, whose staleness check looks for that file).

Floor 0: nothing of mdmem is imported here.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: this module is on the hooks' path
if TYPE_CHECKING:
    import subprocess
    from typing import IO

__all__ = [
    "BOOT",
    "HOOK_BOOT",
    "argv",
    "console_command",
    "console_script",
    "hook_command",
    "import_path",
    "start",
]

#: What the child runs (``python -I -c BOOT N PATH... MODULE:FUNCTION ARG...``): the
#: import path is set before anything is imported, then ``FUNCTION(list_of_args)``
#: runs and its integer result is the exit status.
BOOT = (
    "import sys\n"
    "n = int(sys.argv[1])\n"
    "sys.path[:] = sys.argv[2:2 + n]\n"
    "target = sys.argv[2 + n]\n"
    "del sys.argv[1:3 + n]\n"
    "module, _, name = target.partition(':')\n"
    "result = getattr(__import__(module, fromlist=[name]), name)(sys.argv[1:])\n"
    "raise SystemExit(result if isinstance(result, int) else 0)\n"
)
#: The entry point of the ``mdmem`` command line.
CLI = "mdmem.__main__:main"
#: What a hook command runs (``<python> -E -c HOOK_BOOT ARGS``): the current directory
#: (``sys.path[0]`` under ``-c``) taken off the path before anything is imported, then
#: the installed mdmem's command line, as its console script runs it. Not the console
#: script itself: pip's wrapper imports ``re`` to rewrite ``argv[0]`` and puts its own
#: folder first on the path, one more ``stat`` for each import (~4 M instructions of the
#: per-prompt hook's ~105 M, ``benchmarks/bench_hook_ir.py``).
HOOK_BOOT = (
    'import sys; del sys.path[0]; sys.argv[0] = "mdmem"; '
    "from mdmem.__main__ import main; sys.exit(main())"
)


def _interpreter() -> str:
    if not sys.executable or not os.path.isabs(sys.executable):
        raise OSError("the Python interpreter's absolute path is unknown (sys.executable)")
    return sys.executable


def import_path() -> list[str]:
    """This process's ``sys.path`` as a child may use it: absolute entries, never the cwd.

    The folder that holds the imported ``mdmem`` package comes first, so the
    child imports the same mdmem even when it was found through an entry that
    is left out.
    """
    here = os.getcwd()
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out: list[str] = []
    for entry in [package, *sys.path]:
        if not entry or not os.path.isabs(entry):
            continue
        if os.path.normpath(entry) == os.path.normpath(here) and entry != package:
            continue  # the current directory: a cloned repository, in a hook
        if entry not in out:
            out.append(entry)
    return out


def argv(*args: str, entry: str = CLI) -> list[str]:
    """The command line of a child that runs ``entry`` (``module:function``) with ``args``.

    ``entry`` defaults to the ``mdmem`` command line, so ``argv("worker")`` is
    ``mdmem worker``.

    Raises:
        OSError: the interpreter's absolute path is unknown.
    """
    path = import_path()
    return [_interpreter(), "-I", "-c", BOOT, str(len(path)), *path, entry, *args]


def start(
    args: list[str],
    *,
    cwd: str,
    entry: str = CLI,
    stdout: int | IO[bytes] | None = None,
    env: dict[str, str] | None = None,
) -> subprocess.Popen[bytes]:
    """Start mdmem (``entry`` with ``args``) detached, in ``cwd``, its stdin closed.

    Its output goes to ``stdout`` (stderr too), else nowhere. It runs in a
    session of its own, so it outlives the caller and never gets its terminal.

    Raises:
        OSError: it could not be started.
    """
    import subprocess

    out = subprocess.DEVNULL if stdout is None else stdout
    return subprocess.Popen(
        argv(*args, entry=entry),
        stdin=subprocess.DEVNULL,
        stdout=out,
        stderr=out,
        cwd=cwd,
        env=env,
        start_new_session=True,
        close_fds=True,
    )


def console_script() -> str | None:
    """The absolute path of this installation's ``mdmem`` console script, or None.

    The script beside the interpreter (a virtual environment, pipx, uv tool),
    else the one the installed distribution records (a user-site install). Only
    a regular, executable file counts.
    """
    candidates = [os.path.join(os.path.dirname(_interpreter()), "mdmem")]
    try:
        from importlib import metadata

        dist = metadata.distribution("mdmem")
        for file in dist.files or []:
            if file.name == "mdmem" and file.parent.name in ("bin", "Scripts"):
                candidates.append(os.path.abspath(str(dist.locate_file(file))))
    except Exception:  # metadata of another install, or none: the first candidate only
        pass
    import stat

    for path in candidates:
        try:
            info = os.stat(path)
        except OSError:
            continue
        if stat.S_ISREG(info.st_mode) and os.access(path, os.X_OK):
            return path
    return None


def _is_python_script(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return False
    return head.startswith(b"#!") and b"python" in head.split(b"\n", 1)[0]


def hook_command(*args: str) -> str:
    """The shell command that runs this installed mdmem with ``args``, whatever the cwd.

    ``<python> -E -c HOOK_BOOT ARGS`` where this interpreter has an ``mdmem``
    console script (mdmem is installed for it, so it imports without
    ``PYTHONPATH``): nothing from the current directory is imported, and ``-E``
    keeps ``PYTHONPATH`` out. A console script that is not a Python script is
    named itself; with none (mdmem run from a checkout), the :func:`argv` form.

    Raises:
        OSError: the interpreter's absolute path is unknown.
    """
    script = console_script()
    if script is not None and _is_python_script(script):
        words = [_interpreter(), "-E", "-c", HOOK_BOOT, *args]
    elif script is not None:
        words = [script, *args]
    else:
        words = argv(*args)
    import shlex

    return shlex.join(words)


def console_command(*args: str) -> str:
    """:func:`hook_command` through the console script: ``<python> -E <script> ARGS``.

    What hooks were installed as before :data:`HOOK_BOOT`, and what git's merge
    driver names (its staleness check looks for the script's file).

    Raises:
        OSError: the interpreter's absolute path is unknown.
    """
    script = console_script()
    if script is not None and _is_python_script(script):
        words = [_interpreter(), "-E", script, *args]
    elif script is not None:
        words = [script, *args]
    else:
        words = argv(*args)
    import shlex

    return shlex.join(words)
