"""the audit chain: request_event's place in its project's hash chain, the heads, checkpoints

Every event already stored is chained here, per project in id order (the order the trail has
always been read in), by the rule of `gateway.store.audit`: after this revision every event
of the database is in its project's chain, from seq 1.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01 09:00:00
"""

import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

from gateway.store import audit
from gateway.store.tables import UTCDateTime

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PAGE = 5000  # events read (and linked) at a time
CHAIN_COLUMNS = ("project_id", "seq", "digest", "prev_hash", "hash", "redacted_at")

_event = sa.table(
    "request_event",
    sa.column("id", sa.Integer),
    sa.column("rid", sa.String),
    sa.column("type", sa.String),
    sa.column("detail_json", sa.Text),
    sa.column("at", UTCDateTime),
    sa.column("project_id", sa.Integer),
    sa.column("seq", sa.BigInteger),
    sa.column("digest", sa.String),
    sa.column("prev_hash", sa.String),
    sa.column("hash", sa.String),
)
_request = sa.table("request", sa.column("rid", sa.String), sa.column("project_id", sa.Integer))
_head = sa.table(
    "audit_head",
    sa.column("project_id", sa.Integer),
    sa.column("seq", sa.BigInteger),
    sa.column("hash", sa.String),
)


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN (see 0014): every new column may be null.
    op.add_column("request_event", sa.Column("project_id", sa.Integer(), nullable=True))
    op.add_column("request_event", sa.Column("seq", sa.BigInteger(), nullable=True))
    for name in ("digest", "prev_hash", "hash"):
        op.add_column("request_event", sa.Column(name, sa.String(length=64), nullable=True))
    op.add_column(
        "request_event", sa.Column("redacted_at", sa.DateTime(timezone=True), nullable=True)
    )
    op.create_index("ux_request_event_chain", "request_event", ["project_id", "seq"], unique=True)
    op.create_table(
        "audit_head",
        sa.Column("project_id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("project_id"),
    )
    op.create_table(
        "audit_checkpoint",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("seq", sa.BigInteger(), nullable=False),
        sa.Column("hash", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_audit_checkpoint_project", "audit_checkpoint", ["project_id", "seq"])
    op.create_index("ix_audit_checkpoint_at", "audit_checkpoint", ["at"])
    _chain_existing(op.get_bind())


def _chain_existing(conn: sa.Connection) -> None:
    heads: dict[int, tuple[int, str]] = {}
    last_id = 0
    while rows := _page(conn, last_id):
        links = [_link(heads, row) for row in rows]
        update = sa.update(_event).where(_event.c.id == sa.bindparam("event_id"))
        conn.execute(
            update.values({c: sa.bindparam(f"new_{c}") for c in CHAIN_COLUMNS[:-1]}), links
        )
        last_id = rows[-1].id
    if heads:
        conn.execute(
            sa.insert(_head),
            [{"project_id": p, "seq": seq, "hash": h} for p, (seq, h) in heads.items()],
        )


def _page(conn: sa.Connection, after: int) -> Sequence[Any]:
    query = (
        sa.select(
            _event.c.id,
            _event.c.rid,
            _event.c.type,
            _event.c.detail_json,
            _event.c.at,
            _request.c.project_id,
        )
        .join(_request, _request.c.rid == _event.c.rid)
        .where(_event.c.id > after)
        .order_by(_event.c.id)
        .limit(PAGE)
    )
    return conn.execute(query).all()


def _link(heads: dict[int, tuple[int, str]], row: Any) -> dict[str, Any]:
    digest = audit.event_digest(row.rid, row.type, row.at, json.loads(row.detail_json))
    seq, prev = heads.get(row.project_id, (0, audit.GENESIS))
    link = audit.link_hash(row.project_id, seq + 1, prev, digest)
    heads[row.project_id] = (seq + 1, link)
    return {
        "event_id": row.id,
        "new_project_id": row.project_id,
        "new_seq": seq + 1,
        "new_digest": digest,
        "new_prev_hash": prev,
        "new_hash": link,
    }


def downgrade() -> None:
    op.drop_index("ix_audit_checkpoint_at", table_name="audit_checkpoint")
    op.drop_index("ix_audit_checkpoint_project", table_name="audit_checkpoint")
    op.drop_table("audit_checkpoint")
    op.drop_table("audit_head")
    op.drop_index("ux_request_event_chain", table_name="request_event")
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+), as 0014 does.
    for column in reversed(CHAIN_COLUMNS):
        op.drop_column("request_event", column)
