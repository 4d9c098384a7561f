"""An agent's own email template cannot freeze the gateway: it renders in a process of its
own on a budget; one that runs past it fails its delivery once and is buried, never retried
into another freeze. The API answers within 1 s throughout."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from tests.channels.email.helpers import email_gateway, email_settings, to_alice
from tests.factories import RequestFactory
from tests.helpers import events, jobs
from tests.services.inprocess import RunningGateway, write_config
from tests.services.smtp_sink import SmtpSink

FREEZING = (
    "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}"
    "{% endfor %}{% endfor %}{% endfor %}"
)


async def delivery_of(gw: RunningGateway, call_id: str) -> str:
    [delivery] = (await events(gw, call_id))["deliveries"]
    return str(delivery["status"])


async def test_a_freezing_template_is_buried_and_the_api_answers_throughout(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    config = write_config(
        tmp_path / "routing.toml", "[projects.default]\nallow_agent_templates = true\n"
    )
    async with email_gateway(tmp_path, email_settings(smtp_sink), config=config) as gw:
        made = await request_factory(gw, "freeze-1", channel=to_alice(template=FREEZING))
        slowest = 0.0
        async with gw.client() as client:
            for _ in range(400):  # bounded: the render's budget is 2 s
                started = time.monotonic()
                answered = await client.get(f"/function_calls/{made.call_id}")
                slowest = max(slowest, time.monotonic() - started)
                assert answered.status_code == 200
                if await delivery_of(gw, made.call_id) == "failed":
                    break
                await asyncio.sleep(0.05)  # a client's pace between reads
        assert await delivery_of(gw, made.call_id) == "failed"
        assert slowest < 1.0, slowest
        [job] = [j for j in await jobs(gw) if j["kind"] == "deliver"]
        trail = await events(gw, made.call_id)
    assert job["status"] == "dead" and job["attempts"] == 1, job
    assert "ran past" in (job["last_error"] or "")
    assert "ran past" in trail["deliveries"][0]["error"]
    assert smtp_sink.messages == []  # nothing went out half-rendered
