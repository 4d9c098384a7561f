"""Verify a decision's signed receipt offline, so that an agent can refuse to act on an
unsigned or mismatching approval (for example when the arguments it is about to run differ
from the ones a person approved).

A receipt is a compact JWS (EdDSA, Ed25519) the gateway signs as it writes a decision; it
arrives as `receipt` in GET's answer, in the webhook body and in MCP tool results. Its keys
are published at the gateway's `/.well-known/jwks.json` (`Client.jwks()`), old ones included.
Claims: `v`, `iss`, `iat`, `call_id`, `project`, `kind`, `fn`, `kwargs_sha256`, `decision`,
`comment_sha256` (and `response_sha256` for a human contact), `by`, `channel`, `decided_at`
and `event_sha256` (the audit event's digest). Hashes are lowercase hex SHA-256 of RFC 8785
canonical JSON (`canonical` below); the README's "Signed decision receipts" has the details.

Needs the `receipts` extra (`pip install hitl-gateway-client[receipts]`: PyJWT with
cryptography), imported only when a receipt is verified.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from hitl_client.errors import GatewayError

ALGORITHM = "EdDSA"
VERSION = 1


class ReceiptError(GatewayError):
    """The receipt is missing, altered, signed by an unknown key, or says something other
    than what was expected: `reason` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def verify(
    receipt: str | None,
    jwks: Mapping[str, Any],
    *,
    expected: Any = None,
    decision: str | None = None,
    project: str | None = None,
    fn: str | None = None,
) -> dict[str, Any]:
    """The receipt's claims once its signature checks against a key of `jwks`; ReceiptError
    otherwise. `expected`: a FunctionCall (its call_id, fn and the arguments to run with
    must be the signed ones) or the kwargs alone; `decision`: e.g. "approved"; `project`:
    the project the decision must be of (every project's receipts share one key); `fn`:
    the function, when `expected` is kwargs alone."""
    if not receipt:
        raise ReceiptError("unsigned: the decision carries no receipt")
    claims = _checked(receipt, jwks)
    if decision is not None and claims.get("decision") != decision:
        raise ReceiptError(f"the receipt says {claims.get('decision')!r}, not {decision!r}")
    for name, want in (("project", project), ("fn", fn)):
        if want is not None and claims.get(name) != want:
            raise ReceiptError(f"{name} differs: signed {claims.get(name)!r}, expected {want!r}")
    if expected is not None:
        _matches(claims, expected)
    return claims


def kwargs_hash(kwargs: Any) -> str:
    """`kwargs_sha256` as the gateway signs it."""
    return hashlib.sha256(canonical(kwargs).encode()).hexdigest()


def _checked(receipt: str, jwks: Mapping[str, Any]) -> dict[str, Any]:
    import jwt  # the `receipts` extra

    try:
        kid = jwt.get_unverified_header(receipt).get("kid")
    except jwt.PyJWTError as error:
        raise ReceiptError(f"not a compact JWS: {error}") from None
    found = [key for key in jwks.get("keys", []) if key.get("kid") == kid]
    if not found:
        raise ReceiptError(f"signed by key {kid!r}, which the JWKS does not hold")
    try:
        key = jwt.PyJWK(dict(found[0]), algorithm=ALGORITHM)
        # `iat` is when it was signed, not a validity window: an agent's clock behind the
        # gateway's must not refuse a genuine receipt (it has no exp or nbf to check).
        claims: dict[str, Any] = jwt.decode(
            receipt, key, algorithms=[ALGORITHM], options={"verify_iat": False}
        )
    except jwt.InvalidSignatureError:
        raise ReceiptError("bad signature: the payload or signature was altered") from None
    except jwt.PyJWTError as error:
        raise ReceiptError(f"cannot verify: {error}") from None
    if claims.get("v") != VERSION:
        raise ReceiptError(f"unknown receipt version {claims.get('v')!r}")
    return claims


def _matches(claims: dict[str, Any], expected: Any) -> None:
    if isinstance(expected, Mapping):
        kwargs: Any = dict(expected)
    else:  # a FunctionCall: the same call, and the arguments it runs with
        for name in ("call_id", "fn"):
            want = getattr(expected, name, None)
            if want is None and name == "fn":
                want = expected.spec.fn
            if claims.get(name) != want:
                raise ReceiptError(f"{name} differs: signed {claims.get(name)!r}, got {want!r}")
        kwargs = expected.arguments
    if claims.get("kwargs_sha256") != kwargs_hash(kwargs):
        raise ReceiptError("kwargs differ from the ones approved (kwargs_sha256 mismatch)")


# --- RFC 8785 canonical JSON (the gateway's gateway.store.canonical, in brief) ----------


def canonical(value: Any) -> str:
    """`value` as RFC 8785 canonical JSON: sorted members (by UTF-16 code units), no
    whitespace, ECMAScript number formatting; integers beyond 2**53 written exactly."""
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Mapping):
        members = sorted(
            value.items(), key=lambda item: str(item[0]).encode("utf-16-be", "surrogatepass")
        )
        return "{" + ",".join(f"{_string(k)}:{canonical(v)}" for k, v in members) + "}"
    if isinstance(value, list | tuple):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _string(text: str) -> str:
    # ensure_ascii off escapes only what RFC 8785 escapes; a lone surrogate stays \udxxx.
    out = json.dumps(text, ensure_ascii=False)
    return "".join(f"\\u{ord(c):04x}" if 0xD800 <= ord(c) <= 0xDFFF else c for c in out)


def _number(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError("NaN and Infinity are not JSON")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 2**53:
        return str(int(value))
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    all_digits = "".join(map(str, digit_tuple))
    digits, point = all_digits.rstrip("0"), len(all_digits) + exponent
    count = len(digits)
    if count <= point <= 21:
        return sign + digits + "0" * (point - count)
    if 0 < point <= 21:
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -6 < point <= 0:
        return sign + "0." + "0" * -point + digits
    mantissa = digits[0] + (f".{digits[1:]}" if count > 1 else "")
    return f"{sign}{mantissa}e{'+' if point - 1 >= 0 else '-'}{abs(point - 1)}"
