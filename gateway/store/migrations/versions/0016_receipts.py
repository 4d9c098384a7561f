"""signed decision receipts: the request's receipt, and the keys that sign them

Requests decided before this revision have no receipt. The first signing key is made on
first use (`gateway.policies.receipts`).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-01 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Plain ADD COLUMN: a batch would copy `request`, which foreign keys forbid (see 0014).
    op.add_column("request", sa.Column("receipt", sa.Text(), nullable=True))
    op.create_table(
        "signing_key",
        sa.Column("kid", sa.String(length=64), nullable=False),
        sa.Column("public_jwk", sa.Text(), nullable=False),
        sa.Column("sealed_private", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("kid"),
    )


def downgrade() -> None:
    op.drop_table("signing_key")
    op.drop_column("request", "receipt")  # ALTER TABLE … DROP COLUMN (SQLite 3.35+)
