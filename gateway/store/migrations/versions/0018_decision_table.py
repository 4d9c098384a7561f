"""decision: one narrow, indexed row per decided request, for the console's insights

Filled here from the requests already decided; from then on each decision writes its own
(`gateway.store.decided`). The rule that derives a row is frozen below as it was written,
so that this revision means the same whatever the code becomes.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-02 10:00:00
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BATCH = 2000  # requests read and rows written at a time
DECIDER_FIELDS = ("channel", "user_id", "person", "by", "rule", "grant", "name")
DECIDER_TEXT = 64  # each value's characters at most: `decider` is indexed


def upgrade() -> None:
    decision = op.create_table(
        "decision",
        sa.Column("rid", sa.String(length=32), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("day", sa.String(length=10), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("fn", sa.String(length=255), nullable=True),
        sa.Column("decided_by", sa.String(length=16), nullable=False),
        sa.Column("answered_in", sa.String(length=16), nullable=True),
        sa.Column("decider", sa.Text(), nullable=False),
        sa.Column("alone", sa.Boolean(), nullable=False),
        sa.Column("took_ms", sa.BigInteger(), nullable=False),
        sa.Column("route_json", sa.Text(), nullable=False),
        sa.ForeignKeyConstraint(["rid"], ["request.rid"]),
        sa.PrimaryKeyConstraint("rid"),
    )
    assert decision is not None
    _fill(decision)
    op.create_index(
        "ix_decision_outcomes",
        "decision",
        ["day", "fn", "status", "decided_by", "project_id", "decided_at"],
    )
    op.create_index(
        "ix_decision_deciders",
        "decision",
        ["day", "decider", "alone", "status", "project_id", "decided_at"],
    )


def downgrade() -> None:
    op.drop_table("decision")  # its indexes with it


def _fill(decision: sa.Table) -> None:
    """A row for each request decided so far (before the indexes: one sort each, not one
    insertion per row)."""
    request = sa.table(
        "request",
        *(sa.column(name) for name in ("rid", "project_id", "status", "fn", "route_json")),
        *(sa.column(name) for name in ("user_info_json", "policy_json")),
        sa.column("requested_at", sa.DateTime(timezone=True)),
        sa.column("responded_at", sa.DateTime(timezone=True)),
    )
    bind = op.get_bind()
    after = ""
    while True:
        query = (
            sa.select(request)
            .where(request.c.status != "pending", request.c.rid > after)
            .order_by(request.c.rid)
            .limit(BATCH)
        )
        rows = bind.execute(query).all()
        if not rows:
            return
        bind.execute(sa.insert(decision), [_facts(row._mapping) for row in rows])
        after = rows[-1].rid


def _facts(row: Any) -> dict[str, Any]:
    found = json.loads(row["user_info_json"] or "{}")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    decided_at = _utc(row["responded_at"] or row["requested_at"])
    channel = info.get("channel")
    if channel == "gateway":
        by = "rule" if info.get("rule") else "deadline"
    else:
        by = "grant" if channel == "grant" else "person"
    who = {key: _short(info[key]) for key in DECIDER_FIELDS if info.get(key) is not None}
    return {
        "rid": row["rid"],
        "project_id": row["project_id"],
        "decided_at": decided_at,
        "day": decided_at.date().isoformat(),
        "status": row["status"],
        "fn": row["fn"],
        "decided_by": by,
        "answered_in": None if channel is None else str(channel),
        "decider": json.dumps(who, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        "alone": row["policy_json"] is None or row["status"] == "responded",
        "took_ms": max((decided_at - _utc(row["requested_at"])) // timedelta(milliseconds=1), 0),
        "route_json": row["route_json"],
    }


def _utc(value: datetime | str) -> datetime:
    """In UTC: SQLite hands timestamps back naive (or, through a lightweight table, as text),
    PostgreSQL in its session's time zone."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def _short(value: Any) -> str:
    """At most DECIDER_TEXT characters of UTF-8 (a lone surrogate becomes "?"): with the
    JSON unescaped, seven such values stay well under PostgreSQL's index entry limit."""
    return str(value)[:DECIDER_TEXT].encode("utf-8", "replace").decode("utf-8")
