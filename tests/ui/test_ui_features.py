"""The page's optional sections, bound to the APIs other parts of mdmem offer (or fakes of them).

History, review, stale and disputed marks appear on the page only when this
mdmem has them; here they are stood in for by a store subclass or by modules
put in ``features._MODULES`` under the names the page looks up.
"""

from __future__ import annotations

import re
import types
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from builders import Page, form_value
from builders import add_note as create
from builders import ui_settings as settings
from mdmem import Level, NoteNotFound, Store
from mdmem.store.results import Applied, ApplyResult, Rejected
from mdmem.store.workspace import resolve
from mdmem.ui import features
from mdmem.ui.model import Stores


@dataclass(frozen=True)
class Version:
    version: int
    at: str
    source: str
    action: str


class Versioned(Store):
    """History as ``Store.history`` / ``Store.restore_version`` give it: oldest first."""

    restored: list[tuple[str, int | str]]

    def history(self, filename: str) -> list[Version]:
        return [
            Version(1, "2026-11-29T10:00:00+00:00", "worker", "create"),
            Version(2, "2026-11-30T10:00:00+00:00", "cli", "update"),
        ]

    def restore_version(self, filename: str, version: int | str) -> str:
        self.restored.append((filename, version))
        return "update"


def test_history_newest_first_and_a_version_restored(workspace: Path) -> None:
    ws, _, user = resolve(str(workspace), None)
    project = Versioned(workspace / ".PseudoClaude" / "memory", Level.PROJECT)
    project.restored = []
    name = create(project, "Build")
    page = Page(Stores(ws, project, user), settings())
    assert f"/note/project/{name}/history" in page.get(f"/note/project/{name}").text
    html = page.get(f"/note/project/{name}/history").text
    assert html.index("2026-11-30") < html.index("2026-11-29")
    response = page.post(f"/note/project/{name}/history/restore", {"version": "1"})
    assert response.status_code == 303 and project.restored == [(name, 1)]
    refused = page.post(f"/note/project/{name}/history/restore", {"version": "1"}, csrf=False)
    assert refused.status_code == 403 and len(project.restored) == 1


@dataclass
class Proposal:
    id: str
    level: str
    op: dict[str, object]
    created: str = "2026-12-01T09:00:00+00:00"
    turn: str = "t1"


@dataclass
class Review:
    """A stand-in for mdmem.manager.review: pending, accept (with an edited op), reject."""

    waiting: list[Proposal] = field(default_factory=list)
    decided: list[tuple[str, str, dict[str, object] | None]] = field(default_factory=list)
    refuse: str = ""

    def module(self) -> types.ModuleType:
        module = types.ModuleType("mdmem.manager.review")

        def pending(store: Store) -> list[Proposal]:
            return [p for p in self.waiting if p.level == store.level.value]

        def accept(store: Store, pid: str, op: dict[str, object] | None = None) -> ApplyResult:
            self.decided.append(("accept", pid, op))
            if self.refuse:
                return ApplyResult((), (Rejected(op, self.refuse),))
            self.waiting = [p for p in self.waiting if p.id != pid]
            return ApplyResult((Applied("create", "x.md", store.level),), ())

        def reject(store: Store, pid: str) -> None:
            self.decided.append(("reject", pid, None))
            self.waiting = [p for p in self.waiting if p.id != pid]

        module.pending = pending  # type: ignore[attr-defined]
        module.accept = accept  # type: ignore[attr-defined]
        module.reject = reject  # type: ignore[attr-defined]
        return module


@pytest.fixture
def review(monkeypatch: pytest.MonkeyPatch) -> Review:
    fake = Review(
        [
            Proposal(
                "p1",
                "project",
                {
                    "action": "create",
                    "type": "project_knowledge",
                    "title": "Use <make>",
                    "content": "Run make.",
                    "level": "project",
                },
            ),
            Proposal(
                "p2",
                "project",
                {
                    "action": "update",
                    "filename": "project_knowledge_build.md",
                    "content": "Run make twice.",
                    "level": "project",
                },
            ),
        ]
    )
    monkeypatch.setitem(features._MODULES, "mdmem.manager.review", fake.module())
    return fake


