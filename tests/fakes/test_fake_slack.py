"""FakeSlack driven by the real slack_sdk AsyncWebClient."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncRateLimitErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient
from slack_sdk.webhook.async_client import AsyncWebhookClient

from tests.fakes.slack import FakeSlack

BLOCKS: list[dict[str, Any]] = [
    {
        "type": "section",
        "block_id": "summary",
        "text": {"type": "mrkdwn", "text": "*Deploy v2 to prod?*"},
    },
    {
        "type": "actions",
        "block_id": "decision:R1",
        "elements": [
            {
                "type": "button",
                "action_id": "approve",
                "value": "R1",
                "style": "primary",
                "text": {"type": "plain_text", "text": "Approve"},
            },
            {
                "type": "button",
                "action_id": "deny",
                "value": "R1",
                "style": "danger",
                "text": {"type": "plain_text", "text": "Deny…"},
            },
        ],
    },
]


@pytest.fixture
async def fake() -> AsyncIterator[FakeSlack]:
    server = await FakeSlack().start()
    try:
        yield server
    finally:
        await server.stop()


def client(fake: FakeSlack, token: str | None = "xoxb-good", **kwargs: Any) -> AsyncWebClient:
    return AsyncWebClient(token=token, base_url=fake.base_url, **kwargs)


async def test_auth_test(fake: FakeSlack) -> None:
    response = await client(fake).auth_test()
    assert response["ok"] is True
    assert (response["user_id"], response["bot_id"], response["team_id"]) == ("UBOT", "BBOT", "T1")
    [call] = fake.calls_to("auth.test")
    assert (call.token, call.failed) == ("xoxb-good", False)


async def test_post_message_with_blocks_then_update(fake: FakeSlack) -> None:
    web = client(fake)
    first = await web.chat_postMessage(channel="C123", text="Deploy v2?", blocks=BLOCKS)
    second = await web.chat_postMessage(channel="C123", text="again", thread_ts=first["ts"])
    assert first["ok"] is True
    assert first["channel"] == "C123"
    assert first["message"]["blocks"] == BLOCKS
    assert first["ts"] == "1700000000.000100"
    assert float(second["ts"]) > float(first["ts"])

    [posted, threaded] = await fake.wait_for("chat.postMessage", 2)
    assert posted.token == "xoxb-good"
    assert posted.params["blocks"] == BLOCKS
    assert posted.params["text"] == "Deploy v2?"
    assert threaded.params["thread_ts"] == first["ts"]

    updated = await web.chat_update(channel="C123", ts=first["ts"], text="Approved", blocks=[])
    assert (updated["channel"], updated["ts"]) == ("C123", first["ts"])
    [update] = fake.calls_to("chat.update")
    assert update.params == {"channel": "C123", "ts": first["ts"], "text": "Approved", "blocks": []}


async def test_post_to_user_id_answers_dm_channel(fake: FakeSlack) -> None:
    response = await client(fake).chat_postMessage(channel="U42", text="hi")
    assert response["channel"] == "D42"
    assert fake.calls_to("chat.postMessage")[0].params["channel"] == "U42"


async def test_form_body_blocks_are_decoded(fake: FakeSlack) -> None:
    # api_call(data=...) sends a form body; form callers send blocks as a JSON string.
    form = {"channel": "C1", "blocks": json.dumps(BLOCKS), "text": "t"}
    response = await client(fake).api_call("chat.postMessage", data=form)
    assert response["message"]["blocks"] == BLOCKS
    [call] = fake.calls_to("chat.postMessage")
    assert call.params == {"channel": "C1", "blocks": BLOCKS, "text": "t"}


async def test_rate_limited_then_retried(fake: FakeSlack) -> None:
    fake.failures_before_success = 1
    web = client(
        fake,
        token="xoxb-ratelimited",
        retry_handlers=[AsyncRateLimitErrorRetryHandler(max_retry_count=2)],
    )
    response = await web.chat_postMessage(channel="C1", text="hi")  # sleeps Retry-After (1 s)
    assert response["ok"] is True
    attempts = fake.calls_to("chat.postMessage")
    assert [(call.failed, call.error) for call in attempts] == [
        (True, "ratelimited"),
        (False, None),
    ]
    assert len(fake.calls_to("chat.postMessage", include_failed=False)) == 1


async def test_rate_limited_without_retry_handler(fake: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client(fake, token="xoxb-ratelimited").chat_postMessage(channel="C1", text="hi")
    assert raised.value.response.status_code == 429
    assert raised.value.response.headers["Retry-After"] == "1"
    assert raised.value.response["error"] == "ratelimited"


async def test_server_error_without_retry_handler(fake: FakeSlack) -> None:
    web = client(fake, token="xoxb-server_error")
    with pytest.raises(SlackApiError) as raised:
        await web.chat_postMessage(channel="C1", text="hi")
    assert raised.value.response.status_code == 500
    assert (await web.chat_postMessage(channel="C1", text="hi"))["ok"] is True
    assert [call.failed for call in fake.calls_to("chat.postMessage")] == [True, False]


async def test_channel_not_found(fake: FakeSlack) -> None:
    web = client(fake, token="xoxb-channel_not_found")
    for _ in range(2):
        with pytest.raises(SlackApiError) as raised:
            await web.chat_postMessage(channel="C404", text="hi")
        assert raised.value.response["error"] == "channel_not_found"
    assert (await web.auth_test())["ok"] is True  # no channel, no error


async def test_invalid_and_missing_token(fake: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client(fake, token="xoxb-invalid").auth_test()
    assert raised.value.response["error"] == "invalid_auth"
    with pytest.raises(SlackApiError) as raised:
        await client(fake, token=None).chat_postMessage(channel="C1", text="hi")
    assert raised.value.response["error"] == "not_authed"
    assert [(call.failed, call.error) for call in fake.calls] == [
        (True, "invalid_auth"),
        (True, "not_authed"),
    ]


async def test_unknown_method(fake: FakeSlack) -> None:
    with pytest.raises(SlackApiError) as raised:
        await client(fake).api_call("no.such.method")
    assert raised.value.response["error"] == "unknown_method"


async def test_timeout(fake: FakeSlack) -> None:
    fake.hang_seconds = 3
    web = client(fake, token="xoxb-timeout", timeout=1)
    # aiohttp's total timeout surfaces as the builtin TimeoutError (== asyncio.TimeoutError),
    # which the default AsyncConnectionErrorRetryHandler does not retry.
    with pytest.raises(TimeoutError):
        await web.chat_postMessage(channel="C1", text="hi")
    [call] = fake.calls_to("chat.postMessage")
    assert (call.failed, call.error) == (True, "timeout")
    # Only the first attempt hangs; the held-back handler is released by stop().
    assert (await web.chat_postMessage(channel="C1", text="hi"))["ok"] is True


async def test_other_methods(fake: FakeSlack) -> None:
    web = client(fake)
    ephemeral = await web.chat_postEphemeral(channel="C1", user="U1", text="not yours")
    assert ephemeral["message_ts"]
    view = await web.views_open(trigger_id="t1", view={"type": "modal", "callback_id": "deny"})
    assert view["view"]["id"].startswith("V")
    assert view["view"]["callback_id"] == "deny"
    user = await web.users_info(user="U7")
    assert user["user"]["real_name"] and user["user"]["profile"]["email"] == "u7@example.com"
    channel = await web.conversations_info(channel="D7")
    assert channel["channel"]["id"] == "D7" and channel["channel"]["is_im"] is True
    assert fake.calls_to("users.info")[0].params["user"] == "U7"

    socket = await AsyncWebClient(base_url=fake.base_url).apps_connections_open(app_token="xapp-1")
    assert socket["url"] == f"ws://127.0.0.1:{fake.port}/link"
    assert fake.calls_to("apps.connections.open")[0].token == "xapp-1"


# slack_sdk 3.47 builds aiohttp.BasicAuth for oauth.v2.access, deprecated in aiohttp 3.14.
@pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")
async def test_oauth_v2_access(fake: FakeSlack) -> None:
    web = AsyncWebClient(base_url=fake.base_url)
    response = await web.oauth_v2_access(client_id="cid", client_secret="secret", code="c1")
    assert response["access_token"].startswith("xoxb-installed-")
    assert response["team"] == {"id": "T2", "name": "Other"}
    assert response["authed_user"]["id"] == "U9"
    assert response["enterprise"] is None and response["token_type"] == "bot"
    [call] = fake.calls_to("oauth.v2.access")
    assert call.params["client_id"] == "cid" and call.params["code"] == "c1"


async def test_response_url_sink(fake: FakeSlack) -> None:
    url = fake.response_url("r1")
    waiter = asyncio.create_task(fake.wait_for_response("r1"))
    response = await AsyncWebhookClient(url).send(text="Already decided", replace_original=False)
    assert response.status_code == 200
    [body] = await waiter
    assert body == {"text": "Already decided", "replace_original": False}


async def test_wait_for_times_out(fake: FakeSlack) -> None:
    with pytest.raises(TimeoutError):
        await fake.wait_for("chat.postMessage", 1, within=0.05)
