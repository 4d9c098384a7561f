"""`gateway check`: validate settings, the config file and connections, naming each problem."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from gateway.doors.offline import offline_context
from gateway.errors import DeliveryError, InvalidInput
from gateway.policies import receipts
from gateway.routing import RoutingConfig, load_config
from gateway.seam import ChannelContext
from gateway.seam.channel import Channel, Checkable
from gateway.seam.connections import health_after
from gateway.security.crypto import SecretBox
from gateway.security.ssrf import pin_public
from gateway.settings import Settings
from gateway.store import Database, migrate
from gateway.store import projects as project_store
from gateway.store import receipts as receipt_store
from gateway.store.rows import ApiKeyRow
from gateway.vocabulary import ChannelName


async def run_checks(
    settings: Settings, channels: Mapping[str, Callable[[ChannelContext], Channel]]
) -> int:
    """`channels`: each channel's factory (the composition root's registry), built here
    outside a running gateway: it may log in to its platform, nothing else."""
    problems: list[str] = []
    config: RoutingConfig | None = None
    try:
        settings.secret_key_value()
    except RuntimeError as error:
        problems.append(str(error))
    try:
        config = load_config(settings.config)
        print(
            f"ok   config: {len(config.people)} people, {len(config.teams)} teams, "
            f"{len(config.rules)} rules"
        )
        for warning in config.warnings():
            print(f"warn {warning}")
    except ValueError as error:
        problems.append(f"config: {error}")
    for name, factory in channels.items():
        channel = factory(offline_context(settings, ChannelName(name)))
        problem = await _check_channel(name, channel, settings.channel_connect_timeout_seconds)
        if problem:
            problems.append(problem)
    db = Database(settings.database_url)
    try:
        behind = await migrate.schema_behind(db)
        if behind:
            problems.append(behind)
            return _report(problems)
        hooks = await db.read(project_store.list_webhooks)
        keys = await db.read(project_store.list_keys)
        print(f"ok   database: {db!r}")
        if config is not None:
            problems += _stale_key_targets(config, [key for key, _project in keys])
        if not settings.webhook_allow_private:
            for hook in hooks:
                try:
                    await pin_public(hook.url)
                except DeliveryError as error:
                    problems.append(f"webhook {hook.id}: {error}")
        signing = await db.read(receipt_store.current_key)
        if problem := receipts.unopenable(SecretBox.from_settings(settings), signing):
            problems.append(problem)
    except Exception as error:
        problems.append(f"database {db!r}: {type(error).__name__}: {error}")
    finally:
        await db.aclose()
    return _report(problems)


def _report(problems: list[str]) -> int:
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0


def _stale_key_targets(config: RoutingConfig, keys: list[ApiKeyRow]) -> list[str]:
    """Keys whose default target, or bound person, the current config no longer defines."""
    problems = []
    for key in keys:
        if key.person and key.revoked_at is None and key.person not in config.people:
            problems.append(f"api key {key.id} ({key.prefix}…): votes as unknown {key.person!r}")
        if key.target and key.revoked_at is None:
            try:
                config.expand(key.target, via=f"api key {key.id}")
            except InvalidInput as error:
                problems.append(f"api key {key.id} ({key.prefix}…): {error}")
    return problems


async def _check_channel(name: str, channel: Channel, within: float) -> str | None:
    """Log in where the channel can, within the connect timeout the gateway itself uses, and
    name the state the gateway's connection would be in; a channel not configured is fine."""
    missing = channel.missing_settings()
    if missing:
        print(f"info channel {name}: not configured (set {', '.join(missing)})")
        return None
    if not isinstance(channel, Checkable):
        print(f"info channel {name}: configured")
        return None
    try:
        async with asyncio.timeout(within):
            line = await channel.check()
        print(f"ok   channel {name}: connected, {line}")
    except TimeoutError:
        return f"channel {name}: retrying: no answer within {within:g} s"
    except Exception as error:  # whatever the platform client raised: say it, never crash
        return f"channel {name}: {health_after(error).describe()}"
    finally:
        await channel.aclose()  # a check may have opened a session (Discord logs in)
    return None
