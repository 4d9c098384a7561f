"""The audit chain: concurrent writers leave one unbroken chain per project, and
`gateway audit verify` finds and names an event edited, deleted or moved by plain SQL."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import httpx
import pytest

from gateway.store import audit
from gateway.store.canonical import canonical, sha256_hex
from gateway.vocabulary import KeyScope
from tests.audit.chain import (
    assert_one_chain_each,
    event_ids,
    gateway_audit,
    sql,
    writers,
)
from tests.services.inprocess import RunningGateway


@pytest.fixture
async def clients(gateway: RunningGateway) -> AsyncIterator[list[httpx.AsyncClient]]:
    """An operator's client of the default project and of a second project, "acme"."""
    keys = [gateway.api_key, await gateway.new_key("acme", scope=KeyScope.ADMIN)]
    made = [
        httpx.AsyncClient(base_url=gateway.base_url, headers={"Authorization": f"Bearer {k}"})
        for k in keys
    ]
    try:
        yield made
    finally:
        for client in made:
            await client.aclose()


def test_canonical_json_is_rfc_8785() -> None:
    """RFC 8785's own examples: member order by UTF-16 code units (3.2.3), and numbers as
    ECMAScript writes them (appendix B)."""
    names = {"\u20ac": 1, "\r": 2, "\ufb33": 3, "1": 4, "\U0001f600": 5, "\u0080": 6, "\u00f6": 7}
    expected = '{"\\r":2,"1":4,"\u0080":6,"\u00f6":7,"\u20ac":1,"\U0001f600":5,"\ufb33":3}'
    assert canonical(names) == expected
    numbers = [0.0, -0.0, 1e21, 1e-7, 333333333.3333333, 9007199254740992.0, 5e-324, 1e23]
    written = ["0", "0", "1e+21", "1e-7", "333333333.3333333", "9007199254740992", "5e-324"]
    assert canonical(numbers) == "[" + ",".join([*written, "1e+23"]) + "]"
    assert canonical(295147905179352830000.0) == "295147905179352830000"
    at = datetime(2026, 11, 1, 12, 0, 0, 5, tzinfo=UTC)
    content = {"v": 1, "rid": "r1", "type": "created", "at": "2026-11-01T12:00:00.000005Z"}
    fields = {"call_id": sha256_hex("c"), "n": sha256_hex(1.5)}
    digest = audit.event_digest("r1", "created", at, {"call_id": "c", "n": 1.5})
    assert digest == sha256_hex(content | {"detail": fields})  # the rule, as written down
    link = {"project": 2, "seq": 7, "prev": "0" * 64, "digest": digest}
    assert audit.link_hash(2, 7, "0" * 64, digest) == sha256_hex(link)
    assert canonical(["\ud83d", "é\u007f\u2028"]) == '["\\ud83d","é\u007f\u2028"]'  # lone: escaped
    assert canonical({"b": [True, None, '\u001f\n"\\'], "a": 2**64}) == (
        '{"a":18446744073709551616,"b":[true,null,"\\u001f\\n\\"\\\\"]}'
    )


async def test_concurrent_writers_leave_one_chain_per_project(
    gateway: RunningGateway, clients: list[httpx.AsyncClient], db_url: str
) -> None:
    codes = await writers(clients, "load", each=6)
    assert set(codes) == {200}
    counts = assert_one_chain_each(db_url)
    assert len(counts) == 2 and min(counts.values()) >= 4 * 6 * 3  # created, routed, decided…
    verified = await gateway_audit(db_url, "verify")
    assert verified.returncode == 0, verified
    assert verified.stdout.count(": intact: ") == 2, verified


async def decided_trail(clients: list[httpx.AsyncClient]) -> None:
    codes = await writers(clients[:1], "t", each=1)
    assert set(codes) == {200}


def event(url: str, type_: str, nth: int = 0) -> tuple[int, int, str]:
    """The id, seq and detail of the default project's `nth` event of this type."""
    rows = sql(
        url,
        "SELECT id, seq, detail_json FROM request_event WHERE type = :t AND project_id = 1"
        " ORDER BY seq",
        t=type_,
    )
    event_id, seq, detail = rows[nth]
    return int(event_id), int(seq), str(detail)


