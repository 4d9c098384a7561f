"""Projects, their API keys and their webhook endpoints."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from gateway.store.engine import dumps, utcnow
from gateway.store.tables import ApiKey, Project, WebhookEndpoint

_project = Project.__table__  # type: ignore[attr-defined]
_key = ApiKey.__table__  # type: ignore[attr-defined]
_webhook = WebhookEndpoint.__table__  # type: ignore[attr-defined]


async def get_project(conn: AsyncConnection, name: str) -> Project | None:
    row = (await conn.execute(sa.select(_project).where(_project.c.name == name))).first()
    return None if row is None else Project(**row._mapping)


async def get_project_by_id(conn: AsyncConnection, project_id: int) -> Project | None:
    row = (await conn.execute(sa.select(_project).where(_project.c.id == project_id))).first()
    return None if row is None else Project(**row._mapping)


async def ensure_project(conn: AsyncConnection, name: str) -> Project:
    existing = await get_project(conn, name)
    if existing is not None:
        return existing
    try:
        async with conn.begin_nested():
            await conn.execute(sa.insert(_project).values(name=name, created_at=utcnow()))
    except IntegrityError:
        pass  # another process created it first
    project = await get_project(conn, name)
    assert project is not None
    return project


async def list_projects(conn: AsyncConnection) -> list[Project]:
    rows = (await conn.execute(sa.select(_project).order_by(_project.c.id))).all()
    return [Project(**row._mapping) for row in rows]


async def count_keys(conn: AsyncConnection) -> int:
    return int((await conn.execute(sa.select(sa.func.count()).select_from(_key))).scalar_one())


async def insert_key(
    conn: AsyncConnection,
    *,
    project_id: int,
    name: str,
    key_hash: str,
    prefix: str,
    target: str | None,
) -> int:
    values = {
        "project_id": project_id,
        "name": name,
        "key_hash": key_hash,
        "prefix": prefix,
        "target": target,
        "created_at": utcnow(),
    }
    result = await conn.execute(sa.insert(_key).values(values).returning(_key.c.id))
    return int(result.scalar_one())


# Built once: every API request runs it, and building a statement costs more than running it.
_FIND_KEY = (
    sa.select(_key, *[column.label(f"p__{column.name}") for column in _project.c])
    .join(_project, _project.c.id == _key.c.project_id)
    .where(_key.c.key_hash == sa.bindparam("key_hash"), _key.c.revoked_at.is_(None))
)


async def find_key(conn: AsyncConnection, key_hash: str) -> tuple[ApiKey, Project] | None:
    row = (await conn.execute(_FIND_KEY, {"key_hash": key_hash})).first()
    if row is None:
        return None
    mapping = row._mapping
    key = ApiKey(**{column.name: mapping[column.name] for column in _key.c})
    project = Project(**{column.name: mapping[f"p__{column.name}"] for column in _project.c})
    return key, project


async def list_keys(conn: AsyncConnection) -> list[tuple[ApiKey, str]]:
    query = (
        sa.select(_key, _project.c.name.label("project_name"))
        .join(_project, _project.c.id == _key.c.project_id)
        .order_by(_key.c.id)
    )
    result = []
    for row in (await conn.execute(query)).all():
        mapping = dict(row._mapping)
        project_name = mapping.pop("project_name")
        result.append((ApiKey(**mapping), project_name))
    return result


async def revoke_key(conn: AsyncConnection, prefix_or_id: str) -> int:
    match = _key.c.prefix == prefix_or_id
    if prefix_or_id.isdigit():
        match = sa.or_(match, _key.c.id == int(prefix_or_id))
    query = sa.update(_key).where(match, _key.c.revoked_at.is_(None)).values(revoked_at=utcnow())
    return (await conn.execute(query)).rowcount


async def upsert_webhook(
    conn: AsyncConnection,
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
    existing = (await conn.execute(sa.select(_webhook.c.id).where(match))).scalar_one_or_none()
    if existing is not None:
        await conn.execute(sa.update(_webhook).where(_webhook.c.id == existing).values(values))
        return int(existing)
    values |= {"project_id": project_id, "url": url, "created_at": utcnow()}
    result = await conn.execute(sa.insert(_webhook).values(values).returning(_webhook.c.id))
    return int(result.scalar_one())


async def list_webhooks(
    conn: AsyncConnection, project_id: int | None = None, *, enabled_only: bool = False
) -> list[WebhookEndpoint]:
    query = sa.select(_webhook).order_by(_webhook.c.id)
    if project_id is not None:
        query = query.where(_webhook.c.project_id == project_id)
    if enabled_only:
        query = query.where(_webhook.c.enabled.is_(True))
    return [WebhookEndpoint(**row._mapping) for row in (await conn.execute(query)).all()]


async def get_webhook(conn: AsyncConnection, webhook_id: int) -> WebhookEndpoint | None:
    row = (await conn.execute(sa.select(_webhook).where(_webhook.c.id == webhook_id))).first()
    return None if row is None else WebhookEndpoint(**row._mapping)


async def disable_webhook(conn: AsyncConnection, webhook_id: int, reason: str) -> None:
    query = (
        sa.update(_webhook)
        .where(_webhook.c.id == webhook_id)
        .values(enabled=False, disabled_reason=reason)
    )
    await conn.execute(query)
