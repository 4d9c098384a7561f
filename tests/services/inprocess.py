"""The gateway's real ASGI app under a real uvicorn server, in the test's event loop."""

from __future__ import annotations

import asyncio
import logging
import ssl
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from uvicorn.logging import AccessFormatter

from channels.registry import REGISTRY, ChannelFactory
from gateway.app import Server, build_core, serving_app
from gateway.cli import bootstrap
from gateway.core import Core
from gateway.doors import channel_context
from gateway.runtime.logs import ACCESS_LOGGER, install_access_log_filter
from gateway.seam import ChannelContext, ChannelName
from gateway.settings import Settings
from gateway.vocabulary import KeyScope
from tests.services.net import free_port

# httpx builds an SSL context per client (~100 ms); tests open many clients.
SHARED_SSL = ssl.create_default_context()


def test_settings(database_url: str, **overrides: Any) -> Settings:
    values: dict[str, Any] = {
        "database_url": database_url,
        "secret_key": "test-secret-key",
        "webhook_allow_private": True,
        "webhook_retry_schedule": "0,0.05,0.1,0.2,0.4,0.8",
        "outbox_poll_seconds": 0.2,
        "channel_retry_base_seconds": 0.05,
        "config": None,
    }
    return Settings(_env_file=None, **(values | overrides))


test_settings.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@dataclass
class RunningGateway:
    core: Core
    base_url: str
    api_key: str

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/humanlayer/v1"

    def client(self, key: str | None = None, **kwargs: Any) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key or self.api_key}"}
        return httpx.AsyncClient(
            base_url=self.api_base, headers=headers, timeout=30, verify=SHARED_SSL, **kwargs
        )

    def context(self, name: str = ChannelName.WEB) -> ChannelContext:
        """What a channel of this gateway is given (by default the console's)."""
        return channel_context(self.core, ChannelName(name))

    async def new_key(self, project: str, **kwargs: Any) -> str:
        """A key of `project`: an agent key unless `scope=` says otherwise."""
        return (await bootstrap.create_key(self.core, project=project, **kwargs)).key


class AccessLines(logging.Handler):
    """Keeps each access-log line as `gateway serve` would write it."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__(logging.INFO)
        self.lines = lines
        line = '%(client_addr)s - "%(request_line)s" %(status_code)s'
        self.setFormatter(AccessFormatter(line, use_colors=False))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@asynccontextmanager
async def running_gateway(
    settings: Settings,
    *,
    channels: Mapping[str, ChannelFactory] | None = None,
    access_log: list[str] | None = None,
) -> AsyncIterator[RunningGateway]:
    """The gateway on a free port, with `channels` built by these factories instead of the
    registry's; with `access_log`, its access lines are appended there."""
    for attempt in range(PORT_ATTEMPTS):
        core = build_core(settings, {**REGISTRY, **(channels or {})})
        port = free_port()
        server = Server(_config(core, port), core)  # as `gateway serve` does
        task = asyncio.create_task(_serve(server))
        if await _started(server, task, last=attempt == PORT_ATTEMPTS - 1):
            break
    # After uvicorn's Config, which sets up its loggers afresh.
    install_access_log_filter()  # as `gateway serve` does
    access = logging.getLogger(ACCESS_LOGGER)
    capture = AccessLines(access_log) if access_log is not None else None
    level = access.level
    if capture is not None:
        access.addHandler(capture)
        access.setLevel(logging.INFO)  # this server's log_level is "warning"
    try:
        # The operator's key: tests of what an agent's key may do make agent keys (new_key).
        key = await bootstrap.create_key(core, project="default", name="test", scope=KeyScope.ADMIN)
        yield RunningGateway(core=core, base_url=f"http://127.0.0.1:{port}", api_key=key.key)
    finally:
        server.should_exit = True
        await task
        if capture is not None:
            access.removeHandler(capture)
            access.setLevel(level)


# A port looked up free may be taken by another test worker before uvicorn binds it; uvicorn
# then exits (SystemExit), which must not reach pytest-asyncio: try another port instead.
PORT_ATTEMPTS = 3


def _config(core: Core, port: int) -> uvicorn.Config:
    return uvicorn.Config(
        serving_app(core),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
    )


async def _serve(server: Server) -> bool:
    """`server.serve()`; False when uvicorn exited (SystemExit escaping a task would stop
    the test's event loop itself)."""
    try:
        await server.serve()
    except SystemExit:
        return False
    return True


async def _started(server: Server, task: asyncio.Task[bool], *, last: bool) -> bool:
    """True once `server` listens; False when it gave up (its port was taken), unless this
    was the last attempt, which raises."""
    while not server.started:  # uvicorn offers no event to await for this
        if task.done():
            if task.result() is False and last:
                raise RuntimeError("the test gateway did not start: its ports were taken")
            return False
        await asyncio.sleep(0.01)
    return True


def write_config(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
