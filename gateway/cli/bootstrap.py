"""First-start set-up, API keys and webhook endpoints from the config file."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from gateway.core import Core
from gateway.errors import InvalidInput
from gateway.security.crypto import hash_api_key, new_api_key
from gateway.store import projects as project_store
from gateway.vocabulary import KeyScope

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
    scope: KeyScope = KeyScope.AGENT,
    person: str | None = None,
) -> NewKey:
    """Create a key (and its project if new). Only a hash is stored: show the key once."""
    if target is not None:
        core.config.expand(target, via="--target")
    if person is not None:
        _check_person(core, scope, person)
    key = new_api_key()
    key_id = await core.db.write(
        project_store.insert_project_key,
        project,
        name=name,
        key_hash=hash_api_key(key),
        prefix=key[:12],
        target=target,
        scope=scope.value,
        person=person,
    )
    return NewKey(key=key, project=project, id=key_id)


def _check_person(core: Core, scope: KeyScope, person: str) -> None:
    """A key votes as a person only if it may vote at all, and the person is configured."""
    if not scope.allows(KeyScope.RESPONDER):
        raise InvalidInput("--person binds a key that may respond: use --scope responder")
    if person not in core.config.people:
        known = ", ".join(sorted(core.config.people)) or "(none configured)"
        raise InvalidInput(f"unknown person {person!r}; known people: {known}")


@dataclass(frozen=True)
class FirstStart:
    key: NewKey | None = None  # made by this process: show it
    raced: bool = False  # another process starting at the same moment made the first key


async def first_start(core: Core) -> FirstStart:
    """On an empty database, create the `default` project and its first key: in one
    process only, however many start at once on it."""
    if await core.db.read(project_store.count_keys):
        return FirstStart()
    key = new_api_key()
    key_id = await core.db.write(
        project_store.insert_first_key,
        DEFAULT_PROJECT,
        name="first key",
        key_hash=hash_api_key(key),
        prefix=key[:12],
        target=None,
        scope=KeyScope.AGENT.value,
        person=None,
    )
    if key_id is None:
        return FirstStart(raced=True)
    return FirstStart(NewKey(key=key, project=DEFAULT_PROJECT, id=key_id))
