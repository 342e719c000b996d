"""Builders shared by the tests: one way to spell an operation and a store.

Import them as ``from builders import create_op, new_store`` (``tests/`` is on the path);
the matching fixtures (``store``) live in ``conftest.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from mdmem import Level, Store

if TYPE_CHECKING:
    import httpx2

    from mdmem.ui.guard import Settings
    from mdmem.ui.model import Stores

__all__ = [
    "BASE",
    "TOKEN",
    "Page",
    "add_note",
    "create_op",
    "delete_op",
    "fill",
    "form_value",
    "new_store",
    "text_of",
    "ui_settings",
    "update_op",
]


def create_op(
    title: str,
    content: str | None = None,
    *,
    level: str = "project",
    type: str | None = None,
    summary: str | None = None,
    **extra: object,
) -> dict[str, object]:
    """A ``create`` operation as a model would answer it.

    The type follows the level (``project_knowledge`` / ``user_preference``) unless
    given; the content defaults to a sentence naming the title, so two titles never
    make two identical notes; ``extra`` adds keys (``supersedes``, ``expires``, ``slug``).
    """
    op: dict[str, object] = {
        "action": "create",
        "level": level,
        "type": type or ("project_knowledge" if level == "project" else "user_preference"),
        "title": title,
    }
    if summary is not None:
        op["summary"] = summary
    op["content"] = f"What {title} says." if content is None else content
    op.update(extra)
    return op


def update_op(
    filename: str, content: str, *, level: str = "project", **extra: object
) -> dict[str, object]:
    """An ``update`` operation of ``filename``."""
    return {"action": "update", "level": level, "filename": filename, "content": content, **extra}


def delete_op(filename: str, *, level: str = "project") -> dict[str, object]:
    """A ``delete`` operation of ``filename``."""
    return {"action": "delete", "level": level, "filename": filename}


def new_store(root: Path, level: Level = Level.PROJECT) -> Store:
    """A store at ``root`` (created on first write)."""
    return Store(root, level)


def add_note(store: Store, title: str, body: str = "Some body.", **fields: object) -> str:
    """Apply one ``create`` at ``store``'s level; assert it was applied; return the file name."""
    op = create_op(title, body, level=store.level.value, **fields)
    result = store.apply([op])
    assert not result.rejected, result.rejected
    return result.applied[0].filename


#: A note as a clone brings it: front matter and body, nothing derived.
CLONED_NOTE = (
    "---\ntype: {type}\ntitle: {title}\nsummary: {summary}\nupdated: {updated}\n---\n{body}\n"
)
CLONED_TYPES = ["project_knowledge", "reference_material", "user_preference", "correction_feedback"]


def fill(root: Path, count: int) -> None:
    """``count`` notes written as a clone brings them (no derived state), names out of order."""
    root.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        kind = CLONED_TYPES[i % 4]
        title = f"构建 {i}" if i % 5 == 0 else f"Note number {i}"
        name = f"{kind}_n{(i * 7919) % 100_000:05d}.md" if i % 3 else f"{kind}_笔记-{i}.md"
        (root / name).write_text(
            CLONED_NOTE.format(
                type=kind,
                title=title,
                summary=f"About {i}.",
                updated=f"2026-01-{1 + i % 28:02d}T00:00:00Z",
                body=f"cache retry worker {i} " * 5,
            ),
            encoding="utf-8",
        )


# -- the web page: a logged-in client of the app (tests/ui/) ------------------------------

UI_PORT = 8765
BASE = f"http://127.0.0.1:{UI_PORT}"
TOKEN = "the-token-of-this-run"


def ui_settings() -> Settings:
    """The page's settings for a test: the token above, the loopback names on ``UI_PORT``."""
    from mdmem.ui.guard import Settings

    hosts = frozenset({f"127.0.0.1:{UI_PORT}", f"localhost:{UI_PORT}", f"[::1]:{UI_PORT}"})
    return Settings(token=TOKEN, allowed_hosts=hosts, cookie_name=f"mdmem-ui-{UI_PORT}")


class Page:
    """A logged-in client of the app, and the stores it serves."""

    def __init__(self, stores: Stores, settings: Settings) -> None:
        from starlette.testclient import TestClient

        from mdmem.ui.app import create_app

        self.stores = stores
        self.settings = settings
        self.client = TestClient(create_app(stores, settings), base_url=BASE)
        response = self.client.get(f"/?token={TOKEN}", follow_redirects=False)
        assert response.status_code == 303

    @property
    def project(self) -> Store:
        return self.stores.project

    @property
    def user(self) -> Store:
        return self.stores.user

    def get(
        self, path: str, *, headers: dict[str, str] | None = None, follow_redirects: bool = True
    ) -> httpx2.Response:
        return self.client.get(path, headers=headers, follow_redirects=follow_redirects)

    def post(
        self,
        path: str,
        data: dict[str, str],
        *,
        csrf: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx2.Response:
        form = {"csrf": self.settings.csrf, **data} if csrf else data
        sent = {"origin": BASE, **(headers or {})}  # as a browser says on every POST
        return self.client.post(path, data=form, headers=sent, follow_redirects=False)


def text_of(response: httpx2.Response) -> str:
    """The page's text without tags, unescaped, white space collapsed: what a person reads."""
    import re
    from html import unescape

    return " ".join(unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


def form_value(html: str, name: str) -> str:
    """The value of the form field ``name`` in ``html``."""
    import re
    from html import unescape

    match = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert match, name
    return unescape(match.group(1))
