"""Rotating GATEWAY_SECRET_KEY: what the old key sealed still opens; what it signed does not
verify under the new one."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.security import signed
from gateway.security.crypto import SecretBox, new_webhook_secret
from gateway.settings import Settings


def settings(**values: Any) -> Settings:
    return Settings(_env_file=None, **values)


def test_secrets_sealed_under_an_earlier_key_still_open() -> None:
    secret = new_webhook_secret()
    oldest = SecretBox("key-one").seal(secret)
    old = SecretBox("key-two").seal(secret)

    box = SecretBox.from_settings(
        settings(secret_key="key-three", previous_secret_keys=" key-two , ,key-one")
    )
    assert box.open(old) == secret
    assert box.open(oldest) == secret
    # New seals use the current key: they open once the earlier keys are dropped.
    assert SecretBox("key-three").open(box.seal(secret)) == secret
    with pytest.raises(ValueError, match="GATEWAY_PREVIOUS_SECRET_KEYS"):
        SecretBox("key-two").open(box.seal(secret))


def test_without_the_earlier_key_a_stored_secret_does_not_open() -> None:
    sealed = SecretBox("key-one").seal("whsec_something")
    box = SecretBox.from_settings(settings(secret_key="key-two"))
    with pytest.raises(ValueError, match="GATEWAY_PREVIOUS_SECRET_KEYS"):
        box.open(sealed)


def test_signing_keys_come_from_the_current_key_only() -> None:
    before = SecretBox.from_settings(settings(secret_key="key-one"))
    after = SecretBox.from_settings(settings(secret_key="key-two", previous_secret_keys="key-one"))
    assert after.subkey("console-session") == SecretBox("key-two").subkey("console-session")
    assert after.subkey("console-session") != before.subkey("console-session")
    cookie = signed.sign(before.subkey("console-session"), {"s": "a-session"}, 60)
    with pytest.raises(signed.BadToken):
        signed.verify(after.subkey("console-session"), cookie)


def test_the_box_never_shows_a_key() -> None:
    box = SecretBox.from_settings(settings(secret_key="current-k", previous_secret_keys="old-k"))
    assert "current-k" not in repr(box) and "old-k" not in repr(box)
