"""The Manager: update_async to disk, through the real SDK, across kills and processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from builders import TURN, Scripted, note_names
from builders import create_op as _op
from conftest import PYTHON, python_env, state
from fake_anthropic import FakeAnthropic
from mdmem import Level, Manager, ProviderError, Store
from mdmem.extract.providers.base import ExtractionRequest
from mdmem.manager.manager import MAX_OPERATIONS


def create_op(title: str, level: str = "project", **extra: str) -> dict[str, object]:
    fields = {"content": f"{title}: the details.", "summary": f"About {title}.", **extra}
    return _op(title, level=level, **fields)


def all_files(*roots: Path) -> dict[str, bytes]:
    return {
        str(p): p.read_bytes() for r in roots if r.exists() for p in r.rglob("*") if p.is_file()
    }


# -- end to end through the real anthropic SDK -------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_end_to_end_through_the_sdk(
    workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("MDMEM_STREAM", "1" if stream else "0")
    fake_anthropic.enqueue(
        FakeAnthropic.tool_use(
            "record_memory_operations",
            {
                "operations": [
                    create_op("Parallel tests"),
                    create_op("Answer in Chinese", level="user"),
                ]
            },
        )
    )
    with Manager(workspace) as manager:
        assert manager.provider.name == "anthropic"
        assert manager.index == ""
        future = manager.update_async(TURN)
        assert manager.flush(timeout=30)
        result = future.result()
        assert [a.filename for a in result.project.applied] == [
            "project_knowledge_parallel-tests.md"
        ]
        assert [a.filename for a in result.user.applied] == ["user_preference_answer-in-chinese.md"]
        assert "## Project Memory" in manager.index and "Parallel tests" in manager.index
        assert "## User Memory" in manager.index and "Answer in Chinese" in manager.index
    project = workspace / ".PseudoClaude" / "memory"
    assert (
        (project / "project_knowledge_parallel-tests.md")
        .read_text()
        .endswith("Parallel tests: the details.\n")
    )
    assert "(project_knowledge_parallel-tests.md)" in (project / "MEMORY.md").read_text()
    user = Path(os.environ["MDMEM_USER_DIR"])
    assert "(user_preference_answer-in-chinese.md)" in (user / "MEMORY.md").read_text()

    [request] = fake_anthropic.requests
    body = request.body
    assert body["tool_choice"] == {"type": "tool", "name": "record_memory_operations"}
    assert body.get("stream", False) is stream
    assert "long-term memory of a coding agent" in str(body["system"])
    prompt = body["messages"][0]["content"]
    assert "role=user\nPlease make the tests faster." in prompt
    assert "role=assistant\nDone: the suite now runs" in prompt
    assert "toolu_1" not in prompt and "tool_result" not in prompt  # tools left out by default
    # The instructions, then the memory the session sees: each a cached block, in that order.
    system = body["system"]
    assert [b.get("cache_control") for b in system] == [{"type": "ephemeral"}] * 2
    assert "<existing_project_memory>\n(empty)" in system[1]["text"]
    assert "<existing_project_memory>" not in prompt
    assert request.headers["authorization"] == "Bearer test-key"


def test_tool_excerpts_when_configured(workspace: Path) -> None:
    provider = Scripted([])
    long_result = {"type": "tool_result", "tool_use_id": "t", "content": "y" * 100_000}
    with Manager(workspace, provider=provider, include_tools=True) as manager:
        manager.update_async([*TURN, {"role": "user", "content": [long_result]}]).result(10)
    prompt = provider.requests[0].prompt
    assert '[tool call Bash: {"command": "ls"}]' in prompt
    assert "[tool result: " in prompt and "characters cut" in prompt
    assert len(prompt) < 20_000


def test_text_answer_with_prose_is_parsed(
    workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    ops = json.dumps([create_op("From text")])
    fake_anthropic.enqueue(
        FakeAnthropic.text(f"Here you go:\n```json\n{ops}\n```\nHope it helps [1].")
    )
    with Manager(workspace) as manager:
        result = manager.update_async(TURN).result(30)
    assert [a.filename for a in result.project.applied] == ["project_knowledge_from-text.md"]


@pytest.mark.parametrize(
    ("status", "retryable"), [(401, False), (400, False), (529, True), (500, True), (429, True)]
)
def test_api_errors_become_provider_errors(
    workspace: Path,
    fake_anthropic: FakeAnthropic,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    retryable: bool,
) -> None:
    for key, value in fake_anthropic.env.items():
        monkeypatch.setenv(key, value)
    fake_anthropic.enqueue(*[FakeAnthropic.error(status, "nope") for _ in range(3)])
    with Manager(workspace, max_attempts=5, retry_delay=3600) as manager:
        future = manager.update_async(TURN)
        with pytest.raises(ProviderError) as info:
            future.result(30)
    assert info.value.retryable is retryable
    assert str(status) in str(info.value)
    journal = state(workspace / ".PseudoClaude" / "memory") / "turns"
    places = {p.parent.name for p in journal.rglob("*.json")}
    # A turn that may succeed later waits in the journal; one that cannot is set aside.
    assert places == ({"failed"} if not retryable else places - {"failed"})
    assert len(list(journal.rglob("*.json"))) == 1
    fake_anthropic.failures.clear()


# -- the journal: kill -9, exactly once, stale snapshots ---------------------------------

CHILD = textwrap.dedent(
    """
    import sys, time
    from mdmem import Manager
    manager = Manager(sys.argv[1])
    manager.update_async([{"role": "user", "content": "Remember that " + sys.argv[2]}])
    print("queued", flush=True)
    time.sleep(120)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_turn_of_a_killed_process_is_finished_by_the_next_manager(
    workspace: Path, fake_anthropic: FakeAnthropic
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.delay(60))  # the model never answers the child
    env = python_env(**fake_anthropic.env, NO_PROXY="127.0.0.1")
    child = subprocess.Popen(
        [PYTHON, "-c", CHILD, str(workspace), "builds use make."],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "queued"
        fake_anthropic.wait_for_requests(1, timeout=30)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        child.kill()
        child.wait()
        if child.stdout is not None:
            child.stdout.close()

    seen: list[str] = []

    def answer(request: dict[str, Any]) -> Any:
        seen.append(request["messages"][0]["content"])
        return FakeAnthropic.tool_use(
            "record_memory_operations", {"operations": [create_op("Make")]}
        )

    fake_anthropic.enqueue(answer)
    provider_env = {k: v for k, v in fake_anthropic.env.items()}
    os.environ.update(provider_env)
    try:
        with Manager(workspace) as manager:
            assert manager.flush(timeout=30)
            assert "project_knowledge_make.md" in manager.project.load_index()
    finally:
        for key in provider_env:
            os.environ.pop(key)
    assert len(seen) == 1 and "builds use make." in seen[0]
    journal = state(workspace / ".PseudoClaude" / "memory") / "turns"
    assert list(journal.rglob("*.json")) == []


ADOPTER = textwrap.dedent(
    """
    import sys
    from mdmem import Manager
    with Manager(sys.argv[1]) as manager:
        manager.flush(60)
    """
)


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_two_processes_process_each_pending_turn_exactly_once(
    workspace: Path, fake_anthropic: FakeAnthropic
) -> None:
    from mdmem.manager._journal import new_turn_id, put_pending

    root = state(workspace / ".PseudoClaude" / "memory") / "turns"
    markers = [f"marker-{i:02d}" for i in range(12)]
    for marker in markers:
        put_pending(str(root), {"id": new_turn_id(), "messages": [["user", marker]], "attempts": 0})
    counts: dict[str, int] = {}
    lock = threading.Lock()

    def answer(request: dict[str, Any]) -> Any:
        text = request["messages"][0]["content"].split("<turn>")[1]
        marker = next(m for m in markers if m in text)
        with lock:
            counts[marker] = counts.get(marker, 0) + 1
            n = counts[marker]
        time.sleep(0.05)
        return FakeAnthropic.tool_use(
            "record_memory_operations", {"operations": [create_op(f"{marker} seen {n}")]}
        )

    fake_anthropic.enqueue(*[answer] * (len(markers) * 2))
    env = python_env(**fake_anthropic.env, NO_PROXY="127.0.0.1")
    procs = [subprocess.Popen([PYTHON, "-c", ADOPTER, str(workspace)], env=env) for _ in range(2)]
    for proc in procs:
        assert proc.wait(timeout=100) == 0
    assert counts == {marker: 1 for marker in markers}
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    assert len(note_names(store)) == len(markers)
    assert list(root.rglob("*.json")) == []
    fake_anthropic.failures.clear()  # the unused half of the script


def test_second_queued_turn_sees_the_first_turns_note(workspace: Path) -> None:
    def second(request: ExtractionRequest) -> object:
        assert "project_knowledge_first-fact.md" in request.memory
        assert "project_knowledge_first-fact.md" in request.project_index
        return [create_op("Second fact")]

    provider = Scripted([create_op("First fact")], second)
    provider.gate = threading.Event()
    with Manager(workspace, provider=provider) as manager:
        first = manager.update_async(TURN)
        later = manager.update_async([{"role": "user", "content": "Another turn."}])
        provider.gate.set()  # both turns were queued before the first answer
        assert first.result(10).project.applied[0].filename == "project_knowledge_first-fact.md"
        assert later.result(10).project.applied[0].filename == "project_knowledge_second-fact.md"
    assert len(provider.requests) == 2


# -- hostile answers ---------------------------------------------------------------------


def traversal_ops() -> list[object]:
    names = ["../../evil.md", "/etc/passwd", "..", "a/b.md", "MEMORY.md", ".hidden.md", "x\x00.md"]
    ops: list[object] = [
        {"action": a, "level": "project", "filename": n, "content": "pwned"}
        for n in names
        for a in ("update", "delete")
    ]
    ops.append(create_op("../../../escape", slug="../../escape"))
    ops.append(create_op("Legit note"))
    return ops


HOSTILE: list[tuple[str, object, int]] = [
    ("json then prose", json.dumps([create_op("Kept")]) + "\nI also noticed [a thing].", 1),
    ("wrapped in an object", {"memories": [create_op("Kept")]}, 1),
    (
        "brackets in strings",
        'ok: [{"action": "create", "level": "project", "type": '
        '"project_knowledge", "title": "Uses ] and [", "content": "a ] b [ c"}]',
        1,
    ),
    ("path traversal", traversal_ops(), 2),
    (
        "wrong types",
        [
            {"action": "create", "level": ["x"], "title": 1},
            {"action": 7},
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": {"a": 1},
                "content": "x",
            },
            "a string",
            None,
            42,
            create_op("Fine"),
        ],
        1,
    ),
    ("ten thousand operations", [create_op(f"Op {i}") for i in range(10_000)], MAX_OPERATIONS),
]


