"""Standing grants: found at create (in the create's own transaction, so a revoke on any
replica counts from the next create), used, listed and revoked."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import tables
from gateway.store.changes import keys_changed
from gateway.store.rows import GrantRow, values
from gateway.vocabulary import GrantScope

_grant = tables.StandingGrant.__table__  # type: ignore[attr-defined]
_key = tables.ApiKey.__table__  # type: ignore[attr-defined]
_project = tables.Project.__table__  # type: ignore[attr-defined]

# A grant this create falls under: same project, key and fn, live, and its scope matching.
_COVERING = (
    sa.select(_grant)
    .where(
        _grant.c.project_id == sa.bindparam("project_id"),
        _grant.c.key_id == sa.bindparam("key_id"),
        _grant.c.fn == sa.bindparam("fn"),
        _grant.c.revoked_at.is_(None),
        sa.or_(_grant.c.expires_at.is_(None), _grant.c.expires_at > sa.bindparam("now")),
        sa.or_(
            _grant.c.scope == GrantScope.KEY.value,
            sa.and_(_grant.c.scope == GrantScope.RUN.value, _grant.c.run_id == sa.bindparam("run")),
            sa.and_(
                _grant.c.scope == GrantScope.ARGS.value,
                _grant.c.kwargs_hash == sa.bindparam("kwargs_hash"),
            ),
        ),
    )
    .order_by(_grant.c.created_at)
    .limit(1)
)


class GrantedKeys:
    """The API keys that had a live grant when this process last looked: a create by any
    other key skips the grant lookup. It can only send a call to a person, never approve
    one, so a revoke needs no invalidation; a new grant (in this process or another) clears
    it through the change signal (`Changes.keys`). Read on writer threads, cleared on the
    event loop's: a read that raced a clear does not keep what it read."""

    def __init__(self) -> None:
        self._keys: frozenset[int] | None = None
        self._generation = 0

    def may_have(self, conn: Connection, key_id: int, now: datetime) -> bool:
        keys, generation = self._keys, self._generation
        if keys is None:
            keys = frozenset(conn.execute(_LIVE_KEYS, {"now": now}).scalars())
            if generation == self._generation:
                self._keys = keys
        return key_id in keys

    def clear(self) -> None:
        self._generation += 1
        self._keys = None


_LIVE_KEYS = (
    sa.select(_grant.c.key_id)
    .where(
        _grant.c.revoked_at.is_(None),
        sa.or_(_grant.c.expires_at.is_(None), _grant.c.expires_at > sa.bindparam("now")),
    )
    .distinct()
)


def add(conn: Connection, grant: GrantRow) -> None:
    """A new grant; every process forgets which keys have grants (`GrantedKeys`)."""
    conn.execute(sa.insert(_grant), values(grant))
    keys_changed(conn)


def covering(
    conn: Connection,
    *,
    project_id: int,
    key_id: int,
    fn: str,
    run_id: str,
    kwargs_hash: str,
    now: datetime,
) -> GrantRow | None:
    params = {
        "project_id": project_id,
        "key_id": key_id,
        "fn": fn,
        "now": now,
        "run": run_id,
        "kwargs_hash": kwargs_hash,
    }
    row = conn.execute(_COVERING, params).first()
    return None if row is None else GrantRow(**row._mapping)


_USED = (
    sa.update(_grant)
    .where(_grant.c.id == sa.bindparam("grant_id"))
    .values(
        uses=_grant.c.uses + 1,
        last_used_at=sa.bindparam("now"),
        note_due=sa.func.coalesce(_grant.c.note_due, sa.bindparam("note_due")),
    )
)


def used(conn: Connection, grant_id: str, now: datetime, note_due: datetime) -> None:
    """One more call approved; its note is due at `note_due` unless one is due already."""
    conn.execute(_USED, {"grant_id": grant_id, "now": now, "note_due": note_due})


def noted(conn: Connection, grant_id: str, uses: int) -> None:
    """Its note told the uses up to `uses`; the next use schedules the next note."""
    query = sa.update(_grant).where(_grant.c.id == grant_id)
    conn.execute(query.values(noted_uses=uses, note_due=None))


def get(conn: Connection, grant_id: str) -> GrantRow | None:
    row = conn.execute(sa.select(_grant).where(_grant.c.id == grant_id)).first()
    return None if row is None else GrantRow(**row._mapping)


def listing(
    conn: Connection,
    *,
    project_id: int | None = None,
    live_at: datetime | None = None,
    ids: list[str] | None = None,
) -> list[tuple[GrantRow, str, str]]:
    """Grants (newest first) with their key's and project's names; `live_at`: only those
    neither revoked nor expired then; `ids`: only these."""
    query = (
        sa.select(_grant, _key.c.name.label("key_name"), _project.c.name.label("project_name"))
        .join(_key, _key.c.id == _grant.c.key_id)
        .join(_project, _project.c.id == _grant.c.project_id)
        .order_by(_grant.c.created_at.desc(), _grant.c.id)
    )
    if project_id is not None:
        query = query.where(_grant.c.project_id == project_id)
    if ids is not None:
        query = query.where(_grant.c.id.in_(ids))
    if live_at is not None:
        query = query.where(
            _grant.c.revoked_at.is_(None),
            sa.or_(_grant.c.expires_at.is_(None), _grant.c.expires_at > live_at),
        )
    found = []
    for row in conn.execute(query).all():
        fields = dict(row._mapping)
        key_name, project_name = fields.pop("key_name"), fields.pop("project_name")
        found.append((GrantRow(**fields), key_name, project_name))
    return found


def revoke(conn: Connection, grant_ids: list[str], by: str, now: datetime) -> list[GrantRow]:
    """Revoke those of `grant_ids` not revoked yet; the grants this revoked."""
    if not grant_ids:
        return []
    query = (
        sa.update(_grant)
        .where(_grant.c.id.in_(grant_ids), _grant.c.revoked_at.is_(None))
        .values(revoked_at=now, revoked_by=by)
        .returning(*_grant.c)
    )
    return [GrantRow(**row._mapping) for row in conn.execute(query).all()]


def live_of_key(conn: Connection, key_id: int, now: datetime) -> list[str]:
    """The ids of one key's grants that are neither revoked nor expired."""
    query = sa.select(_grant.c.id).where(
        _grant.c.key_id == key_id,
        _grant.c.revoked_at.is_(None),
        sa.or_(_grant.c.expires_at.is_(None), _grant.c.expires_at > now),
    )
    return list(conn.execute(query).scalars())
