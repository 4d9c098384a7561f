"""The console's routes: sign-in, queue (and its bulk answer), request pages and their
actions ("Approve and allow…", "Edit and approve"), history, insights
(`channels.web.insights`), standing grants and their revokes, webhooks, channel health, live
updates, and the scanner-safe request links `/r/<rid>`.

GETs never change anything (but for taking a one-time notice). Every `/console` POST must come
from a page of this site (its Origin, or Referer); those of a session also carry its CSRF token.
A `/r/<rid>` POST carries the link's own token and a MAC of it. Another project's request is a
404, as in the API. Notices are composed by the server, never read from the URL.
"""

from __future__ import annotations

import asyncio
import urllib.parse
from collections.abc import AsyncIterator, Mapping
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import RedirectResponse, Response, StreamingResponse

from channels.web import actions, insights, render
from channels.web.auth import (
    LINK_SID,
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
from gateway.errors import BadToken
from gateway.lifecycle import Status
from gateway.seam import ChannelContext, Filters, RequestView, Verb
from gateway.seam.console import Revoked

KEEPALIVE_SECONDS = 15.0
NOTICE_SECONDS = 120  # a request link's "Recorded: …" notice, shown after its redirect
NOTICE_KEY = "request-link-notice"  # the purpose of the key that signs those notices
STREAM_SECONDS = 300.0  # the browser reconnects; a shutdown never waits on a stream for long
FORM_LIMIT = 64 * 1024
BULK_LIMIT = 1000  # requests one bulk answer decides (a filter matching more: again)
# The filters the queue's form sends, kept in the bulk form to select what matches them.
FILTER_FIELDS = ("project", "kind", "run_id", "fn", "mine")


async def _form(request: Request) -> dict[str, str]:
    """An urlencoded form's fields (first value of each)."""
    return {name: values[0] for name, values in (await _form_lists(request)).items()}


async def _form_lists(request: Request) -> dict[str, list[str]]:
    """An urlencoded form's fields with every value (the queue's checked requests)."""
    body = await request.body()  # read once: Starlette keeps it for a second call
    if len(body) > FORM_LIMIT:
        return {}
    return urllib.parse.parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)


def _to_sign_in(request: Request) -> RedirectResponse:
    next_url = urllib.parse.quote(
        str(request.url.path) + ("?" + request.url.query if request.url.query else "")
    )
    return RedirectResponse(f"/console/login?next={next_url}", status_code=303)


def _projects(viewer: Viewer) -> list[str] | None:
    return None if viewer.projects is None else list(viewer.projects)


def _safe_next(value: str) -> str:
    """Only a path on this site (no `//evil.example` open redirect)."""
    return value if value.startswith("/") and not value.startswith("//") else "/console"


def _filters(request: Request) -> Filters:
    return _filters_of(request.query_params)


def _filters_of(query: Mapping[str, str]) -> Filters:
    """The filters of the queue's query (or of the bulk form, which carries them)."""
    return Filters(
        project=query.get("project") or None,
        kind=query.get("kind") or None,
        run_id=query.get("run_id") or None,
        fn=query.get("fn") or None,
        text=query.get("q") or None,
        mine=bool(query.get("mine")),
    )


def _filter_fields(request: Request) -> list[tuple[str, str]]:
    """The queue's filters as the bulk form carries them."""
    query = request.query_params
    return [(name, query[name]) for name in FILTER_FIELDS if query.get(name)]


async def home() -> Response:
    return RedirectResponse("/console", status_code=303)


