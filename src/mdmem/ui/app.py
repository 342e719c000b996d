"""The web page as an ASGI application (Starlette): its routes and pages, behind the guard.

Every request passes :class:`mdmem.ui.guard.Guard` first (Host, token and
cookie, origin, methods, security headers); every form that changes something
carries the run's CSRF token, checked here. The pages read and write through
:mod:`mdmem.ui.model` and :mod:`mdmem.ui.features`, which call the stores' API;
nothing is kept between requests but the run's secrets.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from importlib import resources
from typing import TYPE_CHECKING
from urllib.parse import parse_qs

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import (
    HTMLResponse,
    JSONResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
)
from starlette.routing import Route

from mdmem._kinds import Level
from mdmem.errors import InvalidNote, InvalidPath, LockTimeout, MdmemError, NoteExists, NoteNotFound
from mdmem.store import activity as store_activity
from mdmem.ui import activity, features, layout, model, pages, switch
from mdmem.ui.guard import Guard, Settings, same
from mdmem.ui.html import Markup

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable, Mapping

    from starlette.requests import Request
    from starlette.types import ASGIApp

    from mdmem.store.store import Store

__all__ = ["MAX_FORM_BYTES", "create_app"]

# A note is at most 256 KiB; percent-encoding can triple that.
MAX_FORM_BYTES = 1024 * 1024


# -- the application -----------------------------------------------------------------


def create_app(stores: model.Stores, settings: Settings) -> ASGIApp:
    """The web page over ``stores``, behind its guard."""
    ui = _Pages(stores, settings)
    routes = [
        Route("/", ui.home),
        Route("/overview", ui.overview),
        Route("/trash", ui.trash),
        Route("/trash/restore", ui.restore, methods=["POST"]),
        Route("/review", ui.review),
        Route("/timeline", ui.timeline),
        Route("/session/{sid}", ui.session),
        Route("/review/edit", ui.edit_proposal, methods=["GET", "POST"]),
        Route("/review/{verdict:str}", ui.decide, methods=["POST"]),
        Route("/static/style.css", ui.style),
        Route("/static/icon.svg", ui.icon),
        Route("/static/live.js", ui.script),
        Route("/live", ui.live),
        Route("/activity", ui.activity),
        Route("/activity/{session}", ui.activity_session),
        Route("/switch", ui.switcher, methods=["GET", "POST"]),
        Route("/switch/preview", ui.preview),
        Route("/note/{level}/{name}", ui.note),
        Route("/note/{level}/{name}/raw", ui.raw),
        Route("/note/{level}/{name}/edit", ui.edit, methods=["GET", "POST"]),
        Route("/note/{level}/{name}/source", ui.source, methods=["GET", "POST"]),
        Route("/note/{level}/{name}/delete", ui.delete, methods=["POST"]),
        Route("/note/{level}/{name}/expire", ui.expire, methods=["POST"]),
        Route("/note/{level}/{name}/dispute/{verdict:str}", ui.dispute, methods=["POST"]),
        Route("/note/{level}/{name}/history", ui.history),
        Route("/note/{level}/{name}/history/restore", ui.restore_version, methods=["POST"]),
    ]
    handlers: dict[type[Exception] | int, Callable[[Request, Exception], Awaitable[Response]]]
    handlers = {
        InvalidPath: ui.failed(400),
        NoteNotFound: ui.failed(404),
        NoteExists: ui.failed(409),
        LockTimeout: ui.failed(503),
        _Refused: ui.refused,
        MdmemError: ui.failed(400),
        404: ui.not_found,
        405: ui.not_allowed,
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, settings)


class _Pages:
    """The endpoints; each reads the stores afresh (the page keeps no state of its own)."""

    def __init__(self, stores: model.Stores, settings: Settings) -> None:
        self.stores = stores
        self.settings = settings

    # -- helpers

    def _review(self) -> bool:
        return any(features.has_review(s) for s in self.stores.both())

    def page(
        self,
        title: str,
        body: Markup,
        *,
        current: str = "",
        status: int = 200,
        message: Markup | None = None,
        live: bool = False,
    ) -> HTMLResponse:
        html = layout.layout(
            title,
            body,
            workspace=self.stores.workspace,
            current=current,
            message=message,
            review=self._review(),
            live=live,
        )
        return HTMLResponse(html, status_code=status)

    def failed(self, status: int) -> Callable[[Request, Exception], Awaitable[Response]]:
        async def handler(request: Request, exc: Exception) -> Response:
            return self.page("Error", layout.error_page(status, str(exc)), status=status)

        return handler

    async def refused(self, request: Request, exc: Exception) -> Response:
        status = exc.status if isinstance(exc, _Refused) else 400
        return self.page("Error", layout.error_page(status, str(exc)), status=status)

    async def not_found(self, request: Request, exc: Exception) -> Response:
        return self.page("Not found", layout.error_page(404, "There is no such page."), status=404)

    async def not_allowed(self, request: Request, exc: Exception) -> Response:
        return self.page("Error", layout.error_page(405, "Not allowed here."), status=405)

    def _store(self, request: Request) -> tuple[Store, str]:
        """The store and note name of a /note/... address; the name through the one validator."""
        from mdmem.store.paths import check_name

        try:
            store = self.stores.get(request.path_params["level"])
        except ValueError:
            level = str(request.path_params["level"])
            raise NoteNotFound(level, "a level (project or user)") from None
        return store, check_name(request.path_params["name"])

    async def form(self, request: Request, *, csrf: bool = True) -> dict[str, str]:
        """The POSTed form, after the CSRF check unless ``csrf`` is False; line ends as ``\\n``.

        Raises:
            MdmemError: no CSRF token, a wrong one, or a form too large or unreadable.
        """
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        data = bytearray()
        async for chunk in request.stream():
            data += chunk
            if len(data) > MAX_FORM_BYTES:
                raise _Refused(f"the form is larger than {MAX_FORM_BYTES} bytes")
        if data and kind != "application/x-www-form-urlencoded":
            raise _Refused("a form must be sent as application/x-www-form-urlencoded")
        try:
            text = data.decode("ascii")
            fields = parse_qs(text, keep_blank_values=True, max_num_fields=32, errors="strict")
        except (UnicodeDecodeError, ValueError):
            raise _Refused("the form cannot be read") from None
        form = {k: v[0].replace("\r\n", "\n").replace("\r", "\n") for k, v in fields.items()}
        if csrf and not self.csrf_ok(form):
            raise _Refused("the form's CSRF token is missing or wrong; reload the page", 403)
        return form

    def csrf_ok(self, form: Mapping[str, str]) -> bool:
        return same(form.get("csrf"), self.settings.csrf)

    async def _saving(
        self, form: Mapping[str, str], save: Callable[[], model.Edited]
    ) -> model.Edited:
        """Run ``save`` if the form's CSRF token is right; whatever fails, the typed text stays."""
        if not self.csrf_ok(form):
            # A page from before a restart of the server: show the text again, with a
            # fresh token, instead of throwing it away.
            return model.Edited(
                error="the form's CSRF token is missing or wrong; nothing was saved"
            )
        try:
            return await run_in_threadpool(save)
        except (MdmemError, OSError) as exc:  # deleted meanwhile, locked, a full disk, ...
            return model.Edited(error=str(exc))

    def _message(self, request: Request) -> Markup | None:
        q = request.query_params
        return layout.done_message(
            # Not "level": that one filters the list.
            q.get("done", ""),
            q.get("store", ""),
            q.get("note", ""),
            self.settings.csrf,
        )

    # -- pages

    async def style(self, request: Request) -> Response:
        css = resources.files("mdmem.ui").joinpath("style.css").read_text(encoding="utf-8")
        return Response(css, media_type="text/css; charset=utf-8")

    async def script(self, request: Request) -> Response:
        js = resources.files("mdmem.ui").joinpath("live.js").read_text(encoding="utf-8")
        return Response(js, media_type="text/javascript; charset=utf-8")

    async def live(self, request: Request) -> Response:
        version = await run_in_threadpool(model.version, self.stores)
        return JSONResponse({"v": version})

    async def activity(self, request: Request) -> Response:
        wanted = request.query_params.get("day")
        day = None
        if wanted is not None:
            day = activity.today() if wanted == "today" else wanted
            if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", day, flags=re.ASCII):
                raise _Refused(f"day: {wanted[:40]!r} is not a date (YYYY-MM-DD or today)")

        def build() -> tuple[list[activity.Session], Mapping[str, int], str]:
            found = activity.sessions_of(self.stores.project, day)
            totals = activity.day_totals(self.stores.user, day) if day else {}
            return found, totals, model.version(self.stores)

        found, totals, version = await run_in_threadpool(build)
        body = activity.activity_page(found, totals, day=day, live=layout.live_marker(version))
        return self.page("Activity", body, current="activity", live=True)

    async def activity_session(self, request: Request) -> Response:
        ident = str(request.path_params["session"])
        if not re.fullmatch(r"[A-Za-z0-9_-]{1,100}", ident, flags=re.ASCII):
            raise NoteNotFound(f"session {ident[:40]!r}", "the activity log")

        def build() -> tuple[list[dict[str, object]], str]:
            return store_activity.read(self.stores.project.path, ident), model.version(self.stores)

        events, version = await run_in_threadpool(build)
        if not events:
            raise NoteNotFound(f"session {ident}", "the activity log")
        body = activity.session_page(ident, events, live=layout.live_marker(version))
        return self.page(f"Session {ident[:8]}", body, current="activity", live=True)

    async def switcher(self, request: Request) -> Response:
        if request.method == "POST":
            form = await self.form(request)
            chosen = form.get("workspace", "")
            if chosen not in {w for w, _ in await run_in_threadpool(switch.known, self.stores)}:
                raise _Refused("that is not a workspace mdmem knows; pick one from the list")
            self.stores = await run_in_threadpool(switch.open_workspace, chosen, self.stores)
            return RedirectResponse("/" + layout.query_string(done="switched"), 303)
        rows = await run_in_threadpool(switch.summaries, self.stores)
        body = switch.switcher_page(rows, self.stores, self.settings.csrf)
        return self.page("Stores", body, current="stores", message=self._message(request))

    async def preview(self, request: Request) -> Response:
        chosen = request.query_params.get("workspace", "")

        def build() -> Markup:
            if chosen not in {w for w, _ in switch.known(self.stores)}:
                raise NoteNotFound(f"workspace {chosen[:200]!r}", "the workspaces mdmem knows")
            return switch.preview_page(chosen, self.stores, self.settings.csrf)

        body = await run_in_threadpool(build)
        return self.page("Preview a store", body, current="stores")

    async def icon(self, request: Request) -> Response:
        svg = resources.files("mdmem.ui").joinpath("icon.svg").read_text(encoding="utf-8")
        return Response(svg, media_type="image/svg+xml")

    async def home(self, request: Request) -> Response:
        q = request.query_params
        query = q.get("q", "").strip()[:500]
        level = q.get("level", "") if q.get("level") in ("project", "user") else ""
        note_type = q.get("type", "")
        sort = q.get("sort", "")
        number = _page_number(q.get("page", "1"))
        size = model.PAGE_SIZE

        def build() -> Markup:
            stores = self.stores.both()
            if query:
                if sort:  # sorted otherwise than by relevance: the best 200, sorted
                    found = model.sort_rows(
                        model.search_rows(query, stores, level=level, note_type=note_type), sort
                    )
                    more = len(found) > number * size
                    found = found[(number - 1) * size : number * size]
                else:
                    found = model.search_rows(
                        query,
                        stores,
                        level=level,
                        note_type=note_type,
                        offset=(number - 1) * size,
                        limit=size + 1,
                    )
                    more = len(found) > size
                    found = found[:size]
                total = None
            else:
                total, found = model.page_rows(
                    stores, level=level, note_type=note_type or None, sort=sort, page=number
                )
                more = number * size < total
            problems = [
                (s.level, p)
                for s in stores
                if not level or s.level.value == level
                for p in s.problems(max_age=model.FRESH_SECONDS)
            ]
            return pages.list_page(
                found,
                query=query,
                level=level,
                note_type=note_type,
                sort=sort,
                problems=problems,
                page=number,
                size=size,
                total=total,
                more=more,
            )

        body = await run_in_threadpool(build)
        return self.page("Notes", body, current="notes", message=self._message(request))

    async def overview(self, request: Request) -> Response:
        view = await run_in_threadpool(model.overview, self.stores)
        return self.page("Overview", pages.overview_page(view), current="overview")

    async def timeline(self, request: Request) -> Response:
        from mdmem.ui.timeline import timeline_page

        body = await run_in_threadpool(timeline_page, self.stores.project.path)
        return self.page("Timeline", body, current="timeline")

    async def session(self, request: Request) -> Response:
        from mdmem.ui.timeline import session_page

        sid = str(request.path_params["sid"])
        body = await run_in_threadpool(session_page, self.stores.project.path, sid)
        if body is None:
            return await self.not_found(request, LookupError(sid))
        return self.page("Session", body, current="timeline")

    async def trash(self, request: Request) -> Response:
        items = await run_in_threadpool(model.trash_of, self.stores)
        return self.page(
            "Trash",
            pages.trash_page(items, self.settings.csrf),
            current="trash",
            message=self._message(request),
        )

    async def restore(self, request: Request) -> Response:
        form = await self.form(request)
        from mdmem.store.paths import check_name

        try:
            store = self.stores.get(form.get("level", ""))
        except ValueError:
            raise NoteNotFound(form.get("level", ""), "a level (project or user)") from None
        name = check_name(form.get("filename", ""))
        await run_in_threadpool(store.restore, name)
        target = layout.note_url(store.level, name) + layout.query_string(
            done="restored", note=name
        )
        return RedirectResponse(target, status_code=303)

    async def note(self, request: Request) -> Response:
        store, name = self._store(request)

        def build() -> tuple[str, Markup]:
            try:
                text = store.read_text(name)
                note = store.read(name)
            except InvalidNote as exc:
                try:
                    raw: str | None = store.read_text(name)
                except InvalidNote:
                    raw = None
                return name, pages.broken_page(
                    store.level, name, exc.reason, raw, self.settings.csrf
                )
            marks = model.note_markers(store, note, _now())
            has_history = features.has_history(store)
            return note.title, pages.note_page(
                store.level,
                note,
                marks,
                self.settings.csrf,
                base=model.digest(text),
                history=has_history,
                dispute=features.dispute_of(store)(name),
            )

        title, body = await run_in_threadpool(build)
        return self.page(title, body, message=self._message(request))

    async def raw(self, request: Request) -> Response:
        store, name = self._store(request)
        text = await run_in_threadpool(store.read_text, name)
        # text/plain and nosniff: the browser shows the file, never runs it.
        return PlainTextResponse(text, media_type="text/plain; charset=utf-8")

    async def edit(self, request: Request) -> Response:
        store, name = self._store(request)
        if request.method == "GET":
            text = await run_in_threadpool(store.read_text, name)
            try:
                note = await run_in_threadpool(store.read, name)
            except InvalidNote:
                return RedirectResponse(layout.note_url(store.level, name, "/source"), 303)
            body = pages.edit_page(
                store.level,
                name,
                title=note.title,
                summary=note.summary,
                type=note.type.value,
                body=note.body,
                base=model.digest(text),
                csrf=self.settings.csrf,
            )
            return self.page(f"Edit {name}", body)
        form = await self.form(request, csrf=False)
        typed = {k: form.get(k, "") for k in ("title", "summary", "type", "body")}
        base = form.get("base", "")
        result = await self._saving(form, lambda: model.save_fields(store, name, base, **typed))
        if result.ok:
            return _saved(store.level, name, result.action)
        body = pages.edit_page(
            store.level,
            name,
            **typed,
            base=result.base or base,
            csrf=self.settings.csrf,
            error=result.error,
            current=result.current,
        )
        return self.page(f"Edit {name}", body, status=409 if result.current else 422)

    async def source(self, request: Request) -> Response:
        store, name = self._store(request)
        if request.method == "GET":
            text = await run_in_threadpool(store.read_text, name)
            body = pages.source_page(
                store.level, name, text=text, base=model.digest(text), csrf=self.settings.csrf
            )
            return self.page(f"Edit {name}", body)
        form = await self.form(request, csrf=False)
        text, base = form.get("text", ""), form.get("base", "")
        result = await self._saving(form, lambda: model.save_source(store, name, base, text))
        if result.ok:
            return _saved(store.level, name, result.action)
        body = pages.source_page(
            store.level,
            name,
            text=text,
            base=result.base or base,
            csrf=self.settings.csrf,
            error=result.error,
            current=result.current,
        )
        return self.page(f"Edit {name}", body, status=409 if result.current else 422)

    async def expire(self, request: Request) -> Response:
        store, name = self._store(request)
        form = await self.form(request)
        result = await run_in_threadpool(model.expire, store, name, form.get("base", ""))
        if not result.ok:
            raise _Refused(f"{name}: {result.error}", 409 if result.current else 400)
        return _saved(store.level, name, "expired")

    async def dispute(self, request: Request) -> Response:
        store, name = self._store(request)
        await self.form(request)
        verdict = str(request.path_params["verdict"])
        at = _now().isoformat(timespec="seconds")
        await run_in_threadpool(features.settle_dispute, store, name, verdict, at)
        done = "dismissed" if verdict == "dismiss" else "disputed"
        return RedirectResponse(
            layout.note_url(store.level, name) + layout.query_string(done=done, note=name), 303
        )

    async def delete(self, request: Request) -> Response:
        store, name = self._store(request)
        await self.form(request)
        op = {"action": "delete", "level": store.level.value, "filename": name}
        result = await run_in_threadpool(store.apply, [op])
        if result.rejected:
            raise _Refused(f"{name}: {result.rejected[0].reason}")
        done = layout.query_string(done="deleted", store=store.level.value, note=name)
        return RedirectResponse("/" + done, status_code=303)

    async def history(self, request: Request) -> Response:
        store, name = self._store(request)
        wanted = request.query_params.get("version")
        if wanted is not None and not (wanted.isascii() and wanted.isdigit()):
            raise _Refused(f"version: {wanted[:40]!r} is not a version number")

        def build() -> tuple[list[dict[str, str]], dict[str, str | None]] | None:
            versions = features.history_of(store, name)
            if versions is None:
                return None
            if wanted is not None:
                at = [i for i, v in enumerate(versions) if v.get("version") == wanted.lstrip("0")]
                if not at:
                    raise NoteNotFound(f"{name} version {wanted}", store.path)
                versions = versions[at[0] : at[0] + 2]  # it, and the one before it
            numbers = [v.get("version", "") for v in versions]
            return versions, {n: features.version_text(store, name, n) for n in numbers}

        found = await run_in_threadpool(build)
        if found is None:
            raise NoteNotFound(f"history of {name}", store.path)
        versions, texts = found
        if wanted is not None:
            versions = versions[:1]
        body = pages.history_page(
            store.level,
            name,
            versions,
            texts,
            self.settings.csrf,
            restore=features.restorable(store),
        )
        return self.page(f"History of {name}", body, message=self._message(request))

    async def restore_version(self, request: Request) -> Response:
        store, name = self._store(request)
        form = await self.form(request)
        await run_in_threadpool(features.restore_version, store, name, form.get("version", ""))
        return _saved(store.level, name, "restored")

    async def review(self, request: Request) -> Response:
        def build() -> dict[Level, list[dict[str, str]]] | None:
            found = {s.level: features.proposals_of(s) for s in self.stores.both()}
            kept = {level: items for level, items in found.items() if items is not None}
            return kept or None

        proposals = await run_in_threadpool(build)
        if proposals is None:
            raise NoteNotFound("review", "this version of mdmem (review mode is not available)")
        editable = features.can_edit_proposals()
        version = await run_in_threadpool(model.version, self.stores)
        body = pages.review_page(
            proposals, self.settings.csrf, editable=editable, live=layout.live_marker(version)
        )
        return self.page(
            "Review", body, current="review", message=self._message(request), live=True
        )

    def _level(self, value: str) -> Store:
        try:
            return self.stores.get(value)
        except ValueError:
            raise NoteNotFound(value, "a level (project or user)") from None

    async def edit_proposal(self, request: Request) -> Response:
        if not features.can_edit_proposals():
            raise NoteNotFound("review", "this version of mdmem (proposals cannot be edited)")
        if request.method == "GET":
            store = self._level(request.query_params.get("level", ""))
            ident = request.query_params.get("id", "")
            op = await run_in_threadpool(features.proposal_op, store, ident)
            typed = {k: str(op.get(k) or "") for k in ("title", "summary", "type", "content")}
            body = pages.proposal_page(store.level, ident, **typed, csrf=self.settings.csrf)
            return self.page("Edit a proposal", body, current="review")
        form = await self.form(request, csrf=False)
        store = self._level(form.get("level", ""))
        ident = form.get("id", "")
        typed = {k: form.get(k, "") for k in ("title", "summary", "type", "content")}

        def accept() -> model.Edited:
            op = {**features.proposal_op(store, ident), **typed}
            result = features.decide(store, ident, "accept", op)
            rejected = getattr(result, "rejected", ())
            if rejected:
                return model.Edited(error=str(getattr(rejected[0], "reason", rejected[0])))
            return model.Edited(action="accepted")

        result = await self._saving(form, accept)
        if result.ok:
            return RedirectResponse("/review" + layout.query_string(done="accepted"), 303)
        body = pages.proposal_page(
            store.level, ident, **typed, csrf=self.settings.csrf, error=result.error
        )
        return self.page("Edit a proposal", body, current="review", status=422)

    async def decide(self, request: Request) -> Response:
        verdict = request.path_params["verdict"]
        form = await self.form(request)
        try:
            store = self.stores.get(form.get("level", ""))
        except ValueError:
            raise NoteNotFound(form.get("level", ""), "a level (project or user)") from None
        await run_in_threadpool(features.decide, store, form.get("id", ""), verdict)
        done = "accepted" if verdict == "accept" else "rejected"
        return RedirectResponse("/review" + layout.query_string(done=done), status_code=303)


class _Refused(MdmemError):
    """A request refused by the page itself (a bad form, a missing CSRF token)."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason, status)
        self.reason = reason
        self.status = status

    def __str__(self) -> str:
        return self.reason


def _saved(level: Level, name: str, action: str | None) -> Response:
    done = action if action in ("unchanged", "restored", "expired") else "saved"
    return RedirectResponse(
        layout.note_url(level, name) + layout.query_string(done=done, note=name), status_code=303
    )


def _page_number(text: str) -> int:
    """The ``page=`` of a list: a number from 1, in ASCII digits.

    Raises:
        _Refused: anything else.
    """
    if not (text.isascii() and text.isdigit()) or len(text) > 6 or int(text) < 1:
        raise _Refused(f"page: {text[:40]!r} is not a page number (1, 2, ...)")
    return int(text)


def _now() -> datetime:
    return datetime.now(timezone.utc)
