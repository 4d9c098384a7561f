"""What the chain proves to someone outside the database: an export they can recompute with
a few lines of their own, a checkpoint (log line and webhook) that exposes a rewritten
history, and redaction that keeps the chain verifiable."""

from __future__ import annotations

import csv
import hashlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from gateway.outbox.webhooks import add_endpoint
from gateway.store import audit, utcnow
from gateway.store import requests as request_store
from tests.audit.chain import gateway_audit, rechain, sql, writers
from tests.services.inprocess import RunningGateway, running_gateway, test_settings
from tests.services.net import free_port
from tests.services.receiver import WebhookReceiver

CHECKPOINT_SECONDS = 0.3


@pytest.fixture
async def client(gateway: RunningGateway) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {gateway.api_key}"}
    async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as made:
        yield made


def sha256(value: Any) -> str:
    """The README's rule, written again with the standard library: for ASCII text without
    floats, sorted keys and no spaces are RFC 8785."""
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


async def test_an_export_lets_anyone_recompute_the_chain(
    gateway: RunningGateway, client: httpx.AsyncClient, db_url: str
) -> None:
    await writers([client], "e", each=1)
    exported = await gateway_audit(db_url, "export", "--since", "2020-01-01")
    assert exported.returncode == 0, exported
    events = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(events) == sql(db_url, "SELECT count(*) FROM request_event")[0][0]

    prev = "0" * 64
    for seq, event in enumerate(events, start=1):
        fields = {name: sha256(value) for name, value in event["detail"].items()}
        content = {"v": 1, "rid": event["rid"], "type": event["type"], "at": event["at"]}
        digest = sha256(content | {"detail": fields})
        link = sha256({"project": 1, "seq": seq, "prev": prev, "digest": digest})
        assert (event["seq"], event["digest"], event["prev_hash"], event["hash"]) == (
            seq,
            digest,
            prev,
            link,
        )
        prev = link

    as_csv = await gateway_audit(db_url, "export", "--format", "csv")
    rows = list(csv.DictReader(as_csv.stdout.splitlines()))
    assert [(r["seq"], r["hash"]) for r in rows] == [(str(e["seq"]), e["hash"]) for e in events]
    none = await gateway_audit(db_url, "export", "--until", "2020-01-01")
    assert none.returncode == 0 and none.stdout == ""


async def test_redacted_fields_keep_the_chain_verifiable(
    gateway: RunningGateway, client: httpx.AsyncClient, db_url: str
) -> None:
    """Retention's rule: a field replaced by its hash (and `redacted_at` set) verifies; a
    hash that is not the field's does not."""
    await writers([client], "r", each=1)
    [(rid,)] = sql(db_url, "SELECT rid FROM request WHERE call_id = 'r-3-0'")
    names = {"created": ("call_id",), "decided": ("by", "status")}
    changed = await gateway.core.db.write(audit.redact_events, rid, utcnow(), names)
    assert changed == 2
    again = await gateway.core.db.write(audit.redact_events, rid, utcnow(), names)
    assert again == 2  # redacting twice keeps the hashes

    trail = await gateway.core.db.read(request_store.list_events, rid)
    created = next(event for event in trail if event.type == "created")
    assert "r-3-0" not in created.detail_json and created.redacted_at is not None
    assert json.loads(created.detail_json) == {"call_id": {"redacted_sha256": sha256("r-3-0")}}
    assert (await gateway_audit(db_url, "verify")).returncode == 0

    forged = json.dumps({"call_id": {"redacted_sha256": sha256("r-4-0")}})
    sql(db_url, "UPDATE request_event SET detail_json = :d WHERE id = :i", d=forged, i=created.id)
    verified = await gateway_audit(db_url, "verify")
    assert verified.returncode == 1 and f"edited: event {created.id} " in verified.stdout


async def test_a_checkpoint_kept_outside_exposes_a_rewritten_history(
    db_url: str, receiver: WebhookReceiver, caplog: pytest.LogCaptureFixture
) -> None:
    """The head goes out by log line and to the webhook that asked for `audit.checkpoint`
    (not to one taking "all events"). Someone who edits an event and then recomputes every
    link is caught by the stored checkpoint; deleting those too passes a plain verify, not
    one given the checkpoint a receiver kept."""
    caplog.set_level(logging.INFO, logger="gateway.outbox.checkpoints")
    settings = test_settings(db_url, audit_checkpoint_seconds=CHECKPOINT_SECONDS)
    other = await WebhookReceiver(port=free_port()).start()
    try:
        async with running_gateway(settings) as gateway:
            for url, events in ((receiver.url, ["audit.checkpoint"]), (other.url, None)):
                await add_endpoint(gateway.core, project_id=1, url=url, events=events)
            headers = {"Authorization": f"Bearer {gateway.api_key}"}
            async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as client:
                await writers([client], "c", each=1)
            [delivery] = await receiver.wait_for(1)
            await other.wait_for(8)  # its completed events
    finally:
        await other.stop()
    checkpoint = json.loads(delivery.body)
    assert checkpoint["type"] == "audit.checkpoint"
    seq, link = checkpoint["event"]["seq"], checkpoint["event"]["hash"]
    assert sql(db_url, "SELECT hash FROM request_event WHERE seq = :s", s=seq)[0][0] == link
    assert f"project 'default' (id 1) seq {seq} hash {link}" in caplog.text
    assert "audit.checkpoint" not in {json.loads(r.body)["type"] for r in other.received}

    sql(db_url, 'UPDATE request_event SET detail_json = \'{"call_id":"forged"}\' WHERE seq = 1')
    rechain(db_url, 1)
    stored = await gateway_audit(db_url, "verify")
    assert stored.returncode == 1 and f"BROKEN at seq {seq}: rewritten: " in stored.stdout
    assert f"the events up to seq {seq} were changed, and the links recomputed" in stored.stdout
    sql(db_url, "DELETE FROM audit_checkpoint")
    assert (await gateway_audit(db_url, "verify")).returncode == 0  # the database alone is fooled

    kept = await gateway_audit(
        db_url, "verify", "--project", "default", "--checkpoint", f"{seq}:{link}"
    )
    assert kept.returncode == 1, kept
    assert f"BROKEN at seq {seq}: rewritten: event" in kept.stdout
    assert f"differs from the checkpoint of seq {seq} (kept outside" in kept.stdout


@pytest.mark.parametrize("bad", ["3:" + "g" * 64, "3:" + "a" * 63 + " ", "x:" + "a" * 64])
async def test_a_checkpoint_not_seq_and_64_hex_is_refused(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        await gateway_audit("sqlite://", "verify", "--project", "default", "--checkpoint", bad)
    assert refused.value.code == 2
    assert f"not SEQ:HASH (a number, a 64-hex link): {bad!r}" in capsys.readouterr().err
