"""A rule with `decide` settles a function call at create: stored approved or rejected by
the gateway in the rule's name, with the rule's comment and its audit trail, a completed
webhook, and nobody contacted. A `when` that cannot be evaluated never decides anything: the
request goes on to the next rule, or to people, and the rule's first error is logged."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import add_webhook, events, jobs
from tests.rules.helpers import (
    ANN,
    BOB,
    PUBLIC_READS_COMMENT,
    RM_ROOT_COMMENT,
    create,
    decided_by,
    rules_gateway,
    stored,
)
from tests.services.inprocess import RunningGateway
from tests.services.receiver import WebhookReceiver


def types_of(found: dict[str, Any]) -> list[str]:
    return [event["type"] for event in found["events"]]


async def test_an_approve_rule_approves_at_create_and_contacts_nobody(
    ruled: RunningGateway,
) -> None:
    agent = await ruled.new_key("default", name="reader")
    made = await create(ruled, "pub-1", "read_file", {"path": "/srv/public/a.txt"}, key=agent)
    assert made["gateway_status"] == "approved" and made["route"] == []

    record = await stored(ruled, "pub-1")
    assert record["gateway_status"] == "approved"
    assert record["status"]["approved"] is True
    assert record["status"]["comment"] == PUBLIC_READS_COMMENT
    assert record["status"]["user_info"] == decided_by("public-reads")
    assert record["status"]["responded_at"] is not None

    found = await events(ruled, "pub-1")
    assert types_of(found) == ["created", "routed", "decided"]
    routed = found["events"][1]["detail"]
    assert routed == {"targets": 0, "rule": "rule public-reads"}
    assert found["events"][2]["detail"] == {"status": "approved", "by": decided_by("public-reads")}
    assert found["deliveries"] == []


async def test_a_call_the_when_does_not_match_waits_for_a_person(ruled: RunningGateway) -> None:
    made = await create(ruled, "priv-1", "read_file", {"path": "/etc/shadow"})
    assert made["gateway_status"] == "pending"
    record = await stored(ruled, "priv-1")
    assert record["status"]["approved"] is None and record["status"]["user_info"] is None
    found = await events(ruled, "priv-1")
    assert "decided" not in types_of(found)
    assert found["events"][1]["detail"] == {"targets": 1}  # no rule: the web console
    assert [d["channel"] for d in found["deliveries"]] == ["web"]


async def test_a_reject_rule_rejects_with_its_comment_and_says_so_by_webhook(
    ruled: RunningGateway, receiver: WebhookReceiver
) -> None:
    await add_webhook(ruled, receiver.url)
    made = await create(ruled, "rm-1", "run", {"cmd": "rm -rf /"})
    assert made["gateway_status"] == "rejected"

    record = await stored(ruled, "rm-1")
    assert record["status"]["approved"] is False
    assert record["status"]["comment"] == RM_ROOT_COMMENT
    assert record["status"]["user_info"] == decided_by("no-rm-root")
    found = await events(ruled, "rm-1")
    assert found["events"][1]["detail"] == {"targets": 0, "rule": "rule no-rm-root"}
    assert found["events"][2]["detail"]["status"] == "rejected"
    assert found["deliveries"] == []

    [delivery] = await receiver.wait_for(1)
    payload = json.loads(delivery.body)
    assert payload["type"] == "function_call.completed"
    event = payload["event"]
    assert event["call_id"] == "rm-1"
    assert event["status"]["approved"] is False
    assert event["status"]["comment"] == RM_ROOT_COMMENT
    assert event["status"]["user_info"] == decided_by("no-rm-root")


async def test_a_reject_rule_leaves_other_commands_to_people(ruled: RunningGateway) -> None:
    made = await create(ruled, "rm-2", "run", {"cmd": "rm -rf /tmp/build"})
    assert made["gateway_status"] == "pending"


async def test_the_same_call_id_again_gets_the_decided_record(ruled: RunningGateway) -> None:
    first = await create(ruled, "pub-2", "read_file", {"path": "/srv/public/b"})
    again = await create(ruled, "pub-2", "read_file", {"path": "/srv/public/b"})
    assert again["gateway_status"] == "approved"
    assert again["status"] == first["status"]
    assert types_of(await events(ruled, "pub-2")).count("decided") == 1


async def test_a_decide_rule_never_decides_a_question(db_url: str, tmp_path: Path) -> None:
    config = """
