"""The web page, through an HTTP client against the app: every page and action, and its guard."""

from __future__ import annotations

import os
import re
import signal
import subprocess
from html import unescape
from pathlib import Path
from urllib.parse import quote

import httpx2
import pytest
from starlette.testclient import TestClient

from builders import BASE, TOKEN, Page, form_value, text_of
from builders import UI_PORT as PORT
from builders import add_note as create
from builders import ui_settings as settings
from conftest import PYTHON, python_env
from mdmem import Level, NoteType, Store
from mdmem.errors import InvalidOperation
from mdmem.store.index import merge
from mdmem.store.workspace import resolve
from mdmem.ui import features
from mdmem.ui.app import create_app
from mdmem.ui.guard import CSP
from mdmem.ui.model import Stores, digest
from mdmem.ui.server import Server, check_host, is_loopback


def write(store: Store, title: str, body: str = "Some body.", **extra: object) -> str:
    """A note with front-matter keys of its own, saved as a person's editor would."""
    from mdmem.store.note import Note
    from mdmem.store.paths import slugify

    name = f"project_knowledge_{slugify(title)}.md"
    store.save(Note(name, NoteType.PROJECT_KNOWLEDGE, title, body=body, extra=extra))
    return name


# -- the guard ---------------------------------------------------------------------------