async def test_an_edited_event_is_found_and_named(
    gateway: RunningGateway, clients: list[httpx.AsyncClient], db_url: str
) -> None:
    await decided_trail(clients)
    event_id, seq, detail = event(db_url, "decided", 3)
    stored = json.loads(detail)
    assert stored["comment"].startswith("no ")  # what the person said, changed afterwards:
    changed = stored | {"comment": "fine by me"}
    sql(
        db_url,
        "UPDATE request_event SET detail_json = :d WHERE id = :i",
        d=json.dumps(changed),
        i=event_id,
    )

    verified = await gateway_audit(db_url, "verify", "--project", "default")

    assert verified.returncode == 1, verified
    assert f"BROKEN at seq {seq}: edited: event {event_id} (seq {seq}, decided" in verified.stdout
    assert "its content changed" in verified.stdout
    assert f"intact up to seq {seq - 1} " in verified.stdout


async def test_a_deleted_event_is_found_and_named(
    gateway: RunningGateway, clients: list[httpx.AsyncClient], db_url: str
) -> None:
    await decided_trail(clients)
    event_id, seq, _ = event(db_url, "routed", 2)
    sql(db_url, "DELETE FROM request_event WHERE id = :i", i=event_id)

    verified = await gateway_audit(db_url, "verify")

    assert verified.returncode == 1, verified
    assert f"BROKEN at seq {seq}: deleted: seq {seq} missing before event" in verified.stdout
    assert f"intact up to seq {seq - 1} " in verified.stdout


async def test_two_swapped_events_are_found_and_named(
    gateway: RunningGateway, clients: list[httpx.AsyncClient], db_url: str
) -> None:
    await decided_trail(clients)
    first, first_seq, _ = event(db_url, "decided", 1)
    second, second_seq, _ = event(db_url, "decided", 5)
    # Their places traded, in three steps (a place holds one event at a time).
    sql(db_url, "UPDATE request_event SET seq = -1 WHERE id = :i", i=first)
    sql(db_url, "UPDATE request_event SET seq = :s WHERE id = :i", s=first_seq, i=second)
    sql(db_url, "UPDATE request_event SET seq = :s WHERE id = :i", s=second_seq, i=first)

    verified = await gateway_audit(db_url, "verify")

    assert verified.returncode == 1, verified
    assert f"BROKEN at seq {first_seq}: moved: event {second} (seq {first_seq}" in verified.stdout
    assert f"was chained after seq {second_seq - 1}" in verified.stdout
    assert "events were moved or swapped" in verified.stdout
    assert event_ids(verified.stdout) >= {second}


async def test_an_inserted_event_is_found_and_named(
    gateway: RunningGateway, clients: list[httpx.AsyncClient], db_url: str
) -> None:
    """A forged `decided` row added by plain SQL with a project but no place in the chain,
    then moved to another project than its request's: verify names it both times."""
    await decided_trail(clients)
    [(rid,)] = sql(db_url, "SELECT rid FROM request WHERE call_id = 't-0-0'")
    sql(
        db_url,
        "INSERT INTO request_event (rid, type, detail_json, at, project_id)"
        " VALUES (:r, 'decided', :d, :at, 1)",
        r=rid,
        d=json.dumps({"status": "approved", "comment": "forged"}),
        at=datetime.now(UTC),
    )
    [(forged,)] = sql(db_url, "SELECT id FROM request_event WHERE detail_json LIKE '%forged%'")
    named = f"outside the chain: inserted: event {forged} (decided on {rid} at "

    verified = await gateway_audit(db_url, "verify", "--project", "default")

    assert verified.returncode == 1, verified
    assert named in verified.stdout and "inserted outside the chain" in verified.stdout

    await gateway.new_key("acme")  # a second project, not the request's
    sql(db_url, "UPDATE request_event SET project_id = 2 WHERE id = :i", i=forged)
    verified = await gateway_audit(db_url, "verify", "--project", "default")
    assert verified.returncode == 1 and named in verified.stdout, verified