[[rules]]
name = "everything"
when = 'true'
decide = "approve"
comment = "all fine"
"""
    async with rules_gateway(db_url, tmp_path, config) as gw, gw.client() as client:
        body = {"run_id": "r", "call_id": "q-1", "spec": {"msg": "Which region?"}}
        asked = await client.post("/contact_requests", json=body)
        assert asked.status_code == 200, asked.text
        assert asked.json()["gateway_status"] == "pending"
        assert asked.json()["status"].get("user_info") is None
        made = await create(gw, "fc-1", "anything", {})
        assert made["gateway_status"] == "approved"


@pytest.mark.parametrize(
    "kwargs",
    [{}, {"amount": "lots"}, {"amount": [5]}],
    ids=["missing-key", "string", "list"],
)
async def test_a_when_that_cannot_be_evaluated_falls_through_to_the_next_rule(
    ruled_sqlite: RunningGateway, caplog: pytest.LogCaptureFixture, kwargs: dict[str, Any]
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.conditions")
    for call_id in ("refund-1", "refund-2"):
        made = await create(ruled_sqlite, call_id, "refund", kwargs)
        assert made["gateway_status"] == "pending", made
        assert made["status"]["user_info"] is None
        [target] = made["route"]  # the team's, as the next rule says
        assert target["via"] == "rule other-refunds" and target["responders"] == [ANN, BOB]
        record = await stored(ruled_sqlite, call_id)
        assert record["status"]["approved"] is None
        found = await events(ruled_sqlite, call_id)
        assert "decided" not in types_of(found)
        assert found["events"][1]["detail"] == {"targets": 1, "rule": "rule other-refunds"}

    warnings = [
        r for r in caplog.records if r.name == "gateway.conditions" and r.levelno == logging.WARNING
    ]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert "rule small-refunds" in warnings[0].getMessage()

    # The rule itself works: a small refund it can read is approved at once.
    small = await create(ruled_sqlite, "refund-3", "refund", {"amount": 5})
    assert small["gateway_status"] == "approved"
    assert small["status"]["user_info"] == decided_by("small-refunds")


@pytest.mark.parametrize(
    "kwargs", [{}, {"cmd": ["rm", "-rf", "/"]}, {"cmd": 7}], ids=["missing", "list", "int"]
)
async def test_a_reject_rule_that_cannot_be_evaluated_leaves_the_call_to_people(
    ruled_sqlite: RunningGateway, caplog: pytest.LogCaptureFixture, kwargs: dict[str, Any]
) -> None:
    caplog.set_level(logging.WARNING, logger="gateway.conditions")
    made = await create(ruled_sqlite, "run-odd", "run", kwargs)
    assert made["gateway_status"] == "pending"
    assert [t["channel"] for t in made["route"]] == ["web"]
    messages = [r.getMessage() for r in caplog.records if r.name == "gateway.conditions"]
    assert len(messages) == 1 and "rule no-rm-root" in messages[0]


async def test_a_request_decided_at_create_leaves_no_timer_behind(ruled: RunningGateway) -> None:
    """A decision cancels the request's timers ("cancelled: the request was decided"); a
    rule's decision at create must leave none pending either, even when the agent gave the
    request a deadline of its own."""
    deadline = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    # The convention, as a person's decision keeps it:
    await create(ruled, "by-person", "other", {}, expires_at=deadline)
    async with ruled.client() as operator:
        answer = await operator.post(
            "/agent/function_calls/by-person/respond", json={"approved": True}
        )
    assert answer.status_code == 200, answer.text
    [timer] = await jobs(ruled)
    assert timer["status"] == "done" and "decided" in (timer["last_error"] or "")

    made = await create(
        ruled, "by-rule", "read_file", {"path": "/srv/public/a"}, expires_at=deadline
    )
    assert made["gateway_status"] == "approved"
    left = [j for j in await jobs(ruled) if j["status"] in ("pending", "running")]
    assert left == [], left
