"""Socket Mode: the gateway dials out to Slack over a WebSocket, so it needs no public URL."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.web.async_client import AsyncWebClient


async def connect(
    app: AsyncApp, app_token: str, api_url: str, *, within: float | None = 30
) -> AsyncSocketModeHandler:
    """Open the Socket Mode connection that feeds Slack's events and clicks to `app`.

    `apps.connections.open` goes to `api_url` with the app-level (`xapp-`) token. A refused
    token raises SlackApiError at once; slack_sdk would otherwise retry it forever, as it does
    an unreachable WebSocket, which is why the whole connect is bounded by `within` seconds
    (None: by the caller, as the channel's supervisor does).

    No retry within an attempt: whoever calls this retries, and an unreachable Slack must say
    so at once (slack_sdk's default retry waits 0.5-1.5 s first, which a 1 s connect bound
    reported as "no answer").
    """
    web_client = AsyncWebClient(base_url=api_url, timeout=10, retry_handlers=[])
    # The client starts a task and an aiohttp session as it is built: build it in the loop.
    handler = AsyncSocketModeHandler(app, app_token, web_client=web_client)
    client: SocketModeClient = handler.client
    try:
        async with asyncio.timeout(within):
            client.wss_uri = await client.issue_new_wss_url()
            await handler.connect_async()  # type: ignore[no-untyped-call]  # unannotated
    except BaseException:
        await disconnect(handler)
        raise
    return handler


async def watch(
    handler: AsyncSocketModeHandler, up: Callable[[], None], down: Callable[[str], None]
) -> None:
    """Report the connection's state for as long as it lives: slack_sdk re-opens a dropped
    WebSocket by itself, and checks it with a ping every `ping_interval` seconds."""
    client: SocketModeClient = handler.client
    while not client.closed:
        await asyncio.sleep(client.ping_interval)  # the interval slack_sdk itself checks at
        if await client.is_connected():
            up()
        else:
            down("the Socket Mode connection dropped; slack_sdk is reconnecting")


async def disconnect(handler: AsyncSocketModeHandler) -> None:
    """Close the WebSocket and the aiohttp session, and wait for the client's tasks to end.

    slack_sdk's `close()` only cancels its receiver, monitor and queue tasks; they are
    awaited here so nothing is left pending.
    """
    client: SocketModeClient = handler.client
    try:
        await handler.close_async()  # type: ignore[no-untyped-call]
    finally:
        tasks = [
            task
            for task in (
                client.message_processor,
                client.current_session_monitor,
                client.message_receiver,
            )
            if task is not None
        ]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
