"""The fingerprint that makes a create with the same call_id "the same body again"."""

from __future__ import annotations

import hashlib

from gateway.intake import fingerprint
from gateway.lifecycle import Kind
from gateway.store import dumps


def test_the_create_fingerprint_is_the_json_of_the_body_it_always_was() -> None:
    """Stored body hashes stay valid: the fast form equals the hash of the whole dict."""
    spec = {"fn": "f", "kwargs": {"a": [1, "é", None]}, "channel": None, "state": {"x": 1}}
    secrets = {"slack_bot_token": "xoxb-1"}
    whole = dumps({"kind": Kind.FUNCTION_CALL, "run_id": "r", "spec": spec, "secrets": secrets})
    expected = hashlib.sha256(whole.encode()).hexdigest()
    assert fingerprint(Kind.FUNCTION_CALL, "r", dumps(spec), secrets) == expected


def test_any_difference_changes_the_fingerprint() -> None:
    base = fingerprint(Kind.FUNCTION_CALL, "r", dumps({"fn": "f"}), {})
    assert fingerprint(Kind.HUMAN_CONTACT, "r", dumps({"fn": "f"}), {}) != base
    assert fingerprint(Kind.FUNCTION_CALL, "r2", dumps({"fn": "f"}), {}) != base
    assert fingerprint(Kind.FUNCTION_CALL, "r", dumps({"fn": "g"}), {}) != base
    assert (
        fingerprint(Kind.FUNCTION_CALL, "r", dumps({"fn": "f"}), {"slack_bot_token": "t"}) != base
    )
