"""POST /email/inbound: an MTA pipe or a provider's inbound webhook feeds the reply pipeline."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.channels.email.helpers import (
    answers_sent,
    email_gateway,
    email_settings,
    reply,
    sent_for,
    status,
    to_alice,
)
from tests.factories import RequestFactory
from tests.helpers import events
from tests.services.inprocess import RunningGateway
from tests.services.smtp_sink import SmtpSink

SECRET = "inbound-secret"  # the helpers' EMAIL_INBOUND_SECRET


@pytest.fixture
async def gateway(tmp_path: Path, smtp_sink: SmtpSink) -> AsyncIterator[RunningGateway]:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as running:
        yield running


async def post_raw(
    gateway: RunningGateway, raw: bytes, secret: str | None = SECRET
) -> httpx.Response:
    headers = {"Content-Type": "message/rfc822"}
    if secret is not None:
        headers["Authorization"] = f"Bearer {secret}"
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=30) as client:
        return await client.post("/email/inbound", content=raw, headers=headers)


async def test_a_posted_reply_decides_and_a_second_post_is_a_duplicate(
    gateway: RunningGateway, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "posted", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "posted")
    answer = reply(sunk.message, "reject: not on a Friday")

    first = await post_raw(gateway, answer)
    again = await post_raw(gateway, answer)

    assert first.status_code == 200, first.text
    assert first.json()["result"] == "decided"
    assert again.status_code == 200, again.text
    assert again.json()["result"] == "duplicate"
    result = await status(gateway, "posted")
    assert result["approved"] is False
    assert result["comment"] == "not on a Friday"
    await answers_sent(gateway)
    audit = [e["type"] for e in (await events(gateway, "posted"))["events"]]
    assert audit.count("decided") == 1
    assert len(smtp_sink.messages) == 2  # the request and one confirmation


@pytest.mark.parametrize(
    ("secret", "expected"),
    [(None, 401), ("wrong-secret", 401), (SECRET[:-1], 401)],
    ids=["no-header", "wrong", "prefix"],
)
async def test_a_post_without_the_secret_is_refused_and_decides_nothing(
    gateway: RunningGateway,
    smtp_sink: SmtpSink,
    secret: str | None,
    expected: int,
    request_factory: RequestFactory,
) -> None:
    await request_factory(gateway, "forged", channel=to_alice(), settle=True)
    (sunk,) = sent_for(smtp_sink, "forged")

    response = await post_raw(gateway, reply(sunk.message, "approve"), secret=secret)

    assert response.status_code == expected, response.text
    assert "EMAIL_INBOUND_SECRET" in response.json()["detail"]
    assert (await status(gateway, "forged"))["approved"] is None


@pytest.mark.parametrize("body", [b"", b"approve", b"\x00\xff not mime at all"])
async def test_a_body_that_is_not_a_mime_message_is_a_clear_422(
    gateway: RunningGateway, body: bytes
) -> None:
    response = await post_raw(gateway, body)

    assert response.status_code == 422, response.text
    assert "raw MIME message" in str(response.json()["detail"])


async def test_without_a_secret_configured_the_endpoint_is_off(
    tmp_path: Path, smtp_sink: SmtpSink
) -> None:
    settings = email_settings(smtp_sink, email_inbound_secret=None)
    async with email_gateway(tmp_path, settings) as gateway:
        response = await post_raw(gateway, b"From: a@b.c\r\n\r\napprove\r\n")

    assert response.status_code == 404, response.text
    assert "EMAIL_INBOUND_SECRET" in response.json()["detail"]
