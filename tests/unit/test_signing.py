"""Standard Webhooks signatures (checked with the official package), keys and SecretBox."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from gateway.outbox.webhooks import USER_AGENT, new_message_id, signed_headers
from gateway.security.crypto import (
    SecretBox,
    hash_api_key,
    new_api_key,
    new_rid,
    new_webhook_secret,
    sign_webhook,
)

BODY = json.dumps(
    {"type": "function_call.completed", "event": {"call_id": "c-1"}, "is_test": False}
).encode()


def svix_as_webhook(headers: dict[str, str]) -> dict[str, str]:
    return {
        "webhook-" + name.removeprefix("svix-"): value
        for name, value in headers.items()
        if name.startswith("svix-")
    }


def webhook_only(headers: dict[str, str]) -> dict[str, str]:
    return {name: value for name, value in headers.items() if name.startswith("webhook-")}


@pytest.mark.parametrize("body", [BODY, b"{}", '{"msg": "caf\u00e9 \u2713"}'.encode()])
def test_signed_headers_verify_with_standardwebhooks(body: bytes) -> None:
    secret = new_webhook_secret()
    headers = signed_headers(secret, new_message_id(), body)
    assert Webhook(secret).verify(body, webhook_only(headers)) == json.loads(body)


def test_svix_headers_verify_when_renamed() -> None:
    secret = new_webhook_secret()
    headers = signed_headers(secret, "msg_abc", BODY)
    svix = svix_as_webhook(headers)
    assert set(svix) == {"webhook-id", "webhook-timestamp", "webhook-signature"}
    assert Webhook(secret).verify(BODY, svix) == json.loads(BODY)


def test_signed_headers_shape() -> None:
    before = int(time.time())
    headers = signed_headers(new_webhook_secret(), "msg_1", BODY)
    after = int(time.time())
    assert headers["content-type"] == "application/json"
    assert headers["user-agent"] == USER_AGENT
    for prefix in ("webhook", "svix"):
        assert headers[f"{prefix}-id"] == "msg_1"
        assert before <= int(headers[f"{prefix}-timestamp"]) <= after
        assert headers[f"{prefix}-signature"].startswith("v1,")
    assert headers["webhook-signature"] == headers["svix-signature"]
    assert headers["webhook-timestamp"] == headers["svix-timestamp"]


@pytest.mark.parametrize("rename", [webhook_only, svix_as_webhook])
def test_tampered_body_fails(rename: Callable[[dict[str, str]], dict[str, str]]) -> None:
    secret = new_webhook_secret()
    headers = signed_headers(secret, "msg_1", BODY)
    tampered = BODY.replace(b"c-1", b"c-2")
    assert tampered != BODY
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(tampered, rename(headers))


def test_other_secret_fails() -> None:
    headers = signed_headers(new_webhook_secret(), "msg_1", BODY)
    with pytest.raises(WebhookVerificationError):
        Webhook(new_webhook_secret()).verify(BODY, webhook_only(headers))


def test_changed_message_id_fails() -> None:
    secret = new_webhook_secret()
    headers = webhook_only(signed_headers(secret, "msg_1", BODY))
    headers["webhook-id"] = "msg_2"
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(BODY, headers)


def test_sign_webhook_matches_reference_signer() -> None:
    secret = new_webhook_secret()
    timestamp = int(time.time())
    ours = sign_webhook(secret, "msg_x", timestamp, BODY)
    theirs = Webhook(secret).sign("msg_x", datetime.fromtimestamp(timestamp, tz=UTC), BODY.decode())
    assert ours == theirs


def test_new_webhook_secret() -> None:
    secret = new_webhook_secret()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 24
    assert new_webhook_secret() != secret


def test_secret_box_round_trips() -> None:
    box = SecretBox("correct horse battery staple")
    secret = new_webhook_secret()
    sealed = box.seal(secret)
    assert sealed != secret
    assert secret not in sealed
    assert box.open(sealed) == secret
    assert SecretBox("correct horse battery staple").open(sealed) == secret


def test_secret_box_repr_hides_key() -> None:
    key = "super-secret-key-value"
    box = SecretBox(key)
    assert key not in repr(box)
    assert key not in str(box)
    assert "redacted" in repr(box)


def test_secret_box_with_another_key_cannot_open() -> None:
    sealed = SecretBox("key-one").seal("whsec_something")
    with pytest.raises(ValueError, match="GATEWAY_SECRET_KEY"):
        SecretBox("key-two").open(sealed)


def test_secret_box_rejects_garbage() -> None:
    with pytest.raises(ValueError, match="GATEWAY_SECRET_KEY"):
        SecretBox("k").open("not-a-token")


def test_hash_api_key_is_stable_and_not_the_key() -> None:
    key = new_api_key()
    assert key.startswith("hlgw_")
    digest = hash_api_key(key)
    assert digest == hash_api_key(key)
    assert digest != key
    assert key not in digest
    assert re.fullmatch(r"[0-9a-f]{64}", digest)
    assert hash_api_key(key + "x") != digest


def test_new_rid_is_long_url_safe_and_unique() -> None:
    rids = [new_rid() for _ in range(1000)]
    assert len(set(rids)) == len(rids)
    for rid in rids:
        assert len(rid) >= 16  # 16 URL-safe characters carry 96 bits
        assert re.fullmatch(r"[A-Za-z0-9_-]+", rid)
