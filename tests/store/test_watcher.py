"""The user's watcher (store/watcher.py): hand edits of a store above SWEEP_MAX seen by the
next CLI search, prompt hook and block. Real processes, real files, a real inotify watch and
a real Unix socket; ``MDMEM_SWEEP_MAX=4`` makes a small store "large"."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import PYTHON, python_env
from mdmem import Level, Store
from mdmem.store import _watched as checked
from mdmem.store import watcher

pytestmark = [
    pytest.mark.timeout(120),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's"),
]


def _notes(
    root: Path,
    count: int,
    kind: str = "project_knowledge",
    word: str = "release",
    level: Level = Level.PROJECT,
) -> None:
    Store(root, level).apply(
        [
            {
                "action": "create",
                "level": level.value,
                "type": kind,
                "filename": f"{kind}_{word}-step-{i:03d}.md",
                "title": f"{word.capitalize()} step {i:03d}",
                "content": f"Step {i:03d} of the {word} runbook.",
            }
            for i in range(count)
        ]
    )
    past = time.time() - 120
    for p in root.glob("*.md"):
        os.utime(p, (past, past))


@pytest.fixture
def env(workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The environment of the CLI (and of this process's own questions to the watcher),
    with the watcher on; whatever watcher it started is stopped at the end."""
    values = {
        "MDMEM_WORKSPACE": str(workspace),
        "MDMEM_USER_DIR": str(tmp_path / "user"),
        "MDMEM_STATE_DIR": str(tmp_path / "state"),
        "MDMEM_SEMANTIC": "off",
        "MDMEM_SWEEP_MAX": "4",
        watcher.ENV: "on",
        "MDMEM_WATCHER_IDLE": "120",
    }
    for name, value in values.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(watcher, "_started", False)  # this process may start one per test
    monkeypatch.setattr(watcher, "_failed_at", None)  # and ask the one it starts
    yield python_env(**values)
    _stop()
    deadline = time.monotonic() + 10
    while watcher.reap() and time.monotonic() < deadline:
        time.sleep(0.02)


def _pid() -> int | None:
    try:
        text = (Path(watcher.folder()) / "watch-v1.lock").read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except OSError:
        return False
    return state != "Z"


def _stop(sig: int = signal.SIGTERM) -> None:
    pid = _pid()
    if pid is None or not _alive(pid):
        return
    # Ours: the pid its lock file names, and the lock still held (the process is the server).
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)


