"""approval policies: a request's policy, progress and deadline; votes

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23 14:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("request") as batch:
        batch.add_column(sa.Column("policy_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("progress_json", sa.Text(), nullable=True))
        batch.add_column(sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True))
    op.create_table(
        "vote",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("rid", sa.String(length=32), nullable=False),
        sa.Column("person", sa.String(length=512), nullable=False),
        sa.Column("approve", sa.Boolean(), nullable=False),
        sa.Column("targets_json", sa.Text(), nullable=False),
        sa.Column("user_info_json", sa.Text(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("option_name", sa.String(length=255), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["rid"], ["request.rid"]),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_vote_rid", "vote", ["rid"])


def downgrade() -> None:
    op.drop_index("ix_vote_rid", table_name="vote")
    op.drop_table("vote")
    with op.batch_alter_table("request") as batch:
        batch.drop_column("expires_at")
        batch.drop_column("progress_json")
        batch.drop_column("policy_json")
