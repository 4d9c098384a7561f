"""The keys that sign decision receipts, and the receipt a request keeps
(`gateway.policies.receipts` signs)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import tables

_key = tables.SigningKey.__table__  # type: ignore[attr-defined]
_request = tables.Request.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]
# The newest unretired key signs (kid breaks a tie between two made at once on replicas).
_CURRENT = (
    sa.select(_key)
    .where(_key.c.retired_at.is_(None))
    .order_by(_key.c.created_at.desc(), _key.c.kid.desc())
    .limit(1)
)


@dataclass(frozen=True, slots=True, kw_only=True)
class KeyRow:
    kid: str
    public_jwk: str
    sealed_private: str
    created_at: datetime
    retired_at: datetime | None = None


def current_key(conn: Connection) -> KeyRow | None:
    row = conn.execute(_CURRENT).first()
    return None if row is None else KeyRow(**row._mapping)


def add_key(conn: Connection, key: KeyRow) -> None:
    conn.execute(
        sa.insert(_key).values(
            kid=key.kid,
            public_jwk=key.public_jwk,
            sealed_private=key.sealed_private,
            created_at=key.created_at,
            retired_at=key.retired_at,
        )
    )


def retire_keys(conn: Connection, at: datetime) -> int:
    """Retire every key still signing: they stay public, for the receipts they signed."""
    done = conn.execute(sa.update(_key).where(_key.c.retired_at.is_(None)).values(retired_at=at))
    return int(done.rowcount)


def list_keys(conn: Connection) -> list[KeyRow]:
    """Every key, oldest first."""
    rows = conn.execute(sa.select(_key).order_by(_key.c.created_at, _key.c.kid)).all()
    return [KeyRow(**row._mapping) for row in rows]


def set_receipt(conn: Connection, rid: str, receipt: str) -> None:
    conn.execute(sa.update(_request).where(_request.c.rid == rid).values(receipt=receipt))


def project_name(conn: Connection, project_id: int) -> str:
    return str(
        conn.execute(sa.select(_project.c.name).where(_project.c.id == project_id)).scalar_one()
    )