def test_without_the_token_nothing_is_served(workspace: Path) -> None:
    ws, project, user = resolve(str(workspace), None)
    create(project, "Build")
    client = TestClient(create_app(Stores(ws, project, user), settings()), base_url=BASE)
    for path in ("/", "/overview", "/trash", "/note/project/project_knowledge_build.md"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert "Build" not in response.text
    assert client.get("/?token=wrong").status_code == 403
    assert client.post("/note/project/project_knowledge_build.md/delete").status_code == 403
    assert project.exists("project_knowledge_build.md")


def test_the_token_becomes_a_strict_http_only_cookie_and_leaves_the_url(workspace: Path) -> None:
    ws, project, user = resolve(str(workspace), None)
    client = TestClient(create_app(Stores(ws, project, user), settings()), base_url=BASE)
    response = client.get(f"/overview?token={TOKEN}&x=1", follow_redirects=False)
    assert response.status_code == 303
    assert response.headers["location"] == "/overview?x=1"
    cookie = response.headers["set-cookie"]
    assert cookie.startswith(f"mdmem-ui-{PORT}=")
    assert TOKEN not in cookie  # the cookie is its own secret, not the URL's token
    assert "HttpOnly" in cookie and "samesite=strict" in cookie.lower() and "Path=/" in cookie
    again = client.get("/overview")
    assert again.status_code == 200 and "The prompt block" in again.text


@pytest.mark.parametrize(
    "host", ["evil.example", f"evil.example:{PORT}", "127.0.0.1:1", f"127.0.0.2:{PORT}", ""]
)
def test_a_foreign_host_header_is_refused(page: Page, host: str) -> None:
    """DNS rebinding: a site whose name now resolves to 127.0.0.1 gets nothing."""
    create(page.project, "Build")
    response = page.get("/", headers={"host": host})
    assert response.status_code == 421
    assert "Build" not in response.text
    token = page.client.get(f"/?token={TOKEN}", headers={"host": host}, follow_redirects=False)
    assert token.status_code == 421 and "set-cookie" not in token.headers


@pytest.mark.parametrize("host", [f"localhost:{PORT}", f"127.0.0.1:{PORT}", f"LOCALHOST:{PORT}"])
def test_the_loopback_names_are_accepted(page: Page, host: str) -> None:
    assert page.get("/", headers={"host": host}).status_code == 200


def test_every_response_has_the_strict_headers_and_no_cors(page: Page) -> None:
    name = create(page.project, "Build")
    responses = [
        page.get("/"),
        page.get("/static/style.css"),
        page.get(f"/note/project/{name}/raw"),
        page.get("/nowhere"),
        page.get("/", headers={"host": "evil.example", "origin": "http://evil.example"}),
        page.client.options("/", headers={"origin": "http://evil.example"}),
    ]
    for response in responses:
        assert response.headers["content-security-policy"] == CSP
        # One script, the page's own file: nothing inline, no eval, no other origin.
        assert "script-src 'self';" in CSP and "default-src 'none'" in CSP
        assert "unsafe" not in CSP and "connect-src 'self';" in CSP
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"
        assert response.headers["x-frame-options"] == "DENY"
        assert not [h for h in response.headers if h.lower().startswith("access-control-")]
    assert responses[-1].status_code == 405
    assert page.client.put("/").status_code == 405
    assert "<script" not in responses[0].text.lower()


@pytest.mark.parametrize(
    ("data", "headers"),
    [
        ({}, {}),  # no CSRF token
        ({"csrf": "wrong"}, {}),
        (None, {"origin": "http://evil.example"}),  # the right token, from another site
        (None, {"origin": "null"}),
        (None, {"sec-fetch-site": "cross-site"}),
    ],
)
def test_a_change_without_the_csrf_token_or_from_elsewhere_is_refused(
    page: Page, data: dict[str, str] | None, headers: dict[str, str]
) -> None:
    name = create(page.project, "Build")
    form = {"csrf": page.settings.csrf} if data is None else data
    response = page.post(f"/note/project/{name}/delete", form, csrf=False, headers=headers)
    assert response.status_code == 403
    assert page.project.exists(name)
    page.project.apply([{"action": "delete", "level": "project", "filename": name}])
    restore = page.post(
        "/trash/restore",
        {**form, "level": "project", "filename": name},
        csrf=False,
        headers=headers,
    )
    assert restore.status_code == 403 and not page.project.exists(name)


def test_a_form_from_the_page_itself_passes(page: Page) -> None:
    name = create(page.project, "Build")
    headers = {"origin": BASE, "sec-fetch-site": "same-origin"}
    response = page.post(f"/note/project/{name}/delete", {}, headers=headers)
    assert response.status_code == 303 and not page.project.exists(name)


# -- browsing ----------------------------------------------------------------------------


def test_the_list_shows_both_stores_with_their_fields(page: Page) -> None:
    create(page.project, "Build", summary="Run make.")
    create(page.user, "回答用中文", "请用中文回答。", summary="中文")
    response = page.get("/")
    assert response.headers["content-type"] == "text/html; charset=utf-8"
    text = text_of(response)
    assert "2 notes" in text
    for word in ("Build", "Run make.", "project_knowledge", "回答用中文", "user_preference"):
        assert word in text
    assert re.search(r"<time datetime=\"\d{4}-\d\d-\d\dT", response.text)
    assert f'href="/note/user/{quote("user_preference_回答用中文.md")}"' in response.text


def test_filter_by_level_and_type_and_sort_by_updated(page: Page) -> None:
    from datetime import datetime, timezone

    old = datetime(2026, 1, 1, tzinfo=timezone.utc)
    new = datetime(2026, 6, 1, tzinfo=timezone.utc)
    page.project.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "project_knowledge",
                "title": "Older",
                "content": "x",
            }
        ],
        now=old,
    )
    page.project.apply(
        [
            {
                "action": "create",
                "level": "project",
                "type": "reference_material",
                "title": "Newer",
                "content": "y",
            }
        ],
        now=new,
    )
    create(page.user, "Mine")
    both = text_of(page.get("/"))
    assert both.index("Newer") < both.index("Older")
    oldest = text_of(page.get("/?sort=oldest&level=project"))
    assert oldest.index("Older") < oldest.index("Newer") and "Mine" not in oldest
    user_only = text_of(page.get("/?level=user"))
    assert "Mine" in user_only and "Older" not in user_only
    typed = text_of(page.get("/?type=reference_material"))
    assert "Newer" in typed and "Older" not in typed and "Mine" not in typed


def test_markers_from_the_front_matter(page: Page) -> None:
    old = create(page.project, "Old build")
    write(page.project, "New build", supersedes=[old])
    write(page.project, "Gone", expires="2020-01-01")
    write(page.project, "Later", expires="2999-01-01")
    html = page.get("/").text
    assert "superseded by project_knowledge_new-build.md" in unescape(html)
    assert "marker-superseded" in html and "expired 2020-01-01" in html
    assert "marker-expires" in html and "2999-01-01" in html
    note = page.get(f"/note/project/{old}").text
    assert "superseded by" in note


