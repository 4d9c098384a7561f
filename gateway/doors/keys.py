"""The keys door (`gateway.seam.context.Keys`): a key per purpose, derived from
GATEWAY_SECRET_KEY, signed tokens under it, and the request links."""

from __future__ import annotations

from typing import Any

from gateway.core import Core
from gateway.errors import BadToken
from gateway.security import signed


class Signer:
    """Signed tokens under the key of a purpose; the key comes from `subkey`."""

    def subkey(self, purpose: str) -> bytes:
        raise NotImplementedError

    def sign(self, purpose: str, claims: dict[str, Any], ttl_seconds: float) -> str:
        return signed.sign(self.subkey(purpose), claims, ttl_seconds)

    def verify(self, purpose: str, token: str) -> dict[str, Any]:
        return signed.verify(self.subkey(purpose), token)

    def tag(self, purpose: str, value: str) -> str:
        return signed.tag(self.subkey(purpose), value)


class KeysDoor(Signer):
    def __init__(self, core: Core) -> None:
        self.core = core

    def __repr__(self) -> str:
        return "KeysDoor()"

    def subkey(self, purpose: str) -> bytes:
        return self.core.box.subkey(purpose)

    def link(self, rid: str, email: str | None = None) -> str | None:
        return self.core.link(rid, email)

    def link_email(self, rid: str, token: str) -> str:
        claims = signed.verify(self.core.link_key, token)
        if claims.get("r") != rid:
            raise BadToken("this link is for another request")
        return str(claims.get("e"))