class ConsolePages:
    """The console's pages over its context: every handler reaches the core only through
    `context.console`, `context.answers` and `context.keys`."""

    def __init__(self, context: ChannelContext) -> None:
        self.context = context
        self.console = context.console

    def router(self) -> APIRouter:
        router = APIRouter(include_in_schema=False, dependencies=[Depends(self._load_viewer)])
        for path, endpoint, method in (
            ("/", home, "GET"),
            ("/console/login", self.login_form, "GET"),
            ("/console/login", self.login, "POST"),
            ("/console/link/{token}", self.link_form, "GET"),
            ("/console/link/{token}", self.link_sign_in, "POST"),
            ("/console/logout", self.logout, "POST"),
            ("/console/logout/everywhere", self.logout_everywhere, "POST"),
            ("/console", self.queue, "GET"),
            ("/console/history", self.history, "GET"),
            ("/console/insights", self.insights_page, "GET"),
            ("/console/requests/{rid}", self.request_page, "GET"),
            ("/console/requests/{rid}", self.decide_page, "POST"),
            ("/console/requests/{rid}/neighbour", self.neighbour, "GET"),
            ("/console/bulk", self.bulk, "POST"),
            ("/console/grants", self.grants_page, "GET"),
            ("/console/grants/{grant_id}/revoke", self.revoke_grant, "POST"),
            ("/console/grants/{grant_id}/revoke-agent", self.revoke_agent_grants, "POST"),
            ("/r/{rid}", self.request_link, "GET"),
            ("/r/{rid}", self.decide_by_link, "POST"),
            ("/console/webhooks", self.webhooks_page, "GET"),
            ("/console/keys", self.keys_page, "GET"),
            ("/console/rules", self.rules_page, "GET"),
            ("/console/webhooks/jobs/{job_id}/redeliver", self.redeliver, "POST"),
            ("/console/channels", self.channels_page, "GET"),
            ("/console/events", self.events, "GET"),
            ("/console/static/{name}", static, "GET"),
        ):
            router.add_api_route(path, endpoint, methods=[method])
        return router

    async def _load_viewer(self, request: Request) -> None:
        await load_viewer(self.context, request)

    # --- answers the pages give

    def _message(self, viewer: Viewer | None, status: int, title: str, text: str) -> Response:
        return render.page(
            "message.html", status, title=title, text=text, viewer=viewer, csrf=self._csrf(viewer)
        )

    def _csrf(self, viewer: Viewer | None) -> str:
        return csrf_token(self.context, viewer.sid) if viewer else ""

    def _refused(self, viewer: Viewer | None) -> Response:
        text = "The form's CSRF token is missing or wrong; reload the page and try again."
        return self._message(viewer, 403, "Refused", text)

    def _cross_site(self, request: Request, viewer: Viewer | None) -> Response:
        site = expected_origin(self.context, request)
        text = (
            f"This form was not sent from a page of {site}, so nothing was done. "
            f"Open {site}/console in this browser and try again there."
        )
        return self._message(viewer, 403, "Refused: sent from another site", text)

    async def _signed_in_form(self, request: Request) -> tuple[Viewer, dict[str, str]] | Response:
        """A POST's signed-in person and form fields, or the refusal to send instead."""
        viewer = viewer_of(request)
        form = await _form(request)
        if not origin_ok(self.context, request):
            return self._cross_site(request, viewer)
        if viewer is None:
            return self._message(None, 401, "Signed out", "Sign in again, then try once more.")
        if not csrf_ok(self.context, viewer.sid, form.get("csrf")):
            return self._refused(viewer)
        return viewer, form

    # --- signing in

    async def login_form(self, request: Request, next: str = "/console") -> Response:
        return render.page(
            "login.html",
            has_people=bool(console_people(self.context)),
            next=_safe_next(next),
            error=None,
            viewer=None,
            csrf="",
        )

    async def login(self, request: Request) -> Response:
        form = await _form(request)
        if not origin_ok(self.context, request):  # login CSRF: a foreign page must not sign in
            return self._cross_site(request, None)
        viewer = await asyncio.to_thread(
            check_password, self.context, form.get("email", ""), form.get("password", "")
        )
        if viewer is None:
            return render.page(
                "login.html",
                401,
                has_people=bool(console_people(self.context)),
                next=_safe_next(form.get("next", "/console")),
                error="Wrong email or password.",
                viewer=None,
                csrf="",
            )
        response = RedirectResponse(_safe_next(form.get("next", "/console")), status_code=303)
        await start_session(self.context, response, viewer)
        return response

    async def link_form(self, request: Request, token: str) -> Response:
        """Shows a button: only the POST spends the link, so a mail scanner's GET cannot."""
        return render.page("link.html", token=token, viewer=None, csrf="")

    async def link_sign_in(self, request: Request, token: str) -> Response:
        if not origin_ok(self.context, request):  # checked before spending: still usable
            return self._cross_site(request, None)
        viewer = await spend_sign_in_link(self.context, token)
        if isinstance(viewer, str):
            return self._message(None, 403, "Sign-in link refused", viewer)
        response = RedirectResponse("/console", status_code=303)
        await start_session(self.context, response, viewer)
        return response

    async def logout(self, request: Request) -> Response:
        viewer = viewer_of(request)
        form = await _form(request)
        if not origin_ok(self.context, request):
            return self._cross_site(request, viewer)
        if viewer is not None and not csrf_ok(self.context, viewer.sid, form.get("csrf")):
            return self._refused(viewer)
        response = RedirectResponse("/console/login", status_code=303)
        await end_session(self.context, response, viewer)
        return response

    async def logout_everywhere(self, request: Request) -> Response:
        """Ends every session of this person (the operator's: every operator session)."""
        checked = await self._signed_in_form(request)
        if isinstance(checked, Response):
            return checked
        viewer, _form_fields = checked
        response = RedirectResponse("/console/login", status_code=303)
        await end_every_session(self.context, response, viewer)
        return response

    # --- the queue and history

    async def queue(self, request: Request) -> Response:
        return await self._listing(request, pending=True, template="queue.html")

    async def history(self, request: Request) -> Response:
        return await self._listing(request, pending=False, template="history.html")

    async def _listing(self, request: Request, *, pending: bool, template: str) -> Response:
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        filters = _filters(request)
        found = await self.console.search(
            projects=_projects(viewer),
            pending=pending,
            filters=filters,
            user_info=actions.responder(viewer).user_info(),
        )
        projects = await self.console.project_names(viewer.sees)
        name = "queue_rows.html" if request.query_params.get("partial") else template
        return render.page(
            name,
            rows=[render.summary(view) for view in found],
            filters=filters,
            filter_fields=_filter_fields(request),
            bulk=pending,
            projects=projects,
            viewer=viewer,
            csrf=self._csrf(viewer),
        )

    async def insights_page(self, request: Request) -> Response:
        """How decisions flow, as charts and tables (`channels.web.insights`)."""
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        query = request.query_params
        shown = await insights.page(self.console, query, viewer, self._csrf(viewer))
        if isinstance(shown, insights.Unshown):
            return self._message(viewer, shown.status, shown.title, shown.text)
        return shown

    async def bulk(self, request: Request) -> Response:
        """The queue's bulk answer: each selected request (or each pending one matching the
        filter) answered in turn through the one answer path, by this person."""
        checked = await self._signed_in_form(request)
        if isinstance(checked, Response):
            return checked
        viewer, form = checked
        verb = actions.BULK_VERBS.get(form.get("action", ""))
        reason = (form.get("reason") or "").strip() or None
        if verb is None:
            return self._message(viewer, 422, "Nothing changed", "Choose Approve or Reject.")
        if verb == Verb.REJECT and reason is None:
            text = "Give one reason to reject them; nothing was rejected."
            return self._message(viewer, 422, "Nothing changed", text)
        targets, unknown = await self._bulk_targets(viewer, form, await _form_lists(request))
        if not targets and not unknown:
            text = "Select requests first, or every one matching the filter."
            return self._message(viewer, 422, "Nothing changed", text)
        summary = await actions.answer_many(self.context.answers, targets, verb, reason, viewer)
        summary.refused.extend((rid, "there is no such request here") for rid in unknown)
        back = urllib.parse.urlencode([(k, form[k]) for k in FILTER_FIELDS if form.get(k)])
        return render.page(
            "bulk.html",
            summary=summary,
            capped=len(targets) >= BULK_LIMIT,
            limit=BULK_LIMIT,
            back=f"/console?{back}" if back else "/console",
            viewer=viewer,
            csrf=self._csrf(viewer),
        )

    async def _bulk_targets(
        self, viewer: Viewer, form: dict[str, str], fields: dict[str, list[str]]
    ) -> tuple[list[RequestView], list[str]]:
        """The requests a bulk answer is for, and the selected ids this person cannot see."""
        if form.get("all"):
            found = await self.console.search(
                projects=_projects(viewer),
                pending=True,
                filters=_filters_of(form),
                user_info=actions.responder(viewer).user_info(),
                limit=BULK_LIMIT,
            )
            return found, []
        views: list[RequestView] = []
        unknown: list[str] = []
        for rid in list(dict.fromkeys(fields.get("rid", [])))[:BULK_LIMIT]:
            view = await self.console.request(rid, viewer.sees)
            if view is None:
                unknown.append(rid)
            else:
                views.append(view)
        return views, unknown

    # --- one request

    async def _detail(self, view: RequestView) -> dict[str, Any]:
        deliveries, events = await self.console.trail(view.rid)
        standing = await self.console.standing(view.rid)
        pending = view.status == Status.PENDING
        timer = await self.console.next_timer(view.rid) if pending else None
        return render.detail(view, deliveries, events, standing=standing, timer=timer)

    async def request_page(self, request: Request, rid: str) -> Response:
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        found = await self.console.request(rid, viewer.sees)
        if found is None:
            return self._message(viewer, 404, "Not found", "There is no such request here.")
        partial = bool(request.query_params.get("partial"))
        path = f"/console/requests/{rid}"
        return render.page(
            "request_live.html" if partial else "request.html",
            r=await self._detail(found),
            viewer=viewer,
            csrf=self._csrf(viewer),
            action=path,
            link_token=None,
            edit_again=None,
            notice=None if partial else await take_flash(self.context, viewer, path),
        )

    async def neighbour(self, request: Request, rid: str, step: int = 1) -> Response:
        """The next (`step=1`) or previous (`-1`) pending request of the queue after this
        one (j and k on a request page); the queue when there is none."""
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        found = await self.console.search(
            projects=_projects(viewer), pending=True, filters=Filters()
        )
        queue = [view.rid for view in found]
        at = queue.index(rid) + (1 if step >= 0 else -1) if rid in queue else 0
        if 0 <= at < len(queue):
            return RedirectResponse(f"/console/requests/{queue[at]}", status_code=303)
        return RedirectResponse("/console", status_code=303)

    async def decide_page(self, request: Request, rid: str) -> Response:
        checked = await self._signed_in_form(request)
        if isinstance(checked, Response):
            return checked
        viewer, form = checked
        found = await self.console.request(rid, viewer.sees)
        if found is None:
            return self._message(viewer, 404, "Not found", "There is no such request here.")
        result = await self._answer(found, form, viewer)
        if isinstance(result, actions.EditAgain):
            return await self._edit_again(found, result, viewer=viewer, csrf_of=viewer)
        if result.ok:
            path = f"/console/requests/{rid}"
            await flash(self.context, viewer, path, result.text)
            return RedirectResponse(path, status_code=303)
        return self._message(viewer, result.status, "Nothing changed", result.text)

    async def _answer(
        self, found: RequestView, form: dict[str, str], who: Viewer
    ) -> actions.FormResult | actions.EditAgain:
        """A request page's form, signed in or through an emailed link: its one answer."""
        if form.get("action") == "edit":
            return await actions.edit_form(self.context.answers, found, form, who)
        return await actions.answer_form(self.context.answers, found.rid, form, who)

    async def _edit_again(
        self,
        found: RequestView,
        again: actions.EditAgain,
        *,
        viewer: Viewer | None,
        csrf_of: Viewer,
        link_token: str | None = None,
    ) -> Response:
        """The request page again, its edit form open with what the person typed and what
        is wrong; nothing was decided."""
        return render.page(
            "request.html",
            again.status,
            r=await self._detail(found),
            viewer=viewer,
            holder=None if viewer else csrf_of,
            csrf=csrf_token(self.context, csrf_of.sid),
            action=f"/r/{found.rid}" if link_token else f"/console/requests/{found.rid}",
            link_token=link_token,
            edit_again=again,
            notice=None,
        )

    # --- scanner-safe request links

    def _link_viewer(self, rid: str, token: str) -> Viewer | str:
        """The email recipient a `/r/<rid>?t=` token was issued to, or why it is refused."""
        try:
            email = self.context.keys.link_email(rid, token)
        except BadToken as error:
            return f"{error}; sign in to see the request"
        return Viewer(name=email, email=email, projects=None, sid=f"{LINK_SID}{token}")

    def _link_notice(self, rid: str, token: str | None, r: dict[str, Any]) -> str | None:
        """The notice a link's decision redirect names (`n=`), composed here from the request."""
        if not token or r["status"] == Status.PENDING:
            return None
        try:
            claims = self.context.keys.verify(NOTICE_KEY, token)
        except BadToken:
            return None
        if claims.get("r") != rid or claims.get("k") != "decided":
            return None
        return actions.recorded(r["status"], str(r["decided_by"] or "someone"))

    async def request_link(self, request: Request, rid: str, t: str | None = None) -> Response:
        viewer = viewer_of(request)
        if viewer is not None:
            return RedirectResponse(f"/console/requests/{rid}", status_code=303)
        if t is None:
            return _to_sign_in(request)
        holder = self._link_viewer(rid, t)
        if isinstance(holder, str):
            return self._message(None, 403, "Link refused", holder)
        found = await self.console.request(rid, lambda _project: True)  # the link's holder
        if found is None:
            return self._message(None, 404, "Not found", "There is no such request here.")
        detail = await self._detail(found)
        return render.page(
            "request.html",
            r=detail,
            viewer=None,
            holder=holder,
            csrf=csrf_token(self.context, holder.sid),
            action=f"/r/{rid}",
            link_token=t,
            edit_again=None,
            notice=self._link_notice(rid, request.query_params.get("n"), detail),
        )

    async def decide_by_link(self, request: Request, rid: str) -> Response:
        form = await _form(request)
        # No Origin check: nothing ambient (no cookie) decides here, only the link's own
        # token, which a page on another site cannot know.
        token = form.get("t", "")
        holder = self._link_viewer(rid, token)
        if isinstance(holder, str):
            return self._message(None, 403, "Link refused", holder)
        if not csrf_ok(self.context, holder.sid, form.get("csrf")):
            return self._refused(None)
        found = await self.console.request(rid, lambda _project: True)  # the link's holder
        if found is None:
            return self._message(None, 404, "Not found", "There is no such request here.")
        result = await self._answer(found, form, holder)
        if isinstance(result, actions.EditAgain):
            return await self._edit_again(
                found, result, viewer=None, csrf_of=holder, link_token=token
            )
        if result.ok:
            notice = self.context.keys.sign(NOTICE_KEY, {"r": rid, "k": "decided"}, NOTICE_SECONDS)
            query = urllib.parse.urlencode({"t": token, "n": notice})
            return RedirectResponse(f"/r/{rid}?{query}", status_code=303)
        return self._message(None, result.status, "Nothing changed", result.text)

    # --- standing grants

    async def grants_page(self, request: Request) -> Response:
        """The standing grants of the projects the person sees: who gave each, what it
        allows, until when, how often it was used; revoke buttons where they may."""
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        listed = await self.console.grants(viewer.sees, actions.responder(viewer).user_info())
        return render.page(
            "grants.html",
            grants=[render.grant_row(grant) for grant in listed],
            viewer=viewer,
            csrf=self._csrf(viewer),
            notice=await take_flash(self.context, viewer, "/console/grants"),
        )

    async def revoke_grant(self, request: Request, grant_id: str) -> Response:
        return await self._revoke(request, grant_id, whole_key=False)

    async def revoke_agent_grants(self, request: Request, grant_id: str) -> Response:
        return await self._revoke(request, grant_id, whole_key=True)

    async def _revoke(self, request: Request, grant_id: str, *, whole_key: bool) -> Response:
        checked = await self._signed_in_form(request)
        if isinstance(checked, Response):
            return checked
        viewer, _form_fields = checked
        who = actions.responder(viewer).user_info()
        by = actions.revoker(viewer)
        done = await self.console.revoke_grant(grant_id, viewer.sees, who, by, whole_key=whole_key)
        return await self._revoked(viewer, done)

    async def _revoked(self, viewer: Viewer, done: Revoked) -> Response:
        if not done.found:
            return self._message(viewer, 404, "Not found", "There is no such grant here.")
        if not done.allowed:
            text = "Only an admin, the operator or the person who gave this grant may revoke it."
            return self._message(viewer, 403, "Nothing changed", text)
        if done.grants:
            text = "Revoked: " + "; ".join(grant.what for grant in done.grants) + "."
        else:
            text = "Nothing to revoke: no live grant was left there."
        await flash(self.context, viewer, "/console/grants", text)
        return RedirectResponse("/console/grants", status_code=303)

    # --- webhooks and channels

    async def webhooks_page(self, request: Request) -> Response:
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        endpoints, jobs = await self.console.webhooks(viewer.sees)
        return render.page(
            "webhooks.html",
            endpoints=[render.endpoint(endpoint) for endpoint in endpoints],
            jobs=[render.webhook_job(job) for job in jobs],
            viewer=viewer,
            csrf=self._csrf(viewer),
            notice=await take_flash(self.context, viewer, "/console/webhooks"),
        )

    async def keys_page(self, request: Request) -> Response:
        """The API keys of the projects the person sees: each key's scope and person."""
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        keys = await self.console.keys(viewer.sees)
        return render.page("keys.html", keys=keys, viewer=viewer, csrf=self._csrf(viewer))

    async def rules_page(self, request: Request) -> Response:
        """The routing config's rules, in the order they are tried: what each decides itself
        and where the rest of the requests go. Read only: rules live in the config file."""
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        rules = self.console.rules()
        return render.page("rules.html", rules=rules, viewer=viewer, csrf=self._csrf(viewer))

    async def redeliver(self, request: Request, job_id: int) -> Response:
        checked = await self._signed_in_form(request)
        if isinstance(checked, Response):
            return checked
        viewer, _form_fields = checked
        if not await self.console.redeliver(job_id, viewer.sees):
            return self._message(viewer, 404, "Not found", "There is no such webhook delivery.")
        await flash(self.context, viewer, "/console/webhooks", f"Delivery {job_id} queued again.")
        return RedirectResponse("/console/webhooks", status_code=303)

    async def channels_page(self, request: Request) -> Response:
        viewer = viewer_of(request)
        if viewer is None:
            return _to_sign_in(request)
        errors = await self.console.delivery_errors()
        rows = [
            render.channel_health(state, errors.get(state.name))
            for state in self.console.channel_states()
        ]
        return render.page("channels.html", channels=rows, viewer=viewer, csrf=self._csrf(viewer))

    # --- live updates

    async def events(self, request: Request) -> Response:
        """Server-sent events: `changed` whenever a request is created or decided."""
        if viewer_of(request) is None:
            return Response("sign in first", status_code=401)
        return StreamingResponse(
            self._changes(request),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def _changes(self, request: Request) -> AsyncIterator[str]:
        yield "retry: 1000\n\n"
        loop = asyncio.get_running_loop()
        ends = loop.time() + STREAM_SECONDS
        stopping = self.console.stopping
        with self.console.watch_changes() as changed:  # one watch: nothing missed between
            # A shutdown ends the stream at once: the browser reconnects, to another replica.
            while (
                not stopping.is_set() and loop.time() < ends and not await request.is_disconnected()
            ):
                try:
                    await asyncio.wait_for(changed.wait(), timeout=KEEPALIVE_SECONDS)
                except TimeoutError:
                    yield ": keepalive\n\n"
                    continue
                changed.clear()
                if not stopping.is_set():  # woken by the shutdown, not by a change
                    yield "event: changed\ndata: {}\n\n"


async def static(name: str) -> Response:
    kind = render.STATIC.get(name)
    if kind is None:
        return Response("not found", status_code=404)
    content = (render.TEMPLATES / name).read_text()
    return Response(content, media_type=kind, headers={"Cache-Control": "max-age=300"})
