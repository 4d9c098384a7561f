"""Slack click received -> long-poll waiter returns, p50/p99, against a bare ASGI round trip.

The gateway runs as `gateway serve` in a subprocess with its Slack client pointed at a fake
Slack Web API on 127.0.0.1; each click is a block_actions payload signed with Slack's
algorithm and posted to /slack/interactions. Bounded: at most N clicks or PHASE_LIMIT s.
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.decision_latency import SETTLE, Phase, click_bench, served
from tests.channels.slack.helpers import SIGNING_SECRET, button_rid, click, signed_headers
from tests.fakes.slack import FakeSlack


async def approve_button(fake: FakeSlack, call_id: str) -> dict[str, Any]:
    """The Approve button of the message posted for `call_id` (thread notes have none)."""
    marker = f"`{call_id}`"
    while True:
        posts = fake.calls_to("chat.postMessage", include_failed=False)
        for post in posts:
            blocks = post.params.get("blocks") or []
            if marker in json.dumps(blocks):
                for block in blocks:
                    for element in block.get("elements", []):
                        if str(element.get("action_id")).startswith("gw:approve:"):
                            return dict(element)
        await fake.wait_for("chat.postMessage", len(posts) + 1)


async def one_click(
    api: httpx.AsyncClient, slack: httpx.AsyncClient, fake: FakeSlack, index: int
) -> float:
    call_id = f"slack-{index}"
    spec = {
        "fn": "deploy",
        "kwargs": {"n": index},
        "channel": {"slack": {"channel_or_user_id": f"C{index}"}},  # pacing is per channel
    }
    created = await api.post(
        "/function_calls", json={"run_id": "b", "call_id": call_id, "spec": spec}
    )
    created.raise_for_status()
    button = await approve_button(fake, call_id)
    waiter = asyncio.create_task(api.get(f"/function_calls/{call_id}", params={"wait": 30}))
    await asyncio.sleep(SETTLE)
    body = "payload=" + urllib.parse.quote(
        json.dumps(click(fake, button_rid(button), "gw_approve"))
    )
    started = time.perf_counter()
    (await slack.post("/slack/interactions", content=body, headers=signed_headers(body)))
    answer = await waiter
    took = time.perf_counter() - started
    if answer.json()["status"]["approved"] is not True:
        raise RuntimeError(f"{call_id} was not approved: {answer.text[:200]}")
    return took


async def measure() -> list[Phase]:
    phase = Phase("SQLite: Slack click -> long-poll answer")
    async with FakeSlack() as fake:
        with tempfile.TemporaryDirectory(prefix="gw-bench-slack-") as tmp:
            env = {
                "SLACK_BOT_TOKEN": "xoxb-bench",
                "SLACK_SIGNING_SECRET": SIGNING_SECRET,
                "SLACK_API_URL": fake.base_url,
                "GATEWAY_LOG_LEVEL": "warning",
            }
            async with served(Path(tmp), env) as (_process, api, slack):
                await phase.time(lambda index: one_click(api, slack, fake, index))
    return [phase]


def main() -> int:
    return click_bench(
        "Slack click -> long-poll waiter",
        measure,
        "From the signed click leaving the client to the waiter's answer arriving.",
    )


if __name__ == "__main__":
    raise SystemExit(main())
