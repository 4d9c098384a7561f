"""Driving the Slack channel in tests: its factory over the fake Slack Web API, and Slack's
own requests to the gateway (clicks, modal submissions, events), signed as Slack signs them."""

from __future__ import annotations

import json
import time
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

import httpx
from pydantic import SecretStr
from slack_sdk.signature import SignatureVerifier

from channels.slack.channel import SlackChannel
from channels.slack.pacing import Pacer
from channels.slack.settings import SlackSettings
from gateway.seam import ChannelContext, Verb, decode, encode
from tests.fakes.slack import FakeSlack
from tests.services.inprocess import RunningGateway

SIGNING_SECRET = "test-signing-secret"
TO_C1 = {"slack": {"channel_or_user_id": "C1"}}
C1_ALICE_ONLY = {"slack": {"channel_or_user_id": "C1", "allowed_responder_ids": ["U0ALICE"]}}


def slack_settings(fake: FakeSlack, token: str = "xoxb-test", **more: Any) -> SlackSettings:
    return SlackSettings(
        _env_file=None,
        bot_token=token,
        signing_secret=SIGNING_SECRET,
        api_url=fake.base_url,
        **more,
    )


def slack_channel(
    fake: FakeSlack, token: str = "xoxb-test", *, app_token: str | None = None
) -> Callable[[ChannelContext], SlackChannel]:
    """The Slack channel's factory, talking to `fake` (and with `app_token`, Socket Mode)."""
    more = {"app_token": SecretStr(app_token)} if app_token else {}
    settings = slack_settings(fake, token, **more)

    def build(context: ChannelContext) -> SlackChannel:
        return SlackChannel(context, settings, pacer=Pacer(0))

    return build


def assert_posted(fake: FakeSlack) -> None:
    """The outbox's delivery reached Slack: a chat.postMessage that did not fail."""
    assert fake.calls_to("chat.postMessage", include_failed=False), "nothing was posted"


def signed_headers(
    body: str, *, timestamp: int | None = None, secret: str = SIGNING_SECRET
) -> dict[str, str]:
    ts = str(timestamp if timestamp is not None else int(time.time()))
    signature = SignatureVerifier(secret).generate_signature(timestamp=ts, body=body)
    assert signature is not None
    return {
        "X-Slack-Request-Timestamp": ts,
        "X-Slack-Signature": signature,
        "Content-Type": "application/x-www-form-urlencoded",
    }


async def send(gateway: RunningGateway, payload: dict[str, Any], **sign: Any) -> httpx.Response:
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    async with httpx.AsyncClient(base_url=gateway.base_url) as client:
        return await client.post(
            "/slack/interactions", content=body, headers=signed_headers(body, **sign)
        )


def button_rid(button: dict[str, Any]) -> str:
    """The request a posted button answers (its shared callback id)."""
    click = decode(str(button["value"]))
    assert click is not None, button
    return click.rid


def click(
    fake: FakeSlack,
    rid: str,
    action: str,
    user: str = "U0ALICE",
    respond_id: str = "r1",
    *,
    channel: str = "C1",
    ts: str = "1.1",
) -> dict[str, Any]:
    """A click on a button of the post `ts` in `channel`; `action` is "gw_approve",
    "gw_reject" or "gw_option_<n>", sent as the button carries it: the shared callback id,
    as action_id and value."""
    verb, _, index = action.removeprefix("gw_").partition("_")
    callback = encode(Verb(verb), rid, int(index) if index else None)
    return {
        "type": "block_actions",
        "user": {"id": user, "username": user.lower(), "team_id": "T1"},
        "team": {"id": "T1", "domain": "test"},
        "api_app_id": "A1",
        "container": {"type": "message", "message_ts": ts, "channel_id": channel},
        "channel": {"id": channel, "name": "approvals"},
        "trigger_id": f"trigger-{user}",
        "response_url": fake.response_url(respond_id),
        "actions": [
            {
                "action_id": callback,
                "block_id": "gw_decision",
                "value": callback,
                "type": "button",
                "action_ts": str(time.time()),
            }
        ],
    }


