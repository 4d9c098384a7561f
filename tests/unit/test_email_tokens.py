"""Per-request reply addresses: only an address this gateway minted, unaltered, yields a rid."""

from __future__ import annotations

import email
from collections.abc import Callable
from email import policy
from email.message import EmailMessage

import pytest

from channels.email.tokens import (
    LOCAL_PART_LIMIT,
    message_ids_in_thread,
    reply_address,
    rid_from_address,
    rid_from_headers,
)
from gateway.security.crypto import new_rid

BASE = "approvals@example.com"
KEY = b"test-email-key"
RID = "Vq3xZ9-kT_2mYbLw0pQa1g"
OTHER_RID = "Hc7_PzLq0wRt5nU-9sYe2A"


def parse(headers: str) -> EmailMessage:
    raw = headers.strip().replace("\n", "\r\n") + "\r\n\r\nhello\r\n"
    message = email.message_from_string(raw, policy=policy.default)
    assert isinstance(message, EmailMessage)
    return message


def test_round_trip() -> None:
    address = reply_address(BASE, RID, KEY)
    assert address.startswith("approvals+") and address.endswith("@example.com")
    assert rid_from_address(address, BASE, KEY) == RID


def test_address_is_lower_case_and_survives_case_folding() -> None:
    address = reply_address(BASE, RID, KEY)
    assert address == address.lower()
    assert rid_from_address(address.upper(), BASE, KEY) == RID


@pytest.mark.parametrize("_", range(20))
def test_gateway_rids_fit_in_a_local_part(_: int) -> None:
    local = reply_address(BASE, new_rid(), KEY).rpartition("@")[0]
    assert len(local) <= LOCAL_PART_LIMIT


def test_too_long_base_local_part_is_refused() -> None:
    with pytest.raises(ValueError, match="64"):
        reply_address("human-approvals-team@example.com", RID, KEY)


@pytest.mark.parametrize("base", ["approvals", "@example.com", "approvals+x@example.com"])
def test_bad_base_is_refused(base: str) -> None:
    with pytest.raises(ValueError, match="base address"):
        reply_address(base, RID, KEY)


def _tamper_rid(address: str) -> str:
    local, _, domain = address.partition("@")
    encoded = reply_address(BASE, OTHER_RID, KEY).split("+")[1].split(".")[0]
    return f"{local.split('+')[0]}+{encoded}.{local.split('.')[-1]}@{domain}"


def _tamper_mac(address: str) -> str:
    local, _, domain = address.partition("@")
    last = "a" if local[-1] != "a" else "b"
    return f"{local[:-1]}{last}@{domain}"


@pytest.mark.parametrize("tamper", [_tamper_rid, _tamper_mac], ids=["rid", "mac"])
def test_tampered_address_is_refused(tamper: Callable[[str], str]) -> None:
    address = reply_address(BASE, RID, KEY)
    tampered = tamper(address)
    assert tampered != address
    assert rid_from_address(tampered, BASE, KEY) is None


def test_other_key_is_refused() -> None:
    assert rid_from_address(reply_address(BASE, RID, KEY), BASE, b"another-key") is None


def test_other_domain_is_refused() -> None:
    address = reply_address(BASE, RID, KEY).replace("@example.com", "@evil.example")
    assert rid_from_address(address, BASE, KEY) is None


def test_other_base_local_part_is_refused() -> None:
    address = reply_address(BASE, RID, KEY).replace("approvals+", "billing+")
    assert rid_from_address(address, BASE, KEY) is None


def test_domain_matches_case_insensitively() -> None:
    address = reply_address(BASE, RID, KEY).replace("@example.com", "@EXAMPLE.Com")
    assert rid_from_address(address, "Approvals@Example.COM", KEY) == RID


@pytest.mark.parametrize(
    "address",
    [
        "approvals@example.com",
        "approvals+@example.com",
        "approvals+abc@example.com",
        "approvals+abc.def@example.com",
        "approvals+!!!.def@example.com",
        "approvals+a.@example.com",
        "not an address",
        "",
    ],
)
def test_not_a_token(address: str) -> None:
    assert rid_from_address(address, BASE, KEY) is None


def test_rid_from_headers_prefers_the_envelope_recipient() -> None:
    mine, other = reply_address(BASE, RID, KEY), reply_address(BASE, OTHER_RID, KEY)
    message = parse(
        f"From: a@b.example\nTo: Approvals <{other}>, x@y.example\nDelivered-To: {mine}"
    )
    assert rid_from_headers(message, BASE, KEY) == RID


@pytest.mark.parametrize("header", ["To", "Cc", "Delivered-To", "X-Original-To"])
def test_rid_from_headers_reads_each_recipient_header(header: str) -> None:
    message = parse(f"From: a@b.example\n{header}: Someone <{reply_address(BASE, RID, KEY)}>")
    assert rid_from_headers(message, BASE, KEY) == RID


def test_rid_from_headers_skips_unverified_tokens() -> None:
    forged = _tamper_mac(reply_address(BASE, OTHER_RID, KEY))
    good = reply_address(BASE, RID, KEY)
    message = parse(f"From: a@b.example\nDelivered-To: {forged}\nTo: x@y.example, {good}")
    assert rid_from_headers(message, BASE, KEY) == RID


def test_rid_from_headers_none_without_a_token() -> None:
    message = parse(
        "From: a@b.example\nTo: approvals@example.com\nDelivered-To: approvals@example.com"
    )
    assert rid_from_headers(message, BASE, KEY) is None


def test_message_ids_in_thread_newest_first_without_duplicates() -> None:
    message = parse(
        "From: a@b.example\n"
        "In-Reply-To: <remind-1@example.com>\n"
        "References: <req-1@example.com>\n <remind-1@example.com>"
    )
    assert message_ids_in_thread(message) == ["<remind-1@example.com>", "<req-1@example.com>"]


def test_message_ids_in_thread_empty_without_headers() -> None:
    assert message_ids_in_thread(parse("From: a@b.example")) == []
