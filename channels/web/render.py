"""The console's pages: Jinja2 templates from `templates/web/`, autoescaped, and the
plain dicts they read (a request view becomes what a person needs to see)."""

from __future__ import annotations

import json
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi.responses import HTMLResponse

from channels.web import policies
from channels.web.actions import EDIT_PREFIX
from gateway.lifecycle import Kind, Status
from gateway.seam import (
    AnsweredIn,
    ChannelState,
    DeliveryView,
    EndpointView,
    EventView,
    RequestView,
    Responder,
    Standing,
    TimerView,
    WebhookJobView,
    describe,
    origin_line,
    shorten,
)
from gateway.seam.console import ListedGrant
from gateway.seam.edits import edit_fields
from gateway.seam.grants import SCOPE_WORDS, GrantView, by_scope
from gateway.vocabulary import AuditEvent

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "web"
STATIC = {
    "console.css": "text/css",
    "live.js": "text/javascript",
    "shortcuts.js": "text/javascript",
}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ARGS_PREVIEW = 120  # characters of kwargs shown under a queue row's function name
# The edit form is offered when its fields, urlencoded, leave room for the rest of the form
# within the 64 KiB a console form may be (`pages.FORM_LIMIT`).
EDIT_FORM_BYTES = 60 * 1024


def when(iso: str) -> str:
    """An ISO timestamp as a person reads it: `2026-11-23 02:53:45 UTC`."""
    return datetime.fromisoformat(iso).strftime("%Y-%m-%d %H:%M:%S UTC")


_env.filters["when"] = when


