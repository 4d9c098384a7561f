"""`hitl_client.receipts` offline, against a key of the test's own: a receipt signed by a
clock ahead of the agent's verifies, one of another project or function is refused, and the
client's canonical JSON hashes as the gateway's does on the values where they could part."""

from __future__ import annotations

import base64
import time
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from gateway.store import canonical as gateway_json
from hitl_client import receipts
from hitl_client.receipts import ReceiptError, verify

KWARGS = {"to": "ops@example.com"}
PRIVATE = Ed25519PrivateKey.generate()


def jwks() -> dict[str, Any]:
    raw = PRIVATE.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    x = base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
    return {"keys": [{"kty": "OKP", "crv": "Ed25519", "x": x, "kid": "own", "alg": "EdDSA"}]}


def signed(**changes: Any) -> str:
    claims = {
        "v": 1,
        "iat": int(time.time()),
        "call_id": "c1",
        "project": "default",
        "kind": "function_call",
        "fn": "send",
        "kwargs_sha256": receipts.kwargs_hash(KWARGS),
        "decision": "approved",
    }
    return jwt.encode(claims | changes, PRIVATE, algorithm="EdDSA", headers={"kid": "own"})


def test_a_receipt_signed_by_a_clock_ahead_of_the_agents_verifies() -> None:
    ahead = signed(iat=int(time.time()) + 60)
    claims = verify(ahead, jwks(), expected=KWARGS, decision="approved", project="default")
    assert claims["call_id"] == "c1"


def test_another_projects_or_functions_receipt_is_refused() -> None:
    receipt = signed(project="lenient")
    with pytest.raises(ReceiptError, match="project differs: signed 'lenient', expected 'default'"):
        verify(receipt, jwks(), expected=KWARGS, project="default")
    with pytest.raises(ReceiptError, match="fn differs: signed 'send', expected 'drop_table'"):
        verify(receipt, jwks(), expected=KWARGS, fn="drop_table")
    assert verify(receipt, jwks(), expected=KWARGS, project="lenient", fn="send")


TRICKY: list[Any] = [
    1.0,
    1e21,
    1e-7,
    -0.0,
    2**60,
    2**53 + 1,
    -(2**53) - 1,
    0.1 + 0.2,
    123456789012345680000.0,
    5e-324,
    {"\U0001f600": 1, "\ufb01": 2, "a": 3, "": 4, "\u00e9": 5},  # non-BMP sorts before U+FB01
    "lone \ud800 surrogate",
    {chr(0xDC00): "low", chr(0xD800): "high"},  # sorted by code unit, not as typed
    'tab\t nul\x00 \u2028 \x7f quote" back\\',
    {"outer": {"z": [1, {"b": None, "a": True}], "a": [False, -1.5e-9, "x"]}},
]


@pytest.mark.parametrize("value", TRICKY, ids=repr)
def test_the_clients_canonical_json_is_the_gateways(value: Any) -> None:
    assert receipts.canonical(value) == gateway_json.canonical(value)


def test_canonical_json_is_rfc_8785_on_the_tricky_values() -> None:
    said = [receipts.canonical(value) for value in (1.0, 1e21, 1e-7, -0.0, 2**60, 2**53 + 1)]
    assert said == ["1", "1e+21", "1e-7", "0", "1152921504606846976", "9007199254740993"]
    assert receipts.canonical({"\ufb01": 2, "\U0001f600": 1}) == '{"\U0001f600":1,"\ufb01":2}'
    assert receipts.canonical("\ud800") == '"\\ud800"'
