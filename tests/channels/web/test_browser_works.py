"""Self-test of the browser fixtures: a real page, a real click, JavaScript, a screenshot."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from aiohttp import web
from playwright.async_api import Page, expect

from tests.channels.web.browser import SCREENSHOTS, screenshot
from tests.services.net import free_port

PAGE = """<!doctype html>
<html>
  <head><meta charset="utf-8"><title>Browser self-test</title></head>
  <body>
    <p id="status">waiting</p>
    <button id="go" type="button">Approve</button>
    <script>
      document.getElementById("go").addEventListener("click", () => {
        document.getElementById("status").textContent = "approved by click";
      });
    </script>
  </body>
</html>
"""


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async def index(request: web.Request) -> web.Response:
        return web.Response(text=PAGE, content_type="text/html")

    app = web.Application()
    app.router.add_get("/", index)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        await runner.cleanup()


async def test_click_runs_javascript_and_screenshot_is_saved(page: Page, site: str) -> None:
    response = await page.goto(site)
    assert response is not None and response.ok
    status = page.locator("#status")
    await expect(status).to_have_text("waiting")

    await page.get_by_role("button", name="Approve").click()

    await expect(status).to_have_text("approved by click")
    path = await screenshot(page, "browser-self-test")
    assert path == SCREENSHOTS / "browser-self-test.png"
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
