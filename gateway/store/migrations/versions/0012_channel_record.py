"""channel_record: small records a channel keeps (installations, OAuth states) in the
gateway's own schema, instead of tables a platform SDK created outside the migrations

Installations made through slack_sdk's SQLAlchemy installation store (its table
`slack_installations`, when present) are carried over: the latest one of each workspace.
Its tables are left as they were.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-25 20:30:00
"""

import json
from collections.abc import Sequence
from datetime import UTC, datetime

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_INSTALLATIONS = "slack_installations"
_NOT_FIELDS = ("id", "client_id")  # the table's own: not an installation's fields
_record = sa.table(
    "channel_record",
    sa.column("channel", sa.String),
    sa.column("kind", sa.String),
    sa.column("key", sa.String),
    sa.column("value", sa.Text),
    sa.column("expires_at", sa.DateTime(timezone=True)),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def upgrade() -> None:
    op.create_table(
        "channel_record",
        sa.Column("channel", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("channel", "kind", "key"),
    )
    conn = op.get_bind()
    if sa.inspect(conn).has_table(OLD_INSTALLATIONS):
        _carry_over(conn)


def _carry_over(conn: sa.Connection) -> None:
    """Each workspace's latest slack_sdk installation, as the Slack channel now keeps it."""
    old = sa.Table(OLD_INSTALLATIONS, sa.MetaData(), autoload_with=conn)
    latest: dict[str, dict[str, object]] = {}
    for row in conn.execute(sa.select(old).order_by(old.c.installed_at)).mappings():
        fields = {name: _plain(value) for name, value in row.items() if name not in _NOT_FIELDS}
        latest[_workspace(fields)] = fields
    now = datetime.now(UTC)
    for key, fields in latest.items():
        value = json.dumps(fields, separators=(",", ":"))
        record = {"channel": "slack", "kind": "installation", "key": key, "value": value}
        conn.execute(_record.insert().values(record | {"expires_at": None, "updated_at": now}))


def _workspace(fields: dict[str, object]) -> str:
    """The Slack channel's key for an installation (`channels.slack.install.workspace`)."""
    enterprise = fields.get("enterprise_id") or "-"
    team = "-" if fields.get("is_enterprise_install") else fields.get("team_id") or "-"
    return f"{enterprise}:{team}"


def _plain(value: object) -> object:
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    return value


def downgrade() -> None:
    op.drop_table("channel_record")
