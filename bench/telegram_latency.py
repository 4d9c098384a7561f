"""Telegram click -> long-poll waiter returns, p50/p99, against a bare ASGI round trip.

The gateway runs as `gateway serve` in a subprocess, its Telegram channel in polling mode with
TELEGRAM_API_URL pointed at a fake Bot API server on 127.0.0.1 (in this process). Each click
is a callback query the fake hands to the bot's waiting getUpdates, as Telegram would; the
time runs from the click to the agent's long-poll answer. Bounded: at most N clicks or
PHASE_LIMIT s.
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

from bench.decision_latency import SETTLE, Phase, click_bench, served
from tests.channels.telegram.helpers import ALICE, GROUP, ROUTING, data_of, users
from tests.fakes.telegram import FakeTelegram


async def posted(fake: FakeTelegram, call_id: str) -> dict[str, Any]:
    """The message the bot posted for `call_id` (its footer names the call)."""
    while True:
        found = [m for m in fake.messages_in(GROUP) if f"call {call_id}\n" in m["text"]]
        if found:
            return found[0]
        await fake.wait_for("sendMessage", len(fake.calls_to("sendMessage", ok_only=True)) + 1)


async def one_click(
    api: httpx.AsyncClient, fake: FakeTelegram, alice: dict[str, Any], index: int
) -> float:
    call_id = f"telegram-{index}"
    spec = {"fn": "deploy", "kwargs": {"n": index}, "channel": {"team": "ops"}}
    created = await api.post(
        "/function_calls", json={"run_id": "b", "call_id": call_id, "spec": spec}
    )
    created.raise_for_status()
    message = await posted(fake, call_id)
    waiter = asyncio.create_task(api.get(f"/function_calls/{call_id}", params={"wait": 30}))
    await asyncio.sleep(SETTLE)
    started = time.perf_counter()
    await fake.click(message, data_of(message, "gw:approve:"), alice)
    answer = await waiter
    took = time.perf_counter() - started
    if answer.json()["status"]["approved"] is not True:
        raise RuntimeError(f"{call_id} was not approved: {answer.text[:200]}")
    return took


async def measure() -> list[Phase]:
    phase = Phase("SQLite: Telegram click -> long-poll answer")
    async with FakeTelegram() as fake:
        alice = users(fake)[ALICE]
        with tempfile.TemporaryDirectory(prefix="gw-bench-telegram-") as tmp:
            config = Path(tmp) / "routing.toml"
            config.write_text(ROUTING)
            env = {
                "GATEWAY_CONFIG": str(config),
                "TELEGRAM_BOT_TOKEN": FakeTelegram.TOKEN,
                "TELEGRAM_API_URL": fake.api_url,
                "TELEGRAM_MODE": "polling",
                "GATEWAY_LOG_LEVEL": "warning",
            }
            async with served(Path(tmp), env) as (_process, api, _root):
                await phase.time(lambda index: one_click(api, fake, alice, index))
    return [phase]


def main() -> int:
    return click_bench(
        "Telegram click -> long-poll waiter",
        measure,
        "From the click handed to the bot's getUpdates to the waiter's answer arriving.",
    )


if __name__ == "__main__":
    raise SystemExit(main())