def _process(env: dict[str, str], argv: list[str], stdin: str | None = None) -> str:
    """A process run to its end in the workspace: its output (it must succeed)."""
    done = subprocess.run(
        argv,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        cwd=env["MDMEM_WORKSPACE"],
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cli(env: dict[str, str], *args: str, stdin: str | None = None) -> str:
    return _process(env, [PYTHON, "-m", "mdmem", *args], stdin)


def _found(env: dict[str, str], query: str) -> list[str]:
    return [r["filename"] for r in json.loads(_cli(env, "search", query, "--json"))]


def _ready(root: Path) -> watcher.Answer:
    """Wait until the watcher runs and its stat pass of ``root`` is done."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        answers = watcher.ask([(str(root), time.time_ns())], timeout=10)
        if not isinstance(answers, str) and answers[0].kind != watcher.UNKNOWN:
            return answers[0]
        time.sleep(0.05)
    raise AssertionError(f"no watcher answered for {root}: {answers}")


def _watched(tmp_path: Path, *names: str) -> Path:
    """A folder of ``names`` (each holding its own name), watched, its stat pass done."""
    root = tmp_path / "bare"
    root.mkdir()
    for name in names:
        (root / name).write_text(name)
    assert watcher.start([str(root)])
    _ready(root)
    return root


def _in_place(path: Path, old: bytes, new: bytes) -> None:
    """What ``echo > note`` and VS Code do: the same file rewritten, the folder untouched;
    here the same size too, and the old mtime put back (only the ctime tells)."""
    data = path.read_bytes()
    edited = data.replace(old, new, 1)
    assert len(edited) == len(data) and edited != data
    st = path.stat()
    with open(path, "r+b") as f:
        f.write(edited)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def _rename_save(path: Path, old: bytes, new: bytes) -> None:
    """An editor's save: a temporary file written, then renamed over the note."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_bytes(path.read_bytes().replace(old, new, 1))
    os.replace(tmp, path)


def test_an_in_place_edit_and_a_rename_are_found_by_the_next_search(
    workspace: Path, env: dict[str, str]
) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    five = root / "project_knowledge_release-step-005.md"
    seven = root / "project_knowledge_release-step-007.md"
    # Without a watcher (the documented limit): an in-place edit above SWEEP_MAX waits.
    assert _found({**env, watcher.ENV: "off"}, "runbook")
    _in_place(five, b"Release step 005", b"Zeppelin stp 005")
    assert _found({**env, watcher.ENV: "off"}, "zeppelin") == []
    # A search of a large store that found no watcher started one, for the next search.
    assert _found(env, "runbook")
    _ready(root)
    assert _found(env, "zeppelin") == [five.name]  # in step: the edit before it, by ctime
    _in_place(five, b"Zeppelin stp 005", b"Aardvark stp 005")
    assert _found(env, "aardvark") == [five.name]  # after it: by its event
    assert _found(env, "zeppelin") == []
    _rename_save(seven, b"Release step 007", b"Glider step 007")
    assert _found(env, "glider") == [seven.name]
    (root / "project_knowledge_release-step-009.md").rename(root / "moved-by-hand.md")
    assert "moved-by-hand.md" in _found(env, "runbook step 009")


def test_the_next_prompt_hook_finds_an_in_place_edit(workspace: Path, env: dict[str, str]) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    assert _found(env, "runbook")
    _ready(root)
    _found(env, "runbook")  # in step with the watcher
    _in_place(
        root / "project_knowledge_release-step-003.md", b"Release step 003", b"Hovercraft   003"
    )
    payload = {
        "session_id": "s-1",
        "transcript_path": str(workspace / "t.jsonl"),
        "cwd": str(workspace),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "how do we deploy the hovercraft?",
    }
    out = _cli(env, "hook", "user-prompt-submit", stdin=json.dumps(payload))
    context = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    assert "project_knowledge_release-step-003.md" in context


def test_a_write_that_returned_before_the_question_is_always_in_the_answer(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # No barrier, no sleep: the watcher reads the kernel's queue after the request arrives,
    # and inotify queued the event during the write itself.
    root = tmp_path / "bare"
    root.mkdir()
    note = root / "a.md"
    note.write_text("x" * 64)
    assert watcher.start([str(root)])
    since = _ready(root).now
    # The stores it watches are not in its command line (any local user can read that).
    # Read once it answered: the parent's Popen returns when the exec closed its pipe,
    # which is before the kernel has set up the new program's environment to read.
    child = watcher._CHILDREN[-1]
    cmdline = Path(f"/proc/{child.pid}/cmdline").read_bytes()
    assert os.fsencode(str(root)) not in cmdline
    assert os.fsencode(str(root)) in Path(f"/proc/{child.pid}/environ").read_bytes()
    for i in range(200):
        with open(note, "r+b") as f:
            f.write(b"%08d" % i)
        # What the answer holds, not how soon: a loaded machine may take longer than the
        # half second a reader waits by default (and then asks nothing for a minute).
        answer = watcher.ask([(str(root), since)], timeout=10)
        assert not isinstance(answer, str)
        assert answer[0].kind == watcher.COMPLETE or answer[0].kind == watcher.IN_PLACE
        assert "a.md" in answer[0].names
        since = answer[0].now
    # Only notes are named, and a rename both names.
    (root / "scratch.txt").write_text("not a note")
    os.rename(note, root / "b.md")
    answer = watcher.ask([(str(root), since)], timeout=10)
    assert not isinstance(answer, str)
    assert {"a.md", "b.md"} <= answer[0].names and "scratch.txt" not in answer[0].names


def test_the_next_block_shows_an_in_place_edit_and_a_rename_without_a_stat_pass(
    workspace: Path, env: dict[str, str], listings: list[str]
) -> None:
    # 450 notes: the block is ranked from the catalog. A reference note the block does not
    # show becomes a correction in place; a shown note is renamed by hand.
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 400)
    _notes(root, 50, kind="reference_material", word="manual")
    first = _cli(env, "index")
    assert watcher.start([str(root)])
    _ready(root)
    # Until the watch is older than the clock's margin it vouches for edits in place only
    # (a rename before it began is not in its stat pass): then a rename means a stat pass.
    time.sleep(2.1)
    hidden = next(i for i in range(50) if f"manual-step-{i:03d}.md)" not in first)
    path = root / f"reference_material_manual-step-{hidden:03d}.md"
    _in_place(
        path,
        b"type: reference_material\ntitle: Manual",
        b"type: correction_feedback\ntitle: Wombt",
    )
    block = _cli(env, "index")
    assert f"- [correction_feedback] Wombt step {hidden:03d} " in block
    shown = next(i for i in range(400) if f"release-step-{i:03d}.md)" in block)
    os.rename(
        root / f"project_knowledge_release-step-{shown:03d}.md",
        root / f"project_knowledge_aaa-renamed-{shown:03d}.md",
    )
    block = _cli(env, "index")
    assert f"(project_knowledge_aaa-renamed-{shown:03d}.md)" in block
    assert f"release-step-{shown:03d}.md)" not in block
    # Brought up to date by the names the watcher gave, not by a stat pass: the rows say so.
    state = Store(root, Level.PROJECT).state
    import sqlite3

    with contextlib.closing(sqlite3.connect(state / "catalog.sqlite")) as db:
        (watched,) = db.execute("SELECT value FROM meta WHERE key = 'watched'").fetchone()
        (settled,) = db.execute("SELECT value FROM meta WHERE key = 'settled'").fetchone()
    assert watched.split(" ", 1)[1] == settled  # steps from the same stat pass
    # MEMORY.md as SessionStart reads it: no listing either, and up to date.
    _in_place(path, b"Wombt step", b"Koala step")
    listings.clear()
    text = Store(root, Level.PROJECT).load_index()
    assert listings == []
    assert f"Koala step {hidden:03d}" in text and f"aaa-renamed-{shown:03d}.md)" in text


def test_a_watcher_killed_leaves_readers_correct_and_is_started_again(
    workspace: Path, env: dict[str, str]
) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    assert _found(env, "runbook")
    _ready(root)
    _found(env, "runbook")
    first = _pid()
    _stop(signal.SIGKILL)  # its socket file is left behind, refusing connections
    assert watcher.ask([(str(root), time.time_ns())]) == "absent"
    five = root / "project_knowledge_release-step-005.md"
    _in_place(five, b"Release step 005", b"Zeppelin stp 005")
    six = root / "project_knowledge_release-step-006.md"
    _in_place(six, b"Release step 006", b"Narwhals stp 006")
    # Today's check: above SWEEP_MAX the edit waits, but what a query returns is its file's.
    found = json.loads(_cli(env, "search", "release step 005", "--json"))
    assert found[0]["filename"] == five.name and "Zeppelin" in found[0]["title"]
    # That search started a new watcher over the dead one's socket; once its stat pass is
    # done it names the edit made before it began, by ctime.
    _ready(root)
    assert _pid() != first
    assert _found(env, "narwhals") == [six.name]


def test_a_socket_of_another_user_or_open_to_others_is_refused(
    workspace: Path, env: dict[str, str]
) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    folder = Path(watcher.folder())
    folder.mkdir(parents=True, mode=0o700)
    path = folder / "watch-v1.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    try:
        os.chmod(path, 0o666)  # anyone could answer in its place
        assert watcher.ask([(str(root), 0)]) == "refused"
        assert _found(env, "runbook")  # the reader does its own check
        assert path.exists() and _pid() is None  # left alone, no watcher of ours started
        if os.geteuid() == 0:
            os.chmod(path, 0o600)
            os.chown(path, 65534, 65534)
            assert watcher.ask([(str(root), 0)]) == "refused"
            assert _found(env, "runbook")
            assert path.stat().st_uid == 65534
    finally:
        listener.close()


def test_garbage_on_the_socket_is_dropped_and_the_next_request_answered(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = _watched(tmp_path, "a.md")
    for junk in [b"", b"nonsense", watcher.MAGIC + (10**6).to_bytes(4, "little"), b"\0" * 9000]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(watcher.socket_path())
            with contextlib.suppress(OSError):
                s.sendall(junk)
                s.shutdown(socket.SHUT_WR)
                assert s.recv(16) == b""  # dropped, nothing answered
    assert _ready(root).kind != watcher.UNKNOWN


def test_after_an_overflow_the_watcher_vouches_only_by_its_new_stat_pass(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = _watched(tmp_path, "a.md", "b.md", "c.md")
    time.sleep(2.1)  # past the margin: an answer since now is COMPLETE
    before = watcher.ask([(str(root), time.time_ns())], timeout=10)
    assert not isinstance(before, str) and before[0].kind == watcher.COMPLETE
    since = before[0].now
    pid = _pid()
    assert pid is not None
    limit = int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    os.kill(pid, signal.SIGSTOP)  # the queue fills while it cannot read it
    try:
        for i in range(limit + 100):
            os.utime(root / ("a.md" if i % 2 else "b.md"))  # alternating: never merged
        with open(root / "c.md", "r+b") as f:
            f.write(b"C")  # an edit whose event the kernel dropped
    finally:
        os.kill(pid, signal.SIGCONT)
    deadline = time.monotonic() + 30
    while True:
        answer = watcher.ask([(str(root), since)], timeout=10)
        assert not isinstance(answer, str)
        if answer[0].kind != watcher.UNKNOWN or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    # Not COMPLETE (events were lost): the stat pass made again names the dropped edit.
    assert answer[0].kind == watcher.IN_PLACE
    assert "c.md" in answer[0].names


def test_session_start_starts_the_watcher(workspace: Path, env: dict[str, str]) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 6)
    user = Path(env["MDMEM_USER_DIR"])
    user.mkdir(parents=True)
    payload = {"session_id": "s-1", "cwd": str(workspace), "hook_event_name": "SessionStart"}
    assert _pid() is None
    _cli(env, "hook", "session-start", stdin=json.dumps(payload))
    assert _ready(root).kind != watcher.UNKNOWN
    assert _ready(user).kind != watcher.UNKNOWN


def _names(root: Path, since: int) -> frozenset[str]:
    answer = watcher.ask([(str(root), since)], timeout=10)
    assert not isinstance(answer, str) and answer[0].kind == watcher.COMPLETE, answer
    return answer[0].names


def test_a_note_linked_elsewhere_is_named_only_while_it_is(
    tmp_path: Path, env: dict[str, str]
) -> None:
    # A note with a second link can change without an event here: named in every answer
    # while it has one. mdmem's own create has one for a moment (files.create_new links
    # its temp to the note's name, then removes the temp): a watcher that read the create
    # in that moment named the note in every later answer, deleted or not, forever.
    root = _watched(tmp_path, "a.md")
    time.sleep(2.1)  # past the margin: an answer since now is COMPLETE
    start = time.time_ns()
    for name in ("gone.md", "kept.md"):  # create_new's steps, the watcher asked between
        temp = root / f".{name}.tmp"
        temp.write_text(name)
        os.link(temp, root / name)
        assert name in _names(root, time.time_ns())  # read while it had two links
        temp.unlink()
    (root / "gone.md").unlink()
    # A note hard-linked from outside the store, edited there, then that link removed.
    outside = tmp_path / "outside.md"
    outside.write_text("three")
    os.link(outside, root / "linked.md")
    assert "linked.md" in _names(root, time.time_ns())
    before_edit = time.time_ns()
    outside.write_text("THREE")  # no event in the store's folder
    assert "linked.md" in _names(root, before_edit)
    outside.unlink()
    # Never stale: whoever asks since before a change is told it.
    assert {"gone.md", "kept.md", "linked.md"} <= _names(root, start)
    assert "linked.md" in _names(root, before_edit)
    time.sleep(2.1)
    # Bounded: past the margin, none of them is named for a T after the last change.
    assert _names(root, time.time_ns()) == frozenset()
    assert {"gone.md", "kept.md", "linked.md"} <= _names(root, start)
    # The note's only link now: its edits make events, and are named as any other's.
    since = time.time_ns()
    (root / "linked.md").write_text("four")
    assert _names(root, since) == {"linked.md"}


# Runs ``mdmem ARGS`` in its own process, as the console script does, and writes how many
# times the command asked the watcher and how many of those waited for its answer.
_COUNTING = """
import json, os, sys
from mdmem.store import watcher
from mdmem.__main__ import main

counts = {"asks": 0, "waits": 0}
ask, reply = watcher.ask, watcher._reply

def counted_ask(*args, **kwargs):
    counts["asks"] += 1
    return ask(*args, **kwargs)

def counted_reply(*args, **kwargs):
    counts["waits"] += 1  # connected, the question sent: waiting for the answer
    return reply(*args, **kwargs)

watcher.ask, watcher._reply = counted_ask, counted_reply
status = main(sys.argv[1:])
with open(os.environ["COUNTS"], "w") as f:
    json.dump(counts, f)
sys.exit(status)
"""


def test_a_hung_watcher_costs_a_command_one_wait_and_it_checks_by_itself(
    workspace: Path, tmp_path: Path, env: dict[str, str]
) -> None:
    root = workspace / ".PseudoClaude" / "memory"
    user = Path(env["MDMEM_USER_DIR"])
    _notes(root, 12)
    _notes(user, 12, kind="user_preference", word="habit", level=Level.USER)
    assert _found(env, "runbook")
    _ready(root)
    _ready(user)
    time.sleep(2.1)  # past the margin: the watcher vouches for what it is asked
    _found(env, "runbook")  # in step with it
    script = tmp_path / "counting.py"
    script.write_text(_COUNTING)
    counts = tmp_path / "counts.json"

    def counted(*args: str, stdin: str | None = None) -> tuple[dict[str, int], str]:
        out = _process({**env, "COUNTS": str(counts)}, [PYTHON, str(script), *args], stdin)
        return json.loads(counts.read_text()), out

    payload = {
        "session_id": "s-1",
        "transcript_path": str(workspace / "t.jsonl"),
        "cwd": str(workspace),
        "hook_event_name": "UserPromptSubmit",
        "prompt": "how do we deploy the hovercraft?",
    }
    asked, _ = counted("hook", "user-prompt-submit", stdin=json.dumps(payload))
    assert asked["asks"] >= 2 and asked["waits"] == asked["asks"]  # each store, the block
    five = root / "project_knowledge_release-step-005.md"
    pid = _pid()
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)  # up, its socket accepting, but it answers nothing
    try:
        _rename_save(five, b"Release step 005", b"Hovercraft step 005")
        asked, out = counted("hook", "user-prompt-submit", stdin=json.dumps(payload))
        assert asked["asks"] >= 2 and asked["waits"] == 1
        # Its own check instead: an editor's save changes the folder, which it sees.
        assert five.name in json.loads(out)["hookSpecificOutput"]["additionalContext"]
        asked, out = counted("search", "hovercraft", "--json")
        assert asked["asks"] >= 2 and asked["waits"] == 1
        assert [r["filename"] for r in json.loads(out)] == [five.name]
    finally:
        os.kill(pid, signal.SIGCONT)


def test_after_a_checkout_rewrote_more_notes_than_it_names_the_next_block_sees_an_edit(
    workspace: Path, env: dict[str, str]
) -> None:
    # The block's last stat pass, then a checkout rewrites more notes than an answer may
    # name (MAX_NAMES), then the watcher starts: it can never vouch for that stat pass's
    # time. The block took that as "no watcher" and served its rows as they were (for up
    # to ten minutes): a hidden note made a correction by hand, the watcher up, unseen.
    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 300)  # the block shows these, ranked before every reference note
    _notes(root, watcher.MAX_NAMES + 100, kind="reference_material", word="manual")
    time.sleep(2.1)  # past the clock's margin: a row proves its note's bytes by its stat
    first = _cli({**env, watcher.ENV: "off"}, "index")  # the stat pass
    assert "reference_material_" not in first
    path = root / "reference_material_manual-step-007.md"
    # The checkout: every reference note rewritten with the same bytes (a new ctime);
    # no file created, deleted or renamed (the folder untouched).
    for p in root.glob("reference_material_*.md"):
        st = p.stat()
        os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert watcher.start([str(root)])
    _ready(root)
    _in_place(
        path,
        b"type: reference_material\ntitle: Manual",
        b"type: correction_feedback\ntitle: Wombt",
    )
    assert "- [correction_feedback] Wombt step 007 " in _cli(env, "index")
    # And from then on the watcher vouches for the rows: the next edit is seen too.
    _in_place(path, b"Wombt step", b"Koala step")
    assert "- [correction_feedback] Koala step 007 " in _cli(env, "index")


