"""The resident prompt server: the same answer as the hook's own process, fresh, private.

Real processes: the hook as Claude Code runs it (``python -m mdmem hook
user-prompt-submit`` in the workspace), the server it starts, real notes edited
on disk between prompts. Whether a prompt was relayed is read from the hook's
own ``-X importtime`` (a relayed hook never imports the recall engine), not
from the server's word.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from builders import add_note, mdmem_process, project_store
from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.integrations import prompt_server

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the prompt server runs on Linux only"
)

NOTES = [
    ("Release deploys", "Deploy the release branch with make ship after the review."),
    ("Queue retries", "The queue worker retries a job three times, then parks it."),
    ("Lint settings", "The lint config is ruff with a line length of 100."),
]


def _workspace(root: Path, notes: list[tuple[str, str]] = NOTES) -> Path:
    (root / ".git").mkdir(parents=True)
    store = project_store(root)
    for title, body in notes:
        add_note(store, title, body)
    return root


def _env(**extra: str) -> dict[str, str]:
    # A loaded machine may not run the server within the default half second: the tests
    # that expect a prompt relayed wait longer (the one about a late server sets its own).
    return python_env(
        MDMEM_PROMPT_SERVER="on",
        MDMEM_PROMPT_SERVER_IDLE="60",
        MDMEM_PROMPT_SERVER_WAIT="10",
        **extra,
    )


def _hook(
    ws: Path, event: str, payload: dict[str, object], env: dict[str, str], *flags: str
) -> subprocess.CompletedProcess[str]:
    """The hook as Claude Code runs it: a new process in the workspace, JSON on stdin."""
    return mdmem_process(["hook", event], json.dumps(payload), cwd=ws, flags=flags, **env)


def _prompt(ws: Path, prompt: str, session: str, env: dict[str, str]) -> tuple[str, bool]:
    """One prompt's output, and whether the hook's process relayed it (it never imported
    the recall engine, which answering in its own process needs)."""
    payload = {"session_id": session, "cwd": str(ws), "prompt": prompt}
    done = _hook(ws, "user-prompt-submit", payload, env, "-X", "importtime")
    assert done.returncode == 0, done.stderr
    return done.stdout, "mdmem.recall.engine" not in done.stderr


def _alive(pid: int) -> bool:
    """Whether ``pid`` is a running prompt server (a killed one nobody reaped yet is a
    zombie, and a pid may be reused by another process)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z" and b"prompt_server_child" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def _server_pid() -> int | None:
    """The running server's pid, from its lock file."""
    folder = Path(prompt_server.folder())
    for lock in folder.glob("prompt-v*.lock") if folder.is_dir() else []:
        text = lock.read_text().strip()
        if text.isdigit() and _alive(int(text)):
            return int(text)
    return None


def _socket_file() -> Path:
    """The server's socket (named after the hooks' import path, not this process's)."""
    found = sorted(Path(prompt_server.folder()).glob("prompt-v*.sock"))
    return found[0] if found else Path(prompt_server.folder()) / "none.sock"