def test_markers_from_a_store_that_offers_more(workspace: Path) -> None:
    class Marked(Store):
        def markers(self) -> dict[str, dict[str, str]]:
            return {"project_knowledge_build.md": {"stale": "stale: not used in 90 days"}}

    ws, _, user = resolve(str(workspace), None)
    project = Marked(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    create(project, "Build")
    page = Page(Stores(ws, project, user), settings())
    html = page.get("/").text
    assert "marker-stale" in html and "not used in 90 days" in html


def test_search_finds_words_and_chinese_with_a_snippet(page: Page) -> None:
    create(page.project, "Build", "Run `make test` before pushing.")
    create(page.project, "Deploy", "Tag, then push.")
    create(page.user, "语言", "请用中文回答问题。")
    text = text_of(page.get("/?q=make"))
    assert "Build" in text and "Deploy" not in text and "1 note matching" in text
    assert "make test" in text  # the snippet
    chinese = text_of(page.get(f"/?q={quote('中文')}"))
    assert "语言" in chinese and "Build" not in chinese
    assert "No note matches." in text_of(page.get("/?q=nothingatall"))
    assert "Build" not in text_of(page.get("/?q=make&level=user"))


def test_a_note_is_rendered_as_safe_markdown(page: Page) -> None:
    body = (
        "## Steps\n\n- run `make test`\n- **then** push\n\n"
        "<script>alert(1)</script> [docs](https://example.org/a?b=1) [x](javascript:alert(1))"
    )
    name = create(page.project, "Build", body, summary="Run make.")
    html = page.get(f"/note/project/{name}").text
    assert "<h3>Steps</h3>" in html
    assert "<li>run <code>make test</code></li>" in html
    assert "<strong>then</strong>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html and "<script" not in html
    assert '<a href="https://example.org/a?b=1&amp;b' not in html
    assert 'href="https://example.org/a?b=1"' in html
    assert 'href="javascript' not in html
    assert "Run make." in html and name in html


def test_the_raw_file_is_served_as_plain_text(page: Page) -> None:
    name = create(page.project, "Build", "<b>bold</b>")
    response = page.get(f"/note/project/{name}/raw")
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert response.text == (page.project.root / name).read_text(encoding="utf-8")


def test_a_broken_note_is_shown_with_a_way_to_fix_it(page: Page) -> None:
    create(page.project, "Fine")
    (page.project.root / "project_knowledge_broken.md").write_text("---\ntitle: [x\n---\nbody\n")
    listing = page.get("/").text
    assert "Files that cannot be read as notes" in listing
    assert "/note/project/project_knowledge_broken.md/source" in listing
    shown = page.get("/note/project/project_knowledge_broken.md")
    assert shown.status_code == 200
    assert "not a valid note" in shown.text and "title: [x" in unescape(shown.text)
    edit = page.get("/note/project/project_knowledge_broken.md/edit", follow_redirects=False)
    assert edit.status_code == 303 and edit.headers["location"].endswith("/source")


def test_the_overview_counts_and_shows_the_prompt_block_exactly(page: Page) -> None:
    create(page.project, "Build")
    create(page.project, "API", type="reference_material")
    create(page.user, "中文回答")
    response = page.get("/overview")
    block = merge(page.project.load_index(), page.user.load_index())
    assert "## Project Memory\n" in block
    shown = re.search(r'<pre class="raw block">(.*?)</pre>', response.text, re.S)
    assert shown and unescape(shown.group(1)) == block
    text = text_of(response)
    lines, size = len(block.splitlines()), len(block.encode("utf-8"))
    assert f"{lines} lines" in text and f"{size:,} bytes" in text
    from mdmem.extract.turn import estimate_tokens

    assert f"about {estimate_tokens(block):,} tokens" in text
    counts = re.search(r'<tr class="total">(.*?)</tr>', response.text)
    assert counts and re.findall(r"<td>(\d+)</td>", counts.group(1)) == ["2", "1", "3"]


# -- editing -----------------------------------------------------------------------------


def test_edit_saves_through_the_store_and_the_index_follows(page: Page) -> None:
    name = write(page.project, "Build", "Old body.", keep="me")
    form = page.get(f"/note/project/{name}/edit").text
    base = form_value(form, "base")
    assert base == digest((page.project.root / name).read_text(encoding="utf-8"))
    response = page.post(
        f"/note/project/{name}/edit",
        {
            "base": base,
            "title": "Build 构建",
            "summary": "New.",
            "type": "reference_material",
            "body": "New body.\r\n\r\n- one",
        },
    )
    assert response.status_code == 303
    note = page.project.read(name)
    assert (note.title, note.summary, note.type.value) == (
        "Build 构建",
        "New.",
        "reference_material",
    )
    assert note.body == "New body.\n\n- one" and note.extra["keep"] == "me"
    assert "Build 构建 — New." in page.project.load_index()
    shown = page.client.get(response.headers["location"])
    assert "Saved" in shown.text


def test_a_conflicting_edit_is_refused_and_the_typed_text_kept(page: Page) -> None:
    name = create(page.project, "Build", "Original.")
    base = form_value(page.get(f"/note/project/{name}/edit").text, "base")
    path = page.project.root / name
    path.write_text(path.read_text(encoding="utf-8").replace("Original.", "Changed by hand."))
    on_disk = path.read_text(encoding="utf-8")
    typed = {
        "base": base,
        "title": "Build",
        "summary": "",
        "type": "project_knowledge",
        "body": "My careful edit <i>.",
    }
    response = page.post(f"/note/project/{name}/edit", typed)
    assert response.status_code == 409
    assert path.read_text(encoding="utf-8") == on_disk
    html = unescape(response.text)
    assert "changed on disk" in html and "My careful edit <i>." in html
    assert "Changed by hand." in html  # the version on disk, to compare
    assert "<i>." not in response.text  # kept as text, escaped
    # Saving again, knowingly, replaces the version on disk.
    again = page.post(
        f"/note/project/{name}/edit", {**typed, "base": form_value(response.text, "base")}
    )
    assert again.status_code == 303 and page.project.read(name).body == "My careful edit <i>."


def test_a_broken_front_matter_on_save_is_refused_and_the_text_kept(page: Page) -> None:
    name = create(page.project, "Build", "Body.")
    path = page.project.root / name
    before = path.read_text(encoding="utf-8")
    source = page.get(f"/note/project/{name}/source").text
    assert "title: Build" in unescape(source)
    broken = before.replace("title: Build", "title: [Build") + "\nmy new paragraph\n"
    response = page.post(
        f"/note/project/{name}/source", {"base": form_value(source, "base"), "text": broken}
    )
    assert response.status_code == 422
    assert path.read_text(encoding="utf-8") == before
    html = unescape(response.text)
    assert "bad YAML in the front matter" in html and "my new paragraph" in html
    assert 'role="alert"' in response.text


def test_the_source_editor_saves_and_repairs_a_broken_note(page: Page) -> None:
    path = page.project.root / "project_knowledge_broken.md"
    page.project.root.mkdir(parents=True, exist_ok=True)
    path.write_text("---\ntitle: [x\n---\nbody\n", encoding="utf-8")
    source = page.get("/note/project/project_knowledge_broken.md/source").text
    fixed = "---\ntype: project_knowledge\ntitle: Fixed\nmine: kept\n---\nbody\n"
    response = page.post(
        "/note/project/project_knowledge_broken.md/source",
        {"base": form_value(source, "base"), "text": fixed},
    )
    assert response.status_code == 303
    note = page.project.read("project_knowledge_broken.md")
    assert note.title == "Fixed" and note.extra == {"mine": "kept"}
    assert page.project.problems() == []


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        ("title", "   ", "missing field 'title'"),
        ("body", "  ", "the body is empty"),
        ("type", "gossip", "is not one of"),
    ],
)
def test_an_invalid_edit_is_refused_with_the_text_kept(
    page: Page, field: str, value: str, error: str
) -> None:
    name = create(page.project, "Build", "Body.")
    before = (page.project.root / name).read_text(encoding="utf-8")
    base = form_value(page.get(f"/note/project/{name}/edit").text, "base")
    typed = {
        "base": base,
        "title": "Build",
        "summary": "Kept summary 摘要",
        "type": "project_knowledge",
        "body": "Body.",
    }
    response = page.post(f"/note/project/{name}/edit", {**typed, field: value})
    assert response.status_code == 422
    assert error in unescape(response.text) and "Kept summary 摘要" in unescape(response.text)
    assert (page.project.root / name).read_text(encoding="utf-8") == before


