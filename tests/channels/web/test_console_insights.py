"""The console's insights page: requests created and decided through the API and the one
answer path (several people, channels, teams, rejections, a rule and a standing grant
deciding by themselves, a two-person policy), then spread over past days. Every figure the
page shows equals what this test computes itself from the database's rows (plain SQL, its
own arithmetic), for every project and for one, over 30 days and over 7; a person sees only
their projects, an agent's API key sees nothing; Chromium shows the charts (screenshots)."""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from playwright.async_api import Page, expect

from channels.web.auth import hash_password
from gateway.doors import insights as insight_door
from gateway.seam import Answered, AnsweredIn, Refused, Responder, Verb
from gateway.store import decided as decided_store
from gateway.store import insights as insight_store
from gateway.store import requests as request_store
from gateway.store import tables
from gateway.store.values import utcnow
from gateway.vocabulary import KeyScope
from tests.channels.web.browser import SCREENSHOTS, screenshot
from tests.channels.web.helpers import PASSWORD, sign_in_page, signed_in
from tests.factories import RequestFactory
from tests.services.inprocess import RunningGateway, write_config

CONFIG = """
[people.alice]
name = "Alice"
email = "alice@example.org"
password_hash = '{hashed}'
slack = "U0ALICE"
projects = ["*"]

[people.bob]
name = "Bob"
email = "bob@example.org"
password_hash = '{hashed}'
slack = "U0BOB"
projects = ["default"]

[people.carol]
name = "Carol"
email = "carol@example.org"
password_hash = '{hashed}'
projects = ["billing"]

[teams.sre]
members = ["alice", "bob"]
slack_channel = "C0SRE"

[teams.ops]
members = ["alice"]

[[rules]]
name = "no-rm"
fn = "rm_rf"
decide = "reject"
comment = "never rm -rf"

[[rules]]
name = "two-person"
fn = "wire_money"
target = "team:sre"
approvals_required = 2
"""

# Who is who, as this test reads a stored answer (its own table, not the gateway's).
PEOPLE = {
    ("slack", "U0ALICE"): "Alice",
    ("web", "alice@example.org"): "Alice",
    ("slack", "U0BOB"): "Bob",
    ("web", "bob@example.org"): "Bob",
    ("web", "carol@example.org"): "Carol",
}
PLACES = {"slack": "Slack", "web": "the web console", "api": "the API"}
AGES: list[tuple[float, str]] = [
    (300, "under 5m"),
    (1800, "5m to 30m"),
    (3600, "30m to 1h"),
    (14400, "1h to 4h"),
]
AGES += [(86400, "4h to 1d"), (604800, "1d to 7d"), (math.inf, "over 7d")]
BY_THEMSELVES = ("gateway", "grant")

ALICE_SLACK = Responder(AnsweredIn.SLACK, "U0ALICE", "alice.s")
BOB_SLACK = Responder(AnsweredIn.SLACK, "U0BOB", "bob.s")
ALICE_WEB = Responder(AnsweredIn.WEB, "alice@example.org", "Alice", email="alice@example.org")
BOB_WEB = Responder(AnsweredIn.WEB, "bob@example.org", "Bob", email="bob@example.org")
CAROL_WEB = Responder(AnsweredIn.WEB, "carol@example.org", "Carol", email="carol@example.org")


@pytest.fixture(scope="module")
def routing_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    text = CONFIG.format(hashed=hash_password(PASSWORD))
    return write_config(tmp_path_factory.mktemp("insights") / "routing.toml", text)


# --- seeding: the API and the answer path, then the clock moved back


@dataclass(frozen=True)
class Made:
    call_id: str
    days_ago: float  # when it was decided (or made, while pending)
    took: float  # seconds from creation to decision


async def answer(
    gateway: RunningGateway, rid: str, verb: Verb, who: Responder, **extra: Any
) -> None:
    channel = "web" if who.via == AnsweredIn.WEB else who.via
    done = await gateway.context(channel).answers.answer(rid, verb, who, **extra)
    assert isinstance(done, Answered), done