def test_review_lists_accepts_and_rejects_proposals(page: Page, review: Review) -> None:
    create(page.project, "Build")
    listing = page.get("/").text
    assert 'href="/review"' in listing and "a proposed change waits for review" in listing
    html = page.get("/review").text
    assert "Use &lt;make&gt;" in html and "Run make twice." in html
    assert "Edit, then accept" in html
    assert page.post("/review/accept", {"level": "project", "id": "p1"}).status_code == 303
    assert page.post("/review/reject", {"level": "project", "id": "p2"}).status_code == 303
    assert [(v, p) for v, p, _ in review.decided] == [("accept", "p1"), ("reject", "p2")]
    assert "Nothing waiting." in page.get("/review").text
    forged = page.post("/review/accept", {"level": "project", "id": "p1"}, csrf=False)
    assert forged.status_code == 403 and len(review.decided) == 2


def test_a_proposal_edited_then_accepted(page: Page, review: Review) -> None:
    form = page.get("/review/edit?level=project&id=p1").text
    assert form_value(form, "title") == "Use <make>"
    response = page.post(
        "/review/edit",
        {
            "level": "project",
            "id": "p1",
            "title": "Use make",
            "summary": "Make.",
            "type": "project_knowledge",
            "content": "Run `make` first.",
        },
    )
    assert response.status_code == 303
    _, pid, op = review.decided[-1]
    assert pid == "p1" and op is not None
    assert (op["title"], op["content"], op["action"]) == ("Use make", "Run `make` first.", "create")


def test_a_refused_proposal_edit_keeps_the_typed_text(page: Page, review: Review) -> None:
    review.refuse = "title: longer than 120 characters"
    typed = {
        "level": "project",
        "id": "p1",
        "title": "T" * 130,
        "summary": "",
        "type": "project_knowledge",
        "content": "My careful words.",
    }
    response = page.post("/review/edit", typed)
    assert response.status_code == 422
    assert "longer than 120" in response.text and "My careful words." in response.text
    stale = page.post("/review/edit", {**typed, "csrf": "old"}, csrf=False)
    assert stale.status_code == 422 and "My careful words." in stale.text


