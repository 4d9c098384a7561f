"""What each MCP tool returns, built from a request's wire JSON: pure functions, no I/O.

A model reads these, so each result says in words what to do next. The permission prompt's
answer is Claude Code's own shape (see gateway.mcp.tools)."""

from __future__ import annotations

import json
from typing import Any

PENDING_APPROVAL = (
    "No decision yet; a person may take minutes or hours. Do not perform the action. "
    "Call get_decision with this call_id to keep waiting."
)
EDITED = (
    "The person approved it with edited arguments: perform the action with `arguments`, "
    "not the ones you asked with."
)
PENDING_ANSWER = (
    "No answer yet; a person may take minutes or hours. "
    "Call get_answer with this call_id to keep waiting."
)


def _who(info: dict[str, Any]) -> str | None:
    found = info.get("name") or info.get("email") or info.get("user_id")
    return None if found is None else str(found)


def _progress(wire: dict[str, Any]) -> dict[str, Any]:
    """A policy's partial approvals ("1 of 2"), when the request has a policy."""
    progress = wire.get("policy_progress")
    if not progress:
        return {}
    return {"approvals": progress.get("approvals"), "needed": progress.get("needed")}


def decision(wire: dict[str, Any]) -> dict[str, Any]:
    """A function call as request_approval / get_decision answer it."""
    call_id, status = wire["call_id"], wire["gateway_status"]
    if status == "pending":
        return {"status": "pending", "call_id": call_id, "message": PENDING_APPROVAL} | (
            {"progress": progress} if (progress := _progress(wire)) else {}
        )
    info = wire["status"].get("user_info") or {}
    edited = edited_arguments(wire)
    return (
        {
            "status": status,  # approved, rejected (an expired deadline is a rejection), cancelled
            "call_id": call_id,
            "comment": wire["status"].get("comment"),
            "decided_by": _who(info),
            "decided_in": info.get("channel"),
        }
        | _receipt(wire)
        | ({} if edited is None else {"arguments": edited, "message": EDITED})
    )


def answer(wire: dict[str, Any]) -> dict[str, Any]:
    """A human contact as ask_human / get_answer answer it."""
    call_id, status = wire["call_id"], wire["gateway_status"]
    if status == "pending":
        return {"status": "pending", "call_id": call_id, "message": PENDING_ANSWER}
    if status != "responded":  # expired without a configured answer, or cancelled
        return {"status": status, "call_id": call_id, "answer": None}
    info = wire["status"].get("user_info") or {}
    return {
        "status": "answered",
        "call_id": call_id,
        "answer": wire["status"].get("response"),
        "option": wire["status"].get("response_option_name"),
        "answered_by": _who(info),
        "answered_in": info.get("channel"),
    } | _receipt(wire)


def _receipt(wire: dict[str, Any]) -> dict[str, Any]:
    """The decision's signed receipt, to check offline against the gateway's JWKS."""
    return {"receipt": wire["receipt"]} if wire.get("receipt") else {}


def edited_arguments(wire: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments the person approved instead of the agent's (`status.updated_kwargs`),
    when they edited them before approving."""
    edited = wire["status"].get("updated_kwargs")
    return edited if isinstance(edited, dict) else None


def permission(wire: dict[str, Any], tool_input: dict[str, Any]) -> str:
    """The text Claude Code's --permission-prompt-tool expects: allow with the input (as the
    person edited it, if they did), or deny with a message. Anything but an approval is a
    denial: a timeout never allows."""
    status = wire["gateway_status"]
    if status == "approved":
        edited = edited_arguments(wire)
        allowed = tool_input if edited is None else edited
        return json.dumps({"behavior": "allow", "updatedInput": allowed})
    if status == "rejected":
        comment = wire["status"].get("comment") or "Denied by a person through the gateway."
        return json.dumps({"behavior": "deny", "message": comment})
    if status == "pending":
        message = (
            f"Still pending: nobody has decided approval request {wire['call_id']} yet, so "
            "this tool call was not run. Ask again (retry the tool call) to wait for a "
            "decision; get_decision with this call_id shows where it stands."
        )
    else:
        message = f"Approval request {wire['call_id']} was {status}; the tool call was not run."
    return json.dumps({"behavior": "deny", "message": message})
