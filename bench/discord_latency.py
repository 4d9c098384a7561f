"""Discord click -> the clicker's message update, and -> the long-poll waiter, p50/p99,
against a bare ASGI round trip.

The gateway runs as `gateway serve` in a subprocess; its discord.py bot is logged in to a fake
Discord (REST + gateway websocket) on 127.0.0.1. Each click is an INTERACTION_CREATE pushed
over the websocket; the bot's interaction callback (the updated message the clicker sees) is
recorded by the fake. Bounded: at most N clicks or PHASE_LIMIT s.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.decision_latency import PHASE_LIMIT, SETTLE, WARMUP, N, Phase, click_bench, served
from tests.channels.discord.helpers import ALICE, CHANNEL, custom_ids, footer_text
from tests.fakes.discord import FakeDiscord


async def posted_message(fake: FakeDiscord, call_id: str) -> dict[str, Any]:
    """The message the bot posted for `call_id` (its embed footer names the call)."""

    def find() -> dict[str, Any] | None:
        marker = f"call {call_id}"
        return next((m for m in fake.messages.values() if marker in footer_text(m)), None)

    await fake.wait_for_call(lambda _call: find() is not None)
    message = find()
    assert message is not None
    return message


async def finished_at(awaitable: Any) -> float:
    await awaitable
    return time.perf_counter()


async def one_click(api: httpx.AsyncClient, fake: FakeDiscord, index: int) -> tuple[float, float]:
    """(click -> interaction callback, click -> long-poll answer), in seconds."""
    call_id = f"discord-{index}"
    spec = {"fn": "deploy", "kwargs": {"n": index}, "channel": {"discord": {"channel_id": CHANNEL}}}
    created = await api.post(
        "/function_calls", json={"run_id": "b", "call_id": call_id, "spec": spec}
    )
    created.raise_for_status()
    message = await posted_message(fake, call_id)
    rid = custom_ids(message)[0].rsplit(":", 1)[1]
    waiter = asyncio.create_task(api.get(f"/function_calls/{call_id}", params={"wait": 30}))
    await asyncio.sleep(SETTLE)
    started = time.perf_counter()
    clicked = await fake.click(f"gw:approve:{rid}", message_id=message["id"], user_id=ALICE)
    callback_at, answer_at = await asyncio.gather(
        finished_at(fake.wait_for_callback(clicked)), finished_at(waiter)
    )
    answer = waiter.result()
    if answer.json()["status"]["approved"] is not True:
        raise RuntimeError(f"{call_id} was not approved: {answer.text[:200]}")
    return callback_at - started, answer_at - started


async def measure() -> list[Phase]:
    callback = Phase("SQLite: Discord click -> message update to the clicker")
    answer = Phase("SQLite: Discord click -> long-poll answer")
    async with FakeDiscord() as fake:
        with tempfile.TemporaryDirectory(prefix="gw-bench-discord-") as tmp:
            env = {
                "DISCORD_BOT_TOKEN": FakeDiscord.TOKEN,
                "DISCORD_API_URL": fake.api_url,
                "DISCORD_GATEWAY_URL": fake.gateway_url,
                "GATEWAY_LOG_LEVEL": "warning",
            }
            async with served(Path(tmp), env) as (_process, api, _root):
                await fake.wait_ready(timeout=30)
                deadline = time.monotonic() + PHASE_LIMIT
                for index in range(WARMUP + N):
                    if time.monotonic() >= deadline:
                        callback.cut_short = answer.cut_short = True
                        break
                    to_callback, to_answer = await one_click(api, fake, index)
                    if index >= WARMUP:
                        callback.latencies.append(to_callback)
                        answer.latencies.append(to_answer)
    return [callback, answer]


def main() -> int:
    return click_bench(
        "Discord click -> message update and long-poll waiter",
        measure,
        "From the INTERACTION_CREATE leaving the fake's websocket to the bot's callback\n"
        "(Discord allows 3 s) and to the waiter's answer arriving.",
    )


if __name__ == "__main__":
    raise SystemExit(main())
