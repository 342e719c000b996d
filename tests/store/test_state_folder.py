"""mdmem's private state: its folders' modes whatever the umask, and which clone owns it."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import textwrap
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from builders import git
from conftest import CLAUDE_CODE_FIXTURES, PYTHON, python_env
from mdmem.cli import app
from mdmem.integrations import claude_code
from mdmem.store.paths import state_dir

FIXTURES_DIR = CLAUDE_CODE_FIXTURES

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


# -- a new clone at an old clone's path ---------------------------------------------


def test_a_folder_made_again_at_the_same_path_has_another_identity(tmp_path: Path) -> None:
    """ext4 hands a re-created folder its old inode number more often than not."""
    from mdmem.store.paths import anchor_identity

    seen = set()
    for _ in range(20):
        folder = tmp_path / "repo"
        (folder / "sub").mkdir(parents=True)
        seen.add(anchor_identity(str(folder))[0])
        shutil.rmtree(folder)
    assert len(seen) == 20


@pytest.mark.skipif(shutil.which("git") is None, reason="needs the git binary")
def test_a_new_clone_at_an_old_clones_path_inherits_no_trash_turns_or_history(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(claude_code, "start_worker", lambda *a, **k: None)
    git(tmp_path, "init", "-q", "--bare", "-b", "main", "origin.git")
    ws = tmp_path / "repo"
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "repo")
    runner = CliRunner()
    env = {"MDMEM_PROVIDER": "offline"}

    def mdmem(*args: str, input: str | None = None) -> Result:
        return runner.invoke(app, ["--workspace", str(ws), *args], input=input, env=env)

    assert mdmem("init").exit_code == 0
    assert mdmem("add", "--title", "Kept", "Stays in the repository.").exit_code == 0
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", "a note")
    git(ws, "push", "-q", "origin", "HEAD:main")
    # The old clone's private life: a note trashed, a turn waiting.
    secret = mdmem("add", "--title", "Old secret", "Only the old clone had this.").stdout.strip()
    assert mdmem("rm", secret).exit_code == 0
    transcript = tmp_path / "session.jsonl"
    transcript.write_text((FIXTURES_DIR / "simple.jsonl").read_text())
    payload = {"session_id": "s1", "transcript_path": str(transcript), "cwd": str(ws)}
    assert mdmem("hook", "stop", input=json.dumps(payload)).exit_code == 0
    old_state = state_dir(str(ws / ".PseudoClaude" / "memory"))
    assert os.listdir(os.path.join(old_state, "trash"))

    shutil.rmtree(ws)
    git(tmp_path, "clone", "-q", str(tmp_path / "origin.git"), "repo")

    def later(*args: str, input: str = "{}") -> subprocess.CompletedProcess[str]:
        """A command after the re-clone, as a person runs it: a new process."""
        code = "import sys; from mdmem.__main__ import main; sys.exit(main())"
        return subprocess.run(
            [PYTHON, "-c", code, "--workspace", str(ws), *args],
            input=input,
            capture_output=True,
            text=True,
            env=python_env(MDMEM_PROVIDER="offline"),
            timeout=60,
        )

    assert later("init").returncode == 0
    store = ws / ".PseudoClaude" / "memory"
    before = {p.name: p.read_bytes() for p in store.iterdir()}

    assert later("restore", secret).returncode == 1
    assert secret not in later("restore").stdout
    assert later("doctor", "--fix").returncode in (0, 1)
    assert "waiting" not in later("hook", "session-start").stdout
    assert later("worker", "--timeout", "10").returncode in (0, 1)

    assert {p.name: p.read_bytes() for p in store.iterdir()} == before
    new_state = subprocess.run(
        [
            PYTHON,
            "-c",
            "import sys; from mdmem.store.paths import state_dir; print(state_dir(sys.argv[1]))",
            str(store),
        ],
        capture_output=True,
        text=True,
        env=python_env(),
        check=True,
    ).stdout.strip()
    assert new_state != old_state
    assert os.listdir(os.path.join(old_state, "trash"))  # left where it was, untouched
    doctor = later("doctor")
    assert f"state of an earlier clone at this path exists: {old_state}" in doctor.stdout
    assert "1 in the trash" in doctor.stdout and "turns" in doctor.stdout
    # Offered, not applied: a person who knows it was this repository takes a note back.
    assert secret in later("restore", "--from-old-state").stdout
    taken = later("restore", secret, "--from-old-state")
    assert taken.returncode == 0, taken.stderr
    assert "Only the old clone had this." in (store / secret).read_text(encoding="utf-8")
