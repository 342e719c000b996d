"""The hook command ``mdmem install`` writes: ``<python> -E -S -c BOOT``, without ``site``.

``-S`` skips the ``site`` module (a quarter of an empty interpreter's start);
the boot puts back the folders ``site`` adds, as the interpreter itself said
at install time (``_spawn.site_dirs``). These tests run the real commands in
real processes: the path the hook gets is the one a normal start gets, the
hook never imports ``site`` while its folders are there, a command whose
folders are gone still runs mdmem, and the full command line (typer) works
through it. Hooks an earlier install wrote with ``site`` are still checked and
replaced (``test_claude_code_install.py``).
"""

from __future__ import annotations

import importlib.util
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from mdmem import _spawn

#: What the boot runs last; the tests below swap it for a probe of the process.
_TAIL = "from mdmem.__main__ import main; sys.exit(main())"


def _installed() -> list[str]:
    if _spawn.console_script() is None:
        pytest.skip("no mdmem console script installed")
    words = shlex.split(_spawn.hook_command("hook", "user-prompt-submit"))
    if "-S" not in words:
        pytest.skip("this interpreter could not say which folders site adds")
    return words


def _probe(words: list[str], code: str, cwd: Path) -> str:
    python, boot = words[0], words[words.index("-c") + 1]
    assert boot.endswith(_TAIL)
    done = subprocess.run(
        [python, *words[1 : words.index("-c")], "-c", boot[: -len(_TAIL)] + code],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
        check=True,
    )
    return done.stdout


def test_the_hook_command_skips_site_and_gets_the_path_a_normal_start_gets(
    tmp_path: Path,
) -> None:
    words = _installed()
    assert words[:4] == [sys.executable, "-E", "-S", "-c"]
    assert words[-2:] == ["hook", "user-prompt-submit"]
    # The path a hook process gets, and the path `python -E` gets after `site`
    # (the current directory taken off, as the boot does): the same, in order.
    hooked = json.loads(_probe(words, "import json; print(json.dumps(sys.path))", tmp_path))
    normal = subprocess.run(
        [sys.executable, "-E", "-c", "import json, sys; print(json.dumps(sys.path[1:]))"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    expected = json.loads(normal.stdout)
    package = _spawn._package_folder()
    if package not in expected:  # found through a .pth file's import hook: put last
        expected.append(package)
    assert hooked == expected
    assert str(tmp_path) not in hooked and "" not in hooked
    # site is never imported while the folders are there, and mdmem is this one.
    code = "import mdmem; print('site' in sys.modules, mdmem.__spec__.origin)"
    seen, where = _probe(words, code, tmp_path).split(" ", 1)
    assert seen == "False"
    here = importlib.util.find_spec("mdmem")
    assert here is not None and here.origin is not None
    assert Path(where.strip()).resolve() == Path(here.origin).resolve()


def test_a_hook_command_whose_folders_are_gone_runs_site_and_still_runs_mdmem(
    tmp_path: Path,
) -> None:
    gone = str(tmp_path / "gone")
    boot = _spawn.hook_boot([gone], gone)
    # Run from a clone that shadows what the boot imports: the standard ones are used.
    markers = tmp_path / "markers"
    markers.mkdir()
    for name in ("os", "site", "sitecustomize", "mdmem"):
        (tmp_path / f"{name}.py").write_text(f"open({str(markers / name)!r}, 'w').close()\n")
    assert boot.endswith(_TAIL)
    probe = boot[: -len(_TAIL)] + "import mdmem; print('site' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-E", "-S", "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=60,
        check=True,
    )
    assert done.stdout.strip() == "True"
    # The whole command, as a settings file holds it: mdmem's full command line answers.
    command = shlex.join([sys.executable, "-E", "-S", "-c", boot, "--version"])
    ran = subprocess.run(
        ["/bin/sh", "-c", command], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert ran.returncode == 0 and ran.stdout.startswith("mdmem "), ran.stderr
    assert sorted(p.name for p in markers.iterdir()) == []


def test_the_full_command_line_runs_through_the_hook_command(tmp_path: Path) -> None:
    # Not the hook's fast path: typer and the rest of the command line, which `site`'s
    # folders hold; __main__ runs `site` before it (what .pth files do is done too).
    _installed()
    workspace = tmp_path / "ws"
    (workspace / ".git").mkdir(parents=True)
    command = _spawn.hook_command("--workspace", str(workspace), "add", "--title", "Boot")
    done = subprocess.run(
        ["/bin/sh", "-c", f"{command} 'Added through the hook command.'"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MDMEM_USER_DIR": str(tmp_path / "u")},
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    name = done.stdout.strip().splitlines()[-1]
    assert (workspace / ".PseudoClaude" / "memory" / name).is_file()
    listed = subprocess.run(
        ["/bin/sh", "-c", _spawn.hook_command("--workspace", str(workspace), "list")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MDMEM_USER_DIR": str(tmp_path / "u")},
        timeout=60,
    )
    assert listed.returncode == 0 and name in listed.stdout, listed.stderr


def test_an_interpreter_that_cannot_say_gets_the_command_with_site(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if _spawn.console_script() is None:
        pytest.skip("no mdmem console script installed")
    assert _spawn.site_dirs(str(Path("/bin/false"))) is None
    monkeypatch.setitem(_spawn._SITE_DIRS, sys.executable, None)
    words = shlex.split(_spawn.hook_command("hook", "stop"))
    assert words == [sys.executable, "-E", "-c", _spawn.HOOK_BOOT, "hook", "stop"]
    assert _spawn.hook_command("hook", "stop") == _spawn.earlier_hook_command("hook", "stop")
