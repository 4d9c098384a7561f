"""Three `gateway serve` replicas on one PostgreSQL database: each platform connection that
must exist once (Discord's websocket, Slack Socket Mode, the IMAP watcher) runs on one of
them, the others stand by and name it, and when its owner is killed with -9 another replica
takes over within 10 s; an email reply and a Discord click made meanwhile are each handled
once, after: the new owner resumes the Discord session the dead one left (Discord replays
the click) and reads the mailbox from the last checkpoint. SIGTERM hands over as well, the
Discord session with it.

The platforms are the fake Discord (it counts IDENTIFYs), the fake Slack (it counts Socket
Mode opens) and a real Dovecot (`doveadm who` counts the IMAP sessions), with IMAP reached
through a door the test can hold shut, so that the reply surely lands in the gap.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.channels.email.helpers import ALICE, email_env, new_mailbox, reply, sent_for
from tests.factories import request_body
from tests.fakes.discord import FakeDiscord
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually
from tests.replicas.cluster import (
    SINGLETONS,
    Cluster,
    Replica,
    connection_texts,
    imap_sessions,
    owners,
)
from tests.services.door import Door
from tests.services.dovecot import ThrowawayDovecot
from tests.services.smtp_sink import SmtpSink

pytestmark = pytest.mark.postgres

TAKEOVER_WITHIN = 10.0  # issue 15
DISCORD_CHANNEL = "500000000000000001"
DISCORD_ALICE = "600000000000000001"
WEBSOCKETS = ("discord", "slack")  # IMAP is held shut during the takeover
ROUTES = {
    "to-discord": {"discord": {"channel_id": DISCORD_CHANNEL}},
    "to-slack": {"slack": {"channel_or_user_id": "C1"}},
    "to-email": {"email": {"address": ALICE}},
}
ROUTING = f"""
[people.alice]
discord = "{DISCORD_ALICE}"
email = "{ALICE}"
"""


@dataclass
class Platforms:
    discord: FakeDiscord
    slack: FakeSlack
    sink: SmtpSink
    dovecot: ThrowawayDovecot
    imap_door: Door  # between every replica and Dovecot's IMAP port
    user: str  # the mailbox the replicas watch
    password: str

    def env(self, tmp_path: Path, pg_url: str) -> dict[str, str]:
        config = tmp_path / "routing.toml"
        config.write_text(ROUTING)
        return email_env(self.sink, self.dovecot, self.user, self.password) | {
            "GATEWAY_DATABASE_URL": pg_url,
            "GATEWAY_CONFIG": str(config),
            "IMAP_PORT": str(self.imap_door.port),
            "DISCORD_BOT_TOKEN": FakeDiscord.TOKEN,
            "DISCORD_API_URL": self.discord.api_url,
            "DISCORD_GATEWAY_URL": self.discord.gateway_url,
            "SLACK_BOT_TOKEN": "xoxb-test",
            "SLACK_SIGNING_SECRET": "test-signing-secret",
            "SLACK_APP_TOKEN": "xapp-1-test",
            "SLACK_API_URL": self.slack.base_url,
            "GATEWAY_CHANNEL_CONNECT_TIMEOUT_SECONDS": "1",
            "GATEWAY_CHANNEL_RETRY_CAP_SECONDS": "1",
            "GATEWAY_OUTBOX_POLL_SECONDS": "0.2",
        }

    async def imap_sessions(self) -> int:
        return await asyncio.to_thread(imap_sessions, self.dovecot, self.user)

    def socket_mode_opens(self) -> int:
        return len(self.slack.calls_to("apps.connections.open", include_failed=False))


@pytest.fixture
async def platforms(dovecot: ThrowawayDovecot, smtp_sink: SmtpSink) -> AsyncIterator[Platforms]:
    user, password = new_mailbox(dovecot)
    door = Door()
    try:
        await door.open(dovecot.imap_port)
        async with FakeDiscord() as discord, FakeSlack() as slack:
            yield Platforms(discord, slack, smtp_sink, dovecot, door, user, password)
    finally:
        await door.close()


async def test_one_replica_owns_each_connection_and_another_takes_over_after_kill_9(
    tmp_path: Path, pg_url: str, platforms: Platforms
) -> None:
    cluster = Cluster(tmp_path, platforms.env(tmp_path, pg_url))
    try:
        first = await cluster.start()
        everything = dict.fromkeys(SINGLETONS, first.replica_id)
        assert await agreed_owners([first], connected=True) == everything
        await asyncio.gather(cluster.start(), cluster.start())
        assert await agreed_owners(cluster.replicas, connected=True) == everything
        await each_names_the_owner(cluster.replicas, everything)
        # The standbys have tried the locks (they name the owner): still one client each.
        assert platforms.discord.identify_count == 1
        assert platforms.socket_mode_opens() == 1
        assert await platforms.imap_sessions() == 1

        message = await requests_go_out_once(cluster, platforms)
        await kill_the_owner_and_answer_meanwhile(cluster, first, platforms, message)
        await answers_are_handled_once_after_takeover(cluster, platforms, message)
        await a_stopping_owner_hands_over(cluster, platforms)
    finally:
        await cluster.stop()


async def agreed_owners(replicas: list[Replica], *, connected: bool) -> dict[str, str]:
    """Once every replica names the same owner of each singleton, one of `replicas` (and,
    with `connected`, the owner says it is connected): the owner of each."""
    found: dict[str, str] = {}
    ids = {r.replica_id for r in replicas}

    async def agreed() -> bool:
        views, texts = await owners(replicas), await connection_texts(replicas)
        found.clear()
        for name in SINGLETONS:
            named = set(views[name].values())
            if len(named) != 1 or not named <= ids:
                return False
            owner = str(named.pop())
            if connected and not texts[name][owner].startswith("connected"):
                return False
            found[name] = owner
        return True

    await eventually(agreed, within=TAKEOVER_WITHIN + 5)
    return found


async def each_names_the_owner(replicas: list[Replica], owned_by: dict[str, str]) -> None:
    """What the channels page and GET /gateway/v1/channels show on each replica."""
    texts = await connection_texts(replicas)
    for name in SINGLETONS:
        owner = owned_by[name]
        for replica in replicas:
            said = texts[name][replica.replica_id]
            if replica.replica_id == owner:
                assert said.endswith(f"(owned by this replica, {owner})"), said
            else:
                assert said == f"standby (owned by {owner})"
    for replica in replicas:
        states = await replica.channels()
        assert {states[name]["replica"] for name in SINGLETONS} == {replica.replica_id}


async def requests_go_out_once(cluster: Cluster, platforms: Platforms) -> dict[str, Any]:
    """Created on each replica in turn; whichever replica's outbox worker claims a job, each
    request goes out once, Discord's from the owner of its websocket."""
    for replica, (call_id, channel) in zip(cluster.replicas, ROUTES.items(), strict=True):
        async with replica.client() as api:
            created = await api.post("/function_calls", json=request_body(call_id, channel=channel))
            assert created.status_code == 200, created.text

    def posted() -> tuple[list[Any], list[Any], list[Any]]:
        return (
            platforms.discord.messages_in(DISCORD_CHANNEL),
            platforms.slack.calls_to("chat.postMessage", include_failed=False),
            sent_for(platforms.sink, "to-email"),
        )

    async def all_out() -> bool:
        return all(posted())

    await eventually(all_out, within=15)
    discord_posts, slack_posts, emails = posted()
    assert (len(discord_posts), len(slack_posts), len(emails)) == (1, 1, 1)
    return dict(discord_posts[0])


