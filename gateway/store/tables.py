"""The gateway's tables. Timestamps are UTC; JSON is kept as text we serialize ourselves,
so SQLite and PostgreSQL store the same bytes (PostgreSQL's jsonb rejects \\u0000)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from gateway.store.values import as_utc


class UTCDateTime(sa.TypeDecorator[datetime]):
    """A timestamp that reads back aware, in UTC, from either database (SQLite keeps no
    zone), so nothing outside the store ever sees a naive datetime."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> datetime | None:
        return None if value is None else as_utc(value)


def _ts(nullable: bool = False, index: bool = False) -> sa.Column[datetime]:
    return sa.Column(UTCDateTime, nullable=nullable, index=index)


class Project(SQLModel, table=True):
    __tablename__ = "project"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=255, unique=True)
    default_target: str | None = Field(default=None, max_length=255)
    created_at: datetime = Field(sa_column=_ts())


class ApiKey(SQLModel, table=True):
    __tablename__ = "api_key"

    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    name: str = Field(max_length=255)
    key_hash: str = Field(max_length=64, unique=True)
    prefix: str = Field(max_length=16)
    target: str | None = Field(default=None, max_length=255)
    created_at: datetime = Field(sa_column=_ts())
    revoked_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    scope: str = Field(default="agent", max_length=16)  # a KeyScope
    person: str | None = Field(default=None, max_length=255)  # who a responder key votes as


class Request(SQLModel, table=True):
    __tablename__ = "request"
    __table_args__ = (
        sa.UniqueConstraint("project_id", "call_id", name="uq_request_project_call"),
        sa.Index("ix_request_pending", "project_id", "kind", "status", "requested_at"),
    )

    rid: str = Field(primary_key=True, max_length=32)
    project_id: int = Field(foreign_key="project.id")
    kind: str = Field(max_length=16)
    call_id: str = Field(max_length=255)
    run_id: str = Field(max_length=255)
    fn: str | None = Field(default=None, max_length=255)
    spec_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    body_hash: str = Field(max_length=64)
    sealed_secrets: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    route_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    status: str = Field(max_length=16)
    comment: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    option_name: str | None = Field(default=None, max_length=255)
    response: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    user_info_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # HumanLayer status fields a channel's post filled in (Slack's `slack_message_ts`).
    wire_status_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    requested_at: datetime = Field(sa_column=_ts())
    responded_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    # An approval policy (gateway.policies.evaluator) when the first answer does not simply decide,
    # and where its votes stand (rewritten with each vote, so reads need no vote query).
    policy_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    progress_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    expires_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    # The API key that made it (a standing grant is for that key), and what its approver is
    # offered besides Approve: a grant where one answer decides it, and editing.
    key_id: int | None = Field(default=None)
    grantable: bool = False
    editable: bool = False
    # The arguments the approver approved instead of the agent's (`status.updated_kwargs`).
    updated_kwargs_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # When retention replaced its content by hashes (gateway.store.retention).
    redacted_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    # The decision's signed receipt, a compact JWS (`gateway.policies.receipts`).
    receipt: str | None = Field(default=None, sa_column=sa.Column(sa.Text))


class Decision(SQLModel, table=True):
    """One row per decided request, written with the decision: what the console's insights
    count, narrow and indexed so that a period's counts are read from an index alone (each
    index leads with the day, then the rest of one query's GROUP BY: a period is a range of
    it, read in group order, never sorted), never from the requests' content
    (`gateway.store.decided`)."""

    __tablename__ = "decision"
    __table_args__ = (
        sa.Index(
            "ix_decision_outcomes", "day", "fn", "status", "decided_by", "project_id", "decided_at"
        ),
        sa.Index(
            "ix_decision_deciders", "day", "decider", "alone", "status", "project_id", "decided_at"
        ),
    )

    rid: str = Field(primary_key=True, foreign_key="request.rid", max_length=32)
    project_id: int
    decided_at: datetime = Field(sa_column=_ts())
    day: str = Field(max_length=10)  # decided_at's UTC date, YYYY-MM-DD
    status: str = Field(max_length=16)
    fn: str | None = Field(default=None, max_length=255)
    decided_by: str = Field(max_length=16)  # a DecidedBy: person, rule, grant or deadline
    answered_in: str | None = Field(default=None, max_length=16)  # user_info.channel
    decider: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # who, as JSON
    alone: bool  # no vote under a policy decided it
    took_ms: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    route_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # the request's


