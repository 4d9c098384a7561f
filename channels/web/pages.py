"""The console's routes: sign-in, queue, request pages and their actions, history,
webhooks, channel health, live updates, and the scanner-safe request links `/r/<rid>`.

GETs never change anything (but for taking a one-time notice). Every `/console` POST must come
from a page of this site (its Origin, or Referer); those of a session also carry its CSRF token.
A `/r/<rid>` POST carries the link's own token and a MAC of it. Another project's request is a
404, as in the API. Notices are composed by the server, never read from the URL.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from channels.web import actions, render
from channels.web.auth import (
    Viewer,
    check_password,
    console_people,
    csrf_ok,
    csrf_token,
    end_every_session,
    end_session,
    expected_origin,
    flash,
    load_viewer,
    origin_ok,
    spend_sign_in_link,
    start_session,
    take_flash,
    viewer_of,
)
from gateway.core import Core
from gateway.doors import console
from gateway.lifecycle import Status
from gateway.runtime.waiters import ANY
from gateway.security import signed
from gateway.store.rows import Request as RequestRow
from gateway.vocabulary import ChannelName

router = APIRouter(include_in_schema=False, dependencies=[Depends(load_viewer)])
KEEPALIVE_SECONDS = 15.0
NOTICE_SECONDS = 120  # a request link's "Recorded: …" notice, shown after its redirect
STREAM_SECONDS = 300.0  # the browser reconnects; a shutdown never waits on a stream for long
FORM_LIMIT = 64 * 1024


def _core(request: Request) -> Core:
    core: Core = request.app.state.core
    return core


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value of each)."""
    body = await request.body()
    if len(body) > FORM_LIMIT:
        return {}
    fields = urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {name: values[0] for name, values in fields.items()}


def _to_sign_in(request: Request) -> RedirectResponse:
    next_url = urllib.parse.quote(
        str(request.url.path) + ("?" + request.url.query if request.url.query else "")
    )
    return RedirectResponse(f"/console/login?next={next_url}", status_code=303)


def _message(core: Core, viewer: Viewer | None, status: int, title: str, text: str) -> Response:
    return render.page(
        "message.html", status, title=title, text=text, viewer=viewer, csrf=_csrf(core, viewer)
    )


async def _signed_in_form(core: Core, request: Request) -> tuple[Viewer, dict[str, str]] | Response:
    """A POST's signed-in person and form fields, or the refusal to send instead."""
    viewer = viewer_of(core, request)
    form = await _form(request)
    if not origin_ok(core, request):
        return _cross_site(core, request, viewer)
    if viewer is None:
        return _message(core, None, 401, "Signed out", "Sign in again, then try once more.")
    if not csrf_ok(core, viewer.sid, form.get("csrf")):
        return _refused(core, viewer)
    return viewer, form


def _refused(core: Core, viewer: Viewer | None) -> Response:
    text = "The form's CSRF token is missing or wrong; reload the page and try again."
    return _message(core, viewer, 403, "Refused", text)


def _cross_site(core: Core, request: Request, viewer: Viewer | None) -> Response:
    site = expected_origin(core, request)
    text = (
        f"This form was not sent from a page of {site}, so nothing was done. "
        f"Open {site}/console in this browser and try again there."
    )
    return _message(core, viewer, 403, "Refused: sent from another site", text)


def _csrf(core: Core, viewer: Viewer | None) -> str:
    return csrf_token(core, viewer.sid) if viewer else ""


def _projects(viewer: Viewer) -> list[str] | None:
    return None if viewer.projects is None else list(viewer.projects)


@router.get("/")
async def home() -> Response:
    return RedirectResponse("/console", status_code=303)


# --- signing in


@router.get("/console/login")
async def login_form(request: Request, next: str = "/console") -> Response:
    core = _core(request)
    return render.page(
        "login.html",
        has_people=bool(console_people(core)),
        next=_safe_next(next),
        error=None,
        viewer=None,
        csrf="",
    )