async def kill_the_owner_and_answer_meanwhile(
    cluster: Cluster, first: Replica, platforms: Platforms, message: dict[str, Any]
) -> None:
    # IMAP is held shut for whoever connects next, so the reply surely lands in the gap.
    await platforms.imap_door.hang()
    [email] = sent_for(platforms.sink, "to-email")
    first.process.kill()
    killed_at = time.monotonic()
    answer = reply(email.message, "Approved.")
    await asyncio.to_thread(platforms.dovecot.deliver, answer, str(email.message["Reply-To"]))
    await platforms.discord.click(
        approve_id(message), message_id=message["id"], user_id=DISCORD_ALICE
    )

    async def nobody_watches() -> bool:  # Dovecot ends the killed owner's session
        return await platforms.imap_sessions() == 0

    await eventually(nobody_watches, within=5)

    survivors = cluster.alive()
    assert len(survivors) == 2
    taken = await agreed_owners(survivors, connected=False)
    took = time.monotonic() - killed_at
    assert took < TAKEOVER_WITHIN, f"another replica took over {took:.1f} s after the kill"

    async def platforms_up() -> bool:
        texts = await connection_texts(survivors)
        return all(texts[name][taken[name]].startswith("connected") for name in WEBSOCKETS)

    await eventually(platforms_up, within=max(0.1, killed_at + TAKEOVER_WITHIN - time.monotonic()))
    await each_names_the_owner(survivors, taken)
    # The new owner resumed the killed owner's session: no second IDENTIFY.
    assert (platforms.discord.identify_count, platforms.discord.resume_count) == (1, 1)
    assert platforms.socket_mode_opens() == 2


