"""The MCP tools: each creates or reads a request through the core, exactly as the HTTP API
does (gateway.intake with the same pydantic models), so validation, routing, audit and
webhooks are the same. No tool approves, rejects or answers anything: an agent must never
be able to decide its own request.

permission_prompt follows Claude Code's --permission-prompt-tool contract: it is called with
{"tool_name", "input", "tool_use_id"} and returns, as JSON text, {"behavior": "allow",
"updatedInput": {...}} or {"behavior": "deny", "message": "..."} (Claude Code SDK docs, "Custom
permission prompt tool"; anthropics/claude-code#1175; updatedInput is required on allow:
ferrislucas/Circus-Chief#1119 quotes the CLI's schema).
"""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Iterator
from typing import Annotated, Any

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field, ValidationError
from starlette.datastructures import State

from gateway import intake
from gateway.api.limits import take_create
from gateway.core import Caller
from gateway.errors import GatewayError
from gateway.lifecycle import Kind
from gateway.mcp import results
from gateway.store.errors import UNAVAILABLE
from gateway.wire.models import FunctionCallIn, HumanContactIn, is_call_id, spoofing_character

CALLER = "gateway.caller"  # where the door puts the authenticated Caller in the ASGI scope
RUN_ID = "mcp-agent"  # the run_id of a request whose client did not name itself
WAIT_DEFAULT = 45.0
# Under the 60 s request timeout of clients built on the MCP TypeScript SDK
# (DEFAULT_REQUEST_TIMEOUT_MSEC): past it they drop the call and the decision is lost to them.
WAIT_MAX = 55.0
PERMISSION_WAIT_SECONDS = WAIT_MAX  # Claude Code passes no wait; a module value tests lower

Wait = Annotated[
    float,
    Field(
        ge=0,
        le=WAIT_MAX,
        description=(
            f"Seconds to wait for the person before returning a pending ticket (0 to {WAIT_MAX:g}, "
            f"default {WAIT_DEFAULT:g}). The request stays open after that: ask again."
        ),
    ),
]
Team = Annotated[
    str | None,
    Field(
        max_length=255,
        description="Also send the request to this team of the gateway's routing config "
        "(e.g. 'sre'). The gateway's routing rules always apply; a team only adds people.",
    ),
]
Person = Annotated[
    str | None,
    Field(
        max_length=255,
        description="Also send the request to this person of the gateway's routing config "
        "(e.g. 'alice'), instead of a team. The gateway's routing rules always apply.",
    ),
]
CallIdArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=255,
        description="The call_id a pending result gave you.",
    ),
]


# --- tools


async def request_approval(
    action: Annotated[
        str,
        Field(
            min_length=1,
            max_length=255,
            description="The function or action to run, e.g. 'drop_table' or 'deploy'.",
        ),
    ],
    arguments: Annotated[
        dict[str, Any],
        Field(description="The exact arguments it will run with, as a JSON object."),
    ],
    ctx: Context,
    reason: Annotated[
        str | None,
        Field(max_length=10_000, description="Why the action is needed, shown to the person."),
    ] = None,
    team: Team = None,
    person: Person = None,
    wait_seconds: Wait = WAIT_DEFAULT,
) -> dict[str, Any]:
    """Ask a person to approve an action before you perform it. The person sees the action,
    its arguments and your reason in Slack, Discord, email or the web console, and approves or
    rejects it with a comment. Waits up to wait_seconds and returns {status: "approved" |
    "rejected", comment, decided_by, call_id}, or {status: "pending", call_id} when nobody has
    decided yet: then call get_decision with that call_id. Perform the action only after
    status "approved", with the `arguments` it returns if it has them (the person edited
    yours); on "rejected", read the comment and do not perform it."""
    spec: dict[str, Any] = {"fn": action, "kwargs": arguments, "channel": _route(team, person)}
    wire = await _create(
        ctx, Kind.FUNCTION_CALL, "request_approval", spec, wait_seconds, reason=reason
    )
    return results.decision(wire)