class SigningKey(SQLModel, table=True):
    """An Ed25519 key that signs decision receipts: the newest unretired one signs, and
    every one stays in the JWKS so that old receipts still verify."""

    __tablename__ = "signing_key"

    kid: str = Field(primary_key=True, max_length=64)
    public_jwk: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    sealed_private: str = Field(sa_column=sa.Column(sa.Text, nullable=False))  # SecretBox
    created_at: datetime = Field(sa_column=_ts())
    retired_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class StandingGrant(SQLModel, table=True):
    """A person's "approve and allow…": later function calls of one agent key that it
    approves at create, until it expires or is revoked (`gateway.answers.grants`)."""

    __tablename__ = "standing_grant"
    __table_args__ = (sa.Index("ix_standing_grant_lookup", "project_id", "key_id", "fn"),)

    id: str = Field(primary_key=True, max_length=32)
    project_id: int = Field(foreign_key="project.id")
    key_id: int = Field(foreign_key="api_key.id")
    fn: str = Field(max_length=255)
    scope: str = Field(max_length=8)  # a GrantScope
    run_id: str | None = Field(default=None, max_length=255)  # scope "run"
    kwargs_hash: str | None = Field(default=None, max_length=64)  # scope "args"
    granted_by_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    person: str = Field(max_length=512)  # who granted it, as votes count people
    source_rid: str = Field(foreign_key="request.rid", max_length=32)
    created_at: datetime = Field(sa_column=_ts())
    expires_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    revoked_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    revoked_by: str | None = Field(default=None, max_length=512)
    uses: int = 0
    last_used_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    # What its note (under the message that gave it) has told so far, and when the next is
    # due: set by the first use after a note, so notes come at most once a minute.
    noted_uses: int = 0
    note_due: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class RequestEvent(SQLModel, table=True):
    """The audit trail: created, routed, delivered, decided, webhook_*... (`AuditEvent`),
    linked into one hash chain per project (`gateway.store.audit`)."""

    __tablename__ = "request_event"
    # One event per place in a project's chain: a fork cannot commit.
    __table_args__ = (sa.Index("ux_request_event_chain", "project_id", "seq", unique=True),)

    id: int | None = Field(default=None, primary_key=True)
    rid: str = Field(foreign_key="request.rid", index=True, max_length=32)
    type: str = Field(max_length=32)
    detail_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    at: datetime = Field(sa_column=_ts())
    # Its place in the chain, given as its transaction commits (when it is inserted).
    project_id: int | None = Field(default=None)
    seq: int | None = Field(default=None, sa_column=sa.Column(sa.BigInteger))
    digest: str | None = Field(default=None, max_length=64)  # of its content
    prev_hash: str | None = Field(default=None, max_length=64)
    hash: str | None = Field(default=None, max_length=64)  # its link
    # Set by retention: some detail fields now hold their hashes instead of their content.
    redacted_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class AuditHead(SQLModel, table=True):
    """The last link of a project's audit chain; its row lock makes writers take turns."""

    __tablename__ = "audit_head"

    project_id: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    hash: str = Field(max_length=64)


class AuditCheckpoint(SQLModel, table=True):
    """A head published (logged, and sent to `audit.checkpoint` webhooks) at this time."""

    __tablename__ = "audit_checkpoint"
    __table_args__ = (sa.Index("ix_audit_checkpoint_project", "project_id", "seq"),)

    id: int | None = Field(default=None, primary_key=True)
    project_id: int
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    hash: str = Field(max_length=64)
    at: datetime = Field(sa_column=_ts(index=True))


class Vote(SQLModel, table=True):
    """One person's answer to a request under a policy; replayed by gateway.policies.evaluator."""

    __tablename__ = "vote"

    id: int | None = Field(default=None, primary_key=True)
    rid: str = Field(foreign_key="request.rid", index=True, max_length=32)
    person: str = Field(max_length=512)
    approve: bool
    targets_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    user_info_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    comment: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    option_name: str | None = Field(default=None, max_length=255)
    at: datetime = Field(sa_column=_ts())


class Delivery(SQLModel, table=True):
    """One routed target of a request, and what its channel did with it."""

    __tablename__ = "delivery"
    __table_args__ = (sa.Index("ix_delivery_reply_key", "channel", "reply_key"),)

    id: int | None = Field(default=None, primary_key=True)
    rid: str = Field(foreign_key="request.rid", index=True, max_length=32)
    channel: str = Field(max_length=16)
    target_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    status: str = Field(max_length=16)
    ref_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # What a reply in the platform carries to name this post (`Sent.reply_key`).
    reply_key: str | None = Field(default=None, max_length=255)
    error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    updated_at: datetime = Field(sa_column=_ts())


