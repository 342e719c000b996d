"""What memory did (the activity log and its pages), every store of the user, live pages."""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from builders import Page, text_of
from builders import add_note as create
from mdmem import Manager
from mdmem.extract.providers.base import Usage
from mdmem.integrations import prompt_recall
from mdmem.integrations.claude_code import session_start
from mdmem.store import activity
from mdmem.store.workspace import resolve
from mdmem.ui.model import version

SESSION = "sess-1234abcd"


class Priced:
    """A provider that writes one note and reports the tokens the call used."""

    name = "priced"

    def __init__(self) -> None:
        self.last_usage: Usage | None = None

    def extract(self, request: object) -> object:
        self.last_usage = Usage(input_tokens=1200, output_tokens=80, model="m")
        op = {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": "Integration tests need the db",
            "content": "Run `docker compose up -d db` before `make integration`.",
        }
        return [op]


def _session(page: Page, workspace: Path) -> None:
    """A session as Claude Code runs it: the real hooks' functions, then a worker turn."""
    create(page.project, "Deploy", "Tag vX.Y.Z; CI deploys it.")
    create(page.project, "Build", "Run `make test` before pushing.")
    payload = {"session_id": SESSION, "cwd": str(workspace), "hook_event_name": "SessionStart"}
    session_start(payload, str(workspace), None)
    secret = "sk-ant-api03-" + "A" * 90
    prompt = {
        **payload,
        "hook_event_name": "UserPromptSubmit",
        "prompt": f"how do we deploy {secret} to production when the release is tagged on main",
    }
    prompt_recall.user_prompt_submit(prompt, str(workspace), None)
    with Manager(workspace, provider=Priced()) as manager:
        manager.update_async(
            [
                {"role": "user", "content": "How do I run the integration tests?"},
                {"role": "assistant", "content": "Start the db first: docker compose up -d db."},
            ],
            session=SESSION,
        ).result(30)


def test_the_hooks_and_the_worker_write_the_session_activity(page: Page, workspace: Path) -> None:
    _session(page, workspace)
    events = activity.read(page.project.path, SESSION)
    kinds = [e["k"] for e in events]
    assert kinds == ["start", "recall", "write"]
    start, recall, write = events
    assert set(start["n"]["project"]) == {  # type: ignore[index]
        "project_knowledge_deploy.md",
        "project_knowledge_build.md",
    }
    assert int(start["tokens"]) > 0  # type: ignore[call-overload]
    assert str(recall["prompt"]).startswith("how do we deploy [REDACTED")
    assert "sk-ant" not in json.dumps(events) and len(str(recall["prompt"]).split()) <= 9
    assert write["n"] == [
        ["project", "create", "project_knowledge_integration-tests-need-the-db.md"]
    ]
    assert (write["in"], write["out"]) == (1200, 80)
    path = Path(activity.folder(page.project.path)) / f"{SESSION}.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not str(path).startswith(str(workspace))  # state, never in the repository
    assert [w for w, _ in activity.workspaces()] == [str(workspace)]


def test_the_activity_pages_show_what_memory_did(page: Page, workspace: Path) -> None:
    _session(page, workspace)
    listing = page.get("/activity")
    assert listing.status_code == 200
    assert f'href="/activity/{SESSION}"' in listing.text
    row = text_of(listing)
    assert "sess-123" in row and "1 (" in row  # one prompt
    today = page.get("/activity?day=today")
    assert "1 model call" in text_of(today) and "1,280" in text_of(today)
    assert SESSION in today.text
    assert "No session" in page.get("/activity?day=2001-01-01").text
    assert page.get("/activity?day=yesterday").status_code == 400
    one = page.get(f"/activity/{SESSION}")
    shown = text_of(one)
    assert "Session start: 2 notes injected" in shown
    assert "Prompt “how do we deploy [REDACTED" in shown
    assert "wrote 1 ; the model spent 1,200 tokens in, 80 out" in shown
    assert 'href="/note/project/project_knowledge_deploy.md"' in one.text
    assert page.get("/activity/nope").status_code == 404
    assert page.get("/activity/..%2F..%2Fetc").status_code == 404


def test_an_activity_file_stays_bounded_and_ignores_a_symlink(page: Page, tmp_path: Path) -> None:
    root = page.project.path
    for i in range(400):
        activity.record(root, SESSION, "recall", prompt="x" * 500, n={"project": [f"n{i}.md"]})
    path = Path(activity.folder(root)) / f"{SESSION}.jsonl"
    assert path.stat().st_size <= activity.MAX_FILE_BYTES
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"t": 1, "k": "start", "n": {"project": ["secret.md"]}}\n')
    (Path(activity.folder(root)) / "planted.jsonl").symlink_to(outside)
    assert activity.read(root, "planted") == []
    activity.record(root, "planted", "start", n={})
    assert outside.read_text().count("\n") == 1  # nothing appended through the link
    for i in range(activity.KEEP_SESSIONS + 5):
        activity.record(root, f"s{i}", "start", n={})
    assert len(list(Path(activity.folder(root)).glob("*.jsonl"))) <= activity.KEEP_SESSIONS + 1


def test_the_switcher_lists_every_store_and_opens_one_read_only_until_picked(
    page: Page, tmp_path: Path
) -> None:
    other = tmp_path / "other-repo"
    (other / ".git").mkdir(parents=True)
    _, theirs, _ = resolve(str(other), None)
    name = create(theirs, "Their build", "Run cargo test.")
    activity.remember(str(other))
    activity.remember("/nowhere/gone")  # a workspace since deleted: not listed
    listing = page.get("/switch")
    shown = text_of(listing)
    assert "other-repo 1 note " in shown and "Your user store" in shown
    assert "/nowhere/gone" not in listing.text
    preview = page.get(f"/switch/preview?workspace={other}")
    assert "Their build" in preview.text and "read-only" in preview.text
    assert "/edit" not in preview.text and "/delete" not in preview.text
    assert "Their build" not in page.get("/").text  # still the first workspace
    # Only a listed workspace can be picked, and only with the CSRF token.
    assert page.post("/switch", {"workspace": "/etc"}).status_code == 400
    assert page.post("/switch", {"workspace": str(other)}, csrf=False).status_code == 403
    assert page.get("/switch/preview?workspace=/etc").status_code == 404
    picked = page.post("/switch", {"workspace": str(other)})
    assert picked.status_code == 303
    assert "Their build" in page.get("/").text
    assert page.get(f"/note/project/{name}").status_code == 200


def test_the_live_stamp_changes_when_memory_changes(page: Page, workspace: Path) -> None:
    before = version(page.stores)
    assert page.get("/live").json() == {"v": before}
    assert version(page.stores) == before  # nothing changed, same stamp
    create(page.project, "Something new")
    after = version(page.stores)
    assert after != before
    activity.record(page.project.path, SESSION, "start", n={})
    assert version(page.stores) != after
    html = page.get("/activity").text
    assert '<script src="/static/live.js" defer></script>' in html
    assert re.search(r'id="live" data-version="[0-9a-f]{16}"', html)
    assert "<script" not in page.get("/").text  # only the live pages load it
    js = page.get("/static/live.js")
    assert js.headers["content-type"].startswith("text/javascript") and "fetch(" in js.text
    assert os.path.basename("/static/live.js") == "live.js"
