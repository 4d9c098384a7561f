"""Fixtures for browser tests: a headless system Chromium and a fresh page per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from playwright.async_api import Browser, Page

from tests.channels.web.browser import find_chromium, launched_browser
from tests.conftest import missing_service


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