class OutboxJob(SQLModel, table=True):
    """A side effect written in the transaction that caused it, run at least once."""

    __tablename__ = "outbox_job"
    __table_args__ = (sa.Index("ix_outbox_due", "status", "run_at"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=16)
    rid: str | None = Field(default=None, max_length=32, index=True)
    project_id: int | None = Field(default=None, index=True)
    payload_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    status: str = Field(max_length=16)
    attempts: int = 0
    max_attempts: int
    run_at: datetime = Field(sa_column=_ts())
    locked_until: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    claimed_by: str | None = Field(default=None, max_length=64)  # the worker holding the lease
    last_error: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    # A postponed job's channel, while that channel is not connected (`ChannelDown`).
    waiting_for: str | None = Field(default=None, max_length=16)
    created_at: datetime = Field(sa_column=_ts())
    updated_at: datetime = Field(sa_column=_ts())


class WebhookEndpoint(SQLModel, table=True):
    __tablename__ = "webhook_endpoint"
    __table_args__ = (sa.UniqueConstraint("project_id", "url", name="uq_webhook_project_url"),)

    id: int | None = Field(default=None, primary_key=True)
    project_id: int = Field(foreign_key="project.id", index=True)
    url: str = Field(max_length=2048)
    sealed_secret: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    events_json: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    enabled: bool = True
    disabled_reason: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    source: str = Field(default="cli", max_length=16)
    created_at: datetime = Field(sa_column=_ts())


class EmailSeen(SQLModel, table=True):
    """An inbound email already handled (keyed by Message-ID), so a copy changes nothing."""

    __tablename__ = "email_seen"

    message_key: str = Field(primary_key=True, max_length=255)
    rid: str | None = Field(default=None, max_length=32)
    outcome: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    at: datetime = Field(sa_column=_ts())


class ImapCheckpoint(SQLModel, table=True):
    """How far the IMAP watcher has read a mailbox; reset when UIDVALIDITY changes."""

    __tablename__ = "imap_checkpoint"

    mailbox: str = Field(primary_key=True, max_length=255)
    uidvalidity: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    last_uid: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))


class ResumePoint(SQLModel, table=True):
    """Where a platform's websocket session stands, so that the next owner of the connection
    resumes it (the platform replays what it missed) instead of opening a new one."""

    __tablename__ = "resume_point"

    name: str = Field(primary_key=True, max_length=64)  # the channel: "discord"
    session_id: str = Field(max_length=255)
    url: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    seq: int = Field(sa_column=sa.Column(sa.BigInteger, nullable=False))
    saved_at: datetime = Field(sa_column=_ts())


class ChannelRecord(SQLModel, table=True):
    """A small record a channel keeps between messages (`gateway.seam.records.Records`): a
    workspace's installation of the gateway's app, a one-time OAuth state."""

    __tablename__ = "channel_record"

    channel: str = Field(primary_key=True, max_length=16)
    kind: str = Field(primary_key=True, max_length=32)
    key: str = Field(primary_key=True, max_length=255)
    value: str = Field(sa_column=sa.Column(sa.Text, nullable=False))
    expires_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    updated_at: datetime = Field(sa_column=_ts())


class ConsoleLogin(SQLModel, table=True):
    """A one-time console sign-in link (`gateway console link`); only its hash is kept."""

    __tablename__ = "console_login"

    token_hash: str = Field(primary_key=True, max_length=64)
    email: str | None = Field(default=None, max_length=320)  # None: the operator
    created_at: datetime = Field(sa_column=_ts())
    expires_at: datetime = Field(sa_column=_ts())
    used_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))


class ConsoleSession(SQLModel, table=True):
    """A signed-in console browser. The cookie carries the signed session id; only its hash is
    kept, and a session ends when revoked (sign-out, "sign out everywhere") or expired."""

    __tablename__ = "console_session"

    sid_hash: str = Field(primary_key=True, max_length=64)
    email: str | None = Field(default=None, max_length=320, index=True)  # None: the operator
    name: str = Field(max_length=320)
    projects_json: str | None = Field(default=None, sa_column=sa.Column(sa.Text))  # None: all
    created_at: datetime = Field(sa_column=_ts())
    expires_at: datetime = Field(sa_column=_ts(index=True))
    revoked_at: datetime | None = Field(default=None, sa_column=_ts(nullable=True))
    # A one-time status line the server composed for one page ("Recorded: approved by …").
    flash: str | None = Field(default=None, sa_column=sa.Column(sa.Text))
    flash_path: str | None = Field(default=None, max_length=2048)


class ChangeFeed(SQLModel, table=True):
    """What each write batch changed, so other processes on the same SQLite file (the CLI)
    can wake their waiters; PostgreSQL uses NOTIFY instead. Pruned after an hour."""

    __tablename__ = "change_feed"
    # Never reuse a seq, even after pruning every row: readers remember the last one seen.
    __table_args__ = {"sqlite_autoincrement": True}

    seq: int | None = Field(default=None, primary_key=True)
    origin: str = Field(max_length=32)  # the process that wrote it: not news to itself
    rid: str | None = Field(default=None, max_length=32)
    jobs: bool = False
    keys: bool = False
    at: datetime = Field(sa_column=_ts())
