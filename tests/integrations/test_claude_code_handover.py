"""No lost and no repeated turns: Stop, PreCompact and SessionEnd over resume, fork and compact.

The fixtures are one story in a repository, as Claude Code writes it: session A
(two turns, a sub-agent's sidechain, a meta line), resumed under a new session
id over the same history, forked into another, compacted (a boundary and a
summary that is not the person's words), and a last turn interrupted before
``/exit``, so no Stop hook ran for it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from builders import mdmem_process, pending_turns
from conftest import CLAUDE_CODE_FIXTURES, state
from mdmem.integrations import claude_code
from mdmem.integrations.claude_code import Ledger, read_transcript

FIXTURES = CLAUDE_CODE_FIXTURES
A = "5b1f0c1e-2d4a-4c8e-9a51-0f3f1a7e2b10"
B = "c7d2a9e4-6b13-4f0a-8e2d-93b1c4f5a6d7"
C = "e0a4b3c2-1d5f-4e6a-9b7c-2f8e1d3c4b5a"

SAID = [
    "Remember that the staging database is db-staging-2, not db-staging-1.",
    "Remember that migrations run with `make migrate`, never by hand.",
    "Remember that the cart service owns the `carts` table; other services read it "
    "through the API.",
    "Remember that feature flags live in `config/flags.yaml`.",
    "Remember that prices are integer cents everywhere.",
    "Remember that releases are cut on Thursdays, and start the changelog.",
]
NEVER = [
    "This session is being continued",  # the compaction summary
    "<command-name>",  # a meta line
    "Searching the Makefile",  # a sub-agent's sidechain
    "Request interrupted",  # Claude Code's own marker
]


def payload(event: str, transcript: Path, session: str, cwd: Path) -> dict[str, object]:
    extra: dict[str, object] = {
        "Stop": {"stop_hook_active": False},
        "PreCompact": {"trigger": "auto", "custom_instructions": ""},
        "SessionEnd": {"reason": "prompt_input_exit"},
    }[event]
    return {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(cwd),
        "hook_event_name": event,
        **extra,
    }


def test_each_message_is_handed_over_exactly_once(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CLAUDE_PROJECT_DIR", str(workspace))
    elsewhere = tmp_path / "worktree"  # a moved cwd: the session cd'ed out of the project
    (elsewhere / ".git").mkdir(parents=True)
    sub = workspace / "services" / "cart"
    sub.mkdir(parents=True)
    steps = [
        ("Stop", "session_a_turn1.jsonl", A, workspace),
        ("Stop", "session_a.jsonl", A, workspace),
        ("PreCompact", "session_a.jsonl", A, sub),  # nothing new: no turn
        ("Stop", "resumed.jsonl", B, workspace),  # --resume: a new id over old history
        ("Stop", "forked.jsonl", C, elsewhere),  # --fork-session, from another cwd
        ("Stop", "compacted.jsonl", A, sub),  # /compact, then a turn
        ("SessionEnd", "interrupted.jsonl", A, workspace),  # no Stop for the last turn
        ("SessionEnd", "interrupted.jsonl", A, workspace),  # a second end: nothing
        ("Stop", "resumed.jsonl", B, workspace),
    ]
    outcomes = [
        claude_code.hand_over(payload(event, FIXTURES / name, session, cwd), spawn=False)
        for event, name, session, cwd in steps
    ]

    assert [o is not None for o in outcomes] == [
        True,
        True,
        False,
        True,
        True,
        True,
        True,
        False,
        False,
    ]
    turns = pending_turns(workspace)
    user_texts = [text for turn in turns for role, text in turn if role == "user"]
    assert user_texts == SAID  # each once, in order
    everything = json.dumps(turns)
    for text in NEVER:
        assert text not in everything
    # The streamed first answer (a thinking line, then a text line) came over whole, once.
    assert everything.count("Noted: staging is db-staging-2.") == 1
    assert not (elsewhere / ".PseudoClaude").exists()  # the store is the project's


def test_a_message_streamed_across_two_handovers_sends_only_its_new_part(
    workspace: Path, tmp_path: Path
) -> None:
    lines = (FIXTURES / "session_a_turn1.jsonl").read_text().splitlines()
    transcript = tmp_path / "t.jsonl"
    transcript.write_text("\n".join(lines[:3]) + "\n")  # the answer's thinking line only
    first = payload("PreCompact", transcript, A, workspace)
    assert claude_code.hand_over(first, spawn=False) is not None
    transcript.write_text("\n".join(lines) + "\n")  # its text line arrives
    assert claude_code.hand_over(payload("Stop", transcript, A, workspace), spawn=False)
    [one, two] = pending_turns(workspace)
    assert [role for role, _ in one] == ["user"]  # thinking has no text for the prompt
    assert two == [["assistant", lines and json.loads(lines[3])["message"]["content"][0]["text"]]]


def test_the_ledger_is_bounded(tmp_path: Path) -> None:
    ledger = Ledger(str(tmp_path), keep=5)
    for i in range(30):
        ledger.add([f"u-{i}"], ledger.load())
    kept = ledger.load()
    assert len(kept) < 10
    assert kept[-1] == "u-29"
    ledger.add(["not a uuid\nwith a newline", "ok-1"], ledger.load())
    assert ledger.load()[-1] == "ok-1"


def test_the_transcript_is_read_within_limits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = (FIXTURES / "session_a.jsonl").read_text()
    link = tmp_path / "link.jsonl"
    real = tmp_path / "real.jsonl"
    real.write_text(source)
    link.symlink_to(real)
    with pytest.raises(OSError):
        read_transcript(str(link))  # never through a symlink
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read_transcript(str(fifo))  # and never blocks on a pipe
    # Only the tail is read: the cut first line is dropped, later ones kept.
    whole = read_transcript(str(real))
    monkeypatch.setattr(claude_code, "MAX_TRANSCRIPT_BYTES", len(source.encode()) // 2)
    tail = read_transcript(str(real))
    assert 0 < len(tail) < len(whole)
    assert tail[-1].uuid == whole[-1].uuid
    monkeypatch.setattr(claude_code, "MAX_TRANSCRIPT_BYTES", 1 << 30)
    monkeypatch.setattr(claude_code, "MAX_LINE_BYTES", 200)  # every answer line is longer
    roles = [m.role for m in read_transcript(str(real))]
    assert "assistant" not in roles


def test_pre_compact_and_session_end_hooks_print_nothing_and_hand_over(
    workspace: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "session.jsonl"
    shutil.copy(FIXTURES / "interrupted.jsonl", transcript)
    env = {"CLAUDE_PROJECT_DIR": str(workspace), "MDMEM_PROVIDER": "offline"}
    first = mdmem_process(
        ["hook", "pre-compact"], json.dumps(payload("PreCompact", transcript, A, workspace)), **env
    )
    end = mdmem_process(
        ["hook", "session-end"], json.dumps(payload("SessionEnd", transcript, A, workspace)), **env
    )
    for proc in (first, end):
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == "" and proc.stderr == ""
    # The worker may already have taken the turn: count what was journaled or done.
    ledger = Ledger(str(state(workspace / ".PseudoClaude" / "memory"))).load()
    assert len(ledger) == len(set(ledger))
    assert {m.uuid for m in read_transcript(str(transcript))} <= set(ledger)


@pytest.mark.parametrize("event", ["stop", "session-end"])
def test_a_hostile_transcript_leaves_a_small_clean_log(
    event: str, workspace: Path, tmp_path: Path
) -> None:
    noise = tmp_path / "noise.jsonl"
    noise.write_bytes(os.urandom(3_000_000) + b"\n\x1b[31mred\x07\n" * 5000)
    logs = state(workspace / ".PseudoClaude" / "memory") / "hooks.log"
    for path in (noise, "/dev/urandom"):
        body = {"transcript_path": str(path), "cwd": str(workspace), "session_id": "s"}
        proc = mdmem_process(["hook", event], json.dumps(body))
        assert proc.returncode == 0
        assert proc.stdout == ""
    text = logs.read_text(encoding="utf-8")
    assert len(text) < 5_000
    assert not any(ord(ch) < 32 and ch != "\n" for ch in text)
    assert "not a regular file" in text


def test_the_hook_log_is_rotated(workspace: Path) -> None:
    logs = state(workspace / ".PseudoClaude" / "memory") / "hooks.log"
    logs.parent.mkdir(parents=True, exist_ok=True)
    logs.write_bytes(b"x" * (claude_code.MAX_LOG_BYTES + 1))
    proc = mdmem_process(["hook", "stop"], json.dumps({"cwd": str(workspace)}))
    assert proc.returncode == 0
    assert logs.stat().st_size < 1_000
    assert (logs.parent / "hooks.log.1").stat().st_size > claude_code.MAX_LOG_BYTES


# -- properties ------------------------------------------------------------------------

STORY = [
    line
    for name in ("compacted.jsonl", "interrupted.jsonl")
    for line in (FIXTURES / name).read_text().splitlines()
]


@given(
    cuts=st.lists(st.integers(min_value=0, max_value=len(STORY)), min_size=1, max_size=6),
    copies=st.lists(st.booleans(), min_size=1, max_size=6),
)
def test_any_schedule_of_handovers_sends_each_line_once(
    cuts: list[int], copies: list[bool]
) -> None:
    """Handovers at any points of a growing transcript, some over a copy (a resume or a fork)."""
    unique = list(dict.fromkeys(STORY))  # the story repeats A's lines: once each here
    sent: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(tmp, keep=1000)
        for i, cut in enumerate([*sorted(cuts), len(unique)]):
            name = "copy" if copies[i % len(copies)] else "main"
            path = Path(tmp) / f"{name}-{i}.jsonl"
            path.write_text("".join(line + "\n" for line in unique[:cut]))
            known = ledger.load()
            fresh = claude_code.new_messages(read_transcript(str(path)), set(known))
            ledger.add([u for m in fresh for u in m.uuids], known)
            sent += [u for m in fresh for u in m.uuids]
        every = [u for m in read_transcript(str(path)) for u in m.uuids]
    assert sorted(sent) == sorted(every)  # nothing lost, nothing twice


@given(st.binary(max_size=4000))
def test_the_reader_takes_any_bytes(data: bytes) -> None:
    with tempfile.NamedTemporaryFile(suffix=".jsonl") as f:
        f.write(data)
        f.flush()
        for message in read_transcript(f.name):
            assert message.role in ("user", "assistant")