def test_stale_and_disputed_marks_from_their_modules(
    page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = create(page.project, "Build")
    from mdmem.store import marks

    monkeypatch.setattr(marks, "cached_marks", lambda root: {name: "path gone: src/old.py"})
    disputes = types.ModuleType("mdmem.recall.disputes")
    disputes.disputed = lambda store: {  # type: ignore[attr-defined]
        name: {"at": "2026-12-01", "count": 1, "reason": "the user said <no>"}
    }
    monkeypatch.setitem(features._MODULES, "mdmem.recall.disputes", disputes)
    html = page.get("/").text
    assert "stale: path gone: src/old.py" in html
    # A short marker in the list; the correction's words in full on the note's page.
    assert '<span class="marker marker-disputed">disputed</span>' in html
    assert "the user said" not in html
    note = page.get(f"/note/project/{name}").text
    assert "marker-stale" in note and "the user said &lt;no&gt;" in note


def test_without_the_modules_nothing_is_offered(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for module in ("mdmem.manager.review", "mdmem.recall.disputes"):
        monkeypatch.setitem(features._MODULES, module, None)  # as if this mdmem had none of them
    _, project, _ = resolve(str(workspace), None)
    create(project, "Build")
    assert not features.has_review(project)
    assert features.proposals_of(project) is None
    assert not features.can_edit_proposals()
    assert features.markers(project) == {}  # and no staleness check has run
    with pytest.raises(NoteNotFound):
        features.decide(project, "p1", "accept")


def test_search_goes_through_the_recall_engine_where_there_is_one(
    page: Page, monkeypatch: pytest.MonkeyPatch
) -> None:
    import mdmem.recall

    @dataclass(frozen=True)
    class Hit:
        filename: str
        level: Level
        title: str
        summary: str
        score: float
        snippet: str
        updated: None = None

    name = create(page.project, "Build", "Run make.")
    calls: list[tuple[list[str], str, int, list[str] | None]] = []

    def engine(
        stores: list[Store], query: str, *, limit: int = 10, types: list[str] | None = None
    ) -> list[Hit]:
        calls.append(([s.level.value for s in stores], query, limit, types))
        return [Hit(name, Level.PROJECT, "Build", "", 1, "…ranked by the engine…")]

    monkeypatch.setattr(mdmem.recall, "search", engine, raising=False)
    html = page.get("/?q=anything&type=project_knowledge").text
    assert "ranked by the engine" in html and "project_knowledge" in html
    assert calls == [(["project", "user"], "anything", 51, ["project_knowledge"])]  # a page, +1


def test_the_history_of_a_real_store(page: Page) -> None:
    """Store.history and Store.restore_version, end to end through the page."""
    name = create(page.project, "Build", "First version.")
    page.project.apply(
        [{"action": "update", "level": "project", "filename": name, "content": "Second."}]
    )
    assert page.project.read(name).body == "Second."
    html = page.get(f"/note/project/{name}/history").text
    versions = re.findall(r'name="version" value="([^"]+)"', html)
    assert len(versions) >= 2 and versions == sorted(versions, key=int, reverse=True)
    response = page.post(f"/note/project/{name}/history/restore", {"version": versions[-1]})
    assert response.status_code == 303
    assert page.project.read(name).body == "First version."
    assert page.post(f"/note/project/{name}/history/restore", {"version": "999"}).status_code == 404


def test_review_and_disputes_of_the_real_modules(page: Page) -> None:
    """mdmem.manager.review and mdmem.recall.disputes, end to end through the page."""
    from mdmem.manager import review as real_review
    from mdmem.recall import disputes

    name = create(page.project, "Build", "Run make.")
    disputes.mark(page.project, [name], turn="t0", at="2026-12-01", reason="the user said no")
    ops = [
        {
            "action": "create",
            "level": "project",
            "type": "project_knowledge",
            "title": t,
            "content": f"About {t}.",
        }
        for t in ("Lint", "Deploy")
    ]
    ids, _ = real_review.propose(page.project, ops, turn="t1")
    listing = page.get("/").text
    assert 'marker-disputed">disputed<' in listing and 'href="/review"' in listing
    note = page.get(f"/note/project/{name}").text
    assert "the user said no" in note and "Dismiss the dispute" in note
    # A false dispute is dismissed: a POST with the CSRF token, recorded, reversible.
    assert page.post(f"/note/project/{name}/dispute/dismiss", {}, csrf=False).status_code == 403
    assert name in disputes.disputed(page.project)
    done = page.post(f"/note/project/{name}/dispute/dismiss", {})
    assert done.status_code == 303 and disputes.disputed(page.project) == {}
    assert disputes.dismissed(page.project)[name]["reason"] == "the user said no"
    note = page.get(f"/note/project/{name}").text
    assert "A dismissed dispute" in note and "marker-disputed" not in note
    assert page.post(f"/note/project/{name}/dispute/restore", {}).status_code == 303
    assert name in disputes.disputed(page.project)
    assert page.post(f"/note/project/{name}/dispute/maybe", {}).status_code == 404
    html = page.get("/review").text
    assert all(i in html for i in ids) and "Edit, then accept" in html
    edited = {
        "level": "project",
        "id": ids[0],
        "title": "Lint first",
        "summary": "",
        "type": "project_knowledge",
        "content": "Run ruff before make.",
    }
    assert page.post("/review/edit", edited).status_code == 303
    assert page.post("/review/reject", {"level": "project", "id": ids[1]}).status_code == 303
    titles = {e.title for e in page.project.entries()}
    assert "Lint first" in titles and "Deploy" not in titles
    assert real_review.pending(page.project) == []
    again = page.post("/review/accept", {"level": "project", "id": ids[0]})
    assert again.status_code in (400, 404) and "no waiting proposal" in again.text
