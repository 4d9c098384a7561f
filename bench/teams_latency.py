"""Teams click received -> long-poll waiter returns, p50/p99, against a bare ASGI round trip.

    cd /work/main && .venv/bin/python bench/teams_latency.py

The gateway runs as `gateway serve` in a subprocess with its Teams channel pointed at a fake
Teams on 127.0.0.1 (Bot Connector, token endpoint, OpenID metadata and keys); each click is
the `adaptiveCard/action` invoke Teams sends for the card's Approve button, with the Bot
Connector's JWT (signed by the fake before the clock starts), posted to /teams/messages: the
gateway verifies the token, decides, and answers the invoke with the new card. Bounded: at
most N clicks or PHASE_LIMIT s.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.decision_latency import SETTLE, Phase, click_bench, served
from tests.channels.teams.helpers import ALICE, CONFIG, invoke, texts
from tests.fakes.teams import APP_ID, APP_PASSWORD, TENANT, FakeTeams, Message


async def posted_card(fake: FakeTeams, call_id: str) -> Message:
    """The card posted for `call_id` (its context line names the call)."""
    marker = f"call {call_id} "
    async with asyncio.timeout(10):
        while True:
            for message in reversed(fake.messages):
                if marker in texts(message.first_card):
                    return message
            await asyncio.sleep(0.002)  # the fake is in this process: no event to await


async def one_click(
    api: httpx.AsyncClient, teams: httpx.AsyncClient, fake: FakeTeams, index: int
) -> float:
    call_id = f"teams-{index}"
    body = {
        "run_id": "b",
        "call_id": call_id,
        "spec": {"fn": "deploy", "kwargs": {"n": index}, "channel": {"team": "ops"}},
    }
    (await api.post("/function_calls", json=body)).raise_for_status()
    card = await posted_card(fake, call_id)
    click = invoke(fake, card, "Approve", user=ALICE)
    headers = {"Authorization": f"Bearer {fake.token_for(click)}"}
    waiter = asyncio.create_task(api.get(f"/function_calls/{call_id}", params={"wait": 30}))
    await asyncio.sleep(SETTLE)
    started = time.perf_counter()
    clicked = await teams.post("/teams/messages", json=click, headers=headers)
    answer = await waiter
    took = time.perf_counter() - started
    if clicked.status_code != 200 or answer.json()["status"]["approved"] is not True:
        raise RuntimeError(f"{call_id} was not approved: {clicked.text[:200]} {answer.text[:200]}")
    return took


def teams_env(fake: FakeTeams, workdir: Path) -> dict[str, str]:
    config = workdir / "routing.toml"
    config.write_text(CONFIG)
    return {
        "GATEWAY_CONFIG": str(config),
        "TEAMS_APP_ID": APP_ID,
        "TEAMS_APP_PASSWORD": APP_PASSWORD,
        "TEAMS_TENANT_ID": TENANT,
        "TEAMS_SERVICE_URL": fake.service_url,
        "TEAMS_ALLOWED_SERVICE_URLS": fake.service_url,
        "TEAMS_OPENID_METADATA_URL": fake.metadata_url,
        "TEAMS_TOKEN_URL": fake.token_url,
        "GATEWAY_LOG_LEVEL": "warning",
    }


async def measure() -> list[Phase]:
    phase = Phase("SQLite: Teams click -> long-poll answer")
    async with FakeTeams() as fake:
        with tempfile.TemporaryDirectory(prefix="gw-bench-teams-") as tmp:
            env = teams_env(fake, Path(tmp))
            async with served(Path(tmp), env) as (_process, api, teams):
                await phase.time(lambda index: one_click(api, teams, fake, index))
    return [phase]


def main() -> int:
    return click_bench(
        "Teams click -> long-poll waiter",
        measure,
        "From the signed invoke leaving the client to the waiter's answer arriving.",
    )


if __name__ == "__main__":
    raise SystemExit(main())