def test_a_stale_csrf_token_on_an_edit_keeps_the_text(page: Page) -> None:
    name = create(page.project, "Build", "Body.")
    base = form_value(page.get(f"/note/project/{name}/edit").text, "base")
    typed = {
        "csrf": "from-an-earlier-run",
        "base": base,
        "title": "Build",
        "summary": "",
        "type": "project_knowledge",
        "body": "Long typed text.",
    }
    response = page.post(f"/note/project/{name}/edit", typed, csrf=False)
    assert response.status_code == 422
    assert "CSRF" in response.text and "Long typed text." in response.text
    assert page.project.read(name).body == "Body."
    assert form_value(response.text, "csrf") == page.settings.csrf


def test_a_note_deleted_meanwhile_keeps_the_text(page: Page) -> None:
    name = create(page.project, "Build", "Body.")
    source = page.get(f"/note/project/{name}/source").text
    page.project.apply([{"action": "delete", "level": "project", "filename": name}])
    response = page.post(
        f"/note/project/{name}/source", {"base": form_value(source, "base"), "text": "typed"}
    )
    assert response.status_code == 422 and "typed" in response.text and "no note" in response.text


def test_secrets_are_redacted_on_save(page: Page) -> None:
    name = create(page.project, "Build", "Body.")
    key = "sk-ant-api03-" + "A" * 40
    base = form_value(page.get(f"/note/project/{name}/edit").text, "base")
    page.post(
        f"/note/project/{name}/edit",
        {
            "base": base,
            "title": f"Key {key}",
            "summary": f"s {key}",
            "type": "project_knowledge",
            "body": f"The key is {key}.",
        },
    )
    text = (page.project.root / name).read_text(encoding="utf-8")
    assert key not in text and text.count("[REDACTED:anthropic_key]") == 3
    source = page.get(f"/note/project/{name}/source").text
    page.post(
        f"/note/project/{name}/source",
        {
            "base": form_value(source, "base"),
            "text": unescape(
                re.search(r"<textarea[^>]*>\n(.*?)</textarea>", source, re.S).group(1)  # type: ignore[union-attr]
            )
            + f"\nagain {key}\n",
        },
    )
    assert key not in (page.project.root / name).read_text(encoding="utf-8")
    assert key not in page.project.load_index()


