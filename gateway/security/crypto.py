"""Keys, hashes, encryption at rest and Standard Webhooks signatures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from cryptography.fernet import Fernet, InvalidToken, MultiFernet

if TYPE_CHECKING:
    from gateway.settings import Settings

API_KEY_PREFIX = "hlgw_"
WEBHOOK_SECRET_PREFIX = "whsec_"


def new_rid() -> str:
    """An internal request id, URL-safe, never the client's call_id: the time in
    milliseconds, then 80 random bits. Ids made close together share their first characters,
    so a batch's inserts land on a few index pages instead of one random page each."""
    stamp = time.time_ns() // 1_000_000
    raw = stamp.to_bytes(6, "big") + secrets.token_bytes(10)
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    # 256-bit random keys need no slow KDF; a plain digest keeps lookups indexed.
    return hashlib.sha256(key.encode()).hexdigest()


def new_webhook_secret() -> str:
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class SecretBox:
    """Encrypts secrets at rest with a key derived from GATEWAY_SECRET_KEY.

    Earlier keys (GATEWAY_PREVIOUS_SECRET_KEYS) still open what they sealed, so a rotation keeps
    the stored webhook secrets; signing keys (`subkey`) come from the current key alone, so
    sessions and links signed before a rotation end with it.
    """

    def __init__(self, secret_key: str, previous: Sequence[str] = ()) -> None:
        keys = [secret_key, *(key for key in previous if key and key != secret_key)]
        self._fernet = MultiFernet([Fernet(_fernet_key(key)) for key in keys])  # seals with [0]
        self._root = hashlib.sha256(b"gateway-subkeys:" + secret_key.encode()).digest()

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretBox:
        """The box of GATEWAY_SECRET_KEY, opening what GATEWAY_PREVIOUS_SECRET_KEYS sealed."""
        listed = settings.previous_secret_keys
        previous = listed.get_secret_value().split(",") if listed is not None else []
        return cls(settings.secret_key_value(), [key.strip() for key in previous if key.strip()])

    def __repr__(self) -> str:
        return "SecretBox(<redacted>)"

    def subkey(self, purpose: str) -> bytes:
        """A key for one purpose (e.g. signing email reply tokens), independent of the others."""
        return hmac.new(self._root, purpose.encode(), hashlib.sha256).digest()

    def seal(self, plaintext: str) -> str:
        return self._fernet.encrypt(plaintext.encode()).decode()

    def open(self, token: str) -> str:
        try:
            return self._fernet.decrypt(token.encode()).decode()
        except InvalidToken:
            raise ValueError(
                "cannot decrypt a stored secret: was GATEWAY_SECRET_KEY changed? "
                "List the earlier key in GATEWAY_PREVIOUS_SECRET_KEYS"
            ) from None


def _fernet_key(secret_key: str) -> bytes:
    digest = hashlib.sha256(b"gateway-secret-box:" + secret_key.encode()).digest()
    return base64.urlsafe_b64encode(digest)


def sign_webhook(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value of the Standard Webhooks spec (v1, HMAC-SHA256)."""
    key = base64.b64decode(secret.removeprefix(WEBHOOK_SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()
