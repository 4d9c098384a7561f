"""A request's approval policy as the console shows it: each node's approvals and who gave
them, its delay and whether it is active yet; and the request's deadline and next timer.
Pure functions over what the console door read (`Console.standing`, `next_timer`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.seam import PolicyNode, Standing, TimerView, progress_line, spoken
from gateway.vocabulary import Timer

_MODES = {"any_of": "Any of", "all_of": "All of"}
_ADDRESS_KEYS = ("address", "channel", "channel_id", "user_id")  # email, Slack, Discord


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def shown(standing: Standing | None) -> dict[str, Any] | None:
    """The policy section: "1 of 2 approvals: Alice (the web console)" and the tree; None
    for a request the first answer decides."""
    if standing is None:
        return None
    return {"line": progress_line(standing.progress), "tree": _node(standing.tree)}


def _node(node: PolicyNode) -> dict[str, Any]:
    shown: dict[str, Any] = {
        "approvals": node.approvals,
        "needed": node.needed,
        "required": node.required,
        "approved": node.approved,
        "active": node.active,
        "approved_by": list(node.approved_by),
        "delay": spoken(node.delay) if node.delay else None,
        "begins_at": None if node.active else iso(node.begins_at),
    }
    if node.target is not None:
        return shown | {
            "mode": None,
            "channel": node.target["channel"],
            "address": _address(node.target),
            "via": node.target.get("via") or "",
            "children": [],
        }
    mode = _MODES[node.mode or "any_of"]
    return shown | {"mode": mode, "children": [_node(child) for child in node.children]}


def _address(target: dict[str, Any]) -> str:
    """Where the target is posted: an email address, a Slack or Discord channel, a DM."""
    address = target.get("address") or {}
    found = (address.get(key) for key in _ADDRESS_KEYS)
    return next((value for value in found if isinstance(value, str)), "")


def timer(next_timer: TimerView | None) -> dict[str, Any] | None:
    """The next timer: what it does and when."""
    if next_timer is None:
        return None
    if next_timer.timer == Timer.EXPIRE:
        label = "deadline (expires)"
    elif next_timer.timer == Timer.REMIND:
        label = f"reminder {next_timer.number}"
    else:
        label = f"escalation to {next_timer.target}"
    at = next_timer.run_at
    return {"kind": next_timer.timer, "label": label, "at": iso(at), "in": until(at)}


def until(moment: datetime) -> str:
    """How long until `moment`: `59m`, `1h`, `now` once it has passed."""
    seconds = int((moment - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
