"""`gateway hook claude-code`: Claude Code's PreToolUse and PermissionRequest hooks, decided
by a person through a gateway's HTTP API.

Claude Code runs the command with the hook's JSON on stdin and reads the decision from stdout
(exit 0). The shapes, from Claude Code's hooks reference (https://code.claude.com/docs/en/hooks):

- Input (#common-input-fields, #pretooluse-input, #permissionrequest-input): `session_id`,
  `transcript_path`, `cwd`, `permission_mode`, `hook_event_name`, `tool_name`, `tool_input`,
  and for PreToolUse `tool_use_id`; PermissionRequest comes "without `tool_use_id`".
- PreToolUse output (#pretooluse-decision-control): `{"hookSpecificOutput": {"hookEventName":
  "PreToolUse", "permissionDecision": "allow"|"deny"|"ask", "permissionDecisionReason": …,
  "updatedInput"?}}`; a deny's reason is shown to Claude, an allow's to the user, and
  `updatedInput` replaces the tool's input before it runs.
- PermissionRequest output (#permissionrequest-decision-control): `{"hookSpecificOutput":
  {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"|"deny",
  "updatedInput"?, "message"? (deny only: tells Claude why), "interrupt"?}}}`.
- A command hook has 600 s unless its `timeout` says otherwise (#common-fields; CHANGELOG
  2.1.3, https://github.com/anthropics/claude-code/blob/main/CHANGELOG.md: "Changed tool hook
  execution timeout from 60 seconds to 10 minutes"). A hook cut off at its timeout renders no
  decision (#timeouts) and PermissionRequest ignores exit 2 (#exit-code-2-behavior-per-event),
  so this command answers before its own `--timeout`, always with JSON.

It fails closed: "allow" only when a person approved. No decision in time is a deny that
says the request is still pending (and its call_id): asking again waits on the same request.
No key, no gateway, a refused key or any other error is a deny that says why.

The gateway's address and key are the agent's: HUMANLAYER_API_BASE (default
http://127.0.0.1:8080/humanlayer/v1) and HUMANLAYER_API_KEY, from the environment only (a
`.env` in the project Claude Code works on is not the gateway's).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from gateway.wire.models import Origin

DEFAULT_API_BASE = "http://127.0.0.1:8080/humanlayer/v1"
# Claude Code's default hook timeout is 600 s; 30 s are left to start Python and answer.
DEFAULT_TIMEOUT_SECONDS = 570.0
LONG_POLL_SECONDS = 60.0  # the most `GET …?wait=` holds an answer
REQUEST_SECONDS = 10.0  # any other call to the gateway
GRACE_SECONDS = 5.0  # on top of a long-poll's wait, for the answer to arrive
EVENTS = ("PreToolUse", "PermissionRequest")
VIA = "claude-code-hook"
CALL_ID_PREFIX = "claude-code-"
_PLAIN_ID = re.compile(r"[A-Za-z0-9_.\-]{1,200}")


class HookInputError(ValueError):
    """Standard input is not a PreToolUse or PermissionRequest hook's JSON; `event` is set
    when it names one of them (and so the shape of a deny is known)."""

    def __init__(self, message: str, *, event: str | None = None) -> None:
        super().__init__(message)
        self.event = event


class Unanswered(Exception):
    """The gateway could not be asked; the message says why."""


@dataclass(frozen=True)
class HookInput:
    event: str
    session_id: str
    tool_name: str
    tool_input: dict[str, Any]
    tool_use_id: str | None

    @classmethod
    def from_json(cls, text: str) -> HookInput:
        try:
            data = json.loads(text)
        except ValueError as error:
            raise HookInputError(f"standard input is not JSON: {error}") from None
        if not isinstance(data, dict):
            raise HookInputError("standard input is not a JSON object")
        event = data.get("hook_event_name")
        if event not in EVENTS:
            raise HookInputError(f"hook_event_name is {event!r}; this hook answers {EVENTS}")
        tool_use_id = data.get("tool_use_id")
        return cls(
            event=event,
            session_id=_text(data, "session_id", event),
            tool_name=_text(data, "tool_name", event),
            tool_input=_object(data, "tool_input", event),
            tool_use_id=tool_use_id if isinstance(tool_use_id, str) and tool_use_id else None,
        )


def _text(data: dict[str, Any], name: str, event: str) -> str:
    value = data.get(name)
    if not isinstance(value, str) or not value:
        raise HookInputError(f"{name} is missing or not a non-empty string", event=event)
    return value


def _object(data: dict[str, Any], name: str, event: str) -> dict[str, Any]:
    value = data.get(name)
    if not isinstance(value, dict):
        raise HookInputError(f"{name} is missing or not a JSON object", event=event)
    return value


@dataclass(frozen=True)
class Verdict:
    allow: bool
    reason: str
    # The tool input the person approved instead of Claude's (`status.updated_kwargs`).
    updated_input: dict[str, Any] | None = None


def output(event: str, verdict: Verdict) -> dict[str, Any]:
    """The hook's decision JSON for `event`."""
    edited = {"updatedInput": verdict.updated_input} if verdict.updated_input is not None else {}
    if event == "PreToolUse":
        return {
            "hookSpecificOutput": {
                "hookEventName": event,
                "permissionDecision": "allow" if verdict.allow else "deny",
                "permissionDecisionReason": verdict.reason,
            }
            | edited
        }
    decision = (
        {"behavior": "allow"} | edited
        if verdict.allow
        else {"behavior": "deny", "message": verdict.reason}
    )
    return {"hookSpecificOutput": {"hookEventName": event, "decision": decision}}


