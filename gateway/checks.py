"""`gateway check`: validate settings, the config file and connections, naming each problem."""

from __future__ import annotations

import sqlalchemy as sa

from channels import REGISTRY
from gateway.errors import DeliveryError
from gateway.routing import load_config
from gateway.settings import Settings
from gateway.ssrf import pin_public
from gateway.store import Database
from gateway.store import projects as project_store


async def run_checks(settings: Settings) -> int:
    problems: list[str] = []
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
    except ValueError as error:
        problems.append(f"config: {error}")
    for name, factory in REGISTRY.items():
        missing = factory().missing_settings()
        state = f"not configured (set {', '.join(missing)})" if missing else "configured"
        print(f"info channel {name}: {state}")
    db = Database(settings.database_url)
    try:
        async with db.read() as conn:
            await conn.execute(sa.text("SELECT 1"))
            hooks = await project_store.list_webhooks(conn)
        print(f"ok   database: {db!r}")
        if not settings.webhook_allow_private:
            for hook in hooks:
                try:
                    await pin_public(hook.url)
                except DeliveryError as error:
                    problems.append(f"webhook {hook.id}: {error}")
    except Exception as error:
        problems.append(f"database {db!r}: {type(error).__name__}: {error}")
    finally:
        await db.aclose()
    for problem in problems:
        print(f"FAIL {problem}")
    return 1 if problems else 0