async def seed(gateway: RunningGateway, factory: RequestFactory) -> None:
    """About twenty requests in two projects, decided in every way the page counts."""
    billing = await gateway.new_key("billing", name="billing", scope=KeyScope.ADMIN)
    sre, ops = {"team": "sre"}, {"team": "ops"}
    made: list[Made] = []

    async def call(call_id: str, fn: str, days_ago: float, took: float, **spec: Any) -> str:
        created = await factory(gateway, call_id, fn=fn, kwargs={"n": call_id}, **spec)
        made.append(Made(call_id, days_ago, took))
        return created.rid

    rid = await call("sre-1", "deploy", 1, 120, channel=sre)
    await answer(gateway, rid, Verb.APPROVE, ALICE_SLACK)
    rid = await call("sre-2", "deploy", 2, 600, channel=sre)
    await answer(gateway, rid, Verb.REJECT, BOB_SLACK, text="not on a Friday")
    rid = await call("sre-3", "drop_table", 3, 3600, channel=sre)
    await answer(gateway, rid, Verb.REJECT, ALICE_SLACK, text="no")
    rid = await call("ops-1", "restart", 0, 30, channel=ops)
    await answer(gateway, rid, Verb.APPROVE, ALICE_WEB)
    rid = await call("ops-2", "drop_table", 5, 45, channel=ops)
    await answer(gateway, rid, Verb.REJECT, ALICE_WEB, text="no")
    rid = await call("web-1", "drop_table", 10, 900)
    await answer(gateway, rid, Verb.REJECT, BOB_WEB, text="not today")
    await call("web-2", "send_email", 12, 7200)
    async with gateway.client() as client:  # the operator's admin key, through the API
        answered = {"approved": True, "user_info": {"name": "ops bot"}}
        responded = await client.post("/agent/function_calls/web-2/respond", json=answered)
    assert responded.status_code == 200, responded.text
    question = await factory(gateway, "q-1", contact=True, msg="Which region?")
    made.append(Made("q-1", 4, 300))
    await answer(gateway, question.rid, Verb.ANSWER, BOB_WEB, text="eu-west")
    rid = await call("wire-1", "wire_money", 6, 1800)  # two people of team sre must approve
    await answer(gateway, rid, Verb.APPROVE, ALICE_SLACK)
    await answer(gateway, rid, Verb.APPROVE, BOB_SLACK)
    await call("rm-1", "rm_rf", 2, 0)  # rejected by the rule at create
    await call("rm-2", "rm_rf", 40, 0)
    rid = await call("grant-src", "read_config", 1, 60, run_id="run-g")
    await answer(gateway, rid, Verb.GRANT, ALICE_WEB, grant="run:3600")
    for use in ("grant-use-1", "grant-use-2"):  # approved at create by Alice's grant
        await call(use, "read_config", 1, 0, run_id="run-g")
    await call("grant-sre", "read_config", 1, 0, run_id="run-g", channel=sre)  # the grant too
    deadline = (utcnow() + timedelta(hours=1)).isoformat()
    rid = await call("late-sre", "deploy", 2, 3600, channel=sre, expires_at=deadline)
    await gateway.core.db.write(deadline_passed, rid)
    late = await gateway.context("slack").answers.answer(rid, Verb.APPROVE, ALICE_SLACK)
    assert isinstance(late, Refused)  # too late: the gateway rejected it at its deadline
    rid = await call("old-1", "deploy", 45, 240, channel=sre)
    await answer(gateway, rid, Verb.APPROVE, ALICE_SLACK)
    for call_id, age in (("pend-1", 120), ("pend-2", 7200), ("pend-3", 3 * 86400)):
        await call(call_id, "deploy", age / 86400, 0)
    created = await factory(gateway, "bill-1", key=billing, fn="refund", kwargs={})
    made.append(Made("bill-1", 3, 200))
    await answer(gateway, created.rid, Verb.REJECT, CAROL_WEB, text="too much")
    await factory(gateway, "bill-2", key=billing, fn="refund", kwargs={})
    made.append(Made("bill-2", 0.5 / 24, 0))
    await gateway.core.db.write(back_in_time, made, utcnow())


def deadline_passed(tx: Any, rid: str) -> None:
    request = tables.Request.__table__  # type: ignore[attr-defined]
    passed = {"expires_at": utcnow() - timedelta(seconds=1)}
    tx.execute(sa.update(request).where(request.c.rid == rid).values(passed))