def call_id_for(hook: HookInput) -> str:
    """From the tool use's id, so the same tool use finds the same request; PermissionRequest
    carries none, and a pending twin (`Gateway.pending_twin`) stands in for it."""
    if hook.tool_use_id is None:
        return CALL_ID_PREFIX + uuid.uuid4().hex
    if _PLAIN_ID.fullmatch(hook.tool_use_id):
        return CALL_ID_PREFIX + hook.tool_use_id
    return CALL_ID_PREFIX + hashlib.sha256(hook.tool_use_id.encode()).hexdigest()[:40]


def request_body(hook: HookInput, call_id: str) -> dict[str, Any]:
    origin = Origin(via=VIA, tool=hook.tool_name).model_dump(mode="json", exclude_none=True)
    spec = {"fn": hook.tool_name, "kwargs": hook.tool_input, "origin": origin}
    return {"run_id": hook.session_id, "call_id": call_id, "spec": spec}


def verdict_of(record: Mapping[str, Any]) -> Verdict | None:
    """The person's decision on a function call record, or None while it is pending."""
    status = record.get("status") or {}
    approved = status.get("approved")
    if approved is None:
        return None
    comment = status.get("comment") or ""
    if approved is True:
        edited = status.get("updated_kwargs")  # the person's edit of the tool input, if any
        edited = edited if isinstance(edited, dict) else None
        how = f"Approved by {_who(status.get('user_info') or {})}"
        how += "" if edited is None else " with edited input"
        return Verdict(True, f"{how}: {comment}" if comment else how, edited)
    # The gateway gives every rejection a comment ("Rejected in … by …" when nobody wrote one).
    return Verdict(False, comment or f"Rejected by {_who(status.get('user_info') or {})}")


def _who(user_info: Mapping[str, Any]) -> str:
    name = user_info.get("name") or user_info.get("email") or user_info.get("user_id") or "someone"
    channel = user_info.get("channel")
    return f"{name} ({channel})" if channel else str(name)


def still_pending(call_id: str) -> Verdict:
    return Verdict(
        False,
        f"No decision yet: approval request {call_id} is still pending with the gateway. "
        "Ask again (retry the same tool call) to keep waiting for a person's decision.",
    )


