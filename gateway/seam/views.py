"""What channels see of a request, and what they report after posting one: frozen values the
core builds from its rows (`Core.view`), with timestamps in UTC."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from gateway.lifecycle import Kind, Status
from gateway.seam.grants import GrantChoice


@dataclass(frozen=True)
class RequestView:
    rid: str
    project: str
    kind: Kind
    call_id: str
    run_id: str
    spec: dict[str, Any]
    status: Status
    requested_at: datetime
    link: str | None = None  # the request's page when GATEWAY_PUBLIC_URL is set
    comment: str | None = None
    option_name: str | None = None
    response: str | None = None
    user_info: dict[str, Any] | None = None
    responded_at: datetime | None = None
    route: list[dict[str, Any]] = field(default_factory=list)  # its targets, as routed
    progress: Progress | None = None  # a policy's approvals so far; None: first answer decides
    expires_at: datetime | None = None  # when it fails closed (gateway.policies.timers)
    # Write-only values the agent sent (a per-request Slack bot token); never echoed.
    secrets: dict[str, str] = field(default_factory=dict, repr=False)
    # Whether its project lets the agent's own templates render (`allow_agent_templates`).
    agent_templates: bool = False
    # "Approve and allow…": what a person may grant while answering it (empty: not offered,
    # e.g. under a quorum or where a rule says `grants = false`).
    grant_choices: tuple[GrantChoice, ...] = ()
    editable: bool = False  # "Edit and approve" is offered
    # The arguments as the approver edited them (`status.updated_kwargs`), once approved so.
    updated_kwargs: dict[str, Any] | None = None

    @property
    def options(self) -> list[dict[str, Any]]:
        """Its reject options (a function call) or response options (a question)."""
        return options_of(self.kind, self.spec)


def options_of(kind: str, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A request's reject options (a function call) or response options (a question)."""
    key = "reject_options" if kind == Kind.FUNCTION_CALL else "response_options"
    found: list[dict[str, Any]] = spec.get(key) or []
    return found


@dataclass(frozen=True)
class Progress:
    """Where a request with an approval policy stands: "1 of 2 approvals: Alice (Slack)"."""

    approvals: int
    needed: int
    approvers: tuple[dict[str, Any], ...] = ()  # the user_info of each counted approver


@dataclass(frozen=True)
class Sent:
    """What a channel reports after posting. The core stores each part with the delivery
    without knowing what it means."""

    ref: dict[str, Any]  # the platform's ids of the post, handed back to update and remind
    # What a reply or a click in the platform carries to name this post (Slack:
    # "<channel>:<ts>" of the thread; Discord: the message id), so the channel can find the
    # request again (`Answers.find`) and an answer counts for this copy (`Responder.copy`).
    reply_key: str | None = None
    # HumanLayer status fields this post fills in (Slack: {"slack_message_ts": ts}).
    status_fields: dict[str, str] = field(default_factory=dict)


def load_progress(progress_json: str | None) -> Progress | None:
    """A request's stored progress (`progress_json`), as channels see it."""
    if not progress_json:
        return None
    stored = json.loads(progress_json)
    return Progress(stored["approvals"], stored["needed"], tuple(stored["approvers"]))
