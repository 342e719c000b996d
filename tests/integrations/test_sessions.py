"""Session records through the real hooks: timeline, search --sessions, prune, the bounds.

The transcript is one a developer would recognise: a request with a pasted key,
thinking, an Edit and a Bash tool call whose inputs carry a secret, tool results
full of output and secrets, and the assistant saying the tests pass. What must
reach the record is the ask, the file, the command (redacted) and the outcome;
what must reach no file mdmem writes is any secret and any tool output.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conftest import PYTHON, python_env, state
from fake_anthropic import FakeAnthropic
from mdmem.extract.activity import is_test_command, observe, outcome_of
from mdmem.integrations import claude_code
from mdmem.store import sessions as records

A = "0d9a7c52-1e0b-4f7e-b2c4-8d1f3a6e5b70"
B = "7e3c1b9d-5a2f-4c6e-9d8b-1f0a2e4c6d81"
KEY = "sk-ant-api03-" + "Zq7" * 30  # an Anthropic-style key, in a prompt and a command
AWS = "AKIA" + "Q7ZL3XKD9WPM2RTV"
OUTPUT = "OUTPUT-MARKER-4411"  # only ever in tool results
NEVER = [KEY, AWS, OUTPUT, "hunter2-password-value", "THINKING-MARKER-9"]


class Transcript:
    """Writes a transcript as Claude Code does: one JSON object a line, uuids chained."""

    def __init__(self, path: Path, session: str, cwd: Path) -> None:
        self.path, self.session, self.cwd = path, session, cwd
        self.n = 0
        self.lines: list[dict[str, object]] = []
        self.last: str | None = None

    def _line(self, kind: str, message: dict[str, object], **extra: object) -> str:
        self.n += 1
        uuid = f"{self.session[:8]}-line-{self.n:06d}"
        self.lines.append(
            {
                "parentUuid": self.last,
                "isSidechain": False,
                "userType": "external",
                "cwd": str(self.cwd),
                "sessionId": self.session,
                "version": "2.1.240",
                "gitBranch": "fix-billing-retry",
                "type": kind,
                "message": message,
                "uuid": uuid,
                "timestamp": f"2026-11-30T09:{self.n // 60 % 60:02d}:{self.n % 60:02d}.000Z",
                **extra,
            }
        )
        self.last = uuid
        return uuid

    def user(self, text: str) -> None:
        self._line("user", {"role": "user", "content": text})

    def assistant(self, *blocks: dict[str, object]) -> None:
        self.n += 0
        self._line(
            "assistant",
            {
                "id": f"msg_{self.session[:8]}_{self.n:06d}",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": list(blocks),
            },
        )

    def tool(self, name: str, tool_input: dict[str, object], result: str) -> None:
        use_id = f"toolu_{self.n:06d}"
        self.assistant({"type": "tool_use", "id": use_id, "name": name, "input": tool_input})
        self._line(
            "user",
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": use_id, "content": result}],
            },
            toolUseResult={"stdout": result},
        )

    def write(self) -> Path:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("".join(json.dumps(line) + "\n" for line in self.lines))
        return self.path


def billing_session(path: Path, session: str, ws: Path) -> Transcript:
    t = Transcript(path, session, ws)
    t.user(
        "The billing retry charges customers twice when the gateway times out. Fix it; "
        f"the sandbox key is {KEY} if you need it."
    )
    t.assistant(
        {"type": "thinking", "thinking": "THINKING-MARKER-9 look at retry", "signature": "x"}
    )
    t.assistant({"type": "text", "text": "Looking at the retry loop."})
    t.tool(
        "Edit",
        {
            "file_path": str(ws / "billing" / "retry.py"),
            "old_string": "for attempt in range(3):",
            "new_string": "for attempt in range(3):  # idempotency key hunter2-password-value",
        },
        f"The file billing/retry.py has been updated. {OUTPUT} {AWS}",
    )
    t.tool(
        "Bash",
        {"command": f"ANTHROPIC_API_KEY={KEY} pytest tests/test_billing.py -q"},
        f"12 passed in 0.4s {OUTPUT} password=hunter2-password-value",
    )
    t.assistant({"type": "text", "text": "All 12 tests pass now; the retry is idempotent."})
    return t


def hook(event: str, transcript: Path, session: str, ws: Path) -> None:
    payload = {
        "session_id": session,
        "transcript_path": str(transcript),
        "cwd": str(ws),
        "hook_event_name": {"stop": "Stop", "pre-compact": "PreCompact"}.get(event, "SessionEnd"),
    }
    proc = subprocess.run(
        [PYTHON, "-m", "mdmem", "hook", event],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        env=python_env(CLAUDE_PROJECT_DIR=str(ws), MDMEM_PROVIDER="offline"),
        timeout=60,
    )
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == "", proc.stderr


def mdmem(ws: Path, *args: str, **env: str) -> str:
    proc = subprocess.run(
        [PYTHON, "-m", "mdmem", "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        env=python_env(**env),
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def every_file(*roots: Path, skip: Path) -> list[Path]:
    out = []
    for root in roots:
        for folder, _, names in os.walk(root):
            if Path(folder).is_relative_to(skip):
                continue
            out += [Path(folder) / n for n in names]
    return out


def test_a_claude_code_session_is_on_the_timeline_and_found(
    workspace: Path, tmp_path: Path
) -> None:
    claude = tmp_path / "claude-projects"  # Claude Code's own files: not ours to check
    t = billing_session(claude / f"{A}.jsonl", A, workspace)
    transcript = t.write()
    hook("stop", transcript, A, workspace)
    t.user("Also run the linter.")
    t.tool("Bash", {"command": "ruff check billing"}, f"All checks passed! {OUTPUT}")
    t.write()
    hook("pre-compact", transcript, A, workspace)
    hook("session-end", transcript, A, workspace)

    [entry] = json.loads(mdmem(workspace, "timeline", "--json"))
    assert entry["session_id"] == A
    assert entry["started"] == "2026-11-30T09:00:01+00:00"
    assert entry["ended"]  # SessionEnd closed it
    assert entry["branch"] == "fix-billing-retry"
    assert entry["files"] == ["billing/retry.py"]
    assert entry["commands"] == [
        "ANTHROPIC_API_KEY=[REDACTED:anthropic_key] pytest tests/test_billing.py -q",
        "ruff check billing",
    ]
    assert entry["tests"][0]["outcome"] == "passed"
    assert entry["goals"][0].startswith("The billing retry charges customers twice")
    assert entry["goals"][1] == "Also run the linter."
    assert "billing/retry.py" in entry["summary"]
    assert json.loads(mdmem(workspace, "timeline", "--json", "--file", "retry.py"))
    assert json.loads(mdmem(workspace, "timeline", "--json", "--file", "other.py")) == []
    assert json.loads(mdmem(workspace, "timeline", "--json", "--since", "2026-11-29"))
    assert json.loads(mdmem(workspace, "timeline", "--json", "--since", "2099-01-01")) == []

    by_name = json.loads(mdmem(workspace, "search", "retry", "--sessions", "--json"))
    assert [h["session_id"] for h in by_name] == [A]
    assert "billing/retry.py" in by_name[0]["matched"]
    paraphrase = "did we already repair the bug where customers got charged twice?"
    found = json.loads(mdmem(workspace, "search", paraphrase, "--sessions", "--json"))
    assert found and found[0]["session_id"] == A
    assert (
        json.loads(mdmem(workspace, "search", "kubernetes ingress", "--sessions", "--json")) == []
    )
    text = mdmem(workspace, "timeline")
    assert "changed billing/retry.py" in text and A[:8] in text

    # A later session's prompt about past work recalls the session, within the hook's budget.
    ask = {"session_id": B, "cwd": str(workspace), "prompt": "Did we fix the billing retry before?"}
    recalled = subprocess.run(
        [PYTHON, "-m", "mdmem", "hook", "user-prompt-submit"],
        input=json.dumps(ask),
        capture_output=True,
        text=True,
        env=python_env(CLAUDE_PROJECT_DIR=str(workspace)),
        timeout=60,
    )
    context = json.loads(recalled.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "## Past sessions" in context and "billing/retry.py" in context
    assert len(context) < 1_000
    same = subprocess.run(
        [PYTHON, "-m", "mdmem", "hook", "user-prompt-submit"],
        input=json.dumps({**ask, "session_id": A}),  # the session asking is not recalled
        capture_output=True,
        text=True,
        env=python_env(CLAUDE_PROJECT_DIR=str(workspace)),
        timeout=60,
    )
    assert "Past sessions" not in same.stdout

    files = every_file(tmp_path, skip=claude)
    record = [p for p in files if p.name.endswith(f"_{A}.md")]
    assert len(record) == 1 and record[0].is_relative_to(
        state(workspace / ".PseudoClaude" / "memory")
    )
    assert "## Files changed\n- `billing/retry.py`" in record[0].read_text()
    for path in files:
        data = path.read_bytes()
        for marker in NEVER:
            assert marker.encode() not in data, f"{marker} in {path}"


def test_resume_and_compaction_continue_one_record(workspace: Path, tmp_path: Path) -> None:
    first = billing_session(tmp_path / "cc" / f"{A}.jsonl", A, workspace)
    hook("stop", first.write(), A, workspace)
    # /compact: the same file grows by a boundary, a summary and a new turn.
    first._line("system", {"role": "system", "content": "compact"}, subtype="compact_boundary")
    first._line(
        "user",
        {"role": "user", "content": "This session is being continued from a previous one."},
        isCompactSummary=True,
    )
    first.user("Now document the retry policy.")
    first.tool("Write", {"file_path": str(workspace / "docs" / "retry.md"), "content": "x"}, "ok")
    hook("stop", first.write(), A, workspace)
    # --resume: a new id, a new file holding the same lines (same uuids), then a new turn.
    resumed = Transcript(tmp_path / "cc" / f"{B}.jsonl", B, workspace)
    resumed.lines = [{**line, "sessionId": B} for line in first.lines]
    resumed.n, resumed.last = first.n, first.last
    resumed.user("And bump the changelog.")
    resumed.tool("Edit", {"file_path": "CHANGELOG.md", "old_string": "a", "new_string": "b"}, "")
    hook("stop", resumed.write(), B, workspace)
    hook("session-end", resumed.path, B, workspace)
    hook("session-end", resumed.path, B, workspace)

    entries = json.loads(mdmem(workspace, "timeline", "--json"))
    assert len(entries) == 1
    [entry] = entries
    assert entry["session_id"] == A and entry["aliases"] == [B]
    assert entry["files"] == ["billing/retry.py", "docs/retry.md", "CHANGELOG.md"]
    assert len(entry["commands"]) == 1
    assert entry["goals"][1:] == ["Now document the retry policy.", "And bump the changelog."]
    assert "being continued" not in json.dumps(entry)
    assert entry["ended"]


def test_expiry_and_prune_move_old_sessions_to_the_trash_restorably(workspace: Path) -> None:
    project = str(workspace / ".PseudoClaude" / "memory")
    activity = observe([{"role": "user", "content": "old work"}], str(workspace))
    records.record_activity(
        project, "old-session", activity, agent="t", workspace=str(workspace),
        started="2026-01-02T10:00:00Z", last="2026-01-02T11:00:00Z",
    )  # fmt: skip
    fresh = observe([{"role": "user", "content": "new work"}], str(workspace))
    records.record_activity(project, "new-session", fresh, agent="t", workspace=str(workspace))

    dry = json.loads(mdmem(workspace, "prune", "--dry-run", "--json"))
    assert [(r["level"], r["filename"]) for r in dry] == [("session", "2026-01-02_old-session.md")]
    assert len(json.loads(mdmem(workspace, "timeline", "--json"))) == 2
    # MDMEM_SESSIONS_DAYS sets the period: the January session is within 1,000 days.
    assert (
        json.loads(mdmem(workspace, "prune", "--dry-run", "--json", MDMEM_SESSIONS_DAYS="1000"))
        == []
    )
    moved = mdmem(workspace, "prune")
    assert "2026-01-02_old-session.md (session) to the trash" in moved
    assert [e["session_id"] for e in json.loads(mdmem(workspace, "timeline", "--json"))] == [
        "new-session"
    ]
    assert (state(project) / "sessions-trash" / "2026-01-02_old-session.md").is_file()
    back = json.loads(mdmem(workspace, "timeline", "--restore", "old-session", "--json"))
    assert {e["session_id"] for e in back} == {"old-session", "new-session"}
    again = mdmem(workspace, "prune")
    assert "nothing to prune" in again, again  # restored: not taken again at once


def test_a_50000_line_transcript_is_read_once_into_a_bounded_record(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = Transcript(tmp_path / "long.jsonl", A, workspace)
    t.user("Refactor every module of the billing service.")
    while len(t.lines) < 50_000:
        k = len(t.lines)
        t.tool("Edit", {"file_path": f"src/mod_{k % 900}.py", "old_string": "a"}, "ok " * 20)
        t.tool("Bash", {"command": f"pytest tests/test_mod_{k % 700}.py"}, "1 passed")
    transcript = t.write()
    # The work counted: how often the transcript is opened, and how many messages the
    # record looks at (each once: the record reads what the handover read, nothing more).
    opened: list[str] = []
    real_open = os.open

    def counting_open(path: str, *args: object, **kwargs: object) -> int:
        if str(path) == str(transcript):
            opened.append(str(path))
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    seen: list[int] = []
    from mdmem.manager import sessions as recorder

    real_observe = recorder.observe

    def counting_observe(messages: object, *args: object, **kwargs: object) -> object:
        found = real_observe(messages, *args, **kwargs)  # type: ignore[arg-type]
        seen.append(found.messages)
        return found

    monkeypatch.setattr(os, "open", counting_open)
    monkeypatch.setattr(recorder, "observe", counting_observe)
    payload = {"session_id": A, "transcript_path": str(transcript), "cwd": str(workspace)}
    claude_code.hand_over({**payload, "hook_event_name": "Stop"}, spawn=False)
    monkeypatch.setattr(os, "open", real_open)
    assert len(opened) == 1
    assert seen == [len(claude_code.read_transcript(str(transcript)))]
    [session] = records.list_sessions(str(workspace / ".PseudoClaude" / "memory"))
    assert Path(session.path).stat().st_size <= records.MAX_RECORD_BYTES
    assert len(session.files) <= records.MAX_FILES and len(session.commands) <= 100
    assert session.left_out > 0  # the cap says how much it left out
    assert session.commands[-1].startswith("pytest tests/test_mod_")

    # The whole hook, in a child with its memory capped: the record is written within it.
    code = (
        "import resource, sys\n"
        "resource.setrlimit(resource.RLIMIT_AS, (1536 << 20, 1536 << 20))\n"
        "from mdmem.__main__ import main\n"
        "sys.exit(main(['hook', 'stop']))\n"
    )
    other = "1f2e3d4c-0000-4000-8000-000000000001"
    proc = subprocess.run(
        [PYTHON, "-c", code],
        input=json.dumps({**payload, "session_id": other, "hook_event_name": "Stop"}),
        capture_output=True,
        text=True,
        env=python_env(CLAUDE_PROJECT_DIR=str(workspace), MDMEM_PROVIDER="offline"),
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""


def test_update_async_groups_a_runners_turns_and_why_names_the_session(
    workspace: Path, tmp_path: Path
) -> None:
    from mdmem import Manager
    from mdmem.extract.providers.offline import OfflineProvider

    turn = [
        {"role": "user", "content": "Remember that invoices are generated by `make invoices`."},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Noted."},
                {"type": "tool_use", "id": "t1", "name": "Write",
                 "input": {"file_path": "Makefile", "content": "invoices:"}},
                {"type": "tool_use", "id": "t2", "name": "Bash",
                 "input": {"command": "make invoices"}},
            ],
        },
        {"role": "user",
         "content": [{"type": "tool_result", "tool_use_id": "t2", "content": OUTPUT}]},
    ]  # fmt: skip
    with Manager(workspace, user_dir=tmp_path / "user", provider=OfflineProvider()) as mgr:
        mgr.update_async(turn, session_id="run-42").result(timeout=30)
        mgr.update_async(
            [{"role": "user", "content": "Remember that the invoice PDFs go to `out/`."}],
            session="run-42",  # the older keyword still works
        ).result(timeout=30)
    [entry] = records.list_sessions(str(workspace / ".PseudoClaude" / "memory"))
    assert entry.session_id == "run-42" and entry.agent == "manager"
    assert entry.files == ["Makefile"] and entry.commands == ["make invoices"]
    assert entry.notes, "the notes the session's turns wrote are on its record"
    _, name = entry.notes[0]
    why = json.loads(mdmem(workspace, "--user-dir", str(tmp_path / "user"), "why", name, "--json"))
    assert why["session"]["session_id"] == "run-42"
    assert why["session"]["title"].startswith("Remember that invoices")
    assert OUTPUT not in Path(entry.path).read_text()


def test_project_mode_shares_records_and_the_notes_ignore_them(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mdmem import Level, Store

    monkeypatch.setenv("MDMEM_SESSIONS", "project")
    store = Store(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    store.apply(
        [{"action": "create", "level": "project", "type": "project_knowledge",
          "title": "Build", "content": "make"}]
    )  # fmt: skip
    activity = observe([{"role": "user", "content": "ship it"}], str(workspace))
    session = records.record_activity(
        store.path, "team-1", activity, agent="t", workspace=str(workspace)
    )
    assert session is not None
    assert Path(session.path).parent == workspace / ".PseudoClaude" / "memory" / "sessions"
    assert str(workspace) not in Path(session.path).read_text()  # no local path is committed
    assert [n.filename for n in store.notes()] == ["project_knowledge_build.md"]
    store.reindex()
    assert "team-1" not in store.load_index() and "sessions" not in store.load_index()
    assert [s.session_id for s in records.list_sessions(store.path)] == ["team-1"]


def test_a_hostile_clones_sessions_folder_is_read_safely(workspace: Path, tmp_path: Path) -> None:
    project = workspace / ".PseudoClaude" / "memory"
    folder = project / "sessions"
    folder.mkdir(parents=True)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "2026-01-01_leak.md").write_text('---\nsession_id: "leak"\n---\n')
    (folder / "2026-01-01_link.md").symlink_to(outside / "2026-01-01_leak.md")
    os.mkfifo(folder / "2026-01-01_fifo.md")
    (folder / "2026-01-01_huge.md").write_bytes(
        b'---\nsession_id: "huge"\n---\n' + b"x" * (records.MAX_READ_BYTES + 1)
    )
    (folder / "2026-01-01_bad.md").write_bytes(b"\xff\xfe not utf-8")
    (folder / "2026-01-01_ok.md").write_text(
        '---\nsession_id: "ok"\nstarted: "2026-01-01T00:00:00+00:00"\n---\n# x\n\n'
        "## Files changed\n- `a.py`\n- ``weird`name``\n\x1b[31m\n"
    )
    assert [s.session_id for s in records.list_sessions(str(project))] == ["ok"]
    assert records.list_sessions(str(project))[0].files == ["a.py", "weird`name"]
    from mdmem.recall.sessions import search_sessions

    assert [h.session.session_id for h in search_sessions(str(project), "weird a.py")] == ["ok"]
    # A sessions folder that is a symlink is never followed, for reading or writing.
    os.rename(folder, tmp_path / "moved")
    folder.symlink_to(outside, target_is_directory=True)
    assert records.list_sessions(str(project)) == []
    os.environ["MDMEM_SESSIONS"] = "project"
    try:
        activity = observe([{"role": "user", "content": "x"}], str(workspace))
        with pytest.raises(OSError, match="symlink"):
            records.record_activity(str(project), "s", activity, agent="t", workspace="")
    finally:
        del os.environ["MDMEM_SESSIONS"]
    assert sorted(p.name for p in outside.iterdir()) == ["2026-01-01_leak.md"]


@pytest.mark.parametrize(
    ("text", "outcome"),
    [
        ("All 12 tests pass now.", "passed"),
        ("2 failed, 10 passed", "passed"),  # the last word that says so
        ("10 passed, 2 failed", "failed"),
        ("It failed before the fix; now everything is green.", "passed"),
        ("0 failed, 14 passed", "passed"),
        ("测试全部通过", "passed"),
        ("Looking at the code.", ""),
    ],
)
def test_the_outcome_is_what_the_assistant_says(text: str, outcome: str) -> None:
    assert outcome_of(text) == outcome


@pytest.mark.parametrize(
    ("command", "runs_tests"),
    [
        ("pytest -q", True),
        ("cd api && go test ./...", True),
        ("npm run test -- --watch=false", True),
        ("python -m pytest tests/", True),
        ("cargo test", True),
        ("git status", False),
        ("cat tests/README", False),
    ],
)
def test_test_commands_are_recognised(command: str, runs_tests: bool) -> None:
    assert is_test_command(command) is runs_tests


def test_private_blocks_and_tool_results_never_reach_the_activity(workspace: Path) -> None:
    found = observe(
        [
            {"role": "user", "content": "Fix it <private>my home address</private> please"},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "1", "name": "Bash",
                 "input": {"command": "echo <private>secret-flag</private> done"}},
            ]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "1",
                                          "content": "Fix: what the tool printed"}]},
        ],
        str(workspace),
    )  # fmt: skip
    assert found.goals == ["Fix it please"]
    assert found.commands == ["echo done"]
    assert "printed" not in json.dumps(found.__dict__)


def test_the_handover_holds_no_tool_output_and_records_the_same(
    workspace: Path, tmp_path: Path
) -> None:
    from mdmem.extract.turn import from_messages
    from mdmem.privacy import Redactor

    path = tmp_path / "lean.jsonl"
    billing_session(path, A, workspace).write()
    whole, cursor = claude_code.read_new(str(path))
    lean, lean_cursor = claude_code.read_new(str(path), tools=False)
    assert cursor == lean_cursor and [m.uuids for m in whole] == [m.uuids for m in lean]
    held = json.dumps([m.as_dict() for m in lean])
    for marker in (OUTPUT, "THINKING-MARKER-9", "hunter2-password-value", "old_string"):
        assert marker not in held  # tool output, thinking, the text an edit wrote
    assert OUTPUT in json.dumps([m.as_dict() for m in whole])
    # What the session record and the journaled turn make of them is the same.
    assert observe([m.as_dict() for m in lean], str(workspace), Redactor()) == observe(
        [m.as_dict() for m in whole], str(workspace), Redactor()
    )
    assert from_messages([m.as_dict() for m in lean], redactor=Redactor()) == from_messages(
        [m.as_dict() for m in whole], redactor=Redactor()
    )


items = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\r"), min_size=1, max_size=40
)


@given(files=st.lists(items, max_size=5), commands=st.lists(items, max_size=5))
def test_a_record_reads_back_what_was_written(files: list[str], commands: list[str]) -> None:
    from mdmem.store.note import clean_inline

    files = [f for f in dict.fromkeys(clean_inline(f) for f in files) if f]
    commands = [c for c in dict.fromkeys(clean_inline(c) for c in commands) if c]
    session = records.Session("s-1", started="2026-11-30T09:00:00+00:00", files=files)
    session.commands = commands
    back = records.parse(records.render(session))
    assert back is not None
    assert back.files == files and back.commands == commands


def test_the_timeline_page_shows_a_record_escaped_and_links_its_notes(
    workspace: Path, tmp_path: Path
) -> None:
    from starlette.testclient import TestClient

    from mdmem.store.workspace import resolve
    from mdmem.ui.app import create_app
    from mdmem.ui.guard import Settings
    from mdmem.ui.model import Stores

    ws, project, user = resolve(str(workspace), str(tmp_path / "user"))
    activity = observe([{"role": "user", "content": "Fix <script>alert(1)</script> the retry"}], ws)
    records.record_activity(project.path, "s-ui", activity, agent="t", workspace=ws)
    records.record_notes(project.path, "s-ui", [("project", "project_knowledge_retry.md")])
    settings = Settings(token="tok", allowed_hosts=frozenset({"127.0.0.1:8765"}))
    app = create_app(Stores(ws, project, user), settings)
    client = TestClient(app, base_url="http://127.0.0.1:8765")
    assert client.get("/?token=tok", follow_redirects=False).status_code == 303
    listing = client.get("/timeline")
    assert listing.status_code == 200 and 'href="/session/s-ui"' in listing.text
    page = client.get("/session/s-ui")
    assert page.status_code == 200
    assert "<script>alert" not in page.text and "&lt;script&gt;" in page.text
    assert 'href="/note/project/project_knowledge_retry.md"' in page.text
    assert client.get("/session/nope").status_code == 404


def test_the_model_summarises_an_ended_session_within_the_budget(
    workspace: Path, tmp_path: Path, fake_anthropic, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    from mdmem import Manager
    from mdmem.extract.providers.anthropic import TOOL_NAME, AnthropicProvider
    from mdmem.store import ledger

    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", fake_anthropic.url)
    project = str(workspace / ".PseudoClaude" / "memory")
    activity = observe(
        [{"role": "user", "content": f"Fix the billing retry; key {KEY}"}], str(workspace)
    )
    records.record_activity(project, "ended-1", activity, agent="t", workspace="", ended=True)
    records.record_activity(project, "open-1", activity, agent="t", workspace="")
    summary = "Fixed the double charge in billing/retry.py; tests pass."
    said = {"operations": [{"action": "update", "level": "project", "summary": summary}]}
    fake_anthropic.enqueue(FakeAnthropic.tool_use(TOOL_NAME, said))
    user = tmp_path / "user"
    provider = AnthropicProvider(max_retries=0)
    with Manager(workspace, user_dir=user, provider=provider, daily_tokens=1_000_000) as mgr:
        assert mgr.summarise_sessions() == ["ended-1"]
        assert mgr.summarise_sessions() == []  # summarised once; the open session waits
    [request] = fake_anthropic.requests
    assert KEY not in json.dumps(request.body) and "[REDACTED" in json.dumps(request.body)
    done = records.load(project, "ended-1")
    assert done is not None and done.summary.startswith("Fixed the double charge")
    assert ledger.tokens_on(str(user), ledger.day_of(time.time())) > 0  # counted in the budget
    # Over the daily budget: no call at all.
    records.record_activity(project, "ended-2", activity, agent="t", workspace="", ended=True)
    with Manager(workspace, user_dir=user, provider=provider, daily_tokens=10) as mgr:
        assert mgr.summarise_sessions() == []
    assert len(fake_anthropic.requests) == 1


@given(st.text(max_size=400).map(lambda t: '---\nsession_id: "x"\n' + t))
def test_any_record_text_parses_or_is_refused_without_raising(text: str) -> None:
    session = records.parse(text)
    if session is not None:
        assert records.parse(records.render(session)) is not None
