"""What the client's tests share: either client, driven from an async test (the blocking one
in a thread, so the in-process gateway keeps serving), and the people who answer."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from gateway.vocabulary import KeyScope
from hitl_client import AsyncClient, Client, RetryPolicy
from tests.services.inprocess import RunningGateway

AnyClient = Client | AsyncClient
FAST_RETRY = RetryPolicy(attempts=4, base=0.01, cap=0.05)


def make_client(flavor: str, base_url: str, key: str, **kwargs: Any) -> AnyClient:
    kind = Client if flavor == "sync" else AsyncClient
    return kind(base_url, key, **kwargs)


async def run(client: AnyClient, method: str, *args: Any, **kwargs: Any) -> Any:
    """`client.method(*args, **kwargs)`, awaited, whichever client it is."""
    bound: Callable[..., Any] = getattr(client, method)
    if isinstance(client, AsyncClient):
        return await bound(*args, **kwargs)
    return await asyncio.to_thread(bound, *args, **kwargs)


async def close(client: AnyClient) -> None:
    if isinstance(client, AsyncClient):
        await client.aclose()
    else:
        client.close()


async def responder_key(gateway: RunningGateway, project: str = "default") -> str:
    """A key that answers for people (a front end of the team's own)."""
    return await gateway.new_key(project, name="front end", scope=KeyScope.RESPONDER)
