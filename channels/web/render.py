"""The console's pages: Jinja2 templates from `templates/web/`, autoescaped, and the
plain dicts they read (a request row becomes what a person needs to see)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jinja2
from fastapi.responses import HTMLResponse

from channels.web import policies
from gateway.lifecycle import Kind, Status
from gateway.runtime.channel_states import channel_state
from gateway.seam.channel import Channel
from gateway.seam.sentences import origin_line
from gateway.seam.views import Progress
from gateway.store.rows import Delivery, OutboxJob, Request, RequestEvent, WebhookEndpoint

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "web"
STATIC = {"console.css": "text/css", "live.js": "text/javascript"}

_env = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=True,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ARGS_PREVIEW = 120  # characters of kwargs shown under a queue row's function name


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


def channels_of(row: Request) -> list[str]:
    return sorted({str(target["channel"]) for target in json.loads(row.route_json)})


def args_line(kwargs: dict[str, Any]) -> str:
    """`service=billing-api, replicas=6, image={…}`: enough to tell calls apart in a list."""
    line = ", ".join(f"{key}={_short(value)}" for key, value in kwargs.items())
    return line if len(line) <= ARGS_PREVIEW else line[: ARGS_PREVIEW - 1] + "…"


def _short(value: Any) -> str:
    if isinstance(value, str | int | float):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def summary(row: Request, project: str) -> dict[str, Any]:
    """One row of the queue or the history."""
    spec = json.loads(row.spec_json)
    info = json.loads(row.user_info_json) if row.user_info_json else {}
    return {
        "rid": row.rid,
        "call_id": row.call_id,
        "project": project,
        "kind": row.kind,
        "what": row.fn if row.kind == Kind.FUNCTION_CALL else str(spec.get("msg", ""))[:140],
        "args": args_line(spec.get("kwargs") or {}) if row.kind == Kind.FUNCTION_CALL else "",
        "run_id": row.run_id,
        "channels": channels_of(row),
        "age": age(row.requested_at),
        "requested_at": row.requested_at.isoformat(timespec="seconds"),
        "status": row.status,
        "decided_by": info.get("name") or info.get("email") or info.get("user_id"),
        "decided_on": info.get("channel"),
    }


def detail(
    row: Request,
    project: str,
    deliveries: list[Delivery],
    events: list[RequestEvent],
    *,
    progress: Progress | None = None,
    timer: OutboxJob | None = None,
) -> dict[str, Any]:
    """Everything on a request's page; under a policy, where it stands (`progress`), and
    while pending, its deadline and next timer."""
    spec = json.loads(row.spec_json)
    timeline = [
        {"type": e.type, "at": e.at.isoformat(timespec="seconds"), "detail": e.detail_json}
        for e in events
    ]
    options = spec.get("reject_options") or spec.get("response_options") or []
    pending = row.status == Status.PENDING
    return summary(row, project) | {
        "kwargs": json.dumps(spec.get("kwargs") or {}, indent=2, ensure_ascii=False),
        "msg": spec.get("msg"),
        "subject": spec.get("subject"),
        "origin": origin_line(spec),
        "state_bytes": len(json.dumps(spec.get("state"))) if spec.get("state") else 0,
        "route": json.loads(row.route_json),
        "options": [
            {"name": o["name"], "title": o.get("title") or o["name"], "fill": o.get("prompt_fill")}
            for o in options
        ],
        "comment": row.comment,
        "option_name": row.option_name,
        "response": row.response,
        "responded_at": row.responded_at.isoformat(timespec="seconds")
        if row.responded_at
        else None,
        "deliveries": [
            {"id": d.id, "channel": d.channel, "status": d.status, "error": d.error}
            for d in deliveries
        ],
        "events": timeline,
        "webhooks": [e for e in timeline if e["type"].startswith("webhook")],
        "policy": policies.shown(row, progress),
        "deadline": policies.iso(row.expires_at) if row.expires_at and pending else None,
        "deadline_in": policies.until(row.expires_at) if row.expires_at and pending else None,
        "next_timer": policies.timer(timer) if pending else None,
    }


def endpoint(hook: WebhookEndpoint, project: str) -> dict[str, Any]:
    return {
        "id": hook.id,
        "project": project,
        "url": hook.url,
        "events": ", ".join(json.loads(hook.events_json)) or "all",
        "enabled": hook.enabled,
        "disabled_reason": hook.disabled_reason,
    }


def webhook_job(job: OutboxJob) -> dict[str, Any]:
    payload = json.loads(job.payload_json)
    return {
        "id": job.id,
        "endpoint_id": payload.get("endpoint_id"),
        "msg_id": payload.get("msg_id"),
        "rid": job.rid,
        "status": job.status,
        "attempts": f"{job.attempts}/{job.max_attempts}",
        "last_error": job.last_error,
        "updated": age(job.updated_at),
    }


def channel_health(
    name: str, channel: Channel, last_error: tuple[str, datetime] | None
) -> dict[str, Any]:
    """Configured (settings present), the connection's state and since when, last error."""
    state = channel_state(name, channel)
    return {
        "name": name,
        "configured": state.configured,
        "missing": ", ".join(state.missing),
        "connection": state.connection or "n/a",
        "connection_age": age(state.since) if state.since else None,
        "last_error": last_error[0] if last_error else None,
        "last_error_age": age(last_error[1]) if last_error else None,
    }