@pytest.mark.parametrize(
    ("answer", "kept"), [(a, k) for _, a, k in HOSTILE], ids=[name for name, _, _ in HOSTILE]
)
def test_hostile_answers(workspace: Path, tmp_path: Path, answer: object, kept: int) -> None:
    before = {p for p in tmp_path.rglob("*") if "ws" not in p.parts and "home" not in p.parts}
    with Manager(workspace, provider=Scripted(answer)) as manager:
        result = manager.update_async(TURN).result(60)
    store = manager.project
    assert len(note_names(store)) == kept
    assert len(result.project.applied) == kept
    after = {p for p in tmp_path.rglob("*") if "ws" not in p.parts and "home" not in p.parts}
    assert after == before
    assert all(
        p.is_relative_to(store.root) or p.is_relative_to(workspace / ".git")
        for p in workspace.rglob("*")
        if p.is_file()
    )
    if answer is HOSTILE[-1][1]:
        assert len(result.rejected) == 10_000 - MAX_OPERATIONS


def test_garbage_twice_sets_the_turn_aside_with_the_raw_answer(workspace: Path) -> None:
    provider = Scripted("I cannot help with that.", "Still no JSON here, sorry.")
    with Manager(workspace, provider=provider) as manager:
        future = manager.update_async(TURN)
        with pytest.raises(ProviderError):
            future.result(10)
    assert len(provider.requests) == 2  # retried once
    failed = list(
        (state(workspace / ".PseudoClaude" / "memory") / "turns" / "failed").glob("*.json")
    )
    [record] = [json.loads(p.read_text()) for p in failed]
    assert record["errors"][-1]["raw_answer"] == "Still no JSON here, sorry."
    assert record["messages"][0] == ["user", "Please make the tests faster."]