def test_mark_expired_keeps_the_note_and_shows_the_marker(page: Page) -> None:
    name = write(page.project, "Old build", "Use make 3.", mine="kept")
    shown = page.get(f"/note/project/{name}").text
    assert "Mark expired" in shown
    response = page.post(f"/note/project/{name}/expire", {"base": form_value(shown, "base")})
    assert response.status_code == 303
    note = page.project.read(name)
    assert note.extra["mine"] == "kept" and note.body == "Use make 3."
    assert "Marked" in page.client.get(response.headers["location"]).text
    assert "marker-expired" in page.get("/").text
    assert "Mark expired" not in page.get(f"/note/project/{name}").text


def test_mark_expired_refuses_a_note_changed_meanwhile(page: Page) -> None:
    name = create(page.project, "Build")
    shown = page.get(f"/note/project/{name}").text
    path = page.project.root / name
    path.write_text(path.read_text(encoding="utf-8") + "\nMore.\n", encoding="utf-8")
    before = path.read_text(encoding="utf-8")
    response = page.post(f"/note/project/{name}/expire", {"base": form_value(shown, "base")})
    assert response.status_code == 409 and "changed on disk" in response.text
    assert path.read_text(encoding="utf-8") == before
    no_csrf = page.post(f"/note/project/{name}/expire", {"base": "x"}, csrf=False)
    assert no_csrf.status_code == 403


# -- trash -------------------------------------------------------------------------------


def test_delete_to_the_trash_and_restore(page: Page) -> None:
    name = create(page.user, "中文回答")
    response = page.post(f"/note/user/{quote(name)}/delete", {})
    assert response.status_code == 303 and not page.user.exists(name)
    shown = page.client.get(response.headers["location"])
    assert f"Moved {name} to the trash." in unescape(shown.text) and "Undo" in shown.text
    trash = page.get("/trash")
    assert name in unescape(trash.text) and "Restore" in trash.text
    assert re.search(r"<td data-label=\"Deleted\">\d{4}-\d\d-\d\d \d\d:\d\d:\d\d</td>", trash.text)
    restored = page.post("/trash/restore", {"level": "user", "filename": name})
    assert restored.status_code == 303 and page.user.exists(name)
    assert "Restored" in page.client.get(restored.headers["location"]).text
    assert "The trash is empty." in page.get("/trash").text


def test_restore_over_an_existing_note_is_refused(page: Page) -> None:
    name = create(page.project, "Build", "First.")
    page.post(f"/note/project/{name}/delete", {})
    create(page.project, "Build", "Second.")
    response = page.post("/trash/restore", {"level": "project", "filename": name})
    assert response.status_code == 409 and "already exists" in response.text
    assert page.project.read(name).body == "Second."


def test_deleting_a_missing_note_is_an_error(page: Page) -> None:
    response = page.post("/note/project/project_knowledge_none.md/delete", {})
    assert response.status_code == 400 and "project_knowledge_none.md" in response.text


# -- hostile names -----------------------------------------------------------------------

HOSTILE = [
    "%2E%2E%2Fx.md",  # ../x.md, encoded so no client normalises it away
    "..%2F..%2Fetc%2Fpasswd",
    "MEMORY.md",
    "memory.MD",
    "x%00.md",
    ".hidden.md",
    "a%5Cb.md",  # a\b.md
    "%2Fetc%2Fpasswd",
    "x.txt",
]


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("tail", ["", "/raw", "/edit", "/source", "/history"])
def test_hostile_names_are_refused_on_every_page(page: Page, name: str, tail: str) -> None:
    create(page.project, "Build")
    response = page.get(f"/note/project/{name}{tail}")
    assert response.status_code in (400, 404), response.text
    assert "root:" not in response.text and "## Project Memory" not in response.text


