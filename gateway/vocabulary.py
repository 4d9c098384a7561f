"""The words the gateway stores: delivery statuses, outbox jobs, audit events, channels.

StrEnum members equal their strings (and hash like them), so the database keeps the very
bytes it always had, a row's plain `str` column compares equal to a member, and JSON holds
the bare value. A request's kind and status belong to its state machine: `gateway.lifecycle`.

This module imports nothing of the gateway: the store and the channels may both use it.
`tests/unit/test_vocabulary.py` checks every member fits the column that stores it.
"""

from __future__ import annotations

from enum import StrEnum


class DeliveryStatus(StrEnum):
    """`delivery.status`: what became of one routed target of a request."""

    QUEUED = "queued"  # an outbox `deliver` job will send it
    SENT = "sent"  # posted (or served by the gateway itself: the web console)
    RETRYING = "retrying"  # an attempt failed; the job runs again
    FAILED = "failed"  # the last attempt failed
    SKIPPED = "skipped"  # the request was decided before its turn came
    UNCONFIGURED = "unconfigured"  # no such channel here, or its settings are missing


class JobKind(StrEnum):
    """`outbox_job.kind`: which side effect the job runs."""

    DELIVER = "deliver"  # send a delivery through its channel
    UPDATE = "update"  # show the decision on a post sent earlier
    WEBHOOK = "webhook"  # POST a signed event to one endpoint
    TIMER = (
        "timer"  # a request's deadline, reminder or escalation comes due (gateway.policies.timers)
    )
    REMIND = "remind"  # nudge the people one delivery still waits on
    NOTE = "note"  # tell a grant's first copies what it approved since (one note a minute)


class Timer(StrEnum):
    """`payload["timer"]` of a `JobKind.TIMER` job: what comes due."""

    EXPIRE = "expire"  # the deadline: the request fails closed
    REMIND = "remind"  # nudge the people it still waits on
    ESCALATE = "escalate"  # add the escalation step's targets


class JobStatus(StrEnum):
    """`outbox_job.status`."""

    PENDING = "pending"  # due at `run_at`
    RUNNING = "running"  # claimed, under a lease
    DONE = "done"
    DEAD = "dead"  # gave up after its last attempt; kept for an operator


class AuditEvent(StrEnum):
    """`request_event.type`: the request's audit trail."""

    CREATED = "created"
    ROUTED = "routed"
    DELIVERED = "delivered"
    DELIVERY_FAILED = "delivery_failed"
    DELIVERY_FALLBACK = "delivery_fallback"  # a refused delivery goes elsewhere instead
    VOTED = "voted"  # one person's answer under a policy that did not decide it yet
    DECIDED = "decided"
    REMINDED = "reminded"
    ESCALATED = "escalated"
    WEBHOOK_DELIVERED = "webhook_delivered"
    WEBHOOK_FAILED = "webhook_failed"
    WEBHOOK_ENDPOINT_DISABLED = "webhook_endpoint_disabled"  # the receiver answered 410
    EMAIL_REPLY_IGNORED = "email_reply_ignored"  # a reply that changed nothing, and why
    UNCLEAR_REPLY = "unclear_reply"  # a free-text reply read as neither yes nor no: kept
    GRANTED = "granted"  # the person who approved it also allowed more like it (a grant)
    AUTO_APPROVED = "auto_approved"  # approved at create by a person's standing grant
    GRANT_REVOKED = "grant_revoked"  # on the request whose answer gave the grant
    EDITED = "edited"  # approved with arguments the person changed: both versions kept


class ChannelName(StrEnum):
    """Where a request can be routed: a route target's and a delivery's `channel`, and the
    channel registry's keys. SMS and WhatsApp are HumanLayer contact channels the API takes
    but this gateway has no channel for: their deliveries are recorded as unconfigured."""

    WEB = "web"
    SLACK = "slack"
    DISCORD = "discord"
    EMAIL = "email"
    TEAMS = "teams"
    TELEGRAM = "telegram"
    SMS = "sms"
    WHATSAPP = "whatsapp"


class KeyScope(StrEnum):
    """`api_key.scope`: what an API key may do; each scope can do what the ones before it can."""

    AGENT = "agent"  # create, read, wait, list, MCP: all an agent needs, and never a decision
    RESPONDER = "responder"  # also respond: a front end deciding on a person's behalf
    ADMIN = "admin"  # also escalate, and the /gateway/v1 management routes

    def allows(self, needed: KeyScope) -> bool:
        order = list(KeyScope)
        return order.index(self) >= order.index(needed)


class AnsweredIn(StrEnum):
    """`user_info["channel"]` of a decision: where the person answered. The channels that
    take answers, plus the API and the CLI, which are no place to route a request to (so
    not `ChannelName`s). Shared values are the same strings: `AnsweredIn.SLACK ==
    ChannelName.SLACK`."""

    API = "api"
    CLI = "cli"
    GATEWAY = "gateway"  # the gateway itself: a deadline passed (gateway.policies.timers)
    GRANT = "grant"  # a person's standing grant approved it at create (gateway.answers.grants)
    WEB = "web"
    SLACK = "slack"
    DISCORD = "discord"
    EMAIL = "email"
    TEAMS = "teams"
    TELEGRAM = "telegram"


class GrantScope(StrEnum):
    """`standing_grant.scope`: which later function calls a person's grant approves. Every
    scope is within the project and the agent key that made the request it was given on."""

    ARGS = "args"  # the same fn with the same (canonical) kwargs
    RUN = "run"  # the same fn in the same run_id
    KEY = "key"  # the same fn, any run
