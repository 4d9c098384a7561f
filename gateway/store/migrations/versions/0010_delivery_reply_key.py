"""delivery reply_key and request wire_status_json: a channel's own reference for a post,
instead of Slack's message ts on the request

A reply in a platform names the post it answers (Slack: the thread's channel and ts); the
delivery that made the post keeps that key, so any channel can find its request again.
HumanLayer status fields a post fills in (Slack's `slack_message_ts`) are kept as JSON.

Revision ID: 0010
Revises: 0009
Create Date: 2026-11-25 19:30:00
"""

import json
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_request = sa.table(
    "request",
    sa.column("rid", sa.String),
    sa.column("slack_message_ts", sa.String),
    sa.column("wire_status_json", sa.Text),
)
_delivery = sa.table(
    "delivery",
    sa.column("id", sa.Integer),
    sa.column("channel", sa.String),
    sa.column("status", sa.String),
    sa.column("ref_json", sa.Text),
    sa.column("reply_key", sa.String),
)


def _dumps(value: object) -> str:
    return json.dumps(value, separators=(",", ":"))


def upgrade() -> None:
    with op.batch_alter_table("delivery") as batch:
        batch.add_column(sa.Column("reply_key", sa.String(length=255), nullable=True))
        batch.create_index("ix_delivery_reply_key", ["channel", "reply_key"], unique=False)
    with op.batch_alter_table("request") as batch:
        batch.add_column(sa.Column("wire_status_json", sa.Text(), nullable=True))
    conn = op.get_bind()
    posted = conn.execute(
        sa.select(_request.c.rid, _request.c.slack_message_ts).where(
            _request.c.slack_message_ts.is_not(None)
        )
    ).all()
    for rid, ts in posted:
        fields = _dumps({"slack_message_ts": ts})
        conn.execute(_request.update().where(_request.c.rid == rid).values(wire_status_json=fields))
    sent = conn.execute(
        sa.select(_delivery.c.id, _delivery.c.ref_json).where(
            _delivery.c.channel == "slack",
            _delivery.c.status == "sent",
            _delivery.c.ref_json.is_not(None),
        )
    ).all()
    for delivery_id, ref_json in sent:
        ref = json.loads(ref_json)
        if ref.get("channel") and ref.get("ts"):
            key = f"{ref['channel']}:{ref['ts']}"
            conn.execute(
                _delivery.update().where(_delivery.c.id == delivery_id).values(reply_key=key)
            )
    # Not in batch: on SQLite a batch copies the table, and other tables' foreign keys to
    # `request` forbid dropping the original; ALTER TABLE DROP COLUMN (SQLite 3.35) needs none.
    op.drop_index("ix_request_slack_message_ts", table_name="request")
    op.drop_column("request", "slack_message_ts")


def downgrade() -> None:
    with op.batch_alter_table("request") as batch:
        batch.add_column(sa.Column("slack_message_ts", sa.String(length=64), nullable=True))
        batch.create_index("ix_request_slack_message_ts", ["slack_message_ts"], unique=False)
    conn = op.get_bind()
    filled = conn.execute(
        sa.select(_request.c.rid, _request.c.wire_status_json).where(
            _request.c.wire_status_json.is_not(None)
        )
    ).all()
    for rid, fields in filled:
        ts = json.loads(fields).get("slack_message_ts")
        conn.execute(_request.update().where(_request.c.rid == rid).values(slack_message_ts=ts))
    op.drop_column("request", "wire_status_json")
    op.drop_index("ix_delivery_reply_key", table_name="delivery")
    op.drop_column("delivery", "reply_key")
