"""What Teams sends, read into the core's words: pure functions on recorded activities
(tests/channels/teams/data, see SOURCES.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from channels.teams.activities import (
    clicked,
    parse,
    personal_reference,
    post_key,
    reply_text,
    responder,
    tenant_of,
    thread_reply,
)
from gateway.seam import AnsweredIn, CallbackId, Verb

DATA = Path(__file__).parent / "data"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
THREAD = "19:0a1b2c3d4e5f60718293a4b5c6d7e8f9@thread.tacv2;messageid=1768210801000"


def recorded(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((DATA / name).read_text())
    return loaded


def test_an_action_execute_invoke_is_a_click_with_its_inputs() -> None:
    activity = parse(recorded("invoke_action_execute.json"))
    click = clicked(activity)
    assert click is not None
    assert click.callback == CallbackId(Verb.REJECT, "Vx3kR0q9ZbYc2LmN")
    assert click.inputs == {"reason": "Not the production database, please"}
    who = responder(activity)
    assert who is not None
    assert (who.via, who.id, who.name) == (
        AnsweredIn.TEAMS,
        "6f1b2c3d-1111-4a5b-8c9d-0000000000a1",
        "Alice Example",
    )
    channel = "19:0a1b2c3d4e5f60718293a4b5c6d7e8f9@thread.tacv2"
    assert who.copy == THREAD == post_key(channel, "1768210801000")
    assert who.extra["tenant_id"] == TENANT
    assert tenant_of(activity) == TENANT


@pytest.mark.parametrize(
    "change",
    [
        {"name": "composeExtension/submitAction"},  # another invoke
        {"value": {"action": {"type": "Action.Submit", "verb": "gw:approve:abc"}}},
        {"value": {"action": {"type": "Action.Execute", "verb": "refresh"}}},  # not ours
        {"value": {"action": {"type": "Action.Execute", "verb": "gw:approve:a b"}}},
        {"type": "message"},
    ],
)
def test_anything_else_is_no_click(change: dict[str, Any]) -> None:
    assert clicked(parse(recorded("invoke_action_execute.json") | change)) is None


def test_someone_without_an_entra_id_is_nobody() -> None:
    activity = recorded("invoke_action_execute.json")
    activity["from"] = {"id": "29:guest", "name": "Guest"}
    assert responder(parse(activity)) is None


def test_an_install_in_a_1_1_chat_gives_the_conversation_reference() -> None:
    found = personal_reference(parse(recorded("installation_update_personal.json")))
    assert found is not None
    aad, reference = found
    assert aad == "6f1b2c3d-3333-4a5b-8c9d-0000000000c3"
    assert reference.conversation.id == "a:1mNoPqRsTuVwXyZ-personal-chat-id"
    assert reference.service_url == "https://smba.trafficmanager.net/emea/"
    assert reference.activity_id is None  # a proactive message replies to nothing


def test_a_team_install_is_no_personal_conversation() -> None:
    assert personal_reference(parse(recorded("conversation_update_team.json"))) is None


def test_a_thread_reply_names_its_post_and_its_words_without_the_mention() -> None:
    found = thread_reply(parse(recorded("message_thread_reply.json")))
    assert found == (THREAD, "eu-west-1 & nothing else")


def test_a_click_is_no_thread_reply() -> None:
    assert thread_reply(parse(recorded("invoke_action_execute.json"))) is None


def test_reply_text_drops_every_mention_and_tag() -> None:
    text = "<at>HITL Gateway</at> <b>yes</b>, <AT id='1'>Bob</AT> too &lt;3"
    assert reply_text(text) == "yes,  too <3"
