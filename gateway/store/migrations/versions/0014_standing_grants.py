"""standing_grant, and what a request's approver is offered: grants and editing

A request remembers the API key that made it (a grant is for that key), whether "Approve
and allow…" and "Edit and approve" are offered on it, and the arguments an approver edited.
Requests made before this revision offer neither.

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 06:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN: a batch would copy `request` and drop it, which its
    # audit events and deliveries (foreign keys, enforced on SQLite) forbid.
    op.add_column("request", sa.Column("key_id", sa.Integer(), nullable=True))
    for flag in ("grantable", "editable"):
        column: sa.Column[bool] = sa.Column(
            flag, sa.Boolean(), nullable=False, server_default=sa.false()
        )
        op.add_column("request", column)
    op.add_column("request", sa.Column("updated_kwargs_json", sa.Text(), nullable=True))
    op.create_table(
        "standing_grant",
        sa.Column("id", sa.String(length=32), nullable=False),
        sa.Column("project_id", sa.Integer(), nullable=False),
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("fn", sa.String(length=255), nullable=False),
        sa.Column("scope", sa.String(length=8), nullable=False),
        sa.Column("run_id", sa.String(length=255), nullable=True),
        sa.Column("kwargs_hash", sa.String(length=64), nullable=True),
        sa.Column("granted_by_json", sa.Text(), nullable=False),
        sa.Column("person", sa.String(length=512), nullable=False),
        sa.Column("source_rid", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_by", sa.String(length=512), nullable=True),
        sa.Column("uses", sa.Integer(), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("noted_uses", sa.Integer(), nullable=False),
        sa.Column("note_due", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["project_id"], ["project.id"]),
        sa.ForeignKeyConstraint(["key_id"], ["api_key.id"]),
        sa.ForeignKeyConstraint(["source_rid"], ["request.rid"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index(
        "ix_standing_grant_lookup", "standing_grant", ["project_id", "key_id", "fn"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_standing_grant_lookup", table_name="standing_grant")
    op.drop_table("standing_grant")
    # ALTER TABLE … DROP COLUMN (SQLite 3.35+), for the reason above.
    for column in ("updated_kwargs_json", "editable", "grantable", "key_id"):
        op.drop_column("request", column)
