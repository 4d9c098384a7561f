"""`make run`'s first start prints a console sign-in link that works, once."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from tests.services.gateway_process import GatewayProcess


async def test_the_first_start_prints_a_one_time_console_link(tmp_path: Path) -> None:
    process = await asyncio.to_thread(GatewayProcess(tmp_path).start)
    try:
        link = process.console_link
        assert link is not None, "".join(process.output)
        assert link.startswith(f"{process.base_url}/console/link/")
        async with httpx.AsyncClient() as browser:
            shown = await browser.get(link)
            signed_in = await browser.post(link)
            queue = await browser.get(f"{process.base_url}/console")
            again = await browser.post(link)
    finally:
        await asyncio.to_thread(process.stop)
    assert shown.status_code == 200 and "Sign in" in shown.text
    assert signed_in.status_code == 303, signed_in.text
    assert queue.status_code == 200 and "Waiting for a person" in queue.text
    assert again.status_code == 403 and "used already" in again.text
