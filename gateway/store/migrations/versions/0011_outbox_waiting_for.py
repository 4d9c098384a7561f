"""outbox_job waiting_for: the channel a postponed job waits for, as a column

A job whose channel was not connected is postponed without spending an attempt and made due
again when that channel connects. It used to be found by the start of its error text.

Revision ID: 0011
Revises: 0010
Create Date: 2026-11-25 19:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MARKER = " is not connected"  # how ChannelDown's message went on: "<channel> is not connected: …"
_job = sa.table(
    "outbox_job",
    sa.column("id", sa.Integer),
    sa.column("status", sa.String),
    sa.column("last_error", sa.Text),
    sa.column("waiting_for", sa.String),
)


def upgrade() -> None:
    with op.batch_alter_table("outbox_job") as batch:
        batch.add_column(sa.Column("waiting_for", sa.String(length=16), nullable=True))
    conn = op.get_bind()
    waiting = conn.execute(
        sa.select(_job.c.id, _job.c.last_error).where(
            _job.c.status == "pending", _job.c.last_error.contains(MARKER, autoescape=True)
        )
    ).all()
    for job_id, error in waiting:
        channel, _, _rest = error.partition(MARKER)
        if channel and " " not in channel:
            conn.execute(_job.update().where(_job.c.id == job_id).values(waiting_for=channel))


def downgrade() -> None:
    with op.batch_alter_table("outbox_job") as batch:
        batch.drop_column("waiting_for")