def _wait_for_server(env: dict[str, str]) -> int:
    """Until the server a prompt started answers (bounded)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        pid = _server_pid()
        if pid is not None and _socket_file().exists():
            return pid
        time.sleep(0.05)
    raise AssertionError("no prompt server started")


@pytest.fixture(autouse=True)
def _stop_servers():
    yield
    pid = _server_pid()
    if pid is not None:
        os.kill(pid, signal.SIGKILL)


def _warm(ws: Path, env: dict[str, str]) -> int:
    """A server started by a first prompt, and answering."""
    _prompt(ws, "nothing to find here at all", "warm-up", env)
    pid = _wait_for_server(env)
    for _ in range(100):
        if _prompt(ws, "nothing to find here at all", "warm-up", env)[1]:
            return pid
        time.sleep(0.05)
    raise AssertionError("the server never answered")


PROMPTS = [
    "how do we deploy the release branch?",
    "how do we deploy the release branch?",  # the same session: not shown twice
    "what does the queue worker do with a failed job?",
    "tell me a joke about penguins",
    "did we change the lint config before?",
    "",
]


def test_a_relayed_prompt_prints_what_the_hooks_own_process_prints(tmp_path: Path) -> None:
    relayed_ws = _workspace(tmp_path / "a")
    own_ws = _workspace(tmp_path / "b")
    env = _env()
    _warm(relayed_ws, env)
    off = dict(env, MDMEM_PROMPT_SERVER="off")
    for prompt in PROMPTS:
        served, relayed = _prompt(relayed_ws, prompt, "s1", env)
        own, _ = _prompt(own_ws, prompt, "s1", off)
        assert relayed
        assert served == own, prompt
    assert "make ship" in _prompt(relayed_ws, PROMPTS[0], "s2", env)[0]


def test_an_edit_just_before_a_prompt_is_seen_by_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    env = _env(MDMEM_WATCHER="off")
    _warm(ws, env)
    store = ws / ".PseudoClaude" / "memory"
    note = next(p for p in store.glob("*release-deploys*.md"))
    out, relayed = _prompt(ws, "how do we deploy the release branch?", "s1", env)
    assert relayed and "make ship" in out
    # In place, same size, within the same second: only the note's ctime tells.
    text = note.read_text()
    note.write_text(text.replace("make ship", "make sail"))
    out, relayed = _prompt(ws, "how do we deploy the release branch with make sail?", "s2", env)
    assert relayed and "make sail" in out and "make ship" not in out
    # Words no note held before: found only if the index itself was brought in step (a
    # candidate's own check cannot find a note that was not a candidate).
    queue = next(p for p in store.glob("*queue-retries*.md"))
    queue.write_text(queue.read_text().replace("queue worker", "zebra gazebo"))
    out, relayed = _prompt(ws, "what does the zebra gazebo do?", "s2b", env)
    assert relayed and "zebra gazebo" in out
    # Editor-style: a new file renamed over the note.
    tmp = note.with_name(".edit.tmp")
    tmp.write_text(note.read_text().replace("make sail", "make fly"))
    os.replace(tmp, note)
    out, relayed = _prompt(ws, "how do we deploy the release branch with make fly?", "s3", env)
    assert relayed and "make fly" in out
    # A note written by another process between two prompts.
    extra = Store(store, Level.PROJECT)
    extra.apply([{"action": "create", "level": "project", "type": "project_knowledge",
                  "title": "Penguin colony", "summary": "", "content": "The penguins nest "
                  "on the east ridge in winter."}])  # fmt: skip
    out, relayed = _prompt(ws, "where do the penguins nest in winter?", "s4", env)
    assert relayed and "east ridge" in out


def test_one_server_answers_each_hook_with_its_own_environment(tmp_path: Path) -> None:
    one = _workspace(tmp_path / "one", [("Deploy one", "Project one deploys with fabric.")])
    two = _workspace(tmp_path / "two", [("Deploy two", "Project two deploys with ansible.")])
    env = _env()
    pid = _warm(one, env)
    out, relayed = _prompt(one, "how does this project deploy, with fabric?", "s1", env)
    assert relayed and "fabric" in out and "ansible" not in out
    out, relayed = _prompt(two, "how does this project deploy, with ansible?", "s1", env)
    assert relayed and "ansible" in out and "fabric" not in out
    # CLAUDE_PROJECT_DIR names the workspace, whatever the cwd (as in the hook's own process).
    moved = dict(env, CLAUDE_PROJECT_DIR=str(two))
    payload = {"session_id": "s2", "cwd": str(one), "prompt": "deploys with ansible?"}
    assert "ansible" in _hook(one, "user-prompt-submit", payload, moved).stdout
    # A paused session gets nothing, through the server as in its own process.
    off = dict(env, MDMEM_DISABLE="1")
    assert _prompt(one, "how does this project deploy, with fabric?", "s3", off)[0] == ""
    assert _server_pid() == pid  # one server all along


def test_a_prompt_the_busy_server_did_not_accept_in_time_is_answered_once(
    tmp_path: Path,
) -> None:
    """The hook gives up waiting while its request sits, sent, in a stopped server's
    backlog; the server, going on, must not run it as well (it finds the hook gone when it
    says it accepted, or, a moment later, no go from it: the socket-pair test below)."""
    from mdmem.store import activity

    ws = _workspace(tmp_path / "ws")
    env = _env()
    pid = _warm(ws, env)
    os.kill(pid, signal.SIGSTOP)
    try:
        began = time.monotonic()
        impatient = dict(env, MDMEM_PROMPT_SERVER_WAIT="0.5")
        out, relayed = _prompt(ws, "how do we deploy the release branch?", "busy", impatient)
        waited = time.monotonic() - began
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not relayed and "make ship" in out  # answered by its own process
    assert waited >= 0.5
    # The server takes the abandoned request now, and then answers the next prompt.
    out, relayed = _prompt(ws, "what does the queue worker do with a failed job?", "after", env)
    assert relayed and "parks it" in out
    root = str(project_store(ws).root)
    recalls = [e for e in activity.read(root, "busy") if e.get("k") == "recall"]
    assert len(recalls) == 1, recalls


def test_a_killed_server_costs_nothing_and_a_new_one_starts(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    env = _env()
    pid = _warm(ws, env)
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    stamp = Path(prompt_server.folder()) / prompt_server.STARTED
    os.utime(stamp, (0, 0))  # the last start is long ago: the next prompt starts one
    out, relayed = _prompt(ws, "how do we deploy the release branch?", "s1", env)
    assert not relayed and "make ship" in out  # answered in its own process
    new = _wait_for_server(env)
    assert new != pid


def test_the_server_is_private_and_its_command_line_holds_no_memory(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    env = _env()
    pid = _warm(ws, env)
    _prompt(ws, "how do we deploy the release branch?", "s1", env)
    folder = Path(prompt_server.folder())
    assert folder.stat().st_mode & 0o777 == 0o700
    sock = _socket_file()
    assert sock.stat().st_mode & 0o777 == 0o600
    cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    assert b"deploy" not in cmdline and str(ws).encode() not in cmdline
    # A socket someone could write to is never used: the hook answers itself.
    os.chmod(sock, 0o666)
    out, relayed = _prompt(ws, "how do we deploy the release branch?", "s2", env)
    assert not relayed and "make ship" in out


def test_off_starts_nothing_and_an_idle_server_stops(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    off = dict(_env(), MDMEM_PROMPT_SERVER="off")
    _prompt(ws, "how do we deploy the release branch?", "s1", off)
    assert not Path(prompt_server.folder()).exists()
    env = dict(_env(), MDMEM_PROMPT_SERVER_IDLE="1")
    pid = _warm(ws, env)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if not _alive(pid):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the idle server did not stop")
    assert not _socket_file().exists()


def test_session_start_starts_the_server(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    env = _env()
    start = {"session_id": "s1", "cwd": str(ws), "source": "startup"}
    done = _hook(ws, "session-start", start, env)
    assert done.returncode == 0, done.stderr
    _wait_for_server(env)
    assert _prompt(ws, "how do we deploy the release branch?", "s1", env)[1]


# -- the server's side, over a real socket pair -------------------------------------------


def _request(path: list[str], args: list[str], text: str) -> bytes:
    env = [f"{k}={v}" for k, v in os.environ.items()]
    parts = ["\0".join(path), os.getcwd(), text, "\0".join(args), "\0".join(env)]
    return prompt_server._fields([p.encode() for p in parts])


class _Changed:
    def __init__(self, changed: bool) -> None:
        self.value = changed

    def changed(self) -> bool:
        return self.value

    def note_new(self) -> None:
        pass


def _serve_one(code: object, request: bytes, go: bytes | None) -> tuple[bool, bytes, list[str]]:
    """One connection to ``_answer`` over a socket pair: (its result, every byte it sent,
    the requests it ran)."""
    ran: list[str] = []

    def handler(args: list[str]) -> int:
        ran.append(" ".join(args))
        sys.stdout.write("answered\n")
        return 0

    server, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    result: list[bool] = []
    try:
        worker = threading.Thread(
            target=lambda: result.append(prompt_server._answer(server, "P", code, handler))  # type: ignore[arg-type]
        )
        worker.start()
        client.sendall(request)
        first = client.recv(1)
        if go is not None:
            client.sendall(go)
        else:
            client.close()
        worker.join(30)
        server.close()  # what the server's loop does after each connection
        rest = b""
        while go is not None and (chunk := client.recv(1 << 20)):
            rest += chunk
    finally:
        server.close()
        client.close()
    return result[0], first + rest, ran


def test_a_server_whose_code_changed_declines_and_stops() -> None:
    keep, reply, ran = _serve_one(_Changed(True), _request(["P"], ["hook", "x"], "{}"), None)
    assert reply == b"N" and not keep and ran == []


def test_another_import_path_is_declined() -> None:
    keep, reply, ran = _serve_one(_Changed(False), _request(["Q"], ["hook", "x"], "{}"), None)
    assert reply == b"N" and keep and ran == []


def test_a_hook_that_stopped_waiting_is_never_answered_twice() -> None:
    keep, reply, ran = _serve_one(_Changed(False), _request(["P"], ["index"], "{}"), None)
    assert reply == b"A" and keep and ran == []


def test_an_accepted_request_runs_once_and_its_output_comes_back() -> None:
    keep, reply, ran = _serve_one(_Changed(False), _request(["P"], ["index"], "{}"), b"G")
    assert keep and ran == ["index"]
    assert reply[:1] == b"A" and reply[1:5] == prompt_server.MAGIC and reply[5] == 0
    assert b"answered\n" in reply


def test_garbage_is_dropped_without_an_answer() -> None:
    for garbage in (b"", b"MDP1", b"XXXX\x05\x00\x00\x00", b"MDP1\x05\x00\x00\x00\xff\xff\xff\xff"):
        server, client = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        client.sendall(garbage)
        client.shutdown(socket.SHUT_WR)
        with contextlib.suppress(ConnectionError, ValueError):
            prompt_server._answer(server, "P", _Changed(False), lambda args: 0)  # type: ignore[arg-type]
        server.close()
        assert client.recv(16) == b""  # nothing was answered, nothing was run
        client.close()


def test_the_code_record_sees_a_module_file_change(tmp_path: Path) -> None:
    module = tmp_path / "mdmem_probe_module.py"
    module.write_text("X = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import mdmem_probe_module  # noqa: F401

        code = prompt_server._Code()
        assert not code.changed()
        module.write_text("X = 22\n")
        assert code.changed()
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mdmem_probe_module", None)


_REAP_PROBE = """
import os, subprocess, sys, time
from mdmem.integrations import prompt_server
child = subprocess.Popen([sys.executable, "-c", "pass"])
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    if open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
        break
    time.sleep(0.02)
