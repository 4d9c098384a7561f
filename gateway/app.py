"""The composition root: builds the core, each channel from the registry with its context,
the ASGI app, and what runs beside it. The command line (`gateway.cli.main`) is the only
other module that reads the registry, for `gateway check` and `discord invite-url`."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import socket
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager

import httpx
import uvicorn
from fastapi import FastAPI
from starlette.types import ASGIApp

from channels.registry import REGISTRY, ChannelFactory
from gateway import __version__
from gateway.api import (
    channels_status,
    conformance,
    errors,
    extensions,
    grants,
    health,
    jwks,
    routes,
)
from gateway.api.body import BodyLimit
from gateway.api.fast_path import FastPath
from gateway.core import Core
from gateway.doors import channel_context
from gateway.mcp.deferred import DeferredDoor
from gateway.outbox.webhooks import sync_config_webhooks
from gateway.policies import receipts
from gateway.routing import load_config
from gateway.runtime.channel_states import channel_states
from gateway.runtime.dispatch import FINISH_SECONDS, Dispatcher
from gateway.runtime.logs import RequestId
from gateway.runtime.ownership import Ownership, default_replica_id
from gateway.runtime.supervisor import Supervisor, shutdown_step
from gateway.seam.channel import Channel, Connected, Routed
from gateway.security.crypto import SecretBox
from gateway.settings import Settings
from gateway.store import Database, migrate
from gateway.store import receipts as receipt_store
from gateway.vocabulary import ChannelName

log = logging.getLogger(__name__)
START_SECONDS = 2.0  # a channel's start only launches tasks; a slow one is a bug, not a wait


def build_core(settings: Settings, factories: Mapping[str, ChannelFactory] = REGISTRY) -> Core:
    """The core, and each channel built by its factory with its context over the core."""
    core = Core(
        settings=settings,
        db=Database(settings.database_url),
        config=load_config(settings.config),
        box=SecretBox.from_settings(settings),
    )
    for name, factory in factories.items():
        core.channels[name] = factory(channel_context(core, ChannelName(name)))
    return core


@asynccontextmanager
async def running(core: Core) -> AsyncIterator[Dispatcher]:
    """Start what the gateway runs beside the API; stop it all on exit."""
    await migrate.upgrade(core.db)
    if problem := receipts.unopenable(core.box, await core.db.read(receipt_store.current_key)):
        raise RuntimeError(problem)  # fail start, not every decision
    await sync_config_webhooks(core)
    core.db.on_changes = core.signal
    await core.db.follow(period=core.settings.outbox_poll_seconds)
    ownership = singleton_ownership(core)
    for name, channel in core.channels.items():
        await _start(name, channel)
    if ownership is not None:
        ownership.start()
    _say_channel_states(core)
    _freeze_what_start_up_made()
    async with httpx.AsyncClient() as http:
        dispatcher = Dispatcher(core, http)
        worker = asyncio.create_task(dispatcher.run(), name="outbox")
        try:
            yield dispatcher
        finally:
            core.stop()  # done already if the server was `Server` below, as it began to stop
            await shutdown_step("the outbox", dispatcher.finish(worker), FINISH_SECONDS + 1.5)
            if ownership is not None:  # owned connections end first, then their locks go
                await shutdown_step("the singleton locks", ownership.aclose(), 2.5)
            closing = (
                shutdown_step(f"channel {name}", channel.aclose(), START_SECONDS)
                for name, channel in core.channels.items()
            )
            await asyncio.gather(*closing)
            await core.db.aclose()  # the writer commits what is queued before it closes


def singleton_ownership(core: Core, replica: str | None = None) -> Ownership | None:
    """On PostgreSQL, several replicas may share the database: each platform connection then
    runs on the one replica that owns it. On SQLite this process owns them all (None)."""
    if core.db.is_sqlite:
        return None
    supervisors = singletons(core.channels.values())
    if not supervisors:
        return None
    ownership = Ownership(core.db.url, replica=replica or default_replica_id())
    ownership.hold(supervisors)
    return ownership


def singletons(channels: Iterable[Channel]) -> list[Supervisor]:
    """The supervised connections that must run once per deployment (not a Teams token)."""
    return [
        channel.connection
        for channel in channels
        if isinstance(channel, Connected)
        and isinstance(channel.connection, Supervisor)
        and channel.connection.singleton
    ]


def _say_channel_states(core: Core) -> None:
    """One line per channel at start: "slack: not configured", "email: connecting"."""
    for state in channel_states(core.channels):
        said = "not configured" if not state.configured else state.connection or "ready"
        log.info("%s: %s", state.name, said)


GC_THRESHOLD = 20_000  # allocations between young collections


def _freeze_what_start_up_made() -> None:
    """What start-up allocated lives as long as the process: keep it out of every collection.

    `gateway serve` starts with collection off (see gateway.entry), so the garbage here is
    only start-up's own, ~2,000 objects: freezing them too costs less than collecting the
    300,000 (0.2 s, a tenth of the start). Embedded with collection on (as in the tests),
    older garbage of any size may be waiting: collect it first."""
    if gc.isenabled():
        gc.collect()
    gc.freeze()
    # A create leaves no cycles; the default threshold (700) collected every ~6 creates,
    # about a tenth of a create's CPU, and paused 3-8 ms at each full collection.
    gc.set_threshold(GC_THRESHOLD, 20, 10)
    gc.enable()


async def _start(name: str, channel: Channel) -> None:
    """Platform connections start in the background: nothing a platform does holds up the API."""
    try:
        async with asyncio.timeout(START_SECONDS):
            await channel.start()
    except Exception:
        log.exception("channel %s did not start; the gateway runs without it", name)


def create_app(core: Core) -> FastAPI:
    door = DeferredDoor(core)

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        # MCP sessions end (their waits cancelled) before the core they use closes.
        async with running(core), door.running():
            yield

    app = FastAPI(title="hitl-gateway", version=__version__, lifespan=lifespan)
    app.state.core = core
    app.include_router(routes.router, prefix="/humanlayer/v1")
    app.include_router(routes.health)
    app.include_router(routes.health, prefix="/humanlayer/v1")
    app.include_router(health.router)  # /readyz and /metrics, at the root
    app.include_router(jwks.router)  # /.well-known/jwks.json, receipts' public keys
    app.include_router(extensions.router, prefix="/gateway/v1")
    app.include_router(channels_status.router, prefix="/gateway/v1")
    app.include_router(grants.router, prefix="/gateway/v1")
    door.mount(app)
    for channel in core.channels.values():
        if isinstance(channel, Routed):
            channel.mount(app)
    errors.install(app)
    conformance.install(app)  # last: it reads every route mounted above
    return app


def serving_app(core: Core) -> ASGIApp:
    """What uvicorn serves: the app behind what every request passes (its id, which every
    log line written while serving it carries; the body limit) and the hot routes' plain
    ASGI path (`gateway.api.fast_path`), outside FastAPI: a waiting agent holds none of it."""
    app = create_app(core)
    fast = FastPath(app, core, app.state)
    return RequestId(BodyLimit(fast, limit=core.settings.max_body_bytes))


class Server(uvicorn.Server):
    """uvicorn's server, which tells the core the moment it begins to shut down (SIGTERM,
    SIGINT): waiting long-polls answer and live pages end at once, so the open connections
    it then waits for close within moments, and the lifespan's shutdown follows."""

    def __init__(self, config: uvicorn.Config, core: Core) -> None:
        super().__init__(config)
        self.core = core

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        # Stop listening first (uvicorn closes them again): an agent answered now asks
        # again elsewhere, or is refused, never here.
        for server in self.servers:
            server.close()
        self.core.stop()
        await super().shutdown(sockets)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        with super().capture_signals():
            yield
            # uvicorn raises the signal again after a graceful stop, so the process would
            # die by it (exit status -15); a graceful stop is a clean exit, status 0.
            self._captured_signals.clear()
