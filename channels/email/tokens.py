"""Per-request, per-recipient reply addresses (`local+<rid>.<mac>@domain`) and the thread ids
of a reply.

The address is a bearer capability, so the rid carries an HMAC over the rid and the address
the message was sent to: a reply answers only for the recipient its token was made for
(`inbound._voter`), and one recipient's token is worth nothing to another. The MAC is
recomputed for each candidate address (`Token.made_for`), so the address costs no room in
the local part. Tokens made
before they were bound to an address verify with no address (`made_for(key, None)`); the
inbox takes a reply carrying one only when EMAIL_REQUIRE_DMARC vouched for its From.

Everything after `+` is lower-case base32, because some MTAs fold the case of local parts
and rids (`secrets.token_urlsafe`) are mixed-case. A 22-character rid makes a 50-character
token, so the base local part may be at most 13 characters (RFC 5321 §4.5.3.1.1: a local
part holds at most 64).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from email.message import Message
from email.utils import getaddresses

LOCAL_PART_LIMIT = 64
MAC_CHARS = 13  # 65 bits of base32; a forger must guess it online, one email per try
RID_HEADERS = ("Delivered-To", "X-Original-To", "To", "Cc")
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
_RID = re.compile(r"[A-Za-z0-9_-]{1,32}")  # `gateway.security.crypto.new_rid`


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode().rstrip("=").lower()


def _mac(rid: str, key: bytes, to: str | None = None) -> str:
    signed = b"email-reply:" + rid.encode()
    if to is not None:
        signed += b"\x00" + to.strip().lower().encode()
    return _b32(hmac.new(key, signed, hashlib.sha256).digest())[:MAC_CHARS]


@dataclass(frozen=True)
class Token:
    """A token as a reply carries it: a rid and a MAC, not yet verified."""

    rid: str
    mac: str

    def made_for(self, key: bytes, to: str | None) -> bool:
        """Whether this token was made for a message to `to` (None: an unbound, older one)."""
        return hmac.compare_digest(self.mac.encode(), _mac(self.rid, key, to).encode())


def _split(address: str) -> tuple[str, str]:
    local, at, domain = address.strip().strip("<>").rpartition("@")
    return (local, domain) if at and local and domain else ("", "")


def _token(rid: str, key: bytes, to: str | None) -> str:
    return f"{_b32(rid.encode())}.{_mac(rid, key, to)}"


def _parse(token: str) -> Token | None:
    encoded, dot, mac = token.lower().partition(".")
    rid = _decode_rid(encoded) if dot else None
    # Only what a gateway rid can be reaches the database (a NUL would be a 500 there).
    return Token(rid, mac) if rid is not None and _RID.fullmatch(rid) else None


def message_id(
    rid: str, key: bytes, domain: str, *, to: str | None = None, stable: str | None = None
) -> str:
    """A Message-ID that names its request and recipient: `<unique.<rid>.<mac>@domain>`, so
    a reply that lost its reply address still finds the request through In-Reply-To. With
    `stable`, the unique part is derived from it: a message sent again keeps its Message-ID."""
    if stable is None:
        unique = secrets.token_hex(8)
    else:
        unique = hmac.new(key, stable.encode(), hashlib.sha256).hexdigest()[:16]
    return f"<{unique}.{_token(rid, key, to)}@{domain}>"


def token_in_message_id(value: str) -> Token | None:
    """The token of a Message-ID made by `message_id` (unverified)."""
    local = value.strip().strip("<>").rpartition("@")[0]
    return _parse(local.partition(".")[2])


def tokens_in_thread(message: Message) -> list[Token]:
    """The tokens of the Message-IDs this reply answers, newest first (unverified)."""
    found = [token_in_message_id(value) for value in message_ids_in_thread(message)]
    return [token for token in found if token is not None]


def rid_from_thread(message: Message, key: bytes, to: str | None = None) -> str | None:
    """The first rid among the Message-IDs this reply answers made for `to`."""
    return next((t.rid for t in tokens_in_thread(message) if t.made_for(key, to)), None)


def reply_address(base: str, rid: str, key: bytes, to: str | None = None) -> str:
    """The address a reply to request `rid`, sent to `to`, goes to, e.g.
    `approvals+<rid>.<mac>@example.com`.

    Raises:
        ValueError: `base` is not an address, or the local part would exceed 64 characters.
    """
    local, domain = _split(base)
    if not local or "+" in local:
        raise ValueError(f"not a base address without a +detail: {base!r}")
    token = f"{local}+{_token(rid, key, to)}"
    if len(token) > LOCAL_PART_LIMIT:
        raise ValueError(f"reply local part over {LOCAL_PART_LIMIT} characters; shorten {local!r}")
    return f"{token}@{domain}"


def _decode_rid(encoded: str) -> str | None:
    try:
        padded = encoded.upper() + "=" * (-len(encoded) % 8)
        return base64.b32decode(padded).decode()
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None


def token_in_address(address: str, base: str) -> Token | None:
    """The token of a reply address made by `reply_address` (unverified)."""
    local, domain = _split(address)
    base_local, base_domain = _split(base)
    if not base_local or domain.lower() != base_domain.lower():
        return None
    prefix, plus, detail = local.lower().partition("+")
    if not plus or prefix != base_local.lower():
        return None
    return _parse(detail)


def rid_from_address(address: str, base: str, key: bytes, to: str | None = None) -> str | None:
    """The rid in a reply address made for `to`, or None unless its MAC verifies."""
    token = token_in_address(address, base)
    return token.rid if token is not None and token.made_for(key, to) else None


def _raw(message: Message, name: str) -> list[str]:
    """Header values as received, unfolded: parsing them (policy.default) can raise."""
    values = [str(v) for k, v in message.raw_items() if k.lower() == name.lower()]
    return [value.replace("\r", "").replace("\n", "") for value in values]


def tokens_in_headers(message: Message, base: str) -> list[Token]:
    """The tokens among the recipients, envelope headers first (unverified).

    Delivered-To comes first: a reply sent to two requests is delivered twice, and each copy
    must land on its own request, not twice on whichever To names first. A lenient address
    parse is fine here: whatever it yields still has to carry a valid MAC.
    """
    found = []
    for name in RID_HEADERS:
        for _, address in getaddresses(_raw(message, name)):
            token = token_in_address(address, base)
            if token is not None:
                found.append(token)
    return found


def rid_from_headers(message: Message, base: str, key: bytes, to: str | None = None) -> str | None:
    """The first rid among the recipients whose token was made for `to`."""
    return next((t.rid for t in tokens_in_headers(message, base) if t.made_for(key, to)), None)


def message_ids_in_thread(message: Message) -> list[str]:
    """Message-IDs (with their angle brackets) this reply answers: In-Reply-To first, then
    References from the newest ancestor back, without duplicates."""
    in_reply_to = _MESSAGE_ID.findall(" ".join(_raw(message, "In-Reply-To")))
    references = _MESSAGE_ID.findall(" ".join(_raw(message, "References")))
    return list(dict.fromkeys(in_reply_to + references[::-1]))
