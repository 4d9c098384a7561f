"""A request's approval policy as the console shows it: each node's approvals and who gave
them, its delay and whether it is active yet; and the request's deadline and next timer.
Pure functions over what the core read (`gateway.console.standing`, `next_timer`)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from gateway.policies import evaluator
from gateway.seam.sentences import progress_line, spoken
from gateway.seam.views import Progress
from gateway.store.rows import OutboxJob, Request
from gateway.vocabulary import Timer

_MODES = {evaluator.Mode.ANY_OF: "Any of", evaluator.Mode.ALL_OF: "All of"}
_ADDRESS_KEYS = ("address", "channel", "channel_id", "user_id")  # email, Slack, Discord


def iso(moment: datetime) -> str:
    return moment.isoformat(timespec="seconds")


def shown(row: Request, progress: Progress | None) -> dict[str, Any] | None:
    """The policy section: "1 of 2 approvals: Alice (the web console)" and the tree; None
    for a request the first answer decides."""
    if row.policy_json is None or progress is None or progress.tree is None:
        return None
    tree = evaluator.from_dict(json.loads(row.policy_json))
    route = json.loads(row.route_json)
    return {
        "line": progress_line(progress),
        "tree": _node(tree, progress.tree, route, row.requested_at, 0.0),
    }


def _node(
    node: evaluator.Node,
    progress: dict[str, Any],
    route: list[dict[str, Any]],
    requested_at: datetime,
    offset: float,
) -> dict[str, Any]:
    """One node: `progress` is its part of the progress tree (`gateway.votes.progress`),
    built from the same policy, so the two have the same shape."""
    start = offset + node.delay
    approvals, needed = evaluator.summary(_as_progress(progress))
    begins = requested_at + timedelta(seconds=offset + _first_leaf(node))
    shown: dict[str, Any] = {
        "approvals": approvals,
        "needed": needed,
        "required": progress["required"],
        "approved": progress["approved"],
        "active": progress["active"],
        "approved_by": list(progress["approved_by"]),
        "delay": spoken(node.delay) if node.delay else None,
        "begins_at": None if progress["active"] else iso(begins),
    }
    if isinstance(node, evaluator.Leaf):
        target = route[node.target]
        return shown | {
            "mode": None,
            "channel": target["channel"],
            "address": _address(target),
            "via": target.get("via") or "",
            "children": [],
        }
    children = [
        _node(child, part, route, requested_at, start)
        for child, part in zip(node.children, progress["children"], strict=True)
    ]
    return shown | {"mode": _MODES[node.mode], "children": children}


def _first_leaf(node: evaluator.Node) -> float:
    """Seconds from its parent's start until the node's first leaf becomes active."""
    if isinstance(node, evaluator.Leaf):
        return node.delay
    return node.delay + min(_first_leaf(child) for child in node.children)


def _as_progress(node: dict[str, Any]) -> evaluator.Progress:
    """A stored progress node back as the evaluator's, for `evaluator.summary`."""
    children = tuple(_as_progress(child) for child in node.get("children", []))
    mode = evaluator.Mode(node["mode"]) if "mode" in node else None
    return evaluator.Progress(
        node["required"],
        node["approved"],
        node["active"],
        tuple(node["approved_by"]),
        children,
        mode=mode,
    )


def _address(target: dict[str, Any]) -> str:
    """Where the target is posted: an email address, a Slack or Discord channel, a DM."""
    address = target.get("address") or {}
    found = (address.get(key) for key in _ADDRESS_KEYS)
    return next((value for value in found if isinstance(value, str)), "")


def timer(job: OutboxJob | None) -> dict[str, Any] | None:
    """The next timer: what it does and when."""
    if job is None:
        return None
    payload = json.loads(job.payload_json)
    kind = payload.get("timer")
    if kind == Timer.EXPIRE:
        label = "deadline (expires)"
    elif kind == Timer.REMIND:
        label = f"reminder {payload.get('number')}"
    else:
        label = f"escalation to {payload.get('target')}"
    return {"kind": kind, "label": label, "at": iso(job.run_at), "in": until(job.run_at)}


def until(moment: datetime) -> str:
    """How long until `moment`: `59m`, `1h`, `now` once it has passed."""
    seconds = int((moment - datetime.now(UTC)).total_seconds())
    if seconds <= 0:
        return "now"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