@pytest.mark.parametrize("name", ["../x.md", "MEMORY.md", "x\x00.md", "/etc/passwd"])
def test_hostile_names_are_refused_in_forms(page: Page, name: str) -> None:
    response = page.post("/trash/restore", {"level": "project", "filename": name})
    assert response.status_code == 400 and "invalid note name" in response.text


def test_a_level_that_is_not_one_is_not_found(page: Page) -> None:
    create(page.project, "Build")
    assert page.get("/note/elsewhere/project_knowledge_build.md").status_code == 404
    response = page.post("/trash/restore", {"level": "root", "filename": "x.md"})
    assert response.status_code == 404


def test_a_symlink_out_of_the_store_is_never_served(page: Page, tmp_path: Path) -> None:
    create(page.project, "Build")
    secret = tmp_path / "secret.md"
    secret.write_text("---\ntype: project_knowledge\ntitle: SECRET\n---\nSECRET BODY\n")
    os.symlink(secret, page.project.root / "project_knowledge_link.md")
    for tail in ("", "/raw", "/edit", "/source"):
        response = page.get(f"/note/project/project_knowledge_link.md{tail}")
        assert response.status_code == 400, tail
        assert "SECRET BODY" not in response.text and "symlink" in response.text
    listing = page.get("/").text
    assert "SECRET BODY" not in listing
    response = page.post(
        "/note/project/project_knowledge_link.md/source",
        {"base": "x", "text": "---\ntype: project_knowledge\ntitle: t\n---\nb\n"},
    )
    assert response.status_code == 422 and "symlink" in response.text
    assert "SECRET BODY" in secret.read_text()


def test_unknown_pages_and_static_files_are_not_found(page: Page) -> None:
    for path in ("/static/../../pyproject.toml", "/static/%2E%2E/app.py", "/etc/passwd", "/x"):
        response = page.get(path)
        assert response.status_code == 404, path
        assert "[project]" not in response.text and "import" not in response.text


def test_a_huge_or_odd_form_is_refused(page: Page) -> None:
    name = create(page.project, "Build")
    big = page.client.post(
        f"/note/project/{name}/delete",
        content=b"csrf=" + b"a" * (1024 * 1024 + 10),
        headers={"content-type": "application/x-www-form-urlencoded", "origin": BASE},
    )
    assert big.status_code == 400 and "larger than" in big.text
    multipart = page.client.post(
        f"/note/project/{name}/delete",
        files={"csrf": ("x", page.settings.csrf)},
        headers={"origin": BASE},
    )
    assert multipart.status_code == 400
    assert page.project.exists(name)


# -- history and review: shown only where the API exists ---------------------------------


class Plain(Store):
    """A store without history (whether or not this mdmem's Store has it)."""

    history = None
    restore_version = None


