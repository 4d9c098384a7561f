"""Fixtures for the console's tests: a headless system Chromium and a fresh page per test;
a gateway under the test module's own `routing_config` fixture, on each database
(`gateway`) or on SQLite alone (`sqlite_console`: the browser tests)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page

from tests.channels.web.browser import find_chromium, launched_browser
from tests.conftest import missing_service
from tests.services.inprocess import RunningGateway, running_gateway, test_settings


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    """A headless Chromium for one test.

    Function-scoped because the repository's asyncio_default_fixture_loop_scope is "function":
    Playwright objects are bound to the event loop that created them.
    """
    if find_chromium() is None:
        missing_service("Chromium (apt package chromium)")
    async with launched_browser() as launched:
        yield launched


@pytest.fixture
async def page(browser: Browser) -> AsyncIterator[Page]:
    """A page in a new browser context (1280x900 viewport), closed after the test."""
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    try:
        yield await context.new_page()
    finally:
        await context.close()


@pytest.fixture
async def gateway(db_url: str, routing_config: Path) -> AsyncIterator[RunningGateway]:
    async with running_gateway(test_settings(db_url, config=routing_config)) as running:
        yield running


@pytest.fixture
async def sqlite_console(tmp_path: Path, routing_config: Path) -> AsyncIterator[RunningGateway]:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db", config=routing_config)
    async with running_gateway(settings) as running:
        yield running
