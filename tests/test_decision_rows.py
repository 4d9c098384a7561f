"""The `decision` table the insights page reads (`gateway.store.decided`): each decision,
however it was reached, writes one row saying who decided, where, and how long it took,
and migration 0018 fills in the same rows for the decisions made before it."""

from __future__ import annotations

import asyncio
import json
import random
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.store import insights as insight_store
from gateway.store import tables
from gateway.store.engine import make_engine
from gateway.store.values import utcnow
from gateway.vocabulary import JobKind
from tests.factories import RequestFactory
from tests.grants.helpers import create as create_call
from tests.grants.helpers import give_grant
from tests.helpers import make_due
from tests.rules.helpers import create, rules_gateway
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for
from tests.test_migrations import migrate_to
from tests.test_policies_api import CONFIG as POLICIES
from tests.test_policies_api import person_keys, respond

_request = tables.Request.__table__  # type: ignore[attr-defined]
_decision = tables.Decision.__table__  # type: ignore[attr-defined]
_job = tables.OutboxJob.__table__  # type: ignore[attr-defined]


def decision_rows(conn: Connection) -> dict[str, dict[str, Any]]:
    """Every decision row by its request's call_id, timestamps as UTC ISO text."""
    query = sa.select(_request.c.call_id, _decision).join(
        _request, _request.c.rid == _decision.c.rid
    )
    found = {}
    for row in conn.execute(query):
        values = dict(row._mapping)
        values["decided_at"] = values["decided_at"].isoformat()
        found[values.pop("call_id")] = values
    return found


def expected_rows(conn: Connection) -> dict[str, dict[str, Any]]:
    """What each decided request's row must say, read off the request row."""
    found = {}
    for row in conn.execute(sa.select(_request).where(_request.c.status != "pending")):
        info = json.loads(row.user_info_json or "{}")
        took = row.responded_at - row.requested_at
        found[row.call_id] = {
            "decided_at": row.responded_at.isoformat(),
            "day": row.responded_at.strftime("%Y-%m-%d"),
            "status": row.status,
            "fn": row.fn,
            "answered_in": info.get("channel"),
            "took_ms": took.days * 86_400_000 + took.seconds * 1000 + took.microseconds // 1000,
            "alone": row.policy_json is None or row.status == "responded",
        }
    return found


def _deadline(conn: Connection, call_id: str) -> int:
    rid = sa.select(_request.c.rid).where(_request.c.call_id == call_id).scalar_subquery()
    timer = sa.select(_job.c.id).where(_job.c.rid == rid, _job.c.kind == JobKind.TIMER)
    return int(conn.execute(timer).scalar_one())


async def decide_every_way(gateway: RunningGateway, factory: RequestFactory) -> None:
    """A person alone, two people under a policy, a deadline, a standing grant, and one
    left pending."""
    alice, bob = await person_keys(gateway, "alice", "bob")
    await factory(gateway, "alone", fn="deploy", kwargs={"env": "prod"})
    async with gateway.client() as operator:  # the admin key: the operator decides
        path = "/agent/function_calls/alone/respond"
        answered = await operator.post(path, json={"approved": False, "comment": "no"})
    assert answered.status_code == 200, answered.text
    await factory(gateway, "quorum", fn="drop_table", kwargs={})
    await respond(gateway, "quorum", alice, approved=True)
    await respond(gateway, "quorum", bob, approved=True)
    await factory(gateway, "late", fn="drop_index", kwargs={})
    async with gateway.client() as api:
        waiting = asyncio.create_task(api.get("/function_calls/late", params={"wait": 20}))
        await make_due(gateway, await gateway.core.db.read(_deadline, "late"))
        assert (await waiting).json()["status"]["approved"] is False  # rejected at its deadline
    bot = await gateway.new_key("default", name="bot")
    await give_grant(gateway, factory, "granting", key=bot)
    await create_call(gateway, factory, "granted", key=bot, path="/a")
    await factory(gateway, "waiting", fn="deploy", kwargs={})


