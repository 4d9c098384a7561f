"""retention: when a request's content was replaced by its hashes

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-01 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ALTER TABLE … ADD COLUMN, as 0014: a batch would copy `request`.
    op.add_column("request", sa.Column("redacted_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("request", "redacted_at")