def test_failing_turn_is_tried_a_few_times_then_set_aside(workspace: Path) -> None:
    errors = [ProviderError("overloaded", retryable=True) for _ in range(3)]
    provider = Scripted(*errors)
    with Manager(workspace, provider=provider, max_attempts=3, retry_delay=0.05) as manager:
        manager.update_async(TURN)
        deadline = time.monotonic() + 20
        failed_dir = state(workspace / ".PseudoClaude" / "memory") / "turns" / "failed"
        while not list(failed_dir.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
    [record] = [json.loads(p.read_text()) for p in failed_dir.glob("*.json")]
    assert record["attempts"] == 3 and len(record["errors"]) == 3
    assert len(provider.requests) == 3


def test_worker_survives_a_provider_bug(workspace: Path) -> None:
    provider = Scripted(RuntimeError("bug in provider"), [create_op("After the bug")])
    with Manager(workspace, provider=provider, retry_delay=3600) as manager:
        with pytest.raises(RuntimeError):
            manager.update_async(TURN).result(10)
        ok = manager.update_async([{"role": "user", "content": "next"}]).result(10)
    assert ok.project.applied[0].filename == "project_knowledge_after-the-bug.md"


# -- secrets and exits -------------------------------------------------------------------

SECRETS = {
    "anthropic": "sk-ant-api03-" + "A1b2C3d4E5" * 9 + "-xyzAA",
    "openai": "sk-proj-" + "Zz9Yy8Xx7W" * 5,
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "ghp_" + "a1B2c3D4e5" * 3 + "F6g7h8",
    "slack": "xoxb-1234567890-0987654321-" + "AbCdEfGhIjKlMnOpQrStUvWx",
    "google": "AIzaSy" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5pQ6",
    "private key": "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n-----END OPENSSH PRIVATE KEY-----",
    "password": "DB_PASSWORD=hunter2-correct-horse",
    "flag": "--password s3cr3t-flag-value",
    "bearer": "Authorization: Bearer abcdefghijklmnop1234567890",
    "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
    "dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "private block": "<private>my home address is 12 Elm St</private>",
}
NEEDLES = {
    "anthropic": "A1b2C3d4E5A1b2",
    "openai": "Zz9Yy8Xx7W",
    "aws": "AKIAIOSFODNN7EXAMPLE",
    "github": "a1B2c3D4e5a1",
    "slack": "AbCdEfGhIjKl",
    "google": "A1b2C3d4E5f6G7",
    "private key": "b3BlbnNzaC1rZXktdjEAAAAABG5vbmU",
    "password": "hunter2-correct-horse",
    "flag": "s3cr3t-flag-value",
    "bearer": "abcdefghijklmnop1234567890",
    "jwt": "dozjgNryP4J3jVmNHl0w5N",
    "private block": "12 Elm St",
}


def test_secrets_never_reach_disk(workspace: Path) -> None:
    text = "\n".join(f"Remember that the {kind} is {secret}" for kind, secret in SECRETS.items())

    def echo(request: ExtractionRequest) -> object:
        # A careless model that copies the turn, secrets and all, into notes.
        return [
            create_op("Everything", content=request.prompt),
            create_op("Mine", level="user", content=request.prompt, summary=request.prompt[-200:]),
        ]

    provider = Scripted(echo)
    provider.gate = threading.Event()
    with Manager(workspace, provider=provider) as manager:
        future = manager.update_async([{"role": "user", "content": text}])
        # the turn waits in the journal
        journal_now = all_files(manager.project.root, state(manager.project.root))
        provider.gate.set()
        result = future.result(10)
    assert result.project.applied and result.user.applied
    assert any("turns" in name for name in journal_now)
    roots = (manager.project.root, manager.user.root)
    files = {**journal_now, **all_files(*roots, *map(state, roots))}
    for kind, needle in NEEDLES.items():
        leaks = [name for name, data in files.items() if needle.encode() in data]
        assert not leaks, f"{kind} secret found in {leaks}"
    assert b"[REDACTED:" in b"".join(files.values())
    for secret in SECRETS.values():
        assert secret not in provider.requests[0].prompt


EXITER = textwrap.dedent(
    """
    import sys
    from mdmem import Manager
    manager = Manager(sys.argv[1], drain_timeout=float(sys.argv[2]))
    text = "Remember that releases are cut on Fridays."
    manager.update_async([{"role": "user", "content": text}])
    # no flush, no close: the interpreter exits right away
    """
)


def test_exit_right_after_update_async_drains_the_turn(workspace: Path) -> None:
    env = python_env(MDMEM_PROVIDER="offline")
    subprocess.run([PYTHON, "-c", EXITER, str(workspace), "10"], env=env, check=True, timeout=60)
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    assert "Fridays" in store.load_index()


@pytest.mark.slow
@pytest.mark.timeout(60)
def test_exit_with_a_slow_model_leaves_the_turn_for_next_start(
    workspace: Path, fake_anthropic: FakeAnthropic, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_anthropic.enqueue(FakeAnthropic.delay(30))
    env = python_env(**fake_anthropic.env, NO_PROXY="127.0.0.1")
    started = time.monotonic()
    subprocess.run([PYTHON, "-c", EXITER, str(workspace), "0.5"], env=env, check=True, timeout=50)
    assert time.monotonic() - started < 25  # bounded drain, not the model's 30 s
    journal = state(workspace / ".PseudoClaude" / "memory") / "turns"
    assert len(list(journal.rglob("*.json"))) == 1
    with Manager(workspace, provider=Scripted([create_op("Fridays")])) as manager:
        assert manager.flush(10)
        assert "fridays" in manager.project.load_index()


def test_update_async_returns_before_the_model_answers(workspace: Path) -> None:
    provider = Scripted([])
    provider.gate = threading.Event()
    with Manager(workspace, provider=provider) as manager:
        future = manager.update_async(TURN)
        assert not future.done()
        assert manager.flush(timeout=0.05) is False
        provider.gate.set()
        assert manager.flush(timeout=10) is True
        assert future.result().project.applied == ()


def test_empty_turn_is_done_at_once(workspace: Path) -> None:
    with Manager(workspace, provider=Scripted()) as manager:
        future = manager.update_async([{"role": "user", "content": [{"type": "image"}]}])
        assert future.done() and future.result().project.applied == ()


def test_closed_manager_refuses_turns(workspace: Path) -> None:
    manager = Manager(workspace, provider=Scripted())
    manager.close()
    from mdmem import MdmemError

    future = manager.update_async(TURN)  # never raises into the agent: the future fails
    with pytest.raises(MdmemError):
        future.result(timeout=10)


def test_messages_may_be_objects(workspace: Path) -> None:
    class Msg:
        def __init__(self, role: str, content: object) -> None:
            self.role, self.content = role, content

    class Block:
        type = "text"
        text = "Remember that objects work too."

    provider = Scripted([])
    with Manager(workspace, provider=provider) as manager:
        manager.update_async([Msg("user", [Block()]), Msg("assistant", "ok")]).result(10)
    assert (
        "role=user\nRemember that objects work too.\nrole=assistant\nok\n"
        in provider.requests[0].prompt
    )


def test_index_at_start_and_refresh(workspace: Path) -> None:
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply([create_op("Existing")])
    manager = Manager(workspace, provider=Scripted())
    try:
        assert "Existing" in manager.index
        store.apply([create_op("Added elsewhere")])
        assert "Added elsewhere" not in manager.index
        assert "Added elsewhere" in manager.refresh_index()
        assert "Added elsewhere" in manager.index
    finally:
        manager.close()


Answer = Callable[[ExtractionRequest], object]
