"""The web page in a real browser: Debian's Chromium, headless, driven by Playwright.

Playwright's own browser download (``playwright install``) is never used: it
fetches a build from outside the package registries. The browser is the
distribution's ``/usr/bin/chromium``; ``scripts/install-browser.sh`` installs it
on a fresh machine when this runs as root with apt-get, and these tests skip,
saying why, only where it cannot be installed.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from builders import add_note
from conftest import ROOT
from mdmem import NoteType, Store
from mdmem.store.note import Note
from mdmem.store.workspace import resolve
from mdmem.ui.model import Stores
from mdmem.ui.server import Server

playwright_api = pytest.importorskip(
    "playwright.sync_api", reason="playwright is in the test extra"
)

ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# The first test may install the browser (the ``chromium`` fixture of ``conftest.py``):
# apt-get can take minutes on a fresh machine.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture(scope="module")
def browser(
    chromium: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[playwright_api.Browser]:
    # Module-wide, so set up before conftest's isolation of the first test: the browser's
    # own home (crash reports, dconf, caches) is a folder of this run, not the real one.
    home = tmp_path_factory.mktemp("chromium-home")
    env = {name: value for name, value in os.environ.items() if not name.startswith("XDG_")}
    env["HOME"] = str(home)
    with playwright_api.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=chromium, args=ARGS, env=env)
        try:
            yield launched
        finally:
            launched.close()


def go(page: playwright_api.Page, target: playwright_api.Locator) -> None:
    """Click a link or a button and wait for the page it leads to."""
    with page.expect_navigation():
        target.click()


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where the screenshots of a test go (the test's own output folder)."""
    folder = tmp_path / "screenshots"
    folder.mkdir()
    return folder


def create(store: Store, title: str, body: str, kind: NoteType, **fields: str) -> str:
    return add_note(store, title, body, type=kind.value, **fields)


@pytest.fixture
def served(workspace: Path) -> Iterator[tuple[Server, Stores]]:
    """A server on a free loopback port, over a workspace with a few notes; stops by itself."""
    ws, project, user = resolve(str(workspace), None)
    create(
        project,
        "Build and test",
        "Run `make test` before pushing.\n\n- lint with **ruff**\n- type-check with mypy\n\n"
        "See [the docs](https://example.org/docs).",
        NoteType.PROJECT_KNOWLEDGE,
        summary="make test, then push.",
    )
    old = create(project, "Old deploy", "Deploy by hand with scp.", NoteType.PROJECT_KNOWLEDGE)
    project.save(
        Note(
            "reference_material_deploy.md",
            NoteType.REFERENCE_MATERIAL,
            "Deploy",
            "Tag a release; CI deploys it.",
            "Tag `vX.Y.Z`; the release workflow deploys it.",
            extra={"supersedes": [old]},
        )
    )
    create(
        user,
        "回答用中文",
        "请用中文回答，代码注释用英文。",
        NoteType.USER_PREFERENCE,
        summary="用中文回答问题。",
    )
    create(user, "Prefers short answers", "Keep answers short.", NoteType.CORRECTION_FEEDBACK)
    stores = Stores(ws, project, user)
    with Server(stores) as server:
        yield server, stores