async def get_decision(
    call_id: CallIdArg, ctx: Context, wait_seconds: Wait = WAIT_DEFAULT
) -> dict[str, Any]:
    """Wait for the decision on an approval request made with request_approval (its call_id).
    Returns {status: "approved" | "rejected", comment, decided_by} (and `arguments` to use
    instead of yours when the person edited them) or, if nobody has decided within
    wait_seconds, {status: "pending"} again: call this again, as often as needed; a person may
    take hours. Reading never changes the request."""
    wire = await _read(ctx, Kind.FUNCTION_CALL, call_id, wait_seconds)
    return results.decision(wire)


async def ask_human(
    question: Annotated[
        str,
        Field(min_length=1, max_length=100_000, description="The question, in plain words."),
    ],
    ctx: Context,
    options: Annotated[
        list[Annotated[str, Field(min_length=1, max_length=255)]] | None,
        Field(
            max_length=25,
            description="Answers the person can pick with one click (at most 25, each "
            "distinct); they can still type another answer.",
        ),
    ] = None,
    team: Team = None,
    person: Person = None,
    wait_seconds: Wait = WAIT_DEFAULT,
) -> dict[str, Any]:
    """Ask a person a question (a decision you cannot make, missing information) in Slack,
    Discord, email or the web console. Waits up to wait_seconds and returns {status:
    "answered", answer, option, answered_by, call_id}, or {status: "pending", call_id} when
    nobody has answered yet: then call get_answer with that call_id."""
    spec: dict[str, Any] = {"msg": question, "channel": _route(team, person)}
    if options:
        spec["response_options"] = [{"name": text, "title": text} for text in options]
    wire = await _create(ctx, Kind.HUMAN_CONTACT, "ask_human", spec, wait_seconds)
    return results.answer(wire)


async def get_answer(
    call_id: CallIdArg, ctx: Context, wait_seconds: Wait = WAIT_DEFAULT
) -> dict[str, Any]:
    """Wait for the answer to a question asked with ask_human (its call_id). Returns {status:
    "answered", answer, ...} or, if nobody has answered within wait_seconds, {status:
    "pending"} again: call this again, as often as needed. Reading never changes anything."""
    wire = await _read(ctx, Kind.HUMAN_CONTACT, call_id, wait_seconds)
    return results.answer(wire)


async def permission_prompt(
    tool_name: Annotated[
        str,
        Field(min_length=1, max_length=255, description="The name of the tool to run."),
    ],
    input: Annotated[  # Claude Code's name for it
        dict[str, Any], Field(description="The input the tool will run with.")
    ],
    ctx: Context,
    tool_use_id: Annotated[
        str | None, Field(max_length=255, description="The unique tool use request ID.")
    ] = None,
) -> str:
    """For Claude Code's --permission-prompt-tool: asks a person to approve this tool use and
    returns Claude Code's permission JSON, allow with the input (as the person edited it, if
    they did) or deny with the person's comment. If nobody decides in time it denies and says
    the request is still pending."""
    spec: dict[str, Any] = {"fn": tool_name, "kwargs": input}
    if tool_use_id is not None:
        spec["state"] = {"tool_use_id": tool_use_id}
    # The same tool use asked again waits on the same request (an idempotent create).
    call_id = f"mcp-{tool_use_id}" if tool_use_id and is_call_id(f"mcp-{tool_use_id}") else None
    wire = await _create(
        ctx,
        Kind.FUNCTION_CALL,
        "permission_prompt",
        spec,
        PERMISSION_WAIT_SECONDS,
        call_id=call_id,
    )
    return results.permission(wire, input)


# --- the core calls behind them


def _route(team: str | None, person: str | None) -> dict[str, str] | None:
    if team and person:
        raise ToolError("give team or person, not both")
    return {"team": team} if team else {"person": person} if person else None


