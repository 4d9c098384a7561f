"""Driving the Teams channel in tests: its factory over the fake Teams, the routing config that
names people by their AAD object ids, and what the Bot Connector posts to /teams/messages
(clicks on a posted card, installs, thread replies), signed by the fake."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from channels.teams.channel import TeamsChannel
from channels.teams.settings import TeamsSettings
from gateway.seam import ChannelContext
from tests.fakes.teams import APP_ID, APP_PASSWORD, BOT_ID, TENANT, FakeTeams, Message
from tests.services.inprocess import RunningGateway, test_settings, write_config

OPS = "19:0a1b2c3d4e5f60718293a4b5c6d7e8f9@thread.tacv2"  # the ops team's channel
PAIR = "19:9f8e7d6c5b4a39281706f5e4d3c2b1a0@thread.tacv2"  # two of its people must approve
ALICE = "6f1b2c3d-1111-4a5b-8c9d-0000000000a1"  # AAD object ids
BOB = "6f1b2c3d-2222-4a5b-8c9d-0000000000b2"
CAROL = "6f1b2c3d-3333-4a5b-8c9d-0000000000c3"
DANA = "6f1b2c3d-5555-4a5b-8c9d-0000000000d5"
MALLORY = "6f1b2c3d-4444-4a5b-8c9d-0000000000e4"  # in the tenant, not in the config
NAMES = {ALICE: "Alice", BOB: "Bob", CAROL: "Carol", DANA: "Dana", MALLORY: "Mallory"}
TO_OPS = {"team": "ops"}
TO_CAROL = {"person": "carol"}
TO_DANA = {"person": "dana"}

CONFIG = f"""
[people.alice]
name = "Alice"
teams = "{ALICE}"

[people.bob]
name = "Bob"
teams = "{BOB}"

[people.carol]
name = "Carol"
teams = "{CAROL}"

[people.dana]
name = "Dana"
teams = "{DANA}"

[teams.ops]
members = ["alice", "bob"]
teams_channel = "{OPS}"

[teams.pair]
members = ["alice", "bob"]
teams_channel = "{PAIR}"
approvals_required = 2
"""


def teams_settings(fake: FakeTeams, **more: Any) -> TeamsSettings:
    values: dict[str, Any] = {
        "app_id": APP_ID,
        "app_password": APP_PASSWORD,
        "tenant_id": TENANT,
        "service_url": fake.service_url,
        "allowed_service_urls": fake.service_url,
        "openid_metadata_url": fake.metadata_url,
        "token_url": fake.token_url,
    }
    return TeamsSettings(_env_file=None, **(values | more))


def teams_channel(fake: FakeTeams, **more: Any) -> Callable[[ChannelContext], TeamsChannel]:
    """The Teams channel's factory, talking to `fake`."""
    settings = teams_settings(fake, **more)

    def build(context: ChannelContext) -> TeamsChannel:
        return TeamsChannel(context, settings)

    return build


def gateway_settings(tmp_path: Path, name: str = "teams") -> Any:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    return test_settings(f"sqlite+aiosqlite:///{tmp_path}/{name}.db", config=config)


def person(aad: str) -> dict[str, Any]:
    """A Teams user as activities name them."""
    return {"id": f"29:1{aad[-4:]}", "name": NAMES.get(aad, "Someone"), "aadObjectId": aad}


def base_activity(fake: FakeTeams, conversation: dict[str, Any], user: str) -> dict[str, Any]:
    return {
        "id": f"f:{user[-4:]}-1",
        "timestamp": "2026-01-02T03:04:05.000Z",
        "serviceUrl": fake.service_url,
        "channelId": "msteams",
        "from": person(user),
        "conversation": conversation | {"tenantId": TENANT},
        "recipient": {"id": BOT_ID, "name": "HITL Gateway"},
        "channelData": {"tenant": {"id": TENANT}},
        "locale": "en-US",
    }


def conversation_of(message: Message) -> dict[str, Any]:
    """The conversation a click on `message` comes from: its thread in a channel."""
    if message.conversation_id.startswith("19:"):
        thread = f"{message.conversation_id};messageid={message.activity_id}"
        return {"isGroup": True, "conversationType": "channel", "id": thread}
    return {"conversationType": "personal", "id": message.conversation_id}


def actions(card: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Every action of a card: its own, its action sets', and those inside its ShowCards."""
    for action in card.get("actions") or []:
        yield action
        if action["type"] == "Action.ShowCard":
            yield from actions(action["card"])
    for element in card.get("body") or []:
        if element["type"] == "ActionSet":
            for action in element["actions"]:
                yield action
                if action["type"] == "Action.ShowCard":
                    yield from actions(action["card"])


def button(message: Message, title: str) -> dict[str, Any]:
    """The `Action.Execute` with this title on the card as it was posted."""
    card = message.first_card
    found = [a for a in actions(card) if a["type"] == "Action.Execute" and a["title"] == title]
    assert found, f"no button {title!r} on the card: {json.dumps(card)[:500]}"
    return found[0]


def invoke(
    fake: FakeTeams,
    message: Message,
    title: str,
    *,
    user: str = ALICE,
    inputs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A click on the card's button `title`, with the card's inputs, as Teams sends it."""
    action = button(message, title)
    return base_activity(fake, conversation_of(message), user) | {
        "type": "invoke",
        "name": "adaptiveCard/action",
        "replyToId": message.activity_id,
        "value": {
            "action": {
                "type": "Action.Execute",
                "title": title,
                "verb": action["verb"],
                "data": dict(action.get("data") or {}) | (inputs or {}),
            },
            "trigger": "manual",
        },
    }


def installed(fake: FakeTeams, user: str) -> dict[str, Any]:
    """The app installed in a person's 1:1 chat (installationUpdate, action add)."""
    conversation = {"conversationType": "personal", "id": fake.personal_conversation(user)}
    return base_activity(fake, conversation, user) | {
        "type": "installationUpdate",
        "action": "add",
    }


def thread_reply(
    fake: FakeTeams, message: Message, text: str, user: str = ALICE, *, number: int = 1
) -> dict[str, Any]:
    """A message in the thread of a channel post, @mentioning the bot."""
    return base_activity(fake, conversation_of(message), user) | {
        "type": "message",
        "id": f"{message.activity_id}{number}",
        "text": f"<at>HITL Gateway</at> {text}",
        "textFormat": "plain",
        "entities": [
            {"type": "mention", "text": "<at>HITL Gateway</at>", "mentioned": {"id": BOT_ID}}
        ],
    }


async def post(
    gateway: RunningGateway, fake: FakeTeams, activity: dict[str, Any], token: str | None = None
) -> httpx.Response:
    """What the Bot Connector does: POST the activity to the messaging endpoint, signed."""
    headers = {"Authorization": f"Bearer {token or fake.token_for(activity)}"}
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as client:
        return await client.post("/teams/messages", json=activity, headers=headers)


async def status(gateway: RunningGateway, call_id: str, kind: str = "function_calls") -> Any:
    async with gateway.client() as client:
        return (await client.get(f"/{kind}/{call_id}")).json()


def only_post(fake: FakeTeams, conversation_id: str = OPS) -> Message:
    [message] = fake.posts_in(conversation_id)
    return message


def texts(card: dict[str, Any]) -> str:
    """Every word the card shows, runs and blocks alike, in order."""
    found: list[str] = []
    for element in card.get("body") or []:
        if element["type"] == "TextBlock":
            found.append(element["text"])
        for inline in element.get("inlines") or []:
            found.append(inline["text"])
    return " ".join(found)