@router.post("/console/login")
async def login(request: Request) -> Response:
    core = _core(request)
    form = await _form(request)
    if not origin_ok(core, request):  # login CSRF: a foreign page must not sign you in
        return _cross_site(core, request, None)
    viewer = await asyncio.to_thread(
        check_password, core, form.get("email", ""), form.get("password", "")
    )
    if viewer is None:
        return render.page(
            "login.html",
            401,
            has_people=bool(console_people(core)),
            next=_safe_next(form.get("next", "/console")),
            error="Wrong email or password.",
            viewer=None,
            csrf="",
        )
    response = RedirectResponse(_safe_next(form.get("next", "/console")), status_code=303)
    await start_session(core, response, viewer)
    return response


@router.get("/console/link/{token}")
async def link_form(request: Request, token: str) -> Response:
    """Shows a button: only the POST spends the link, so a mail scanner's GET cannot."""
    return render.page("link.html", token=token, viewer=None, csrf="")


@router.post("/console/link/{token}")
async def link_sign_in(request: Request, token: str) -> Response:
    core = _core(request)
    if not origin_ok(core, request):  # checked before spending: the link stays usable
        return _cross_site(core, request, None)
    viewer = await spend_sign_in_link(core, token)
    if isinstance(viewer, str):
        return _message(core, None, 403, "Sign-in link refused", viewer)
    response = RedirectResponse("/console", status_code=303)
    await start_session(core, response, viewer)
    return response


@router.post("/console/logout")
async def logout(request: Request) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    form = await _form(request)
    if not origin_ok(core, request):
        return _cross_site(core, request, viewer)
    if viewer is not None and not csrf_ok(core, viewer.sid, form.get("csrf")):
        return _refused(core, viewer)
    response = RedirectResponse("/console/login", status_code=303)
    await end_session(core, response, viewer)
    return response


@router.post("/console/logout/everywhere")
async def logout_everywhere(request: Request) -> Response:
    """Ends every session of this person (the operator's: every operator session)."""
    core = _core(request)
    checked = await _signed_in_form(core, request)
    if isinstance(checked, Response):
        return checked
    viewer, _form_fields = checked
    response = RedirectResponse("/console/login", status_code=303)
    await end_every_session(core, response, viewer)
    return response


def _safe_next(value: str) -> str:
    """Only a path on this site (no `//evil.example` open redirect)."""
    return value if value.startswith("/") and not value.startswith("//") else "/console"


# --- the queue and history


def _filters(request: Request) -> console.Filters:
    query = request.query_params
    return console.Filters(
        project=query.get("project") or None,
        kind=query.get("kind") or None,
        run_id=query.get("run_id") or None,
        fn=query.get("fn") or None,
        text=query.get("q") or None,
        mine=bool(query.get("mine")),
    )


@router.get("/console")
async def queue(request: Request) -> Response:
    return await _listing(request, pending=True, template="queue.html")


@router.get("/console/history")
async def history(request: Request) -> Response:
    return await _listing(request, pending=False, template="history.html")


async def _listing(request: Request, *, pending: bool, template: str) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    if viewer is None:
        return _to_sign_in(request)
    filters = _filters(request)
    found = await console.search(
        core,
        projects=_projects(viewer),
        pending=pending,
        filters=filters,
        user_info=actions.responder(viewer).user_info(),
    )
    projects = await console.project_names(core, viewer.sees)
    rows = [render.summary(row, project) for row, project in found]
    name = "queue_rows.html" if request.query_params.get("partial") else template
    return render.page(
        name,
        rows=rows,
        filters=filters,
        projects=projects,
        viewer=viewer,
        csrf=_csrf(core, viewer),
    )


# --- one request


async def _visible(core: Core, viewer: Viewer, rid: str) -> tuple[RequestRow, str] | None:
    return await console.request(core, rid, viewer.sees)


