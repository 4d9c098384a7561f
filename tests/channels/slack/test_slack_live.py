"""Slack against a live `gateway serve` process: settings from the environment, a signed
click over a real port, the message truncated and escaped as Slack will show it."""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.channels.slack.helpers import SIGNING_SECRET, button_rid, click, signed_headers
from tests.fakes.slack import FakeSlack
from tests.services.gateway_process import GatewayProcess

INJECTION = "<!channel> <@U123> <https://evil.example|Approve>"


@pytest.fixture
async def live(tmp_path: Path) -> AsyncIterator[tuple[GatewayProcess, FakeSlack]]:
    async with FakeSlack() as fake:
        env = {
            "SLACK_BOT_TOKEN": "xoxb-live",
            "SLACK_SIGNING_SECRET": SIGNING_SECRET,
            "SLACK_API_URL": fake.base_url,
            "GATEWAY_PUBLIC_URL": "https://gw.example",
        }
        process = await asyncio.to_thread(GatewayProcess(tmp_path, env).start)
        try:
            yield process, fake
        finally:
            await asyncio.to_thread(process.stop)


async def test_click_on_a_live_gateway(live: tuple[GatewayProcess, FakeSlack]) -> None:
    process, fake = live
    headers = {"Authorization": f"Bearer {process.api_key}"}
    spec = {
        "fn": "send_email",
        "kwargs": {"body": "x" * 10_000, "to": INJECTION},
        "channel": {"slack": {"channel_or_user_id": "C1"}},
    }
    async with httpx.AsyncClient(base_url=process.api_base, headers=headers) as api:
        created = await api.post(
            "/function_calls", json={"run_id": "live", "call_id": "live-1", "spec": spec}
        )
        assert created.status_code == 200
        [posted] = await fake.wait_for("chat.postMessage", 1)
        texts = [b["text"]["text"] for b in posted.params["blocks"] if b["type"] == "section"]
        body_text = next(t for t in texts if t.startswith("*body*"))
        assert len(body_text) <= 3000 and "https://gw.example/r/" in body_text
        rendered = json.dumps(posted.params["blocks"])
        assert "<!channel>" not in rendered and "<@U123>" not in rendered
        assert "&lt;!channel&gt;" in rendered

        [button] = [
            e
            for b in posted.params["blocks"]
            for e in b.get("elements", [])
            if str(e.get("action_id")).startswith("gw:approve:")
        ]
        payload = "payload=" + urllib.parse.quote(
            json.dumps(click(fake, button_rid(button), "gw_approve"))
        )
        async with httpx.AsyncClient(base_url=process.base_url) as slack:
            answered = await slack.post(
                "/slack/interactions", content=payload, headers=signed_headers(payload)
            )
        assert answered.status_code == 200
        result = (await api.get("/function_calls/live-1", params={"wait": 10})).json()
    assert result["status"]["approved"] is True
    assert result["status"]["user_info"]["user_id"] == "U0ALICE"
    [update] = await fake.wait_for("chat.update", 1)
    assert "Approved by <@U0ALICE>" in update.params["text"]
