"""Signed decision receipts: each decision carries a compact JWS (EdDSA, Ed25519) that an
agent or an auditor verifies offline against the gateway's JWKS (`/.well-known/jwks.json`),
without trusting its database. `hitl_client.receipts.verify` is the verifying side.

The receipt is signed in the transaction that writes the decision, so a decision never
commits without it. Its header names the key (`kid`, the key's RFC 7638 thumbprint); its
claims (version 1):
- `v`: 1; `iss`: "hitl-gateway"; `iat`: when it was signed (Unix seconds);
- `call_id`, `project` (the project's name), `kind` (function_call, human_contact), `fn`;
- `kwargs_sha256`: sha256 of the RFC 8785 canonical JSON of the arguments as approved (the
  approver's edited ones, when they edited them; null for a human contact);
- `decision`: the request's status (approved, rejected, responded, expired);
- `comment_sha256`: of the canonical JSON of the comment (a JSON string, or null);
  `response_sha256` likewise for a human contact's answer;
- `by`: who decided (`status.user_info`, a person, a rule or a standing grant); `channel`:
  where (`user_info.channel`); `decided_at`: `status.responded_at` (ISO 8601);
- `event_sha256`: the digest of the audit event that recorded the decision
  (`gateway.store.audit`), which names its place in the audit chain.
Hashes are lowercase hex SHA-256 over `gateway.store.canonical` (RFC 8785).

Keys: the newest unretired key signs; the first is made on first use. `gateway receipts
rotate` retires it and makes a new one; retired keys stay in the JWKS, so old receipts still
verify. Private keys are stored sealed (`SecretBox`) and never leave the gateway.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

from gateway.lifecycle import Kind
from gateway.security.crypto import SecretBox
from gateway.store import Tx, utcnow
from gateway.store import receipts as receipt_store
from gateway.store.canonical import canonical, sha256_hex
from gateway.store.receipts import KeyRow
from gateway.store.rows import RequestRow, changed
from gateway.wire.output import iso

VERSION = 1
ISSUER = "hitl-gateway"
ALGORITHM = "EdDSA"
TYPE = "hitl-receipt+jwt"
PUBLIC_MEMBERS = ("kty", "crv", "x")  # all an Ed25519 public JWK holds (RFC 8037)
_UNSEALED: dict[str, PrivateKeyTypes] = {}  # by kid: signing keys, in this process only


def claims(row: RequestRow, project: str, event_digest: str | None) -> dict[str, Any]:
    """What a receipt says about the decided `row` (see the module's docstring)."""
    who = row.user_info or {}
    function_call = row.kind == Kind.FUNCTION_CALL
    said: dict[str, Any] = {
        "v": VERSION,
        "iss": ISSUER,
        "iat": int(utcnow().timestamp()),
        "call_id": row.call_id,
        "project": project,
        "kind": row.kind,
        "fn": row.fn,
        "kwargs_sha256": sha256_hex(approved_kwargs(row)) if function_call else None,
        "decision": row.status,
        "comment_sha256": sha256_hex(row.comment),
        "by": who,
        "channel": who.get("channel"),
        "decided_at": iso(row.responded_at),
        "event_sha256": event_digest,
    }
    if not function_call:
        said["response_sha256"] = sha256_hex(row.response)
    return said


def approved_kwargs(row: RequestRow) -> Any:
    """The arguments as approved: the approver's edit, else the agent's own."""
    if row.updated_kwargs_json is not None:
        return json.loads(row.updated_kwargs_json)
    return json.loads(row.spec_json).get("kwargs")


def sign(tx: Tx, box: SecretBox, row: RequestRow, event_digest: str | None) -> RequestRow:
    """Sign the decision on `row` (just written in `tx`) and store the receipt with it;
    returns the row carrying it."""
    key = receipt_store.current_key(tx) or _new_key(tx, box)
    private = _private_key(box, key)
    said = claims(row, receipt_store.project_name(tx, row.project_id), event_digest)
    headers = {"kid": key.kid, "typ": TYPE}
    receipt = jwt.encode(said, private, algorithm=ALGORITHM, headers=headers)  # type: ignore[arg-type]
    receipt_store.set_receipt(tx, row.rid, receipt)
    return changed(row, receipt=receipt)


def _private_key(box: SecretBox, key: KeyRow) -> PrivateKeyTypes:
    """The key, unsealed once per process: unsealing costs as much as signing, on the
    writer's thread. The kid is the key's thumbprint, so a cached kid is that very key."""
    private = _UNSEALED.get(key.kid)
    if private is None:
        private = serialization.load_pem_private_key(box.open(key.sealed_private).encode(), None)
        _UNSEALED[key.kid] = private
    return private


def unopenable(box: SecretBox, key: KeyRow | None) -> str | None:
    """Why the signing key does not open with GATEWAY_SECRET_KEY, or None: checked at start,
    since every decision signs (without it each fails, and expiry timers with them)."""
    if key is None:
        return None
    try:
        box.open(key.sealed_private)
    except ValueError:
        return (
            f"the receipt signing key {key.kid} does not open with GATEWAY_SECRET_KEY: was it "
            "changed? List the earlier key in GATEWAY_PREVIOUS_SECRET_KEYS, or no decision "
            "can be written"
        )
    return None


def rotate(tx: Tx, box: SecretBox) -> KeyRow:
    """Retire the signing key (it stays public) and make the one that signs from now on."""
    receipt_store.retire_keys(tx, utcnow())
    return _new_key(tx, box)


def jwks(keys: list[KeyRow]) -> dict[str, Any]:
    """The public keys as a JWK Set: public members only, never the sealed private part."""
    return {"keys": [_public(key) for key in keys]}


def _public(key: KeyRow) -> dict[str, Any]:
    stored = json.loads(key.public_jwk)
    public = {name: stored[name] for name in PUBLIC_MEMBERS}
    return public | {"kid": key.kid, "use": "sig", "alg": ALGORITHM}


def _new_key(tx: Tx, box: SecretBox) -> KeyRow:
    private = Ed25519PrivateKey.generate()
    raw = private.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    public = {"crv": "Ed25519", "kty": "OKP", "x": _b64url(raw)}
    pem = private.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    key = KeyRow(
        kid=_thumbprint(public),
        public_jwk=json.dumps(public),
        sealed_private=box.seal(pem.decode()),
        created_at=utcnow(),
    )
    receipt_store.add_key(tx, key)
    return key


def _thumbprint(public: dict[str, str]) -> str:
    """RFC 7638: base64url SHA-256 of the required members' canonical JSON."""
    return _b64url(hashlib.sha256(canonical(public).encode()).digest())


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()