async def _detail(core: Core, row: RequestRow, project: str) -> dict[str, Any]:
    deliveries, events = await console.trail(core, row.rid)
    progress = await console.standing(core, row)
    timer = await console.next_timer(core, row.rid) if row.status == Status.PENDING else None
    return render.detail(row, project, deliveries, events, progress=progress, timer=timer)


@router.get("/console/requests/{rid}")
async def request_page(request: Request, rid: str) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    if viewer is None:
        return _to_sign_in(request)
    found = await _visible(core, viewer, rid)
    if found is None:
        return _message(core, viewer, 404, "Not found", "There is no such request here.")
    partial = bool(request.query_params.get("partial"))
    return render.page(
        "request_live.html" if partial else "request.html",
        r=await _detail(core, *found),
        viewer=viewer,
        csrf=_csrf(core, viewer),
        action=f"/console/requests/{rid}",
        link_token=None,
        notice=None if partial else await take_flash(core, viewer, f"/console/requests/{rid}"),
    )


@router.post("/console/requests/{rid}")
async def decide_page(request: Request, rid: str) -> Response:
    core = _core(request)
    checked = await _signed_in_form(core, request)
    if isinstance(checked, Response):
        return checked
    viewer, form = checked
    found = await _visible(core, viewer, rid)
    if found is None:
        return _message(core, viewer, 404, "Not found", "There is no such request here.")
    outcome = await actions.decide(core, rid, form, viewer)
    if outcome.ok:
        path = f"/console/requests/{rid}"
        await flash(core, viewer, path, outcome.text)
        return RedirectResponse(path, status_code=303)
    return _message(core, viewer, outcome.status, "Nothing changed", outcome.text)


# --- scanner-safe request links


def _link_viewer(core: Core, rid: str, token: str) -> Viewer | str:
    """The email recipient a `/r/<rid>?t=` token was issued to, or why it is refused."""
    try:
        claims = signed.verify(core.link_key, token)
    except signed.BadToken as error:
        return f"{error}; sign in to see the request"
    if claims.get("r") != rid:
        return "this link is for another request; sign in to see the request"
    email = str(claims.get("e"))
    return Viewer(name=email, email=email, projects=None, sid=f"link:{token}")


def _notice_key(core: Core) -> bytes:
    return core.box.subkey("request-link-notice")


def _link_notice(core: Core, rid: str, token: str | None, r: dict[str, Any]) -> str | None:
    """The notice a link's decision redirect names (`n=`), composed here from the request."""
    if not token or r["status"] == Status.PENDING:
        return None
    try:
        claims = signed.verify(_notice_key(core), token)
    except signed.BadToken:
        return None
    if claims.get("r") != rid or claims.get("k") != "decided":
        return None
    return actions.recorded(r["status"], str(r["decided_by"] or "someone"))


@router.get("/r/{rid}")
async def request_link(request: Request, rid: str, t: str | None = None) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    if viewer is not None:
        return RedirectResponse(f"/console/requests/{rid}", status_code=303)
    if t is None:
        return _to_sign_in(request)
    holder = _link_viewer(core, rid, t)
    if isinstance(holder, str):
        return _message(core, None, 403, "Link refused", holder)
    found = await console.request(core, rid, lambda _project: True)  # the link's holder
    row, project = found if found else (None, None)
    if row is None or project is None:
        return _message(core, None, 404, "Not found", "There is no such request here.")
    detail = await _detail(core, row, project)
    return render.page(
        "request.html",
        r=detail,
        viewer=None,
        holder=holder,
        csrf=csrf_token(core, holder.sid),
        action=f"/r/{rid}",
        link_token=t,
        notice=_link_notice(core, rid, request.query_params.get("n"), detail),
    )


