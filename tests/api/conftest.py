"""The API tests' client: the test key against the gateway of the root `gateway` fixture."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.services.inprocess import RunningGateway


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    async with gateway.client() as http:
        yield http