def modal_submit(rid: str, reason: str, option: str | None = None) -> dict[str, Any]:
    return {
        "type": "view_submission",
        "user": {"id": "U0ALICE", "username": "alice", "team_id": "T1"},
        "team": {"id": "T1", "domain": "test"},
        "api_app_id": "A1",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": "gw_reject_modal",
            "private_metadata": json.dumps({"rid": rid, "option": option}),
            "state": {
                "values": {"gw_reason": {"reason": {"type": "plain_text_input", "value": reason}}}
            },
        },
    }


async def status(gateway: RunningGateway, call_id: str, kind: str = "function_calls") -> Any:
    async with gateway.client() as client:
        return (await client.get(f"/{kind}/{call_id}")).json()


async def decided(gateway: RunningGateway, call_id: str, kind: str = "function_calls") -> Any:
    """Bolt acks before its listener decides: wait with the gateway's own long-poll."""
    async with gateway.client() as client:
        answer = (await client.get(f"/{kind}/{call_id}", params={"wait": 10})).json()
    assert answer["gateway_status"] != "pending", answer
    return answer


def event_callback(event: dict[str, Any]) -> dict[str, Any]:
    """The Events API envelope around one event."""
    return {
        "type": "event_callback",
        "team_id": "T1",
        "api_app_id": "A1",
        "event_id": f"Ev{event['ts']}",
        "event_time": int(time.time()),
        "event": event,
    }


async def post_event(
    gateway: RunningGateway, event: dict[str, Any], *, retry: int | None = None
) -> httpx.Response:
    body = json.dumps(event_callback(event))
    headers = signed_headers(body) | {"Content-Type": "application/json"}
    if retry is not None:
        headers |= {"X-Slack-Retry-Num": str(retry), "X-Slack-Retry-Reason": "http_timeout"}
    async with httpx.AsyncClient(base_url=gateway.base_url) as client:
        return await client.post("/slack/events", content=body, headers=headers)


async def parent_ts(gateway: RunningGateway, call_id: str, kind: str = "function_calls") -> str:
    return str((await status(gateway, call_id, kind))["status"]["slack_message_ts"])


def reply(
    thread_ts: str, text: str, user: str = "U0ALICE", ts: str = "1700000001.000001"
) -> dict[str, Any]:
    return {
        "type": "message",
        "channel": "C1",
        "user": user,
        "text": text,
        "ts": ts,
        "thread_ts": thread_ts,
        "channel_type": "channel",
        "team": "T1",
    }


def pick(
    fake: FakeSlack,
    rid: str,
    value: str,
    user: str = "U0ALICE",
    respond_id: str = "r1",
    *,
    action_id: str | None = None,
) -> dict[str, Any]:
    """A choice in the "Approve and allow…" select of the post of `rid`: Slack sends the
    select's action_id and the chosen option, and no value."""
    payload = click(fake, rid, "gw_approve", user, respond_id)
    payload["actions"] = [
        {
            "type": "static_select",
            "action_id": action_id or encode(Verb.GRANT, rid),
            "block_id": "gw_decision",
            "selected_option": {"text": {"type": "plain_text", "text": value}, "value": value},
            "placeholder": {"type": "plain_text", "text": "Approve and allow…"},
            "action_ts": str(time.time()),
        }
    ]
    return payload


def edit_submit(
    rid: str,
    texts: Mapping[str, str | None],
    user: str = "U0ALICE",
    *,
    private_metadata: str | None = None,
) -> dict[str, Any]:
    """The "Edit and approve" modal submitted with `texts` by block_id (gw_arg_<n>), with the
    private_metadata views.open was given (by default, only the rid)."""
    values = {
        block: {"text": {"type": "plain_text_input", "value": text}}
        for block, text in texts.items()
    }
    return {
        "type": "view_submission",
        "user": {"id": user, "username": user.lower(), "team_id": "T1"},
        "team": {"id": "T1", "domain": "test"},
        "api_app_id": "A1",
        "view": {
            "id": "V1",
            "type": "modal",
            "callback_id": "gw_edit_modal",
            "private_metadata": private_metadata or json.dumps({"rid": rid}),
            "state": {"values": values},
        },
    }
