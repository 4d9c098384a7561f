"""Per-request reply addresses (`local+<rid>.<mac>@domain`) and the thread ids of a reply.

The address is a bearer capability, so the rid carries an HMAC; the caller still checks that
From is the approver and that DMARC passed. Everything after `+` is lower-case base32,
because some MTAs fold the case of local parts and rids (`secrets.token_urlsafe`) are
mixed-case. A 22-character rid makes a 50-character token, so the base local part may be at
most 13 characters (RFC 5321 §4.5.3.1.1: a local part holds at most 64).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from email.message import Message
from email.utils import getaddresses

LOCAL_PART_LIMIT = 64
MAC_CHARS = 13  # 65 bits of base32; a forger must guess it online, one email per try
RID_HEADERS = ("Delivered-To", "X-Original-To", "To", "Cc")
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")


def _b32(data: bytes) -> str:
    return base64.b32encode(data).decode().rstrip("=").lower()


def _mac(rid: str, key: bytes) -> str:
    digest = hmac.new(key, b"email-reply:" + rid.encode(), hashlib.sha256).digest()
    return _b32(digest)[:MAC_CHARS]


def _split(address: str) -> tuple[str, str]:
    local, at, domain = address.strip().strip("<>").rpartition("@")
    return (local, domain) if at and local and domain else ("", "")


def _token(rid: str, key: bytes) -> str:
    return f"{_b32(rid.encode())}.{_mac(rid, key)}"


def _rid_from_token(token: str, key: bytes) -> str | None:
    encoded, dot, mac = token.lower().partition(".")
    rid = _decode_rid(encoded) if dot else None
    if rid is None or not hmac.compare_digest(mac.encode(), _mac(rid, key).encode()):
        return None
    return rid


def message_id(rid: str, key: bytes, domain: str, *, stable: str | None = None) -> str:
    """A Message-ID that names its request: `<unique.<rid>.<mac>@domain>`, so a reply that
    lost its reply address still finds the request through In-Reply-To. With `stable`, the
    unique part is derived from it: a message sent again (a retry) keeps its Message-ID."""
    if stable is None:
        unique = secrets.token_hex(8)
    else:
        unique = hmac.new(key, stable.encode(), hashlib.sha256).hexdigest()[:16]
    return f"<{unique}.{_token(rid, key)}@{domain}>"


def rid_from_thread(message: Message, key: bytes) -> str | None:
    """The first verified rid among the Message-IDs this reply answers."""
    for value in message_ids_in_thread(message):
        local = value.strip("<>").rpartition("@")[0]
        rid = _rid_from_token(local.partition(".")[2], key)
        if rid is not None:
            return rid
    return None


def reply_address(base: str, rid: str, key: bytes) -> str:
    """The address a reply to request `rid` goes to, e.g. `approvals+<rid>.<mac>@example.com`.

    Raises:
        ValueError: `base` is not an address, or the local part would exceed 64 characters.
    """
    local, domain = _split(base)
    if not local or "+" in local:
        raise ValueError(f"not a base address without a +detail: {base!r}")
    token = f"{local}+{_token(rid, key)}"
    if len(token) > LOCAL_PART_LIMIT:
        raise ValueError(f"reply local part over {LOCAL_PART_LIMIT} characters; shorten {local!r}")
    return f"{token}@{domain}"


def _decode_rid(encoded: str) -> str | None:
    try:
        padded = encoded.upper() + "=" * (-len(encoded) % 8)
        return base64.b32decode(padded).decode()
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None


def rid_from_address(address: str, base: str, key: bytes) -> str | None:
    """The rid in a reply address made by `reply_address`, or None unless its MAC verifies."""
    local, domain = _split(address)
    base_local, base_domain = _split(base)
    if not base_local or domain.lower() != base_domain.lower():
        return None
    prefix, plus, detail = local.lower().partition("+")
    if not plus or prefix != base_local.lower():
        return None
    return _rid_from_token(detail, key)


def _raw(message: Message, name: str) -> list[str]:
    """Header values as received, unfolded: parsing them (policy.default) can raise."""
    values = [str(v) for k, v in message.raw_items() if k.lower() == name.lower()]
    return [value.replace("\r", "").replace("\n", "") for value in values]


def rid_from_headers(message: Message, base: str, key: bytes) -> str | None:
    """The first verified rid among the recipients, envelope headers first.

    Delivered-To comes first: a reply sent to two requests is delivered twice, and each copy
    must land on its own request, not twice on whichever To names first. A lenient address
    parse is fine here: whatever it yields still has to carry a valid MAC.
    """
    for name in RID_HEADERS:
        for _, address in getaddresses(_raw(message, name)):
            rid = rid_from_address(address, base, key)
            if rid is not None:
                return rid
    return None


def message_ids_in_thread(message: Message) -> list[str]:
    """Message-IDs (with their angle brackets) this reply answers: In-Reply-To first, then
    References from the newest ancestor back, without duplicates."""
    in_reply_to = _MESSAGE_ID.findall(" ".join(_raw(message, "In-Reply-To")))
    references = _MESSAGE_ID.findall(" ".join(_raw(message, "References")))
    return list(dict.fromkeys(in_reply_to + references[::-1]))