@router.post("/r/{rid}")
async def decide_by_link(request: Request, rid: str) -> Response:
    core = _core(request)
    form = await _form(request)
    # No Origin check: nothing ambient (no cookie) decides here, only the link's own token,
    # which a page on another site cannot know.
    token = form.get("t", "")
    holder = _link_viewer(core, rid, token)
    if isinstance(holder, str):
        return _message(core, None, 403, "Link refused", holder)
    if not csrf_ok(core, holder.sid, form.get("csrf")):
        return _refused(core, None)
    outcome = await actions.decide(core, rid, form, holder)
    if outcome.ok:
        notice = signed.sign(_notice_key(core), {"r": rid, "k": "decided"}, NOTICE_SECONDS)
        query = urllib.parse.urlencode({"t": token, "n": notice})
        return RedirectResponse(f"/r/{rid}?{query}", status_code=303)
    return _message(core, None, outcome.status, "Nothing changed", outcome.text)


# --- webhooks and channels


@router.get("/console/webhooks")
async def webhooks_page(request: Request) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    if viewer is None:
        return _to_sign_in(request)
    projects, endpoints, jobs = await console.webhooks(core, viewer.sees)
    return render.page(
        "webhooks.html",
        endpoints=[render.endpoint(e, projects.get(e.project_id, "?")) for e in endpoints],
        jobs=[render.webhook_job(job) for job in jobs],
        viewer=viewer,
        csrf=_csrf(core, viewer),
        notice=await take_flash(core, viewer, "/console/webhooks"),
    )


@router.post("/console/webhooks/jobs/{job_id}/redeliver")
async def redeliver(request: Request, job_id: int) -> Response:
    core = _core(request)
    checked = await _signed_in_form(core, request)
    if isinstance(checked, Response):
        return checked
    viewer, _form_fields = checked
    queued = await console.redeliver(core, job_id, viewer.sees)
    if not queued:
        return _message(core, viewer, 404, "Not found", "There is no such webhook delivery.")
    await flash(core, viewer, "/console/webhooks", f"Delivery {job_id} queued again.")
    return RedirectResponse("/console/webhooks", status_code=303)


@router.get("/console/channels")
async def channels_page(request: Request) -> Response:
    core = _core(request)
    viewer = viewer_of(core, request)
    if viewer is None:
        return _to_sign_in(request)
    errors = await console.delivery_errors(core)
    rows = [
        render.channel_health(name, channel, errors.get(name))
        for name, channel in core.channels.items()
        if name != ChannelName.WEB
    ]
    return render.page("channels.html", channels=rows, viewer=viewer, csrf=_csrf(core, viewer))


# --- live updates and static files


@router.get("/console/events")
async def events(request: Request) -> Response:
    """Server-sent events: `changed` whenever a request is created or decided."""
    core = _core(request)
    if viewer_of(core, request) is None:
        return Response("sign in first", status_code=401)
    return StreamingResponse(
        _changes(core, request),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
    )


async def _changes(core: Core, request: Request) -> AsyncIterator[str]:
    yield "retry: 1000\n\n"
    loop = asyncio.get_running_loop()
    ends = loop.time() + STREAM_SECONDS
    with core.waiters.watch(ANY) as changed:  # one watch: nothing is missed between events
        # A shutdown ends the stream at once: the browser reconnects, to another replica.
        while (
            not core.stopping.is_set()
            and loop.time() < ends
            and not await request.is_disconnected()
        ):
            try:
                await asyncio.wait_for(changed.wait(), timeout=KEEPALIVE_SECONDS)
            except TimeoutError:
                yield ": keepalive\n\n"
                continue
            changed.clear()
            if not core.stopping.is_set():  # woken by the shutdown, not by a change
                yield "event: changed\ndata: {}\n\n"


@router.get("/console/static/{name}")
async def static(name: str) -> Response:
    kind = render.STATIC.get(name)
    if kind is None:
        return Response("not found", status_code=404)
    content = (render.TEMPLATES / name).read_text()
    return Response(content, media_type=kind, headers={"Cache-Control": "max-age=300"})
