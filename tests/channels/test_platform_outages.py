"""No platform can take the API down: Discord, Slack Socket Mode and IMAP pointed at a port
that refuses, or that accepts and never answers, while `gateway serve` starts and runs.

The API answers at once, the process stays up, each channel says why it is down, and when
the platform comes back on the same port the channel connects and what waited goes out.
"""

from __future__ import annotations

import asyncio
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.channels.email.helpers import ALICE, email_env, new_mailbox, reply, sent_for
from tests.factories import request_body
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually
from tests.services.door import Door
from tests.services.dovecot import ThrowawayDovecot
from tests.services.gateway_process import GatewayProcess
from tests.services.smtp_sink import SmtpSink

DISCORD_CHANNEL = "500000000000000001"
# An outage may not hold up the first create. Its start is timed against a start in the same
# run with no platform configured (a fixed bound fails on a loaded machine, old code and new
# alike): it may take longer by less than the connect timeout, which any connect the start
# waited on would cost (three platforms waited on: three times that). The margin left covers
# what a configured start does more, such as importing the platforms' libraries (0.8 s on a
# loaded machine: a 1 s timeout left too little).
CONNECT_TIMEOUT = 3  # seconds
HELD_UP_AT_MOST = 2.0  # seconds
STAYS_UP_FOR = 10.0
DOWN_BECAUSE = {
    "hangs": rf"no answer within {CONNECT_TIMEOUT} s",
    "refuses": r"(?i)refused|cannot connect|connect call failed",
}
ROUTES = {
    "to-discord": {"discord": {"channel_id": DISCORD_CHANNEL}},
    "to-slack": {"slack": {"channel_or_user_id": "C1"}},
    "to-email": {"email": {"address": ALICE}},
}


@pytest.fixture
async def doors() -> AsyncIterator[dict[str, Door]]:
    opened = {name: Door() for name in ("discord", "slack", "imap")}
    try:
        yield opened
    finally:
        for door in opened.values():
            await door.close()


def outage_env(doors: dict[str, Door], sink: SmtpSink, dovecot: ThrowawayDovecot) -> dict[str, str]:
    user, password = new_mailbox(dovecot)
    return email_env(sink, dovecot, user, password) | {
        "IMAP_PORT": str(doors["imap"].port),
        "DISCORD_BOT_TOKEN": FakeDiscord.TOKEN,
        "DISCORD_API_URL": doors["discord"].url("http", "/api/v10"),
        "DISCORD_GATEWAY_URL": doors["discord"].url("ws", "/gateway"),
        "SLACK_BOT_TOKEN": "xoxb-test",
        "SLACK_SIGNING_SECRET": "test-signing-secret",
        "SLACK_APP_TOKEN": "xapp-1-test",
        "SLACK_API_URL": doors["slack"].url("http", "/api/"),
        "GATEWAY_CHANNEL_CONNECT_TIMEOUT_SECONDS": str(CONNECT_TIMEOUT),
        "GATEWAY_CHANNEL_RETRY_CAP_SECONDS": "1",
        "GATEWAY_OUTBOX_POLL_SECONDS": "0.2",
    }


async def connections(api: httpx.AsyncClient, base_url: str) -> dict[str, str | None]:
    response = await api.get(f"{base_url}/gateway/v1/channels")
    assert response.status_code == 200, response.text
    return {c["name"]: c["connection"] for c in response.json()["channels"]}


async def delivery_status(api: httpx.AsyncClient, base_url: str, call_id: str) -> str:
    response = await api.get(f"{base_url}/gateway/v1/calls/{call_id}/events")
    assert response.status_code == 200, response.text
    [delivery] = response.json()["deliveries"]
    return str(delivery["status"])


@pytest.mark.parametrize("outage", ["hangs", "refuses"])
async def test_a_platform_outage_at_start_never_holds_up_the_api(
    outage: str,
    doors: dict[str, Door],
    tmp_path: Path,
    dovecot: ThrowawayDovecot,
    smtp_sink: SmtpSink,
) -> None:
    if outage == "hangs":
        for door in doors.values():
            await door.hang()
    healthy = await _healthy_start(tmp_path / "healthy")
    async with FakeDiscord() as discord_fake, FakeSlack() as slack_fake:
        process = GatewayProcess(tmp_path, outage_env(doors, smtp_sink, dovecot))
        await asyncio.to_thread(process.start)
        try:
            admin = await _while_down(process, outage, healthy)
            await _after_recovery(
                process, admin, doors, discord_fake, slack_fake, smtp_sink, dovecot
            )
        finally:
            await asyncio.to_thread(process.stop)


async def _first_creates(process: GatewayProcess, routes: dict[str, Any]) -> float:
    """Seconds from the process's spawn to its first creates answered (the agent's key)."""
    assert process.started_at is not None
    headers = {"Authorization": f"Bearer {process.api_key}"}
    async with httpx.AsyncClient(base_url=process.api_base, headers=headers, timeout=5) as agent:
        for call_id, channel in routes.items():
            created = await agent.post(
                "/function_calls", json=request_body(call_id, channel=channel)
            )
            assert created.status_code == 200, created.text
    return time.monotonic() - process.started_at


