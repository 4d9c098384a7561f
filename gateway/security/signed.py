"""Signed, expiring tokens: console session cookies and request links (`/r/<rid>?t=...`).

A token is `<base64url JSON>.<base64url HMAC-SHA256>`; the JSON carries its expiry (`x`,
Unix seconds). Readable by anyone, forgeable by no one without the key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

from gateway.errors import BadToken

__all__ = ["BadToken", "sign", "tag", "verify"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, body: str) -> str:
    return _b64(hmac.new(key, body.encode(), hashlib.sha256).digest()[:18])


def sign(key: bytes, claims: dict[str, Any], ttl_seconds: float) -> str:
    body = _b64(json.dumps(claims | {"x": int(time.time() + ttl_seconds)}).encode())
    return f"{body}.{_mac(key, body)}"


def verify(key: bytes, token: str) -> dict[str, Any]:
    """The claims of a genuine, unexpired token; raises BadToken otherwise."""
    body, _, mac = token.partition(".")
    if not body or not hmac.compare_digest(mac.encode(), _mac(key, body).encode()):
        raise BadToken("this link or session is not valid")
    try:
        claims: dict[str, Any] = json.loads(_unb64(body))
    except ValueError:
        raise BadToken("this link or session is not valid") from None
    if not isinstance(claims, dict) or int(claims.get("x", 0)) < time.time():
        raise BadToken("this link or session has expired")
    return claims


def tag(key: bytes, value: str) -> str:
    """A short MAC of one value (the CSRF token of a session)."""
    return _mac(key, value)
