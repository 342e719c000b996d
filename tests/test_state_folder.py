"""mdmem's private state: its folders' modes whatever the umask, and which clone owns it."""

from __future__ import annotations

import os
import stat
import subprocess
import textwrap
from pathlib import Path

from conftest import PYTHON, python_env

UMASK_ZERO = textwrap.dedent(
    """
    import os, sys
    os.umask(0)
    from mdmem import Level, Store
    ws = sys.argv[1]
    project = Store(os.path.join(ws, ".PseudoClaude", "memory"), Level.PROJECT)
    user = Store(os.environ["MDMEM_USER_DIR"], Level.USER)
    for store, level in ((project, "project"), (user, "user")):
        done = store.apply([{"action": "create", "level": level, "type": "project_knowledge",
                             "title": "Kept", "content": "A fact."}])
        name = done.applied[0].filename
        store.apply([{"action": "delete", "level": level, "filename": name}])
        store.restore(name)
        store.search("fact")
    """
)


def test_no_folder_mdmem_makes_is_writable_by_others_under_umask_000(tmp_path: Path) -> None:
    """Issue 21: `~/.local/state` was made 0777 under umask 000."""
    home = tmp_path / "home"
    ws = tmp_path / "ws"
    (ws / ".git").mkdir(parents=True)
    env = python_env(HOME=str(home), MDMEM_USER_DIR=str(home / ".PseudoClaude" / "memory"))
    env.pop("MDMEM_STATE_DIR", None)
    env.pop("XDG_STATE_HOME", None)
    proc = subprocess.run(
        [PYTHON, "-c", UMASK_ZERO, str(ws)], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    state = home / ".local" / "state"
    for folder in (home / ".local", state, state / "mdmem"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    made = [p for p in state.rglob("*")]
    assert any(p.name == "trash" for p in made)
    loose = []
    for path in made:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir():
            assert mode == 0o700, (path, oct(mode))
        elif mode & 0o077:
            loose.append(f"{path.name} {mode:o}")
    assert loose == []
    # The stores themselves: never writable by others (their notes follow the umask's
    # read bits, for sharing through git).
    for root in (ws / ".PseudoClaude", ws / ".PseudoClaude" / "memory", home / ".PseudoClaude"):
        assert not stat.S_IMODE(root.stat().st_mode) & 0o022, root
    assert not os.listdir(tmp_path / "ws" / ".git")
