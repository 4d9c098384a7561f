"""outbox claimed_by: which worker holds a running job's lease

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 17:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox_job") as batch:
        batch.add_column(sa.Column("claimed_by", sa.String(length=64), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox_job") as batch:
        batch.drop_column("claimed_by")