def test_a_note_mdmem_just_wrote_is_vouched_for_by_its_bytes_and_an_edit_still_seen(
    workspace: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A note mdmem wrote moments ago is too new for its stat to prove its bytes: the
    watcher names it, and its bytes (the row's hash) vouch for it, with no row rewritten.
    Bytes that differ are brought up to date, even behind a stat equal to the row's (an
    edit within the clock tick of mdmem's write)."""
    from mdmem.store import sync

    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    store = Store(root, Level.PROJECT)
    assert _found(env, "runbook")  # a large store's search starts the watcher
    _ready(root)
    store.load_index()
    refreshed: list[list[str]] = []
    real_refresh = sync.Coherence.refresh_named

    def refresh_named(self: sync.Coherence, names: list[str], *a: object, **k: object) -> bool:
        refreshed.append(sorted(names))
        return real_refresh(self, names, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(sync.Coherence, "refresh_named", refresh_named)
    name = "project_knowledge_fresh-write.md"
    op = {"action": "create", "level": "project", "type": "project_knowledge"}
    store.apply([{**op, "filename": name, "title": "Fresh write", "content": "Kept a week."}])
    assert store.catalog_current() == 13
    assert refreshed == []
    # The same size, other bytes, and (as within one tick) the stat its row records.
    path = root / name
    recorded = store._engine.recorded_stat(name)
    path.write_bytes(path.read_bytes().replace(b"Kept a week.", b"Kept a day!!"))
    real_followed = checked.followed
    monkeypatch.setattr(
        checked, "followed", lambda p: recorded if p == str(path) else real_followed(p)
    )
    assert store.catalog_current() == 13
    assert refreshed == [[name]]
    from mdmem.store import files

    row = store._engine.cat().get(name)
    assert row is not None and row.sha == files.content_hash(path.read_bytes())


def _told(store: Store) -> watcher.Answer | None:
    """The watcher's answer as the store's next reader asks it (since its stat pass, or
    since ``meta watched`` when that steps from the same pass)."""
    engine = store._engine
    with engine.guard:
        cat = engine.cat()
        settled = cat.meta("settled") or ""
        return engine._told(checked.since(cat, settled, float(settled.split(" ")[2])))


def test_the_names_of_many_writes_stop_piling_up_in_every_answer(
    workspace: Path, env: dict[str, str]
) -> None:
    """Until the next stat pass (up to ten minutes) every write adds its notes to each
    later answer, and an ``lstat`` each to each reader. An answer that names more than
    ``STEP_NAMES`` notes, each with the row its file says, moves ``meta watched`` on:
    the next answer names none, and an edit in place after that is still seen."""

    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 12)
    store = Store(root, Level.PROJECT)
    assert _found(env, "runbook")
    _ready(root)
    store.load_index()
    time.sleep(2.1)  # the watch older than the clock's margin: COMPLETE answers
    op = {"action": "create", "level": "project", "type": "project_knowledge"}

    def write(first: int, count: int) -> None:
        store.apply(
            [
                {**op, "filename": f"project_knowledge_w{i:03d}.md", "title": f"Wrote {i:03d}"}
                | {"content": f"Written {i:03d}."}
                for i in range(first, first + count)
            ]
        )

    write(0, 5)
    assert store.catalog_current() == 17
    told = _told(store)
    assert told is not None and told.kind == watcher.COMPLETE and len(told.names) >= 5
    write(5, checked.STEP_NAMES)
    assert store.catalog_current() == 17 + checked.STEP_NAMES
    told = _told(store)
    assert told is not None and len(told.names) > checked.STEP_NAMES  # within the margin
    time.sleep(watcher.MARGIN_NS / 1e9 + 0.1)
    assert store.catalog_current() == 17 + checked.STEP_NAMES
    told = _told(store)
    assert told is not None and told.kind == watcher.COMPLETE
    assert not {n for n in told.names if watcher.is_note(n)}  # stepped on: none named
    path = root / "project_knowledge_w003.md"
    path.write_bytes(path.read_bytes().replace(b"Written 003.", b"Rewrote 003"))
    assert store.catalog_current() == 17 + checked.STEP_NAMES
    from mdmem.store import files

    row = store._engine.cat().get(path.name)
    assert row is not None and row.sha == files.content_hash(path.read_bytes())


def test_a_block_the_watcher_vouches_for_checks_no_shown_note_and_still_sees_an_edit(
    workspace: Path, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large store's block comes from its catalog's rows. Unwatched, each line it shows
    is checked against its note (one ``stat``: an edit in place moves no key). When the
    watcher has compared every note changed since the stat pass with its row, those
    checks are its: none is made again, and an edit in place is still in the block."""
    from mdmem.store import _catalog_reads
    from mdmem.store.block import prompt_block

    root = workspace / ".PseudoClaude" / "memory"
    _notes(root, 450)
    store = Store(root, Level.PROJECT)
    store.load_index()
    checked: list[str] = []
    real = _catalog_reads._as_recorded

    def as_recorded(path: str, recorded: tuple[object, ...]) -> bool:
        checked.append(path)
        return real(path, recorded)

    monkeypatch.setattr(_catalog_reads, "_as_recorded", as_recorded)
    monkeypatch.setenv(watcher.ENV, "off")
    unwatched = prompt_block(store, None)
    assert len(checked) >= 150 and all(p.startswith(f"{root}{os.sep}") for p in checked)
    monkeypatch.setenv(watcher.ENV, "on")
    assert watcher.start([str(root)])
    _ready(root)
    checked.clear()
    assert prompt_block(store, None) == unwatched
    assert checked == []
    shown = next(i for i in range(450) if f"release-step-{i:03d}.md)" in unwatched)
    _in_place(
        root / f"project_knowledge_release-step-{shown:03d}.md",
        b"title: Release step",
        b"title: Rollout step",
    )
    block = prompt_block(store, None)
    assert f"Rollout step {shown:03d}" in block and checked == []