async def answers_are_handled_once_after_takeover(
    cluster: Cluster, platforms: Platforms, message: dict[str, Any]
) -> None:
    [api_replica, *_] = cluster.alive()
    # Discord replayed the click to the new owner when it resumed the session. By then its
    # 3 s to answer had likely passed; the decision stands and the outbox edits the message.
    assert platforms.discord.replays == [1]
    # The email reply waited in the mailbox; the new IMAP owner reads it once it can connect.
    await platforms.imap_door.open(platforms.dovecot.imap_port)
    for call_id in ("to-discord", "to-email"):
        decided = await get_call(api_replica, call_id, wait=20)
        assert decided["status"]["approved"] is True, decided
        assert await decisions(api_replica, call_id) == 1

    async def buttons_gone() -> bool:
        edits = platforms.discord.edits_of(str(message["id"]))
        return bool(edits) and not edits[-1].get("components")

    await eventually(buttons_gone, within=10)
    assert await platforms.imap_sessions() == 1
    assert platforms.discord.identify_count == 1


async def a_stopping_owner_hands_over(cluster: Cluster, platforms: Platforms) -> None:
    """SIGTERM: the owner closes its connections and releases its locks as it exits, and
    the last replica takes everything over at its next try."""
    owned_by = await agreed_owners(cluster.alive(), connected=True)
    [leaving] = [r for r in cluster.alive() if r.replica_id == owned_by["discord"]]
    await asyncio.to_thread(leaving.process.stop)
    stopped_at = time.monotonic()
    [last] = cluster.alive()
    everything = dict.fromkeys(SINGLETONS, last.replica_id)
    assert await agreed_owners([last], connected=True) == everything
    assert time.monotonic() - stopped_at < TAKEOVER_WITHIN
    # It left the Discord session resumable, and the last replica took it up.
    assert (platforms.discord.identify_count, platforms.discord.resume_count) == (1, 2)
    assert await platforms.imap_sessions() == 1


def approve_id(message: dict[str, Any]) -> str:
    ids = [str(b["custom_id"]) for row in message["components"] for b in row["components"]]
    return next(i for i in ids if i.startswith("gw:approve:"))


async def get_call(replica: Replica, call_id: str, wait: float | None = None) -> dict[str, Any]:
    async with replica.client() as api:
        params = {"wait": wait} if wait else None
        response = await api.get(f"/function_calls/{call_id}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


async def decisions(replica: Replica, call_id: str) -> int:
    async with replica.client() as api:
        response = await api.get(f"{replica.process.base_url}/gateway/v1/calls/{call_id}/events")
    assert response.status_code == 200, response.text
    return sum(1 for event in response.json()["events"] if event["type"] == "decided")