def back_in_time(tx: Any, made: list[Made], now: datetime) -> None:
    """Each request decided `days_ago` (an hour before that, for a whole day), `took`
    seconds after it was made; a pending one made `days_ago`. Votes and the decision's row
    (`gateway.store.decided`, what the page reads) move with them."""
    request, vote = tables.Request.__table__, tables.Vote.__table__  # type: ignore[attr-defined]
    decision = tables.Decision.__table__  # type: ignore[attr-defined]
    for one in made:
        row = tx.execute(sa.select(request).where(request.c.call_id == one.call_id)).one()
        if row.status == "pending":
            values = {"requested_at": now - timedelta(days=one.days_ago)}
            tx.execute(sa.update(request).where(request.c.rid == row.rid).values(values))
            continue
        decided = now - timedelta(days=one.days_ago, hours=1)
        shift = decided - row.responded_at
        values = {"responded_at": decided, "requested_at": decided - timedelta(seconds=one.took)}
        tx.execute(sa.update(request).where(request.c.rid == row.rid).values(values))
        moved_row = request_store.get_by_rid(tx, row.rid)
        assert moved_row is not None
        facts = decided_store.facts(moved_row)
        tx.execute(sa.update(decision).where(decision.c.rid == row.rid).values(facts))
        for voted in tx.execute(sa.select(vote).where(vote.c.rid == row.rid)).all():
            moved = {"at": voted.at + shift}
            tx.execute(sa.update(vote).where(vote.c.id == voted.id).values(moved))


# --- what the page shows


class Tables(HTMLParser):
    """Each table of a page by its id: its rows, each cell's `data-value` or its text."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.attrs: dict[str, str] = {}
        self._table: list[list[str]] | None = None
        self._cell: list[str] | None = None
        self._value: str | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "table" and "id" in found:
            self._table = self.tables.setdefault(found["id"], [])
        elif tag == "tr" and self._table is not None:
            self._table.append([])
        elif tag in ("td", "th") and self._table is not None:
            self._cell, self._value = [], found.get("data-value")
        for name in ("data-period",):
            if name in found:
                self.attrs[name] = found[name]

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._table is not None and self._cell is not None:
            text = "".join(self._cell).strip()
            self._table[-1].append(self._value if self._value is not None else text)
            self._cell = None
        elif tag == "table":
            self._table = None

    def body(self, table: str) -> list[list[str]]:
        """The rows of a table under its header (none when the page says there are none)."""
        return self.tables.get(table, [[]])[1:]


@dataclass
class Shown:
    period: tuple[date, date]
    per_day: dict[str, dict[str, int]]
    by_team: dict[str, tuple[int, int, int]]
    by_channel: dict[str, tuple[int, int, int]]
    pending: dict[str, int]
    rejected: list[tuple[str, int, int, int]]  # fn, rejected, no answer in time, decided
    auto: dict[str, tuple[str, int, int]]
    people: dict[str, tuple[int, int, int]]


def read_page(html: str) -> Shown:
    page = Tables(html)
    start, end = page.attrs["data-period"].split("/")
    header = page.tables["per-day"][0][1:-1]
    per_day = {
        row[0]: {o: int(n) for o, n in zip(header, row[1:-1], strict=True) if int(n)}
        for row in page.body("per-day")
    }

    def timings(table: str) -> dict[str, tuple[int, int, int]]:
        return {r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in page.body(table)}

    return Shown(
        period=(date.fromisoformat(start), date.fromisoformat(end)),
        per_day={day: counts for day, counts in per_day.items() if counts},
        by_team=timings("by-team"),
        by_channel=timings("by-channel"),
        pending={r[0]: int(r[1]) for r in page.body("pending-ages") if int(r[1])},
        rejected=[(r[0], int(r[1]), int(r[2]), int(r[3])) for r in page.body("most-rejected")],
        auto={r[1]: (r[0], int(r[2]), int(r[3])) for r in page.body("auto-decisions")},
        people={r[0]: (int(r[1]), int(r[2]), int(r[3])) for r in page.body("answers")},
    )


# --- the same figures, computed here from the rows


def moment(value: Any) -> datetime:
    """A timestamp as either database hands it to plain SQL (SQLite: UTC text)."""
    if isinstance(value, str):
        return datetime.fromisoformat(value).replace(tzinfo=UTC)
    assert isinstance(value, datetime)
    return value.astimezone(UTC)


def whole_seconds(took: timedelta) -> int:
    """To the millisecond, then whole seconds down: as the page counts."""
    return round(took.total_seconds() * 1000) // 1000


def nearest_rank(values: list[int], pct: int) -> int:
    ordered = sorted(values)
    return ordered[math.ceil(len(ordered) * pct / 100) - 1]


def teams_of(route: list[dict[str, Any]]) -> set[str]:
    """This test's own reading of the config's teams in a stored route."""
    found = set()
    for target in route:
        if target["channel"] == "slack" and target["address"] == {"channel": "C0SRE"}:
            found.add("sre")
        if target["channel"] == "web" and target["responders"] == ["alice@example.org"]:
            found.add("ops")
    return found


REQUESTS = """
SELECT r.rid, p.name AS project, r.kind, r.fn, r.status, r.route_json, r.policy_json,
       r.user_info_json, r.requested_at, r.responded_at
