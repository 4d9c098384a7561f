"""First-start set-up, API keys and webhook endpoints from the config file."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.core import Core
from gateway.security.crypto import hash_api_key, new_api_key
from gateway.store import projects as project_store

log = logging.getLogger(__name__)

DEFAULT_PROJECT = "default"


@dataclass(frozen=True)
class NewKey:
    key: str
    project: str
    id: int


async def create_key(
    core: Core,
    *,
    project: str = DEFAULT_PROJECT,
    name: str = "default",
    target: str | None = None,
) -> NewKey:
    """Create a key (and its project if new). Only a hash is stored: show the key once."""
    if target is not None:
        core.config.expand(target, via="--target")
    key = new_api_key()
    key_id = await core.db.write(
        project_store.insert_project_key,
        project,
        name=name,
        key_hash=hash_api_key(key),
        prefix=key[:12],
        target=target,
    )
    return NewKey(key=key, project=project, id=key_id)


async def first_start(core: Core) -> NewKey | None:
    """On an empty database, create the `default` project and its first key."""
    if await core.db.read(project_store.count_keys):
        return None
    return await create_key(core, project=DEFAULT_PROJECT, name="first key")
