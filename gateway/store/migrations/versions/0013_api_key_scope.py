"""api_key scope and person: what a key may do, and who a responder key votes as

Keys made before this revision could respond, escalate and read the management routes:
they become `admin` keys, so nothing that worked stops working. New keys are `agent` keys
unless made with another scope (`gateway keys create --scope`).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-25 22:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("api_key") as batch:
        # The server default fills the rows already there; new rows always name their scope.
        batch.add_column(
            sa.Column("scope", sa.String(length=16), nullable=False, server_default="admin")
        )
        batch.add_column(sa.Column("person", sa.String(length=255), nullable=True))
    with op.batch_alter_table("api_key") as batch:
        batch.alter_column("scope", server_default=None)


def downgrade() -> None:
    with op.batch_alter_table("api_key") as batch:
        batch.drop_column("person")
        batch.drop_column("scope")
