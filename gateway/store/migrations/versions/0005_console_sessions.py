"""console sessions (revocable server-side, with a one-time flash)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "console_session",
        sa.Column("sid_hash", sa.String(length=64), nullable=False),
        sa.Column("email", sa.String(length=320), nullable=True),
        sa.Column("name", sa.String(length=320), nullable=False),
        sa.Column("projects_json", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("flash", sa.Text(), nullable=True),
        sa.Column("flash_path", sa.String(length=2048), nullable=True),
        sa.PrimaryKeyConstraint("sid_hash"),
    )
    with op.batch_alter_table("console_session", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_console_session_email"), ["email"], unique=False)
        batch_op.create_index(
            batch_op.f("ix_console_session_expires_at"), ["expires_at"], unique=False
        )


def downgrade() -> None:
    with op.batch_alter_table("console_session", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_console_session_expires_at"))
        batch_op.drop_index(batch_op.f("ix_console_session_email"))
    op.drop_table("console_session")