def test_history_and_review_are_hidden_without_their_api(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(features._MODULES, "mdmem.manager.review", None)
    ws, _, user = resolve(str(workspace), None)
    project = Plain(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    page = Page(Stores(ws, project, user), settings())
    name = create(page.project, "Build")
    note = page.get(f"/note/project/{name}").text
    assert "/history" not in note and 'href="/review"' not in note
    assert page.get(f"/note/project/{name}/history").status_code == 404
    assert page.get("/review").status_code == 404


class Versioned(Store):
    """A store with the history and review API the page looks for (restore with a version)."""

    restore_version = None  # whether or not this mdmem's Store has it: use restore(version=)

    restored: list[tuple[str, str | None]]
    decided: list[tuple[str, list[str]]]

    def history(self, filename: str) -> list[dict[str, str]]:
        return [{"version": "2", "saved": "2026-11-30"}, {"version": "1", "saved": "2026-11-29"}]

    def restore(self, filename: str, version: str | None = None) -> str:  # type: ignore[override]
        self.restored.append((filename, version))
        return filename

    def proposals(self) -> list[dict[str, str]]:
        return [
            {"id": "p1", "action": "create", "title": "Proposed <b>"},
            {"id": "p2", "action": "update", "filename": "project_knowledge_build.md"},
        ]

    def accept(self, ids: list[str]) -> None:
        self.decided.append(("accept", ids))

    def reject(self, ids: list[str]) -> None:
        self.decided.append(("reject", ids))


def test_history_and_review_appear_with_their_api(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(features._MODULES, "mdmem.manager.review", None)  # the store's own methods
    ws, _, user = resolve(str(workspace), None)
    project = Versioned(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    project.restored, project.decided = [], []
    name = create(project, "Build")
    page = Page(Stores(ws, project, user), settings())
    note = page.get(f"/note/project/{name}").text
    assert f"/note/project/{name}/history" in note and 'href="/review"' in note
    history = page.get(f"/note/project/{name}/history")
    assert history.status_code == 200 and "2026-11-29" in history.text
    assert history.text.count("Restore this version") == 2
    response = page.post(f"/note/project/{name}/history/restore", {"version": "1"})
    assert response.status_code == 303 and project.restored == [(name, "1")]
    assert "a proposed change waits for review" in page.get("/").text
    review = page.get("/review")
    assert "Proposed &lt;b&gt;" in review.text and "Accept" in review.text
    assert page.post("/review/accept", {"level": "project", "id": "p1"}).status_code == 303
    assert page.post("/review/reject", {"level": "project", "id": "p1"}).status_code == 303
    assert page.post("/review/maybe", {"level": "project", "id": "p1"}).status_code == 404
    assert project.decided == [("accept", ["p1"]), ("reject", ["p1"])]
    assert (
        page.post("/review/accept", {"level": "project", "id": "p1"}, csrf=False).status_code == 403
    )


# -- the server and the command ----------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.5", "localhost", "::1", "[::1]"])
def test_loopback_addresses(host: str) -> None:
    assert is_loopback(host) and check_host(host) is None


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.2", "example.org"])
def test_other_addresses_are_refused_unless_allowed(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(InvalidOperation, match="--allow-remote"):
        check_host(host)
    warning = check_host(host, allow_remote=True)
    assert warning and "plain HTTP" in warning


def test_the_server_serves_on_a_free_loopback_port_and_stops(workspace: Path) -> None:
    ws, project, user = resolve(str(workspace), None)
    create(project, "Build")
    server = Server(Stores(ws, project, user))
    assert server.host.startswith("127.") and server.host != "127.0.0.1" and server.port > 0
    assert server.url == f"http://{server.host}:{server.port}/?token={server.token}"
    with server, httpx2.Client(follow_redirects=True) as client:
        assert client.get(server.base_url + "/").status_code == 403
        response = client.get(server.url)
        assert response.status_code == 200 and "Build" in response.text
        assert str(response.url) == server.base_url + "/"
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(server.base_url + "/", timeout=2)


def test_other_cookies_on_localhost_do_not_get_in_the_way(workspace: Path) -> None:
    ws, project, user = resolve(str(workspace), None)
    app = create_app(Stores(ws, project, user), settings())
    client = TestClient(app, base_url=BASE)
    cookie = client.get(f"/?token={TOKEN}", follow_redirects=False).cookies[f"mdmem-ui-{PORT}"]
    client.cookies.clear()
    odd = f'theme="dark; x"; a b=c; {f"mdmem-ui-{PORT}"}={cookie}; other=1'
    assert client.get("/", headers={"cookie": odd}).status_code == 200
    assert client.get("/", headers={"cookie": f"mdmem-ui-1={cookie}"}).status_code == 403


def test_an_address_for_every_interface_accepts_this_machines_names() -> None:
    import socket

    from mdmem.ui.server import _host_names

    assert _host_names("127.0.0.1") == {"127.0.0.1", "localhost", "[::1]"}
    assert socket.gethostname().lower() in _host_names("0.0.0.0")
    assert "[fe80::1]" in _host_names("fe80::1")


def test_two_servers_have_their_own_tokens_and_cookies(workspace: Path) -> None:
    ws, project, user = resolve(str(workspace), None)
    a, b = Server(Stores(ws, project, user)), Server(Stores(ws, project, user))
    try:
        assert a.token != b.token and a.settings.csrf != b.settings.csrf
        assert a.settings.cookie_name != b.settings.cookie_name
    finally:
        a.stop()
        b.stop()


def test_mdmem_ui_refuses_a_remote_address(workspace: Path) -> None:
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "mdmem",
            "--workspace",
            str(workspace),
            "ui",
            "--host",
            "0.0.0.0",
            "--no-browser",
        ],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("mdmem: error: ") and "--allow-remote" in proc.stderr
    assert proc.stdout == ""


def test_mdmem_ui_prints_the_url_serves_and_stops_on_ctrl_c(workspace: Path) -> None:
    _, project, _ = resolve(str(workspace), None)
    create(project, "Build")
    proc = subprocess.Popen(
        [PYTHON, "-m", "mdmem", "--workspace", str(workspace), "ui", "--no-browser"],
        env=python_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.\d+\.\d+\.\d+:\d+/\?token=[\w-]{20,}", url), url
        with httpx2.Client(follow_redirects=True, timeout=10) as client:
            response = client.get(url)
        assert response.status_code == 200 and "Build" in response.text
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err
    assert "stopped" in err and "Traceback" not in err
    assert url.split("token=")[1] not in err  # no access log writes the token down


def test_mdmem_ui_says_when_the_port_is_taken(workspace: Path) -> None:
    import socket

    from typer.testing import CliRunner

    from mdmem.cli import app

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        args = ["--workspace", str(workspace), "ui", "--no-browser", "--host", "127.0.0.1"]
        result = CliRunner().invoke(app, [*args, "--port", str(port)])
    assert result.exit_code == 1
    assert "mdmem: error: " in result.output and "in use" in result.output


def test_mdmem_ui_without_the_extra_says_how_to_get_it(workspace: Path) -> None:
    code = (
        "import sys; sys.modules['starlette'] = None; sys.modules['uvicorn'] = None\n"
        "from mdmem.cli import run; sys.exit(run(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [PYTHON, "-c", code, "--workspace", str(workspace), "ui", "--no-browser"],
        env=python_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert "'mdmem[mcp,dictionary,ui] @ git+" in proc.stderr and proc.stdout == ""


# -- paging ------------------------------------------------------------------------------


def _many(store: Store, count: int, kind: str = "project_knowledge") -> None:
    ops = [
        {
            "action": "create",
            "level": store.level.value,
            "type": kind if i % 3 else "reference_material",
            "title": f"Paged note {i:03d}",
            "content": f"Body {i}.",
        }
        for i in range(count)
    ]
    assert not store.apply(ops).rejected


def test_the_store_answers_a_page_filtered_and_sorted(page: Page) -> None:
    _many(page.project, 30)
    total, first = page.project.query(order="title", limit=10)
    assert total == 30 and [e.title for e in first] == [f"Paged note {i:03d}" for i in range(10)]
    total, refs = page.project.query(type="reference_material", order="name", offset=2, limit=3)
    assert total == 10 and len(refs) == 3 and all(e.type == "reference_material" for e in refs)
    assert [e.filename for e in refs] == sorted(e.filename for e in refs)
    keys = page.project.order_keys(order="title", limit=3)
    assert keys == [(e.filename, e.title) for e in first[:3]]
    with pytest.raises(ValueError):
        page.project.query(order="title; DROP TABLE notes")
    with pytest.raises(ValueError):
        page.project.order_keys(order="updated DESC --")


def test_the_list_is_paged_with_a_next_link(page: Page) -> None:
    _many(page.project, 70)
    _many(page.user, 5, "user_preference")
    first = page.get("/?sort=title")
    assert first.text.count('<tr>\n<td data-label="Note">') == 50
    assert "1–50 of 75 notes" in text_of(first)
    assert 'rel="next" href="/?sort=title&amp;page=2"' in first.text
    second = page.get("/?sort=title&page=2")
    assert second.text.count('<tr>\n<td data-label="Note">') == 25
    assert "51–75 of 75 notes" in text_of(second) and 'rel="next"' not in second.text
    assert 'rel="prev" href="/?sort=title"' in second.text
    shown = re.findall(r'class="title" href="([^"]+)"', first.text + second.text)
    assert len(shown) == len(set(shown)) == 75  # every note once, across the pages
    user_only = page.get("/?level=user")
    assert "5 notes" in text_of(user_only) and 'rel="next"' not in user_only.text
    assert page.get("/?page=0").status_code == 400
    assert page.get("/?page=²").status_code == 400
    assert "No notes on this page" in page.get("/?page=9").text


def test_search_results_are_paged(page: Page) -> None:
    # The recall engine ranks its best 50 candidates per store: 40 + 30 here.
    _many(page.project, 40)
    _many(page.user, 30, "user_preference")
    first = page.get("/?q=paged")
    assert first.text.count('<tr>\n<td data-label="Note">') == 50
    assert 'rel="next" href="/?q=paged&amp;page=2"' in first.text
    second = page.get("/?q=paged&page=2")
    assert second.text.count('<tr>\n<td data-label="Note">') == 20
    assert "results 51–70" in text_of(second) and 'rel="next"' not in second.text
