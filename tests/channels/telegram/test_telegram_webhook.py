"""Webhook mode: the gateway registers `/telegram/<secret path>` with setWebhook and its secret
token, and takes updates there as Telegram posts them. An update without the secret token
is refused (401) and decides nothing; one posted again decides and edits once."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from channels.telegram.updates import ALLOWED_UPDATES
from gateway.settings import Settings
from tests.channels.telegram.helpers import (
    ALICE,
    PUBLIC_URL,
    TO_OPS,
    WEBHOOK_SECRET,
    channel_of,
    data_of,
    gateway_with_bot,
    get,
    post_update,
    posted_message,
    webhook_mode,
)
from tests.factories import RequestFactory
from tests.fakes.telegram import FakeTelegram
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway


@pytest.fixture
async def gateway(settings: Settings, fake: FakeTelegram) -> AsyncIterator[RunningGateway]:
    async with gateway_with_bot(settings, fake, **webhook_mode()) as running:
        yield running


async def test_the_webhook_is_registered_with_its_secret_token(
    gateway: RunningGateway, fake: FakeTelegram
) -> None:
    path = channel_of(gateway).settings.webhook_path
    assert path is not None and path.startswith("/telegram/") and WEBHOOK_SECRET not in path
    assert fake.webhook == {
        "url": f"{PUBLIC_URL}{path}",
        "secret_token": WEBHOOK_SECRET,
        "allowed_updates": list(ALLOWED_UPDATES),
    }
    assert not fake.calls_to("getUpdates")  # no polling beside it


async def test_a_click_posted_to_the_webhook_decides(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "hook-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "hook-1")
    update = fake.callback_update(message, data_of(message, "gw:approve:"), people[ALICE])
    response = await post_update(gateway, update)
    assert response.status_code == 200
    assert (await get(gateway, "hook-1"))["status"]["user_info"]["user_id"] == str(ALICE)
    await eventually(lambda: outbox_idle(gateway))
    assert "reply_markup" not in fake.current(message)


async def test_an_update_without_the_secret_token_is_refused_and_decides_nothing(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "forged-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "forged-1")
    update = fake.callback_update(message, data_of(message, "gw:approve:"), people[ALICE])
    for secret in ("wrong-secret-token-0123456789", "", None):
        assert (await post_update(gateway, update, secret=secret)).status_code == 401
    wrong_path = await post_update(gateway, update, path="/telegram/" + "0" * 32)
    assert wrong_path.status_code == 404
    assert (await get(gateway, "forged-1"))["status"]["approved"] is None
    assert not fake.calls_to("answerCallbackQuery")


async def test_an_update_posted_again_decides_and_edits_once(
    gateway: RunningGateway,
    fake: FakeTelegram,
    people: dict[int, Any],
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "again-1", channel=TO_OPS, settle=True)
    message = posted_message(fake, "again-1")
    update = fake.callback_update(message, data_of(message, "gw:approve:"), people[ALICE])
    for _ in range(2):  # Telegram posts it again when it missed our answer
        assert (await post_update(gateway, update)).status_code == 200
    await eventually(lambda: outbox_idle(gateway))
    history = (await events(gateway, "again-1"))["events"]
    assert [e["type"] for e in history].count("decided") == 1
    assert len(fake.calls_to("answerCallbackQuery")) == 1
    assert len(fake.calls_to("editMessageText")) == 1


async def test_a_body_that_is_no_update_is_a_400(gateway: RunningGateway) -> None:
    assert (await post_update(gateway, {"no": "update"})).status_code == 400