async def decided_every_way(
    db_url: str, tmp_path: Path, factory: RequestFactory
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The decision rows of a gateway that decided every way, and what they must say."""
    config = write_config(tmp_path / "routing.toml", POLICIES)
    async with running_gateway(settings_for(db_url, config=config)) as gateway:
        await decide_every_way(gateway, factory)
        return await gateway.core.db.read(decision_rows), await gateway.core.db.read(expected_rows)


async def test_each_decision_writes_one_row_saying_who_decided_and_how_long_it_took(
    db_url: str, tmp_path: Path, request_factory: RequestFactory
) -> None:
    rows, wanted = await decided_every_way(db_url, tmp_path, request_factory)

    assert "waiting" not in rows and set(rows) == set(wanted)  # one per decision, no more
    for call_id, row in rows.items():
        assert {key: row[key] for key in wanted[call_id]} == wanted[call_id], call_id
    by = {call_id: (row["decided_by"], row["alone"]) for call_id, row in rows.items()}
    assert by["alone"] == ("person", True) and by["quorum"] == ("person", False)
    assert by["late"][0] == "deadline" and by["granted"][0] == "grant"
    assert by["granting"] == ("person", True)
    assert json.loads(rows["quorum"]["decider"])["person"] == "bob"  # the deciding vote
    assert rows["late"]["took_ms"] > 0


async def test_a_rule_that_decides_at_create_writes_its_row(tmp_path: Path) -> None:
    async with rules_gateway(f"sqlite+aiosqlite:///{tmp_path}/gw.db", tmp_path) as ruled:
        await create(ruled, "rule-1", "run", {"cmd": "rm -rf /"})
        rows = await ruled.core.db.read(decision_rows)
    assert rows["rule-1"]["decided_by"] == "rule" and rows["rule-1"]["status"] == "rejected"
    assert json.loads(rows["rule-1"]["decider"])["rule"] == "no-rm-root"
    assert rows["rule-1"]["took_ms"] == 0


async def test_migration_0018_fills_in_the_same_rows_for_earlier_decisions(
    db_url: str, tmp_path: Path, request_factory: RequestFactory
) -> None:
    written, _ = await decided_every_way(db_url, tmp_path, request_factory)

    await asyncio.to_thread(migrate_to, db_url, "0017", down=True)
    await asyncio.to_thread(migrate_to, db_url, "head")
    engine = make_engine(db_url, for_migrations=True)
    try:
        with engine.connect() as conn:
            filled = decision_rows(conn)
    finally:
        engine.dispose()
    assert filled == written and len(filled) == 5


async def test_a_decider_with_the_longest_user_info_allowed_still_decides(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    """The `decider` column is indexed, and PostgreSQL refuses an index entry over ~2.7 kB:
    an API caller's user_info may hold 1,000 characters in each field, four bytes each."""
    rng = random.Random(28)  # no repeats: PostgreSQL compresses long index entries
    fields = ("channel", "user_id", "person", "by", "rule", "grant", "name")
    info = {
        key: "".join(chr(rng.randrange(0x10000, 0x20000)) for _ in range(1000)) for key in fields
    }
    wide = info["name"]  # 4,000 bytes in UTF-8
    await request_factory(gateway, "wide", fn="deploy", kwargs={})
    async with gateway.client() as operator:
        body = {"approved": True, "user_info": info}
        answered = await operator.post("/agent/function_calls/wide/respond", json=body)
    assert answered.status_code == 200, answered.text
    rows = await gateway.core.db.read(decision_rows)
    assert json.loads(rows["wide"]["decider"])["name"] == wide[:64]


async def test_the_counts_read_in_index_order_and_leave_the_reader_as_it_was(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    """PostgreSQL plans the counts as index-only scans by turning the hash and the table scan
    off for them: the reader's connection, which serves other reads next, gets them back."""
    await request_factory(gateway, "counted", fn="deploy", kwargs={})
    async with gateway.client() as operator:
        await operator.post("/agent/function_calls/counted/respond", json={"approved": True})
    now = utcnow()
    period = insight_store.Period(None, now - timedelta(days=1), now + timedelta(days=1))

    def counted_then_settings(conn: Connection) -> tuple[Any, Any, list[str]]:
        outcomes = insight_store.outcomes(conn, period)
        groups = insight_store.decision_groups(conn, period)
        if conn.dialect.name != "postgresql":
            return outcomes, groups, []
        show = [conn.exec_driver_sql(f"SHOW {name}").scalar() for name in PLANNER_SWITCHES]
        return outcomes, groups, [str(value) for value in show]

    outcomes, groups, settings = await gateway.core.db.scan(counted_then_settings)
    assert [(fn, outcome, n) for _day, outcome, fn, n in outcomes] == [("deploy", "approved", 1)]
    assert [(g.who["channel"], g.status, g.count) for g in groups] == [("api", "approved", 1)]
    assert settings in ([], ["on", "on"])


PLANNER_SWITCHES = ("enable_hashagg", "enable_seqscan")


def zone_of_another_day(now: datetime) -> str:
    """A time zone whose date differs from UTC's at `now` (UTC+14 late in the UTC day,
    UTC-12 early in it)."""
    return "Pacific/Kiritimati" if now.hour >= 10 else "Etc/GMT+12"


async def test_the_day_is_the_utc_date_whatever_the_database_sessions_time_zone(
    db_url: str, tmp_path: Path, request_factory: RequestFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL hands timestamps back in the session's time zone (PGTZ, or the server's
    default): the day must still be the UTC one, as for SQLite."""
    monkeypatch.setenv("PGTZ", zone_of_another_day(utcnow()))
    async with running_gateway(settings_for(db_url)) as gateway:
        await request_factory(gateway, "zoned", fn="deploy", kwargs={})
        async with gateway.client() as operator:
            body = {"approved": True}
            assert (
                await operator.post("/agent/function_calls/zoned/respond", json=body)
            ).is_success
        rows = await gateway.core.db.read(decision_rows)
    decided_at = datetime.fromisoformat(rows["zoned"]["decided_at"])
    assert decided_at.utcoffset() == timedelta(0)
    assert rows["zoned"]["day"] == decided_at.date().isoformat()
