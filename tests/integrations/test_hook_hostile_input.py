"""What a session or a repository feeds the hooks cannot stop memory, nor reach the agent.

Each test is the attack: a lone surrogate in a transcript (a JSON escape and a
raw byte), deeply nested hook stdin, a committed ``.PseudoClaude/mdmem.json`` of
nested brackets, and a transcript of 50,000+ lines that every hook would read
again from its start.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from builders import pending_turns
from mdmem import Manager, MdmemError, _spawn
from mdmem.extract.providers.offline import OfflineProvider
from mdmem.integrations import claude_code
from mdmem.integrations.claude_code import Cursors, hand_over, read_new
from mdmem.manager import review


def line(kind: str, uuid: str, text: str) -> bytes:
    message: dict[str, object] = {"role": kind, "content": text}
    if kind == "assistant":
        message = {"id": f"m-{uuid}", "role": kind, "content": [{"type": "text", "text": text}]}
    return (json.dumps({"type": kind, "uuid": uuid, "message": message}) + "\n").encode()


def stop(transcript: Path, ws: Path, session: str = "s1") -> dict[str, object]:
    return {"session_id": session, "transcript_path": str(transcript), "cwd": str(ws)}


def test_a_lone_surrogate_does_not_stop_memory_for_the_session(
    workspace: Path, tmp_path: Path
) -> None:
    transcript = tmp_path / "t.jsonl"
    raw_surrogate = line("assistant", "a1", "Noted: deploys go through fly RAW.").replace(
        b"RAW",
        b"\xed\xa0\x80",  # a surrogate as raw bytes: not UTF-8 at all
    )
    # json.dumps writes a lone surrogate as the escape "\ud800", as a transcript may hold it.
    transcript.write_bytes(line("user", "u1", "Remember: staging is \ud800 db-2.") + raw_surrogate)
    first = hand_over(stop(transcript, workspace, session="s\udfff1"), spawn=False)
    assert first is not None
    [turn] = pending_turns(workspace)
    assert turn[0] == ["user", "Remember: staging is \ufffd db-2."]
    assert "\ufffd" in turn[1][1] and "deploys go through fly" in turn[1][1]
    # The session goes on: the next turn is handed over, and only it.
    with transcript.open("ab") as f:
        f.write(line("user", "u2", "Remember: releases are on Thursdays \udbff."))
    assert hand_over(stop(transcript, workspace), spawn=False) is not None
    assert pending_turns(workspace)[-1] == [["user", "Remember: releases are on Thursdays \ufffd."]]


def test_update_async_never_raises_into_the_agent(workspace: Path) -> None:
    with Manager(workspace, provider=OfflineProvider()) as manager:
        no_role = manager.update_async([{"content": "no role"}])
        with pytest.raises(TypeError):
            no_role.result(timeout=10)
        lone = manager.update_async(
            [
                {"role": "user", "content": "Remember that the cache \ud800 is warm at 9."},
                {"role": "assistant", "content": [{"type": "text", "text": "ok \udfff"}]},
            ]
        )
        assert lone.result(timeout=60).provider == "offline"
    closed = manager.update_async([{"role": "user", "content": "Remember that x is 1."}])
    with pytest.raises(MdmemError):
        closed.result(timeout=10)


NESTED = "[" * 100_000


@pytest.mark.parametrize(
    "hook", ["stop", "pre-compact", "session-end", "session-start", "user-prompt-submit"]
)
def test_deeply_nested_hook_stdin_exits_zero_with_one_line(hook: str, workspace: Path) -> None:
    proc = subprocess.run(
        _spawn.argv("hook", hook),
        input=NESTED,
        capture_output=True,
        text=True,
        cwd=workspace,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.splitlines()) <= 1, proc.stderr


def test_a_committed_config_of_nested_brackets_disables_nothing(
    workspace: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = workspace / ".PseudoClaude" / "mdmem.json"
    config.parent.mkdir()
    config.write_text("[" * 2040 + "]" * 2040)  # 4 KB: under the size cap
    assert review.levels(str(workspace)) == frozenset()  # defaults
    [record] = [r for r in caplog.records if "mdmem.json" in r.getMessage()]
    assert "nested too deeply" in record.getMessage()
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(line("user", "u1", "Remember that the build runs `make all`."))
    assert hand_over(stop(transcript, workspace), spawn=False) is not None  # the hook works
    worker = subprocess.run(
        _spawn.argv("--workspace", str(workspace), "worker"),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "MDMEM_PROVIDER": "offline"},
        timeout=120,
    )
    assert worker.returncode == 0, worker.stderr
    assert pending_turns(workspace) == []  # and so does the worker
    assert any(p.name != "MEMORY.md" for p in (workspace / ".PseudoClaude" / "memory").iterdir())


LINES = 50_000


def test_a_long_transcript_is_handed_over_by_its_tail(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads: list[dict[str, int]] = []
    real = claude_code.read_new

    def counting(path: str, cursor: claude_code.Cursor | None = None, **kw: bool) -> object:
        stats: dict[str, int] = {}
        out = real(path, cursor, stats=stats, **kw)
        reads.append(stats)
        return out

    monkeypatch.setattr(claude_code, "read_new", counting)
    transcript = tmp_path / "long.jsonl"
    progress = b'{"type":"progress","data":{"step":"tool output streamed"}}\n'
    with transcript.open("wb") as f:
        f.write(line("user", "u0", "Remember that the API is versioned by date."))
        f.write(progress * LINES)
        f.write(line("assistant", "a0", "Noted: the API is versioned by date."))
    assert hand_over(stop(transcript, workspace), spawn=False) is not None
    assert reads[-1]["lines"] == LINES + 2 and reads[-1]["start"] == 0
    size = transcript.stat().st_size
    # The next turn: only the appended lines are read.
    with transcript.open("ab") as f:
        f.write(progress * 3 + line("user", "u1", "Remember that pagination uses cursors."))
    assert hand_over(stop(transcript, workspace), spawn=False) is not None
    assert reads[-1] == {"lines": 4, "start": size}
    assert pending_turns(workspace)[-1] == [["user", "Remember that pagination uses cursors."]]
    # Nothing new (SessionEnd after Stop): nothing read at all.
    assert hand_over(stop(transcript, workspace), spawn=False) is None
    assert reads[-1]["lines"] == 0
    # The file replaced by another (same path): read from its start, nothing handed twice.
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes(transcript.read_bytes().replace(b"streamed", b"STREAMED"))
    os.replace(copy, transcript)
    assert hand_over(stop(transcript, workspace), spawn=False) is None
    assert reads[-1]["start"] == 0 and reads[-1]["lines"] == LINES + 6


def test_a_cursor_never_fits_a_rewritten_transcript(tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_bytes(line("user", "u1", "one") + line("user", "u2", "two"))
    _, cursor = read_new(str(transcript))
    assert cursor.offset == transcript.stat().st_size
    with transcript.open("r+b") as f:  # rewritten in place, same inode, longer
        f.write(line("user", "u9", "nine") + line("user", "u2", "two") + line("user", "u3", "3"))
    stats: dict[str, int] = {}
    messages, _ = read_new(str(transcript), cursor, stats=stats)
    assert stats["start"] == 0 and [m.uuid for m in messages] == ["u9", "u2", "u3"]
    cursors = Cursors(str(tmp_path / "state"))
    assert cursors.get(str(transcript)) is None
    os.makedirs(tmp_path / "state")
    cursors.put(str(transcript), cursor)
    assert cursors.get(str(transcript)) == cursor
    assert not any("t.jsonl" in name for name in os.listdir(tmp_path / "state" / "claude-code"))
