"""The timeline page in a real browser (Debian's Chromium, headless, through Playwright).

From the timeline to a session's record, and from the record to a note it
wrote. The browser is the ``chromium`` fixture's (``conftest.py``: installed on a
fresh machine where it can be, else skipped, saying why), as for ``test_ui_browser.py``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from mdmem.extract.activity import observe
from mdmem.store import sessions as records
from mdmem.store.workspace import resolve
from mdmem.ui.model import Stores
from mdmem.ui.server import Server

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in the test extra"
)

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--disable-component-update"]  # fmt: skip
pytestmark = pytest.mark.timeout(900)  # the browser may be installed first


@pytest.fixture
def browser(chromium: str) -> Iterator[playwright_api.Browser]:
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=ARGS)
        try:
            yield launched
        finally:
            launched.close()


def test_from_the_timeline_to_a_session_and_to_the_note_it_wrote(
    browser: playwright_api.Browser, workspace: os.PathLike[str]
) -> None:
    ws, project, user = resolve(str(workspace), None)
    result = project.apply(
        [{"action": "create", "level": "project", "type": "project_knowledge",
          "title": "Retries are idempotent", "content": "The retry sends an idempotency key."}]
    )  # fmt: skip
    note = result.applied[0].filename
    messages = [
        {"role": "user", "content": "Fix the billing retry that charges twice"},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": "1", "name": "Edit",
             "input": {"file_path": "billing/retry.py", "old_string": "a", "new_string": "b"}},
            {"type": "text", "text": "Fixed; all tests pass."}]},
    ]  # fmt: skip
    records.record_activity(
        project.path, "sess-1", observe(messages, ws), agent="claude-code", workspace=ws
    )
    records.record_notes(project.path, "sess-1", [("project", note)])
    with Server(Stores(ws, project, user)) as server:
        page = browser.new_context().new_page()
        page.goto(server.url)
        page.goto(server.url.split("?")[0].rstrip("/") + "/timeline")
        entry = page.locator("ul.timeline li")
        assert entry.count() == 1 and "billing/retry.py" in entry.inner_text()
        with page.expect_navigation():
            entry.get_by_role("link").click()
        assert "Fix the billing retry that charges twice" in page.locator("h1").inner_text()
        assert "billing/retry.py" in page.inner_text("body")
        with page.expect_navigation():
            page.get_by_role("link", name=note).click()
        assert "idempotency key" in page.inner_text("body")
