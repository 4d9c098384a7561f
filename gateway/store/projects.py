"""Projects, their API keys and their webhook endpoints."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gateway.store import locks, tables
from gateway.store.changes import keys_changed
from gateway.store.rows import ApiKeyRow, EndpointRow, ProjectRow
from gateway.store.values import dumps, utcnow

_project = tables.Project.__table__  # type: ignore[attr-defined]
_key = tables.ApiKey.__table__  # type: ignore[attr-defined]
_webhook = tables.WebhookEndpoint.__table__  # type: ignore[attr-defined]
_INSERT_PROJECT = {
    "sqlite": sqlite.insert(_project).on_conflict_do_nothing(),
    "postgresql": postgresql.insert(_project).on_conflict_do_nothing(),
}


def get_project(conn: Connection, name: str) -> ProjectRow | None:
    row = (conn.execute(sa.select(_project).where(_project.c.name == name))).first()
    return None if row is None else ProjectRow(**row._mapping)


def get_project_by_id(conn: Connection, project_id: int) -> ProjectRow | None:
    row = (conn.execute(sa.select(_project).where(_project.c.id == project_id))).first()
    return None if row is None else ProjectRow(**row._mapping)


def ensure_project(conn: Connection, name: str) -> ProjectRow:
    existing = get_project(conn, name)
    if existing is not None:
        return existing
    # Another process may create it first: then this insert does nothing.
    conn.execute(_INSERT_PROJECT[conn.dialect.name], {"name": name, "created_at": utcnow()})
    project = get_project(conn, name)
    assert project is not None
    return project


def list_projects(conn: Connection) -> list[ProjectRow]:
    rows = (conn.execute(sa.select(_project).order_by(_project.c.id))).all()
    return [ProjectRow(**row._mapping) for row in rows]


def count_keys(conn: Connection) -> int:
    return int((conn.execute(sa.select(sa.func.count()).select_from(_key))).scalar_one())


def insert_key(
    conn: Connection,
    *,
    project_id: int,
    name: str,
    key_hash: str,
    prefix: str,
    target: str | None,
    scope: str,
    person: str | None = None,
) -> int:
    values = {
        "project_id": project_id,
        "name": name,
        "key_hash": key_hash,
        "prefix": prefix,
        "target": target,
        "scope": scope,
        "person": person,
        "created_at": utcnow(),
    }
    result = conn.execute(sa.insert(_key).values(values).returning(_key.c.id))
    return int(result.scalar_one())


def insert_project_key(conn: Connection, project: str, **key: Any) -> int:
    """A new key (`insert_key`'s fields), in `project` (created if new)."""
    row = ensure_project(conn, project)
    assert row.id is not None
    return insert_key(conn, project_id=row.id, **key)


def insert_first_key(conn: Connection, project: str, **key: Any) -> int | None:
    """`insert_project_key`, on a database with no key yet; None when it has one (another
    process starting at the same moment made it)."""
    locks.take_for_transaction(conn, locks.FIRST_KEY)
    if count_keys(conn):
        return None
    return insert_project_key(conn, project, **key)


# Built once: every API request runs it, and building a statement costs more than running it.
_FIND_KEY = (
    sa.select(_key, *[column.label(f"p__{column.name}") for column in _project.c])
    .join(_project, _project.c.id == _key.c.project_id)
    .where(_key.c.key_hash == sa.bindparam("key_hash"), _key.c.revoked_at.is_(None))
)


def find_key(conn: Connection, key_hash: str) -> tuple[ApiKeyRow, ProjectRow] | None:
    row = (conn.execute(_FIND_KEY, {"key_hash": key_hash})).first()
    if row is None:
        return None
    mapping = row._mapping
    key = ApiKeyRow(**{column.name: mapping[column.name] for column in _key.c})
    project = ProjectRow(**{column.name: mapping[f"p__{column.name}"] for column in _project.c})
    return key, project


def list_keys(conn: Connection, project_id: int | None = None) -> list[tuple[ApiKeyRow, str]]:
    """Every key with its project's name; with `project_id`, that project's keys."""
    query = (
        sa.select(_key, _project.c.name.label("project_name"))
        .join(_project, _project.c.id == _key.c.project_id)
        .order_by(_key.c.id)
    )
    if project_id is not None:
        query = query.where(_key.c.project_id == project_id)
    result = []
    for row in (conn.execute(query)).all():
        mapping = dict(row._mapping)
        project_name = mapping.pop("project_name")
        result.append((ApiKeyRow(**mapping), project_name))
    return result


def revoke_key(conn: Connection, prefix_or_id: str) -> int:
    match = _key.c.prefix == prefix_or_id
    if prefix_or_id.isdigit():
        match = sa.or_(match, _key.c.id == int(prefix_or_id))
    query = sa.update(_key).where(match, _key.c.revoked_at.is_(None)).values(revoked_at=utcnow())
    revoked = int(conn.execute(query).rowcount)
    if revoked:
        keys_changed(conn)
    return revoked


def upsert_webhook(
    conn: Connection,
    *,
    project_id: int,
    url: str,
    sealed_secret: str,
    events: list[str],
    source: str,
) -> int:
    values: dict[str, Any] = {
        "sealed_secret": sealed_secret,
        "events_json": dumps(events),
        "enabled": True,
        "disabled_reason": None,
        "source": source,
    }
    match = sa.and_(_webhook.c.project_id == project_id, _webhook.c.url == url)
    existing = (conn.execute(sa.select(_webhook.c.id).where(match))).scalar_one_or_none()
    if existing is not None:
        conn.execute(sa.update(_webhook).where(_webhook.c.id == existing).values(values))
        return int(existing)
    values |= {"project_id": project_id, "url": url, "created_at": utcnow()}
    result = conn.execute(sa.insert(_webhook).values(values).returning(_webhook.c.id))
    return int(result.scalar_one())


# Every decision asks it (`webhooks.enqueue_completed`): built once.
_PROJECT_ENABLED_WEBHOOKS = (
    sa.select(_webhook)
    .where(_webhook.c.project_id == sa.bindparam("project_id"), _webhook.c.enabled.is_(True))
    .order_by(_webhook.c.id)
)


def list_webhooks(
    conn: Connection, project_id: int | None = None, *, enabled_only: bool = False
) -> list[EndpointRow]:
    if project_id is not None and enabled_only:
        found = conn.execute(_PROJECT_ENABLED_WEBHOOKS, {"project_id": project_id}).all()
        return [EndpointRow(**row._mapping) for row in found]
    query = sa.select(_webhook).order_by(_webhook.c.id)
    if project_id is not None:
        query = query.where(_webhook.c.project_id == project_id)
    if enabled_only:
        query = query.where(_webhook.c.enabled.is_(True))
    return [EndpointRow(**row._mapping) for row in (conn.execute(query)).all()]


def get_webhook(conn: Connection, webhook_id: int) -> EndpointRow | None:
    row = (conn.execute(sa.select(_webhook).where(_webhook.c.id == webhook_id))).first()
    return None if row is None else EndpointRow(**row._mapping)


def disable_webhook(conn: Connection, webhook_id: int, reason: str) -> None:
    query = (
        sa.update(_webhook)
        .where(_webhook.c.id == webhook_id)
        .values(enabled=False, disabled_reason=reason)
    )
    conn.execute(query)