async def _healthy_start(workdir: Path) -> float:
    """The same, for a gateway with no platform configured: the baseline."""
    await asyncio.to_thread(workdir.mkdir)
    process = GatewayProcess(workdir)
    await asyncio.to_thread(process.start)
    try:
        return await _first_creates(process, {"healthy": None})
    finally:
        await asyncio.to_thread(process.stop)


async def _while_down(process: GatewayProcess, outage: str, healthy: float) -> str:
    """The agent's key (first start's) creates; channel states and deliveries are read with
    an admin key, made once the creates were timed. Returns that key."""
    assert process.started_at is not None
    served_after = await _first_creates(process, ROUTES)
    assert served_after < healthy + HELD_UP_AT_MOST, (
        f"first create answered {served_after:.2f} s after start; "
        f"{healthy:.2f} s with no platform configured"
    )
    admin = await asyncio.to_thread(process.new_key, "admin", "--name", "operator")
    headers = {"Authorization": f"Bearer {admin}"}
    async with httpx.AsyncClient(base_url=process.api_base, headers=headers, timeout=5) as api:

        async def all_down() -> bool:
            states = await connections(api, process.base_url)
            return all(
                re.search(DOWN_BECAUSE[outage], states[name] or "")
                and (states[name] or "").startswith("retrying: ")
                for name in ("discord", "slack", "email")
            )

        await eventually(all_down, within=STAYS_UP_FOR)
        # The requirement itself is a span of wall time: still serving 10 s after start.
        await asyncio.sleep(max(0.0, process.started_at + STAYS_UP_FOR - time.monotonic()))
        assert process.alive(), "".join(process.output)
        assert (await api.get(f"{process.base_url}/healthz")).status_code == 200
        states = await connections(api, process.base_url)
        for name in ("discord", "slack", "email"):  # still trying, between attempts or in one
            assert (states[name] or "").partition(":")[0] in ("connecting", "retrying"), states
        for call_id in ("to-discord", "to-slack"):
            assert await delivery_status(api, process.base_url, call_id) in ("queued", "retrying")
    return admin


async def _after_recovery(
    process: GatewayProcess,
    admin: str,
    doors: dict[str, Door],
    discord_fake: FakeDiscord,
    slack_fake: FakeSlack,
    sink: SmtpSink,
    dovecot: ThrowawayDovecot,
) -> None:
    # An answer waits in the mailbox (SMTP was up all along) before IMAP comes back.
    [email] = sent_for(sink, "to-email")
    answer = reply(email.message, "Approved.")
    await asyncio.to_thread(dovecot.deliver, answer, str(email.message["Reply-To"]))
    await doors["discord"].open(discord_fake.port)
    await doors["slack"].open(slack_fake.port)
    await doors["imap"].open(dovecot.imap_port)
    headers = {"Authorization": f"Bearer {admin}"}
    async with httpx.AsyncClient(base_url=process.api_base, headers=headers, timeout=30) as api:

        async def all_up() -> bool:
            states = await connections(api, process.base_url)
            return all(states[name] == "connected" for name in ("discord", "slack", "email"))

        await eventually(all_up, within=20)

        async def delivered() -> bool:
            statuses = [await delivery_status(api, process.base_url, c) for c in ROUTES]
            return statuses == ["sent", "sent", "sent"]

        await eventually(delivered, within=20)
        assert len(discord_fake.messages_in(DISCORD_CHANNEL)) == 1
        assert len(slack_fake.calls_to("chat.postMessage", include_failed=False)) == 1
        answered: dict[str, Any] = (
            await api.get("/function_calls/to-email", params={"wait": 20})
        ).json()
        assert answered["status"]["approved"] is True


async def test_gateway_check_names_each_platform_state_within_the_connect_timeout(
    doors: dict[str, Door], tmp_path: Path, dovecot: ThrowawayDovecot, smtp_sink: SmtpSink
) -> None:
    await doors["discord"].hang()
    await doors["slack"].hang()  # and IMAP refuses: nothing listens on its door
    env = os.environ | outage_env(doors, smtp_sink, dovecot)
    env |= {
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path}/check.db",
        "GATEWAY_SECRET_KEY": "test-secret-key",
    }
    db_upgrade = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "gateway", "db", "upgrade", cwd=tmp_path, env=env
    )
    assert await db_upgrade.wait() == 0
    started = time.monotonic()
    check = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "gateway",
        "check",
        cwd=tmp_path,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(check.communicate(), timeout=60)
    text = out.decode()
    assert check.returncode == 1, text
    assert time.monotonic() - started < 30, "each platform is given the connect timeout, no more"
    assert f"FAIL channel discord: retrying: no answer within {CONNECT_TIMEOUT} s" in text
    assert f"FAIL channel slack: retrying: no answer within {CONNECT_TIMEOUT} s" in text
    assert re.search(
        r"FAIL channel email: retrying: imap: .*(?i:refused|connect call failed)", text
    )