else:
    raise SystemExit("the child did not end")
prompt_server._reap()
print("collected" if not os.path.exists(f"/proc/{child.pid}") else "zombie")
"""


def test_the_children_a_request_started_are_collected_when_they_end() -> None:
    """A hook may start a watcher or an embedder; the server, their parent, outlives them.
    (In a process of its own: collecting this test process's children would take other
    tests'.)"""
    done = subprocess.run(
        [PYTHON, "-c", _REAP_PROBE], env=python_env(), capture_output=True, text=True, timeout=60
    )
    assert done.stdout.strip() == "collected", done.stderr


@pytest.mark.parametrize("then", ["hang", "die"])
def test_an_accepted_prompt_without_an_answer_is_not_run_again_unless_the_server_died(
    then: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The hook's side against a server that accepts, takes the go, and then hangs (the
    prompt may still be answered: the hook prints nothing) or dies (it answers itself)."""
    from mdmem import _unixsock

    monkeypatch.setattr(prompt_server, "REPLY_SECONDS", 0.3)
    path = prompt_server._import_path()
    bound = _unixsock.bind(prompt_server.folder(), prompt_server._name(path))
    assert bound is not None
    listener, lock, _, _ = bound
    release = threading.Event()

    def fake() -> None:
        conn, _ = listener.accept()
        with conn:
            assert prompt_server._read_request(conn) is not None
            conn.sendall(b"A")
            assert conn.recv(1) == b"G"
            if then == "hang":
                release.wait(10)

    worker = threading.Thread(target=fake)
    worker.start()
    try:
        got = prompt_server._ask(path, ["hook", "user-prompt-submit"], "{}")
    finally:
        release.set()
        worker.join(10)
        listener.close()
        os.close(lock)
    if then == "hang":
        assert got is not None and got[:2] == (0, "") and "no answer" in got[2]
    else:
        assert got is None