class Gateway:
    """The few calls of the HumanLayer API this hook makes; every failure is `Unanswered`."""

    def __init__(self, http: httpx.Client, base: str) -> None:
        self.http = http
        self.base = base

    def pending_twin(self, hook: HookInput) -> dict[str, Any] | None:
        """A pending request of this session from this hook for the same tool and input: the
        one to wait on when Claude asks again after a deny that said "still pending"."""
        params = {"status": "pending", "run_id": hook.session_id, "limit": 100}
        page = self._call("GET", "/function_calls", params=params, timeout=REQUEST_SECONDS)
        for record in page.get("items", []):
            spec = record.get("spec") or {}
            origin = spec.get("origin") or {}
            same = spec.get("fn") == hook.tool_name and spec.get("kwargs") == hook.tool_input
            if same and origin.get("via") == VIA:
                return dict(record)
        return None

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        # Idempotent on call_id: the same body again returns the stored record.
        return self._call("POST", "/function_calls", json=body, timeout=REQUEST_SECONDS)

    def wait(self, call_id: str, seconds: float) -> dict[str, Any]:
        params = {"wait": f"{seconds:.3f}"}
        timeout = seconds + GRACE_SECONDS
        return self._call("GET", f"/function_calls/{call_id}", params=params, timeout=timeout)

    def _call(self, method: str, path: str, *, timeout: float, **kwargs: Any) -> dict[str, Any]:
        try:
            response = self.http.request(method, self.base + path, timeout=timeout, **kwargs)
        except httpx.HTTPError as error:
            name = type(error).__name__
            raise Unanswered(f"cannot reach the approval gateway at {self.base} ({name})") from None
        if response.status_code == 401:
            raise Unanswered(
                f"the approval gateway at {self.base} refused the API key in HUMANLAYER_API_KEY "
                f"({_detail(response)})"
            )
        if response.status_code != 200:
            raise Unanswered(
                f"the approval gateway at {self.base} answered {response.status_code} "
                f"({_detail(response)})"
            )
        body = response.json()
        if not isinstance(body, dict):
            raise Unanswered(f"the approval gateway at {self.base} answered with no JSON object")
        return body


def _detail(response: httpx.Response) -> str:
    try:
        detail = response.json().get("detail")
    except (ValueError, AttributeError):
        detail = None
    text = detail if isinstance(detail, str) else json.dumps(detail) if detail else response.text
    return text[:500] or response.reason_phrase


def await_decision(
    hook: HookInput,
    gateway: Gateway,
    *,
    timeout: float,
    clock: Callable[[], float] = time.monotonic,
) -> Verdict:
    """Ask, then long-poll until a person decides or `timeout` seconds have passed."""
    deadline = clock() + timeout
    record = gateway.pending_twin(hook) or gateway.create(request_body(hook, call_id_for(hook)))
    call_id = str(record["call_id"])
    while (verdict := verdict_of(record)) is None:
        remaining = deadline - clock()
        if remaining < 0.05:  # `wait` must be positive; a sliver is not worth a request
            return still_pending(call_id)
        record = gateway.wait(call_id, min(remaining, LONG_POLL_SECONDS))
    return verdict


def ask(hook: HookInput, *, timeout: float, environ: Mapping[str, str]) -> Verdict:
    """The verdict for `hook`: a person's, or a deny that says why there is none."""
    key = environ.get("HUMANLAYER_API_KEY", "").strip()
    if not key:
        return _closed("HUMANLAYER_API_KEY is not set, so the approval gateway cannot be asked")
    base = (environ.get("HUMANLAYER_API_BASE") or DEFAULT_API_BASE).rstrip("/")
    try:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(headers=headers, follow_redirects=False) as http:
            return await_decision(hook, Gateway(http, base), timeout=timeout)
    except Unanswered as error:
        return _closed(str(error))
    except Exception as error:  # whatever went wrong, it is never an allow
        return _closed(f"the hook failed: {type(error).__name__}: {error}")


def _closed(problem: str) -> Verdict:
    return Verdict(False, f"Denied (fail closed): {problem}. Nothing was approved.")


def seconds(text: str) -> float:
    """An argparse type: a positive number of seconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT_SECONDS,
        help="seconds to wait for a decision; keep it under the hook's own timeout (600 s)",
    )


def main(argv: list[str]) -> int:
    """The command without the gateway's CLI: it runs on every tool use, so it starts
    without importing the server (about 0.2 s instead of 1.2 s)."""
    parser = argparse.ArgumentParser(prog="gateway hook claude-code")
    add_arguments(parser)
    return run(parser.parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """`gateway hook claude-code`: the hook's JSON in, its decision JSON out, exit 0."""
    try:
        hook = HookInput.from_json(sys.stdin.buffer.read().decode("utf-8"))
    except (HookInputError, UnicodeDecodeError) as error:
        event = getattr(error, "event", None)
        if event is not None:
            _answer(event, _closed(f"the hook's input is not what Claude Code sends: {error}"))
            return 0
        # No event to answer in its shape. Exit 2 blocks a PreToolUse call; PermissionRequest
        # ignores it and shows its dialog (#exit-code-2-behavior-per-event).
        print(f"gateway hook claude-code: {error}", file=sys.stderr)
        return 2
    _answer(hook.event, ask(hook, timeout=args.timeout, environ=os.environ))
    return 0


def _answer(event: str, verdict: Verdict) -> None:
    print(json.dumps(output(event, verdict)), flush=True)
