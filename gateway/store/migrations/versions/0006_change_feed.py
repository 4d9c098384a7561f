"""change feed (SQLite: what other processes changed, read once per poll period)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "change_feed",
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("origin", sa.String(length=32), nullable=False),
        sa.Column("rid", sa.String(length=32), nullable=True),
        sa.Column("jobs", sa.Boolean(), nullable=False),
        sa.Column("keys", sa.Boolean(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sqlite_autoincrement=True,
    )


def downgrade() -> None:
    op.drop_table("change_feed")