def test_list_search_open_edit_delete_restore(
    browser: playwright_api.Browser, served: tuple[Server, Stores], shots: Path
) -> None:
    server, stores = served
    context = browser.new_context(viewport={"width": 1100, "height": 760})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))

    page.goto(server.url)
    assert page.url == server.base_url + "/"  # the token is gone from the address bar
    assert "token" not in page.url
    rows = page.locator("table.notes tbody tr")
    assert rows.count() == 5
    assert page.get_by_role("link", name="回答用中文").is_visible()
    assert page.locator(".marker-superseded").first.inner_text() == (
        "superseded by reference_material_deploy.md"
    )
    page.screenshot(path=str(shots / "list.png"), full_page=True)

    # Search, then filter.
    page.get_by_label("Search").fill("make")
    go(page, page.get_by_role("button", name="Show"))
    assert rows.count() == 1 and "Build and test" in rows.first.inner_text()
    page.screenshot(path=str(shots / "search.png"), full_page=True)
    page.goto(server.base_url + "/")
    page.get_by_label("Level").select_option("user")
    go(page, page.get_by_role("button", name="Show"))
    assert rows.count() == 2

    # Open a note: rendered Markdown.
    go(page, page.get_by_role("link", name="回答用中文"))
    assert page.locator("h1").inner_text() == "回答用中文"
    page.goto(server.base_url + "/")
    go(page, page.get_by_role("link", name="Build and test"))
    assert page.locator(".body code").first.inner_text() == "make test"
    assert page.locator(".body li strong").inner_text() == "ruff"
    assert page.get_by_role("link", name="the docs").get_attribute("href") == (
        "https://example.org/docs"
    )
    page.screenshot(path=str(shots / "note.png"), full_page=True)

    # Edit and save.
    go(page, page.get_by_role("link", name="Edit", exact=True))
    page.get_by_label("Summary").fill("make test, ruff, then push.")
    body = page.get_by_label("Body")
    body.fill(body.input_value() + "\n\n补充：先运行 `make lint`。")
    page.screenshot(path=str(shots / "edit.png"), full_page=True)
    go(page, page.get_by_role("button", name="Save"))
    assert page.get_by_role("status").inner_text().startswith("Saved")
    note = stores.project.read("project_knowledge_build-and-test.md")
    assert note.summary == "make test, ruff, then push." and "补充：先运行" in note.body
    assert "先运行 make lint" in page.locator(".body").inner_text()

    # Delete, then restore from the trash.
    go(page, page.get_by_role("button", name="Delete"))
    assert (
        "Moved project_knowledge_build-and-test.md to the trash."
        in page.get_by_role("status").inner_text()
    )
    assert not stores.project.exists("project_knowledge_build-and-test.md")
    assert rows.count() == 4, page.content()
    go(page, page.get_by_role("link", name="Trash"))
    page.screenshot(path=str(shots / "trash.png"), full_page=True)
    go(page, page.get_by_role("button", name="Restore"))
    assert page.locator("h1").inner_text() == "Build and test"
    assert stores.project.read("project_knowledge_build-and-test.md").summary == (
        "make test, ruff, then push."
    )

    # The overview shows the prompt block.
    go(page, page.get_by_role("link", name="Overview"))
    assert "## Project Memory" in page.locator("pre.block").inner_text()
    page.screenshot(path=str(shots / "overview.png"), full_page=True)

    assert problems == []  # no CSP violation, no script error, nothing failed to load
    context.close()
    for name in ("list", "search", "note", "edit", "trash", "overview"):
        assert (shots / f"{name}.png").stat().st_size > 1000


def test_a_failed_save_keeps_the_typed_text(
    browser: playwright_api.Browser, served: tuple[Server, Stores]
) -> None:
    server, stores = served
    context = browser.new_context()
    page = context.new_page()
    page.goto(server.url)
    go(page, page.get_by_role("link", name="Prefers short answers"))
    go(page, page.get_by_role("link", name="Edit the file"))
    text = page.get_by_label("The file, front matter included")
    typed = (
        text.input_value().replace("title: Prefers", "title: [Prefers") + "\nA long paragraph.\n"
    )
    text.fill(typed)
    go(page, page.get_by_role("button", name="Save"))
    assert "bad YAML" in page.get_by_role("alert").inner_text()
    assert text.input_value().strip() == typed.strip()
    note = [n for n in stores.user.notes() if n.title == "Prefers short answers"]
    assert note and note[0].body == "Keep answers short."
    context.close()


def test_browsing_works_without_javascript(
    browser: playwright_api.Browser, served: tuple[Server, Stores]
) -> None:
    server, _ = served
    context = browser.new_context(java_script_enabled=False)
    page = context.new_page()
    page.goto(server.url)
    rows = page.locator("table.notes tbody tr")
    assert rows.count() == 5
    page.get_by_label("Search").fill("中文")
    with page.expect_navigation():
        page.get_by_label("Search").press("Enter")
    assert rows.count() == 1 and "回答用中文" in rows.first.inner_text()
    go(page, page.get_by_role("link", name="回答用中文"))
    assert "请用中文回答" in page.locator(".body").inner_text()
    context.close()


