"""The sentences every channel shows, written once: the outcome ("Approved by Alice in Slack
at …"), a policy's progress, where a request came from, a reminder, a duration, and how a
long text is cut. Channels pass their own `who`, `when` and `text` to fit their markup."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from gateway.lifecycle import Status
from gateway.seam.grants import GrantView
from gateway.seam.people import Responder, plain_when, plain_who
from gateway.seam.views import Progress, RequestView
from gateway.vocabulary import AnsweredIn


def describe(
    request: RequestView,
    *,
    who: Callable[[Responder], str] = plain_who,
    when: Callable[[datetime], str] = plain_when,
    text: Callable[[str], str] = str,
) -> str:
    """ "Approved by Alice in Slack at …", "Rejected by …: reason", "Answered by …: text",
    "1 of 2 approvals: Alice (Slack)", "Expired at …: No decision within 2h; expired".
    Channels pass `who` and `when` to show people and times their own way, and `text` to
    escape what people and agents wrote for their markup."""
    responder = Responder.of(request.user_info)
    by = who(responder) if responder else "someone"
    at = f" at {when(request.responded_at)}" if request.responded_at else ""
    if request.status == Status.PENDING and request.progress is not None:
        return progress_line(request.progress, text=text)
    if responder is not None and responder.via == AnsweredIn.GATEWAY:
        return f"Expired{at}: {text(request.comment or request.response or 'no decision in time')}"
    if request.status == Status.APPROVED:
        return f"Approved by {by}{at}{_extras(request, text)}"
    if request.status == Status.REJECTED:
        return f"Rejected by {by}{at}: {text(request.comment or '')}"
    if request.status == Status.RESPONDED:
        return f"Answered by {by}{at}: {text(request.response or '')}"
    return f"This request is {text(request.status)}; it can no longer be answered"


def _extras(request: RequestView, text: Callable[[str], str]) -> str:
    """What an approval did besides approving: the arguments it changed, the grant it gave."""
    extras = ""
    if request.updated_kwargs is not None:
        original = request.spec.get("kwargs") or {}
        keys = original.keys() | request.updated_kwargs.keys()
        changed = sorted(k for k in keys if original.get(k) != request.updated_kwargs.get(k))
        extras += f", with edited arguments ({text(', '.join(changed) or 'none changed')})"
    allowed = (request.user_info or {}).get("allowed")
    if allowed:
        extras += f", and allowed {text(str(allowed))}"
    return extras


def grant_note(grant: GrantView, new: int) -> str:
    """What a standing grant did since its last note, under the message that gave it."""
    who = str(grant.granted_by.get("name") or "someone")
    calls = "1 more call" if new == 1 else f"{new} more calls"
    until = f"until {plain_when(grant.expires_at)}" if grant.expires_at else "until revoked"
    state = "" if grant.live else " It is no longer in force."
    return (
        f"{who}'s standing grant approved {calls} of {grant.what} ({until}).{state} "
        "The console's Grants page lists it and can revoke it."
    )


def progress_line(progress: Progress, *, text: Callable[[str], str] = str) -> str:
    """ "1 of 2 approvals: Alice (Slack), Bob (the web console)"."""
    people = [Responder.of(info) for info in progress.approvers]
    named = ", ".join(text(f"{p.name} ({p.place})") for p in people if p is not None)
    line = f"{progress.approvals} of {progress.needed} approvals"
    return f"{line}: {named}" if named else line


_ORIGINS = {"mcp": "an MCP client", "claude-code-hook": "a Claude Code hook"}


def origin_line(request: RequestView | Mapping[str, Any]) -> str | None:
    """ "Requested through an MCP client: claude-code 1.0.3, tool request_approval"; None for
    a request made through the HTTP API. Takes a view or its spec. Channels escape it: the
    client names itself."""
    spec = request.spec if isinstance(request, RequestView) else request
    origin = spec.get("origin")
    if not origin:
        return None
    line = f"Requested through {_ORIGINS.get(origin.get('via'), 'an agent tool')}"
    client = " ".join(str(origin[k]) for k in ("client", "client_version") if origin.get(k))
    details = [part for part in (client, origin.get("tool") and f"tool {origin['tool']}") if part]
    line = f"{line}: {', '.join(details)}" if details else line
    return f"{line}. Reason: {origin['reason']}" if origin.get("reason") else line


def reminder_text(request: RequestView) -> str:
    """What a reminder says, before the channel's mentions."""
    line = "Reminder: this request is still waiting for a decision"
    if request.progress is not None:
        line += f" ({progress_line(request.progress)})"
    if request.expires_at is not None:
        line += f"; it expires at {plain_when(request.expires_at)}"
    return line


def spoken(seconds: float) -> str:
    """2h, 90m, 45s: a duration as the config file would say it (to the second)."""
    whole = max(round(seconds), 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if whole >= size and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


CUT = "… (truncated)"  # where a channel has no link to the full request


def shorten(text: str, limit: int, *, more: str = "…") -> str:
    """`text` whole if it fits in `limit` characters, else cut (and trailing spaces with it)
    to end with `more`: a link to the full request, where the channel has one."""
    if len(text) <= limit:
        return text
    return text[: max(limit - len(more), 0)].rstrip() + more