FROM request r JOIN project p ON p.id = r.project_id
"""
VOTES = """
SELECT v.rid, v.person, v.approve, v.user_info_json, v.at, p.name AS project
FROM vote v JOIN request r ON r.rid = v.rid JOIN project p ON p.id = r.project_id
"""


async def rows(gateway: RunningGateway, sql: str) -> list[dict[str, Any]]:
    def read(conn: Any) -> list[dict[str, Any]]:
        return [dict(row._mapping) for row in conn.execute(sa.text(sql))]

    return await gateway.core.db.scan(read)


def outcome(r: dict[str, Any]) -> str:
    """A decision's status, but "expired" for a call the gateway rejected at its deadline
    (no rule: a rule's rejection is a rejection)."""
    info = r["info"]
    ran_out = info["channel"] == "gateway" and not info.get("rule")
    return "expired" if r["status"] == "rejected" and ran_out else str(r["status"])


def timing(values: list[int]) -> tuple[int, int, int]:
    return len(values), nearest_rank(values, 50), nearest_rank(values, 90)


async def expected(gateway: RunningGateway, period: tuple[date, date], projects: set[str]) -> Shown:
    since = datetime(*period[0].timetuple()[:3], tzinfo=UTC)
    until = datetime(*period[1].timetuple()[:3], tzinfo=UTC) + timedelta(days=1)
    now = utcnow()
    everything = [r for r in await rows(gateway, REQUESTS) if r["project"] in projects]
    decided = [
        r | {"info": json.loads(r["user_info_json"]), "at": moment(r["responded_at"])}
        for r in everything
        if r["status"] != "pending" and since <= moment(r["responded_at"]) < until
    ]
    per_day: dict[str, Counter[str]] = defaultdict(Counter)
    for r in decided:
        per_day[r["at"].date().isoformat()][outcome(r)] += 1
    by_people = [
        r
        for r in decided
        if r["status"] in ("approved", "rejected", "responded")
        and r["info"]["channel"] not in BY_THEMSELVES
    ]
    took = {r["rid"]: whole_seconds(r["at"] - moment(r["requested_at"])) for r in decided}
    channels: dict[str, list[int]] = defaultdict(list)
    teams: dict[str, list[int]] = defaultdict(list)
    for r in by_people:
        channels[PLACES[r["info"]["channel"]]].append(took[r["rid"]])
        for team in teams_of(json.loads(r["route_json"])):
            teams[team].append(took[r["rid"]])
    pending: Counter[str] = Counter()
    for r in everything:
        if r["status"] == "pending":
            age = (now - moment(r["requested_at"])).total_seconds()
            pending[next(label for bound, label in AGES if age < bound)] += 1
    fns: dict[str, Counter[str]] = defaultdict(Counter)
    for r in decided:
        if r["kind"] == "function_call":
            fns[r["fn"]]["decided"] += 1
            fns[r["fn"]][outcome(r)] += 1
    rejected = sorted(
        (
            (fn, c["rejected"], c["expired"], c["decided"])
            for fn, c in fns.items()
            if c["rejected"] or c["expired"]
        ),
        key=lambda found: (-found[1], -found[2], found[0]),
    )
    auto: dict[str, tuple[str, int, int]] = {}
    for r in decided:
        info = r["info"]
        key = info.get("rule") if info["channel"] == "gateway" else info.get("grant")
        if info["channel"] in BY_THEMSELVES and key:
            name = info["name"] if info["channel"] == "gateway" else "Alice's standing grant"
            _, approved, rejections = auto.get(key, (name, 0, 0))
            counted = (
                approved + (r["status"] == "approved"),
                rejections + (r["status"] == "rejected"),
            )
            auto[key] = (name, *counted)
    people: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in by_people:
        if r["policy_json"] is None or r["status"] == "responded":
            info = r["info"]
            who = (
                "the operator"
                if info["channel"] == "api"
                else PEOPLE[(info["channel"], info["user_id"])]
            )
            people[who][0] += 1
            people[who][1] += r["status"] == "approved"
            people[who][2] += r["status"] == "rejected"
    for v in await rows(gateway, VOTES):
        if v["project"] in projects and since <= moment(v["at"]) < until:
            info = json.loads(v["user_info_json"])
            who = PEOPLE[(info["channel"], info["user_id"])]
            people[who][0] += 1
            people[who][1 if v["approve"] else 2] += 1
    return Shown(
        period=period,
        per_day={day: dict(counts) for day, counts in per_day.items()},
        by_team={team: timing(values) for team, values in teams.items()},
        by_channel={place: timing(values) for place, values in channels.items()},
        pending=dict(pending),
        rejected=rejected[:10],
        auto=auto,
        people={who: (a, b, c) for who, (a, b, c) in people.items()},
    )


def assert_same(shown: Shown, wanted: Shown) -> None:
    assert shown.per_day == wanted.per_day
    assert shown.by_team == wanted.by_team
    assert shown.by_channel == wanted.by_channel
    assert shown.pending == wanted.pending
    assert shown.rejected == wanted.rejected
    assert shown.auto == wanted.auto
    assert shown.people == wanted.people


def decisions(shown: Shown) -> int:
    return sum(sum(counts.values()) for counts in shown.per_day.values())


async def insights(client: httpx.AsyncClient, **query: str) -> Shown:
    got = await client.get("/console/insights", params=query)
    assert got.status_code == 200, got.text
    return read_page(got.text)


# --- the tests


async def test_every_figure_equals_sql_computed_independently(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    await seed(gateway, request_factory)
    both = {"default", "billing"}
    async with signed_in(gateway, "alice") as alice:  # plain HTTP: no JavaScript at all
        shown = await insights(alice)
        assert shown.period[1] - shown.period[0] == timedelta(days=29)
        assert_same(shown, await expected(gateway, shown.period, both))
        # What the seed makes sure the page has something to compare in each figure.
        assert shown.by_team.keys() == {"sre", "ops"}
        assert shown.by_channel.keys() == {"Slack", "the web console", "the API"}
        assert shown.people["Alice"][0] == 6  # in Slack and the console, one person; a vote
        assert shown.auto["no-rm"] == ("rule no-rm", 0, 1)
        # Team times are people's: not the grant's (0 s) nor the deadline's (the timeout).
        assert shown.by_team["sre"][0] == 4
        assert ("deploy", 1, 1, 3) in shown.rejected  # one person's rejection, one deadline
        assert sum(counts.get("expired", 0) for counts in shown.per_day.values()) == 1
        assert [name for name, *_ in shown.auto.values()].count("Alice's standing grant") == 1

        week = await insights(alice, days="7")
        assert_same(week, await expected(gateway, week.period, both))
        assert "Bob" in shown.people and week.people["Bob"][0] < shown.people["Bob"][0]

        billing = await insights(alice, project="billing")
        assert_same(billing, await expected(gateway, billing.period, {"billing"}))
        assert billing.people == {"Carol": (1, 0, 1)}

        start = (utcnow() - timedelta(days=60)).date().isoformat()
        custom = await insights(alice, **{"from": start, "to": utcnow().date().isoformat()})
        assert_same(custom, await expected(gateway, custom.period, both))
        assert decisions(custom) == decisions(shown) + 2  # those 40 and 45 days ago


async def test_who_sees_which_project(
    sqlite_console: RunningGateway, request_factory: RequestFactory
) -> None:
    gateway = sqlite_console
    await seed(gateway, request_factory)
    async with signed_in(gateway, "carol") as carol:  # Carol works on billing only
        hers = await insights(carol)
        assert hers.people == {"Carol": (1, 0, 1)}
        assert hers.pending == {"30m to 1h": 1}  # bill-2; none of default's
        assert decisions(hers) == 1 and hers.rejected == [("refund", 1, 0, 1)]  # billing's
        other = await carol.get("/console/insights", params={"project": "default"})
        assert other.status_code == 404
        assert Tables(other.text).tables == {} and "data-total" not in other.text
        wrong = await carol.get("/console/insights", params={"from": "2026-13-01"})
        assert wrong.status_code == 422
    agent_key = await gateway.new_key("default", name="agent")
    admin_key = await gateway.new_key("default", name="admin", scope=KeyScope.ADMIN)
    for key in (agent_key, admin_key):  # the console knows people, not API keys
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(base_url=gateway.base_url, headers=headers) as agent:
            refused = await agent.get("/console/insights", follow_redirects=True)
        assert refused.status_code == 200 and refused.url.path == "/console/login"
        assert Tables(refused.text).tables == {} and "data-total" not in refused.text


async def test_chromium_shows_the_charts(
    sqlite_console: RunningGateway, page: Page, request_factory: RequestFactory, tmp_path: Path
) -> None:
    gateway = sqlite_console
    await seed(gateway, request_factory)
    await sign_in_page(page, gateway, "alice")
    await page.get_by_role("link", name="Insights").click()
    await expect(page.get_by_role("heading", name="Insights", exact=True)).to_be_visible()
    days = page.locator("svg.days")
    await expect(days.locator("g")).to_have_count(30)  # a column per day, empty ones too
    await expect(
        page.locator("svg[aria-label='Time to decision, per team'] text.label")
    ).to_have_text(["sre", "ops"])
    await expect(page.locator("table#answers")).to_be_visible()
    saved = [await screenshot(page, "insights")]
    today = utcnow().date()
    await page.get_by_label("From", exact=True).fill((today - timedelta(days=59)).isoformat())
    await page.get_by_label("To", exact=True).fill(today.isoformat())
    await page.get_by_role("button", name="Show these days").click()
    await expect(page.locator("svg.days g")).to_have_count(60)
    await page.get_by_label("Project").select_option("default")
    await page.get_by_role("button", name="7 days").click()  # the boxes are still filled
    await expect(page.locator("svg.days g")).to_have_count(7)
    saved.append(await screenshot(page, "insights-default-7-days"))
    for path in saved:
        assert path.parent == SCREENSHOTS and path.stat().st_size > 10_000
        (tmp_path / path.name).write_bytes(path.read_bytes())


async def test_a_period_button_wins_over_the_boxes(sqlite_console: RunningGateway) -> None:
    """What a form without JavaScript sends: the boxes still hold a custom period's days,
    and the button pressed says which period to show."""
    today = utcnow().date()

    def ago(days: int) -> date:
        return today - timedelta(days=days)

    async with signed_in(sqlite_console, "alice") as alice:
        boxes = {"from": ago(60).isoformat(), "to": ago(50).isoformat()}
        assert (await insights(alice, days="custom", **boxes)).period == (ago(60), ago(50))
        assert (await insights(alice, days="7", **boxes)).period == (ago(6), today)
        assert (await insights(alice, **boxes)).period == (ago(60), ago(50))  # a link's
        # Only the last day: the 30 days up to it.
        assert (await insights(alice, to=ago(100).isoformat())).period == (ago(129), ago(100))


async def test_one_page_is_computed_at_a_time(
    sqlite_console: RunningGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two loads at once: the second one's queries wait for the first one's, so one page
    holds at most its own five reader threads. (Both loads start in the same turn of the
    event loop: without the lock all ten queries would be running together.)"""
    db = sqlite_console.core.db
    real_scan = db.scan
    running, most = 0, 0

    async def counted(fn: Any, /, *args: Any) -> Any:
        nonlocal running, most
        if fn.__module__ != insight_store.__name__:
            return await real_scan(fn, *args)
        running += 1
        most = max(most, running)
        try:
            return await real_scan(fn, *args)
        finally:
            running -= 1

    monkeypatch.setattr(db, "scan", counted)
    core, until = sqlite_console.core, utcnow()
    week = (until - timedelta(days=7), until)
    await asyncio.gather(
        insight_door.gather(core, None, *week), insight_door.gather(core, None, *week)
    )
    assert most == 5
