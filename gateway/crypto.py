"""Keys, hashes, encryption at rest and Standard Webhooks signatures."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

from cryptography.fernet import Fernet, InvalidToken

API_KEY_PREFIX = "hlgw_"
WEBHOOK_SECRET_PREFIX = "whsec_"


def new_rid() -> str:
    """An internal request id: 128 random bits, URL-safe, never the client's call_id."""
    return secrets.token_urlsafe(16)


def new_api_key() -> str:
    return API_KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(key: str) -> str:
    # 256-bit random keys need no slow KDF; a plain digest keeps lookups indexed.
    return hashlib.sha256(key.encode()).hexdigest()


def new_webhook_secret() -> str:
    return WEBHOOK_SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


class SecretBox:
    """Encrypts secrets at rest with a key derived from GATEWAY_SECRET_KEY."""

    def __init__(self, secret_key: str) -> None:
        digest = hashlib.sha256(b"gateway-secret-box:" + secret_key.encode()).digest()
        self._fernet = Fernet(base64.urlsafe_b64encode(digest))
        self._root = hashlib.sha256(b"gateway-subkeys:" + secret_key.encode()).digest()

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
                "cannot decrypt a stored secret: was GATEWAY_SECRET_KEY changed?"
            ) from None


def sign_webhook(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` value of the Standard Webhooks spec (v1, HMAC-SHA256)."""
    key = base64.b64decode(secret.removeprefix(WEBHOOK_SECRET_PREFIX))
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(key, signed, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()