async def _create(
    ctx: Context,
    kind: Kind,
    tool: str,
    spec: dict[str, Any],
    wait: float,
    *,
    call_id: str | None = None,
    reason: str | None = None,
) -> dict[str, Any]:
    """Create the request as POST /function_calls or /contact_requests would, then wait."""
    caller = _caller(ctx)
    client, version = _client(ctx)
    origin = {"via": "mcp", "client": client, "client_version": version, "tool": tool}
    body = {
        "run_id": client or RUN_ID,
        "call_id": call_id or f"mcp-{secrets.token_urlsafe(12)}",
        "spec": spec | {"origin": origin | ({"reason": reason} if reason else {})},
    }
    model = FunctionCallIn if kind is Kind.FUNCTION_CALL else HumanContactIn
    try:
        incoming = model.model_validate(body)
    except ValidationError as error:
        raise ToolError(_explain(error, tool)) from None
    with _as_tool_errors():
        take_create(_app_state(ctx), caller)  # the same buckets as the HTTP API's creates
        wire = await intake.create(caller.core, caller, kind, incoming)
        if wire["gateway_status"] != "pending" or not wait:
            return wire
        return await intake.get(caller.core, caller, kind, wire["call_id"], wait=wait)


async def _read(ctx: Context, kind: Kind, call_id: str, wait: float) -> dict[str, Any]:
    """GET /function_calls/{call_id}?wait=…: another project's call_id is not found."""
    caller = _caller(ctx)
    with _as_tool_errors():
        return await intake.get(caller.core, caller, kind, call_id, wait=wait or None)


def _caller(ctx: Context) -> Caller:
    """The caller the door authenticated for the HTTP request that carries this call."""
    request = ctx.request_context.request
    caller = None if request is None else request.scope.get(CALLER)
    if not isinstance(caller, Caller):  # only reachable by mounting the server without the door
        raise ToolError("not authenticated: send 'Authorization: Bearer <api key>'")
    return caller


def _app_state(ctx: Context) -> State:
    """The gateway app's state (the door's request carries the app, as any request does)."""
    request = ctx.request_context.request
    assert request is not None  # _caller found the door's caller in it
    state: State = request.app.state
    return state


def _client(ctx: Context) -> tuple[str | None, str | None]:
    """The client's name and version from its initialize handshake, as labels a person can
    read (controls and bidi overrides dropped: the client names itself)."""
    params = ctx.session.client_params
    if params is None:
        return None, None
    info = params.client_info
    return _label(info.name), _label(info.version)


def _label(text: str | None) -> str | None:
    kept = "".join(c for c in text or "" if spoofing_character(c) is None).strip()[:255]
    return kept or None


# What the model called each field the request's validation names.
_ARGUMENTS = {
    "request_approval": {"fn": "action", "kwargs": "arguments", "origin": "reason"},
    "permission_prompt": {"fn": "tool_name", "kwargs": "input", "state": "tool_use_id"},
    "ask_human": {"msg": "question", "response_options": "options"},
}


def _explain(error: ValidationError, tool: str) -> str:
    """The validation errors in the tool's own argument names, without the values."""
    names = _ARGUMENTS.get(tool, {}) | {"channel": "team or person"}
    problems = []
    for item in error.errors():
        loc = [str(part) for part in item["loc"] if part != "spec"]
        if loc and loc[0] in names:
            loc[0] = names[loc[0]]
        problems.append(f"{'.'.join(loc) or 'request'}: {item['msg']}")
    return "invalid request: " + "; ".join(problems)


@contextlib.contextmanager
def _as_tool_errors() -> Iterator[None]:
    """The gateway's errors as tool errors (isError results the model reads), never a 500."""
    try:
        yield
    except GatewayError as error:
        raise ToolError(str(error)) from error
    except UNAVAILABLE as error:
        raise ToolError("the gateway's database is busy or unreachable; retry shortly") from error
