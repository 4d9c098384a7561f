"""`make run`'s first start prints a console sign-in link that works, once; `gateway serve`'s
access log never shows the link's token."""

from __future__ import annotations

import asyncio
import urllib.parse
from pathlib import Path

import httpx

from tests.services.gateway_process import GatewayProcess


async def test_the_first_start_prints_a_one_time_console_link(tmp_path: Path) -> None:
    process = GatewayProcess(tmp_path, env={"GATEWAY_LOG_LEVEL": "info"})  # with access lines
    await asyncio.to_thread(process.start)
    try:
        link = process.console_link
        assert link is not None, "".join(process.output)
        assert link.startswith(f"{process.base_url}/console/link/")
        # A browser on the console's page sends its Origin with the form's POST.
        async with httpx.AsyncClient(headers={"Origin": process.base_url}) as browser:
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

    token = urllib.parse.urlsplit(link).path.rsplit("/", 1)[1]
    access = [line for line in process.output if '"GET /' in line or '"POST /' in line]
    link_lines = [line for line in access if "/console/link/" in line]
    assert len(link_lines) == 3, access  # the GET and both POSTs were logged ...
    assert all("/console/link/[redacted]" in line for line in link_lines), link_lines
    assert not [line for line in access if token in line]  # ... without the token
