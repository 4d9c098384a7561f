"""Headless Chromium for browser tests: Debian's /usr/bin/chromium, driven by Playwright.

Playwright's own browser downloads are never used; the system binary is passed as
`executable_path`.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from playwright.async_api import Browser, Page, async_playwright

# Git-ignored folder at the repository root where tests leave screenshots for people to look at.
SCREENSHOTS = Path(__file__).resolve().parents[3] / "screenshots"

# Running as root in a container: the setuid/namespace sandbox is unavailable, /dev/shm may be
# small, and there is no GPU.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"]


def find_chromium() -> str | None:
    """The system Chromium (Debian's `chromium`, or `chromium-browser`), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


@asynccontextmanager
async def launched_browser() -> AsyncIterator[Browser]:
    """A headless system Chromium, closed (with its Playwright driver) on exit."""
    executable = find_chromium()
    if executable is None:
        raise RuntimeError("no chromium on PATH: run `bash tests/services/provision.sh`")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=executable, headless=True, args=CHROMIUM_ARGS
        )
        try:
            yield browser
        finally:
            await browser.close()


async def screenshot(page: Page, name: str) -> Path:
    """Save a full-page PNG of `page` as screenshots/<name>.png and return its path."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / (name if name.endswith(".png") else f"{name}.png")
    await page.screenshot(path=str(path), full_page=True)
    return path