def test_keyboard_and_a_narrow_window(
    browser: playwright_api.Browser, served: tuple[Server, Stores], shots: Path
) -> None:
    server, _ = served
    context = browser.new_context(viewport={"width": 360, "height": 740})
    page = context.new_page()
    page.goto(server.url)
    assert page.evaluate("document.characterSet") == "UTF-8"
    # The first Tab reaches the skip link, which shows itself and leads to the content.
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    assert skip.evaluate("e => e === document.activeElement")
    box = skip.bounding_box()
    assert box is not None and box["x"] >= 0
    outline = skip.evaluate("e => getComputedStyle(e).outlineStyle")
    assert outline != "none"  # a visible focus ring
    page.keyboard.press("Enter")
    page.wait_for_url("**/#main", timeout=5000)
    # Tab on to the search field, type, and submit with Enter: no mouse needed.
    search = page.get_by_label("Search")
    for _ in range(10):
        page.keyboard.press("Tab")
        if search.evaluate("e => e === document.activeElement"):
            break
    assert search.evaluate("e => e === document.activeElement")
    page.keyboard.type("make")
    with page.expect_navigation():
        page.keyboard.press("Enter")
    rows = page.locator("table.notes tbody tr")
    assert rows.count() == 1
    # In a narrow window the table stacks: nothing is wider than the window.
    page.goto(server.base_url + "/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 360
    assert page.locator("table.notes thead").is_hidden()
    font = page.locator("html").evaluate("e => getComputedStyle(e).fontFamily")
    assert "WenQuanYi Micro Hei" in font and "Noto Sans CJK SC" in font
    page.screenshot(path=str(shots / "narrow.png"), full_page=True)
    context.close()


def test_the_cookie_never_reaches_another_local_server(
    browser: playwright_api.Browser, served: tuple[Server, Stores]
) -> None:
    """Cookies ignore ports: a server on another port of 127.0.0.1 (another user's, a
    repository's dev server) that the browser visits must not get a cookie that reads and
    deletes notes when replayed."""
    import http.server
    import threading

    import httpx2

    server, stores = served
    caught: list[str] = []

    class Catcher(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            caught.append(self.headers.get("cookie") or "")
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.end_headers()
            self.wfile.write(b"<p>hello</p>")

        def log_message(self, *args: object) -> None:
            pass

    other = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Catcher)
    thread = threading.Thread(target=other.serve_forever, daemon=True)
    thread.start()
    try:
        context = browser.new_context()
        page = context.new_page()
        page.goto(server.url)
        assert page.locator("table.notes tbody tr").count() == 5
        assert any(c["name"] == server.settings.cookie_name for c in context.cookies())
        # The user follows a link to another local page; the page then fetches itself too.
        page.goto(f"http://127.0.0.1:{other.server_address[1]}/")
        page.goto(f"http://localhost:{other.server_address[1]}/again")
        context.close()
    finally:
        other.shutdown()
        other.server_close()
    assert len(caught) >= 2  # the pages, and maybe their icons
    name = next(iter(stores.project.entries())).filename
    for header in caught:
        assert server.settings.session not in header
        with httpx2.Client(headers={"cookie": header}) as thief:
            assert thief.get(server.base_url + "/").status_code == 403
            csrf = {"csrf": server.settings.csrf}  # even knowing the CSRF token
            origin = {"origin": server.base_url}
            delete = thief.post(
                f"{server.base_url}/note/project/{name}/delete", data=csrf, headers=origin
            )
            assert delete.status_code == 403
    assert stores.project.exists(name)


def test_the_install_script_does_nothing_when_the_browser_is_there(chromium: str) -> None:
    proc = subprocess.run(
        ["sh", str(ROOT / "scripts" / "install-browser.sh")],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


# -- at scale: paging, a diff, a dispute, the activity, the stores, live, the look ----------

SHOTS_ENV = "MDMEM_UI_SHOTS"  # a folder (docs/images) to keep the screenshots in


def keep(page: playwright_api.Page, shots: Path, name: str, *, full: bool = False) -> None:
    """A screenshot (the window, or the whole page) into the test's folder, and into
    $MDMEM_UI_SHOTS if set (how docs/images is made)."""
    page.screenshot(path=str(shots / f"{name}.png"), full_page=full)
    folder = os.environ.get(SHOTS_ENV)
    if folder:
        page.screenshot(path=os.path.join(folder, f"{name}.png"), full_page=full)


@pytest.fixture
def busy(tmp_path: Path) -> Iterator[tuple[Server, Stores, Path]]:
    """A workspace as a user has it after a while: 120 notes, a dispute with a long reason,
    a note with versions, a recorded session; a second workspace; a server over it."""
    from mdmem.integrations import prompt_recall
    from mdmem.integrations.claude_code import session_start
    from mdmem.recall import disputes
    from mdmem.store import activity

    workspace = Path.home() / "projects" / "shop-api"  # the test's own home folder
    (workspace / ".git").mkdir(parents=True)
    ws, project, user = resolve(str(workspace), None)
    kinds = ["project_knowledge", "reference_material", "correction_feedback"]
    ops = [
        {
            "action": "create",
            "level": "project",
            "type": kinds[i % 3],
            "title": f"Service note {i:03d}: retries and timeouts",
            "summary": f"Step {i} of the request path; 第{i}条。",
            "content": f"Retry {i % 5} times with backoff.",
        }
        for i in range(120)
    ]
    assert not project.apply(ops).rejected
    logging = create(
        project,
        "Logging",
        "Use `log.Printf` for debug output.\n\nKeep handlers small.",
        NoteType.PROJECT_KNOWLEDGE,
        summary="log.Printf for debug output.",
    )
    project.apply(
        [
            {
                "action": "update",
                "level": "project",
                "filename": logging,
                "content": "Log through `logging.FromContext(ctx)` with slog.\n\n"
                "Keep handlers small.",
            }
        ]
    )
    reason = "No, use `slog` through `logging.FromContext(ctx)` instead of `log.Printf`; " * 4
    disputes.mark(project, [logging], turn="t1", at="2026-12-01T10:00Z", reason=reason[:300])
    create(user, "回答用中文", "请用中文回答，代码注释用英文。", NoteType.USER_PREFERENCE)
    payload = {"session_id": "demo-session-01", "cwd": ws, "hook_event_name": "SessionStart"}
    session_start(payload, ws, None)
    for words in ("how do retries and timeouts work here", "where is the logging setup"):
        prompt_recall.user_prompt_submit({**payload, "prompt": words}, ws, None)
    activity.record(
        project.path,
        "demo-session-01",
        "write",
        turn="turn-0001",
        n=[["project", "update", logging]],
        **{"in": 2400, "out": 160},
    )
    other = Path.home() / "projects" / "api-gateway"
    (other / ".git").mkdir(parents=True)
    _, theirs, _ = resolve(str(other), None)
    create(theirs, "Gateway routes", "Routes live in routes.yaml.", NoteType.PROJECT_KNOWLEDGE)
    activity.remember(str(other))
    stores = Stores(ws, project, user)
    with Server(stores) as server:
        yield server, stores, other


def test_a_busy_store_pages_diffs_activity_and_stores(
    browser: playwright_api.Browser, busy: tuple[Server, Stores, Path], shots: Path
) -> None:
    server, stores, other = busy
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    page = context.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(server.url)
    rows = page.locator("table.notes tbody tr")
    assert rows.count() == 50
    assert "1–50 of 122 notes" in page.locator("caption").inner_text()
    keep(page, shots, "list")
    # Paging: the next link, and back.
    go(page, page.get_by_role("link", name="Next page →"))
    assert "page=2" in page.url and rows.count() == 50
    go(page, page.get_by_role("link", name="Next page →"))
    assert rows.count() == 22 and page.get_by_role("link", name="Next page →").count() == 0
    page.goto(server.base_url + "/?q=logging")
    # The disputed note: a short marker, the page no wider than the window.
    marker = page.locator(".marker-disputed").first
    assert marker.inner_text() == "disputed"
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    go(page, page.get_by_role("link", name="Logging"))
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    assert "instead of `log.Printf`" in page.locator(".dispute blockquote").inner_text()
    keep(page, shots, "note-disputed", full=True)
    # History: the second version against the first, then restore the first.
    go(page, page.get_by_role("link", name="History"))
    first_card = page.locator("article.version").first
    assert first_card.locator("del", has_text="log.Printf").count() >= 1
    assert "slog" in first_card.locator("pre.diff").inner_text()
    assert first_card.locator("ins").count() >= 1
    keep(page, shots, "history-diff", full=True)
    go(
        page,
        page.locator("article.version").nth(1).get_by_role("button", name="Restore this version"),
    )
    assert "log.Printf" in page.locator(".body").inner_text()
    # Dismiss the (false) dispute.
    go(page, page.get_by_role("button", name="Dismiss the dispute"))
    assert "Dismissed the dispute" in page.get_by_role("status").inner_text()
    # The activity: today's view and the session.
    go(page, page.get_by_role("link", name="Activity"))
    assert page.locator("#live.on").count() == 1  # the script runs under the CSP
    go(page, page.get_by_role("link", name="Today"))
    go(page, page.get_by_role("link", name="demo-ses"))
    events = page.locator(".timeline .event")
    assert events.count() == 4
    assert "Session start" in events.first.inner_text()
    assert events.first.locator("details li").first.is_hidden()  # folded: 55 notes
    keep(page, shots, "activity-session", full=True)
    events.first.locator("summary").click()
    assert events.first.locator("details li").first.is_visible()
    assert "how do retries and timeouts work here" in events.nth(1).inner_text()
    assert "2,400 tokens in" in events.nth(3).inner_text()
    # Live: a new prompt in the session reloads the page by itself.
    from mdmem.store import activity as log

    with page.expect_navigation(timeout=20_000):
        log.record(stores.project.path, "demo-session-01", "recall", prompt="a new prompt", n={})
    assert events.count() == 5
    # Every store of the user: look at another workspace read-only, then pick it.
    go(page, page.get_by_role("link", name="Stores"))
    keep(page, shots, "stores")
    go(page, page.get_by_role("link", name="Look (read-only)"))
    assert "Gateway routes" in page.locator(".preview").inner_text()
    assert page.get_by_role("link", name="Edit").count() == 0
    go(page, page.get_by_role("button", name="Work on this one"))
    assert "Gateway routes" in page.locator("table.notes").inner_text()
    assert str(other) in (page.locator(".where").get_attribute("title") or "")
    assert problems == []  # no CSP violation, no script error
    context.close()


def test_the_look_on_a_phone_and_in_dark_mode(
    browser: playwright_api.Browser, busy: tuple[Server, Stores, Path], shots: Path
) -> None:
    server, _, _ = busy
    for n, scheme in enumerate(["light", "dark"]):
        _phone(browser, server, shots, scheme, server.url if n == 0 else None)


def _phone(
    browser: playwright_api.Browser, server: Server, shots: Path, scheme: str, url: str | None
) -> None:
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, color_scheme=scheme, is_mobile=True
    )
    page = context.new_page()
    if url is None:  # the token is used up: the second browser uses a fresh one
        url = f"{server.base_url}/?token={server.settings.tokens.issue()}"
    page.goto(url)
    background = page.evaluate("getComputedStyle(document.documentElement).backgroundColor")
    assert (background == "rgb(13, 17, 23)") is (scheme == "dark")
    for path in (
        "/",
        "/activity/demo-session-01",
        "/switch",
        "/note/project/project_knowledge_logging.md",
    ):
        page.goto(server.base_url + path)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, (path, width)
    page.goto(server.base_url + "/note/project/project_knowledge_logging.md/history")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    keep(page, shots, f"phone-history-{scheme}")
    page.goto(server.base_url + "/")
    keep(page, shots, f"phone-list-{scheme}")
    context.close()