def page(name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    html = _env.get_template(name).render(**context)
    # The console renders its own markup only: no frames, no scripts from elsewhere.
    # "strict-origin": a Referer never carries a path or query (a link's token) to anyone, a
    # proxy's log included, while the console's own form POSTs keep a real Origin header
    # ("no-referrer" makes Chromium send `Origin: null`, Fetch standard "serializing a
    # request origin").
    headers = {
        "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "strict-origin",
        "Cache-Control": "no-store",
    }
    return HTMLResponse(html, status_code=status_code, headers=headers)


def age(at: datetime | None) -> str:
    if at is None:
        return ""
    seconds = int((datetime.now(UTC) - at).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


def channels_of(request: RequestView) -> list[str]:
    return sorted({str(target["channel"]) for target in request.route})


def args_line(kwargs: dict[str, Any]) -> str:
    """`service=billing-api, replicas=6, image={…}`: enough to tell calls apart in a list."""
    return shorten(
        ", ".join(f"{key}={_short(value)}" for key, value in kwargs.items()), ARGS_PREVIEW
    )


def _short(value: Any) -> str:
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def summary(request: RequestView) -> dict[str, Any]:
    """One row of the queue or the history."""
    spec = request.spec
    info = request.user_info or {}
    function_call = request.kind == Kind.FUNCTION_CALL
    decided_by = info.get("name") or info.get("email") or info.get("user_id")
    if decided_by and info.get("channel") == AnsweredIn.GRANT:
        decided_by = f"{decided_by}'s standing grant"
    return {
        "rid": request.rid,
        "call_id": request.call_id,
        "project": request.project,
        "kind": request.kind,
        "what": spec.get("fn") if function_call else str(spec.get("msg", ""))[:140],
        "args": args_line(spec.get("kwargs") or {}) if function_call else "",
        "run_id": request.run_id,
        "channels": channels_of(request),
        "age": age(request.requested_at),
        "requested_at": policies.iso(request.requested_at),
        "status": request.status,
        "decided_by": decided_by,
        "decided_on": info.get("channel"),
    }


def detail(
    request: RequestView,
    deliveries: list[DeliveryView],
    events: list[EventView],
    *,
    standing: Standing | None = None,
    timer: TimerView | None = None,
) -> dict[str, Any]:
    """Everything on a request's page; under a policy, where it stands, and while pending,
    its deadline and next timer."""
    spec = request.spec
    timeline = [{"type": e.type, "at": policies.iso(e.at), "detail": e.detail_json} for e in events]
    routed = [json.loads(e.detail_json) for e in events if e.type == AuditEvent.ROUTED]
    pending = request.status == Status.PENDING
    expires_at = request.expires_at if pending else None
    info = request.user_info or {}
    return summary(request) | {
        "kwargs": json.dumps(spec.get("kwargs") or {}, indent=2, ensure_ascii=False),
        "msg": spec.get("msg"),
        "subject": spec.get("subject"),
        "origin": origin_line(spec),
        "state_bytes": len(json.dumps(spec.get("state"))) if spec.get("state") else 0,
        "route": request.route,
        "rule": routed[0].get("rule") if routed else None,  # the config's rule that matched
        "options": [
            {"name": o["name"], "title": o.get("title") or o["name"], "fill": o.get("prompt_fill")}
            for o in request.options
        ],
        "comment": request.comment,
        "option_name": request.option_name,
        "response": request.response,
        "responded_at": policies.iso(request.responded_at) if request.responded_at else None,
        "deliveries": [
            {"id": d.id, "channel": d.channel, "status": d.status, "error": d.error}
            for d in deliveries
        ],
        "events": timeline,
        "webhooks": [e for e in timeline if e["type"].startswith("webhook")],
        "policy": policies.shown(standing),
        "deadline": policies.iso(expires_at) if expires_at else None,
        "deadline_in": policies.until(expires_at) if expires_at else None,
        "next_timer": policies.timer(timer) if pending else None,
        "outcome": None if pending else describe(request),
        # A request a standing grant approved names it (the grants page has its source).
        "grant_id": info.get("grant") if info.get("channel") == AnsweredIn.GRANT else None,
        "grant_groups": grant_groups(request) if pending else [],
        "edit_fields": edit_form_fields(request) if pending else [],
        "edits": differences(request),
    }


def grant_groups(request: RequestView) -> list[dict[str, Any]]:
    """ "Approve and allow…": the choices by scope (an option group each), shortest first."""
    return [
        {
            "label": SCOPE_WORDS[scope],
            "choices": [{"value": c.value, "duration": c.duration} for c in choices],
        }
        for scope, choices in by_scope(request.grant_choices).items()
    ]


def edit_form_fields(request: RequestView) -> list[dict[str, Any]]:
    """ "Edit and approve": one field per argument, as every channel shows them; none where
    editing is not offered, the call has no arguments, or the form would be too big."""
    if not request.editable:
        return []
    fields = edit_fields(request.spec.get("kwargs") or {})
    encoded = urllib.parse.urlencode({f"{EDIT_PREFIX}{f.name}": f.text for f in fields})
    if not fields or len(encoded) > EDIT_FORM_BYTES:
        return []
    return [
        {
            "name": f.name,
            "text": f.text,
            "kind": f.kind,
            "long": f.as_json or "\n" in f.text or len(f.text) > 80,  # a textarea
        }
        for f in fields
    ]


_ABSENT = object()


def differences(request: RequestView) -> list[dict[str, Any]]:
    """The arguments the agent asked for and the ones approved, side by side (after an
    "Edit and approve"); empty otherwise."""
    updated = request.updated_kwargs
    if updated is None:
        return []
    original = request.spec.get("kwargs") or {}
    names = [*original, *(name for name in updated if name not in original)]
    return [
        {
            "name": name,
            "before": _as_json(original.get(name, _ABSENT)),
            "after": _as_json(updated.get(name, _ABSENT)),
            "changed": original.get(name, _ABSENT) != updated.get(name, _ABSENT),
        }
        for name in names
    ]


def _as_json(value: Any) -> str:
    return "(none)" if value is _ABSENT else json.dumps(value, ensure_ascii=False)


def grant_row(listed: ListedGrant) -> dict[str, Any]:
    """One row of the grants page."""
    grant = listed.grant
    giver = Responder.of(grant.granted_by)
    return {
        "id": grant.id,
        "project": grant.project,
        "key": grant.key,
        "what": grant.what,
        "scope": SCOPE_WORDS[grant.scope],
        "by": giver.name if giver else "someone",
        "by_place": giver.place if giver else "",
        "created": policies.iso(grant.created_at),
        "expires": policies.iso(grant.expires_at) if grant.expires_at else None,
        "uses": grant.uses,
        "last_used": policies.iso(grant.last_used_at) if grant.last_used_at else None,
        "live": grant.live,
        "state": _state(grant),
        "revoked_by": grant.revoked_by,
        "source_rid": grant.source_rid,
        "may_revoke": listed.may_revoke,
    }


def _state(grant: GrantView) -> str:
    if grant.live:
        return "live"
    return "revoked" if grant.revoked_at is not None else "expired"


def endpoint(hook: EndpointView) -> dict[str, Any]:
    return {
        "id": hook.id,
        "project": hook.project,
        "url": hook.url,
        "events": ", ".join(hook.events) or "all",
        "enabled": hook.enabled,
        "disabled_reason": hook.disabled_reason,
    }


def webhook_job(job: WebhookJobView) -> dict[str, Any]:
    return {
        "id": job.id,
        "endpoint_id": job.endpoint_id,
        "msg_id": job.msg_id,
        "rid": job.rid,
        "status": job.status,
        "attempts": f"{job.attempts}/{job.max_attempts}",
        "last_error": job.last_error,
        "updated": age(job.updated_at),
    }


def channel_health(state: ChannelState, last_error: tuple[str, datetime] | None) -> dict[str, Any]:
    """Configured (settings present), the connection's state and since when, last error."""
    return {
        "name": state.name,
        "configured": state.configured,
        "missing": ", ".join(state.missing),
        "connection": state.connection or "n/a",
        "connection_age": age(state.since) if state.since else None,
        "last_error": last_error[0] if last_error else None,
        "last_error_age": age(last_error[1]) if last_error else None,
    }
