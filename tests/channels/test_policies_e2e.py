"""Approval policies end to end, through the real channel stacks: Slack's Bolt app behind the
gateway with signed interaction POSTs and the real slack_sdk client against the fake Slack
Web API, email out through the SMTP sink and replies in through `POST /email/inbound`, the
web console through its HTTP forms, and webhooks to a local receiver.

Timing is measured against the request's own `requested_at`; the fake Slack stamps each call
as it arrives. Waits are bounded polls on what the fakes or the API show, never sleeps.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from channels.email.channel import EmailChannel
from channels.registry import ChannelFactory
from channels.web.auth import hash_password
from gateway.store import outbox as outbox_store
from gateway.store.rows import JobRow
from gateway.vocabulary import JobKind, JobStatus
from tests.channels.email.helpers import email_settings, post_inbound, reply, sent_for
from tests.channels.slack.helpers import click, modal_submit, send, slack_channel
from tests.factories import RequestFactory
from tests.fakes.slack import Call, FakeSlack
from tests.helpers import add_webhook, events, eventually, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings, write_config
from tests.services.receiver import WebhookReceiver
from tests.services.smtp_sink import SmtpSink, SunkMessage

PASSWORD = "correct horse battery staple"
PASSWORD_HASH = hash_password(PASSWORD)  # once: argon2 is slow on purpose
PEOPLE = {  # config name -> (Slack id, real name, email)
    "alice": ("U0ALICE", "Alice", "alice@example.org"),
    "bob": ("U0BOB", "Bob", "bob@example.org"),
    "carol": ("U0CAROL", "Carol", "carol@example.org"),
}
TEAM_EMAIL = "dba@example.org"
# Someone the config does not know: the all_of tests' second approver, by email. (A configured
# person's one answer counts for every branch that lists any of their ids.)
DANA = "dana@example.net"
# The outbox wakes for a job due at its time; allow it this much slack after that time.
WAKE_UP_SLACK = timedelta(seconds=1)
REMINDER = "gateway_reminder"
OUTCOME = "gateway_outcome"


def _config() -> str:
    people = "".join(
        f'[people.{name}]\nname = "{real}"\nslack = "{slack}"\nemail = "{email}"\n'
        f"password_hash = '{PASSWORD_HASH}'\n\n"
        for name, (slack, real, email) in PEOPLE.items()
    )
    return (
        people
        + f"""
[teams.dba]
members = ["alice", "bob", "carol"]
approvals_required = 2
slack_channel = "C1"
email = "{TEAM_EMAIL}"

[teams.ops]
members = ["alice", "bob", "carol"]
approvals_required = 2
slack_channel = "C2"

[[rules]]
fn = "drop_*"
target = "team:dba"

[[rules]]
fn = "restart_*"
target = "team:ops"
remind_every = 1
max_reminders = 2
expires_after = "1m"
"""
    )


class StampedSlack(FakeSlack):
    """The fake Slack Web API, noting when each call arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: list[tuple[Call, datetime]] = []

    async def _record(self, call: Call) -> None:
        self.arrived.append((call, datetime.now(UTC)))
        await super()._record(call)

    def posts(self, *, threaded: bool) -> list[tuple[Call, datetime]]:
        """chat.postMessage calls that succeeded: top-level posts, or thread replies."""
        return [
            (call, at)
            for call, at in self.arrived
            if call.method == "chat.postMessage"
            and not call.failed
            and bool(call.params.get("thread_ts")) is threaded
        ]


@pytest.fixture
async def fake() -> AsyncIterator[StampedSlack]:
    slack = StampedSlack()
    for slack_id, real, email in PEOPLE.values():  # as users.info tells the listeners
        slack.users[slack_id] = {
            "id": slack_id,
            "team_id": "T1",
            "name": real.lower(),
            "real_name": real,
            "is_bot": False,
            "profile": {"real_name": real, "display_name": real, "email": email},
        }
    async with slack:
        yield slack


@pytest.fixture
async def stack(
    db_url: str, tmp_path: Path, fake: StampedSlack, smtp_sink: SmtpSink
) -> AsyncIterator[RunningGateway]:
    """The gateway with Slack (fake Web API) and email (SMTP sink, inbound POSTs) channels,
    the people and teams above in its routing config, on SQLite and on PostgreSQL."""
    config = write_config(tmp_path / "routing.toml", _config())
    email = email_settings(smtp_sink)
    channels: dict[str, ChannelFactory] = {
        "slack": slack_channel(fake),
        "email": lambda context: EmailChannel(context, email),
    }
    async with running_gateway(test_settings(db_url, config=config), channels=channels) as gw:
        yield gw


# --- reading what the gateway and the fakes show


async def wire(gw: RunningGateway, call_id: str, *, wait: float | None = None) -> Any:
    params = {} if wait is None else {"wait": wait}
    async with gw.client() as client:
        got = await client.get(f"/function_calls/{call_id}", params=params)
    assert got.status_code == 200, got.text
    return got.json()


async def decided(gw: RunningGateway, call_id: str) -> Any:
    """The request once decided, through the gateway's own long-poll."""
    answer = await wire(gw, call_id, wait=10)
    assert answer["gateway_status"] != "pending", answer
    return answer


async def progress_reaches(gw: RunningGateway, call_id: str, approvals: int) -> Any:
    """The request once its policy counts `approvals` (a Slack click is acked before it
    is recorded, so there is nothing else to wait on)."""
    seen: dict[str, Any] = {}

    async def counted() -> bool:
        seen.update(await wire(gw, call_id))
        progress = seen.get("policy_progress") or {}
        return bool(progress.get("approvals") == approvals)

    await eventually(counted, within=5)
    return seen


def requested_at(answer: Any) -> datetime:
    return datetime.fromisoformat(answer["status"]["requested_at"])


def buttons(message: dict[str, Any]) -> list[str]:
    blocks = message.get("blocks") or []
    return [e["action_id"] for b in blocks if b["type"] == "actions" for e in b["elements"]]


def contexts(message: dict[str, Any]) -> list[str]:
    blocks = message.get("blocks") or []
    return [e["text"] for b in blocks if b["type"] == "context" for e in b["elements"]]


def the_post(fake: FakeSlack, channel: str) -> tuple[str, dict[str, Any]]:
    """The one top-level message in `channel`, as Slack now shows it (edits applied)."""
    [(ts, message)] = [
        (ts, m) for (c, ts), m in fake.messages.items() if c == channel and not m.get("thread_ts")
    ]
    return ts, message


async def recorded_post(gw: RunningGateway, fake: FakeSlack, call_id: str) -> str:
    """The ts of the request's post in C9, once the gateway recorded it as sent (a click
    names its post: one that arrives before the post is recorded counts for no copy)."""

    async def sent() -> bool:
        deliveries = (await events(gw, call_id))["deliveries"]
        return any(d["channel"] == "slack" and d["status"] == "sent" for d in deliveries)

    await eventually(sent, within=5)
    return the_post(fake, "C9")[0]


def event_types(thread: list[dict[str, Any]]) -> list[str]:
    return [str((m.get("metadata") or {}).get("event_type")) for m in thread]


async def edited_to(fake: FakeSlack, channel: str, line: str) -> dict[str, Any]:
    """The post once an edit put `line` in one of its context blocks."""

    async def shows() -> bool:
        return line in contexts(the_post(fake, channel)[1])

    await eventually(shows, within=5)
    return the_post(fake, channel)[1]


async def decided_in_slack(fake: FakeSlack, channel: str) -> dict[str, Any]:
    """The post once an edit took its buttons away (the request was decided)."""

    async def no_buttons() -> bool:
        return buttons(the_post(fake, channel)[1]) == []

    await eventually(no_buttons, within=5)
    return the_post(fake, channel)[1]


async def jobs_of(gw: RunningGateway, rid: str) -> list[JobRow]:
    every = await gw.core.db.read(outbox_store.list_jobs, project_id=None, status=None)
    return [job for job in every if job.rid == rid]


def event_names(trail: dict[str, Any]) -> list[str]:
    return [event["type"] for event in trail["events"]]


# --- the web console over HTTP, as a browser on its own site

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def console_approve(gw: RunningGateway, email: str, rid: str) -> str:
    """Sign in with a password, open the request's page, press Approve; the page after."""
    headers = {"Origin": gw.base_url}
    async with httpx.AsyncClient(base_url=gw.base_url, headers=headers, timeout=30) as browser:
        signed_in = await browser.post(
            "/console/login", data={"email": email, "password": PASSWORD}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = await browser.get(f"/console/requests/{rid}")
        assert page.status_code == 200, page.text
        assert 'value="approve"' in page.text, "a pending request shows its Approve button"
        found = CSRF.search(page.text)
        assert found is not None, "no csrf field on the page"
        data = {"action": "approve", "csrf": found.group(1)}
        pressed = await browser.post(f"/console/requests/{rid}", data=data)
        assert pressed.status_code == 303, pressed.text
        after = await browser.get(pressed.headers["location"])
    assert after.status_code == 200, after.text
    return after.text


async def console_page(gw: RunningGateway, email: str, rid: str) -> str:
    headers = {"Origin": gw.base_url}
    async with httpx.AsyncClient(base_url=gw.base_url, headers=headers, timeout=30) as browser:
        signed_in = await browser.post(
            "/console/login", data={"email": email, "password": PASSWORD}
        )
        assert signed_in.status_code == 303, signed_in.text
        page = await browser.get(f"/console/requests/{rid}")
    assert page.status_code == 200, page.text
    return page.text


# --- 1. all_of: Slack and email must both approve

BOTH = {
    "all_of": [
        {"slack": {"channel_or_user_id": "C9"}},
        {"email": {"address": DANA}},
    ]
}


async def _approved_in_slack_only(
    gw: RunningGateway, fake: StampedSlack, sink: SmtpSink, factory: RequestFactory, call_id: str
) -> SunkMessage:
    """An all_of request approved in Slack: pending, both copies still answerable; returns
    the email it sent."""
    made = await factory(gw, call_id, fn="deploy", channel=BOTH, settle=True)
    assert made.wire["policy"]["mode"] == "all_of"
    [emailed] = sent_for(sink, call_id)
    ts, posted = the_post(fake, "C9")
    assert buttons(posted) == [f"gw:approve:{made.rid}", f"gw:reject:{made.rid}"]

    assert (
        await send(gw, click(fake, made.rid, "gw_approve", channel="C9", ts=ts))
    ).status_code == 200
    pending = await progress_reaches(gw, call_id, 1)
    assert pending["gateway_status"] == "pending"
    assert pending["status"]["approved"] is None  # the SDK keeps waiting
    assert pending["policy_progress"]["needed"] == 2
    [approver] = pending["policy_progress"]["approvers"]
    assert (approver["channel"], approver["user_id"]) == ("slack", "U0ALICE")

    edited = await edited_to(fake, "C9", ":hourglass: 1 of 2 approvals: Alice (Slack)")
    assert buttons(edited) == [f"gw:approve:{made.rid}", f"gw:reject:{made.rid}"]
    await eventually(lambda: outbox_idle(gw), within=5)
    assert fake.thread("C9", ts) == [], "a partial approval posts no thread note"
    assert sent_for(sink, call_id) == [emailed], "and sends no email"
    return emailed


async def test_all_of_slack_then_email_approval_approves(
    stack: RunningGateway,
    fake: StampedSlack,
    smtp_sink: SmtpSink,
    request_factory: RequestFactory,
) -> None:
    emailed = await _approved_in_slack_only(stack, fake, smtp_sink, request_factory, "both-yes")

    outcome = await post_inbound(stack, reply(emailed.message, "approved", sender=f"Dana <{DANA}>"))

    assert outcome["result"] == "decided", outcome
    answer = await decided(stack, "both-yes")
    assert answer["status"]["approved"] is True
    assert answer["status"]["user_info"]["channel"] == "email"
    assert answer["status"]["user_info"]["email"] == DANA
    assert answer["policy_progress"]["approvals"] == 2
    post = await decided_in_slack(fake, "C9")
    assert post["text"].startswith(":white_check_mark: Approved by Dana in Email at "), post
    trail = await events(stack, "both-yes")
    assert event_names(trail).count("voted") == 1
    assert event_names(trail).count("decided") == 1
    assert [d["status"] for d in trail["deliveries"]] == ["sent", "sent"]


async def test_all_of_slack_approval_then_email_rejection_rejects_with_its_reason(
    stack: RunningGateway,
    fake: StampedSlack,
    smtp_sink: SmtpSink,
    request_factory: RequestFactory,
) -> None:
    emailed = await _approved_in_slack_only(stack, fake, smtp_sink, request_factory, "both-no")

    outcome = await post_inbound(
        stack,
        reply(
            emailed.message,
            "Reject: the release freeze starts today",
            sender=f"Dana <{DANA}>",
        ),
    )

    assert outcome["result"] == "decided", outcome
    answer = await decided(stack, "both-no")
    assert answer["gateway_status"] == "rejected"
    assert answer["status"]["approved"] is False
    assert answer["status"]["comment"] == "the release freeze starts today"
    assert answer["status"]["user_info"]["email"] == DANA
    text = (await decided_in_slack(fake, "C9"))["text"]
    assert text.startswith(":x: Rejected by ") and "the release freeze starts today" in text


# --- 2. a 2-of-3 team: one person counts once, wherever they click


async def test_a_two_of_three_team_counts_each_person_once_across_channels(
    stack: RunningGateway,
    fake: StampedSlack,
    smtp_sink: SmtpSink,
    receiver: WebhookReceiver,
    request_factory: RequestFactory,
) -> None:
    await add_webhook(stack, receiver.url)
    made = await request_factory(stack, "quorum", fn="drop_table", settle=True)
    rid = made.rid
    assert made.wire["policy"]["approvals_required"] == 2
    [emailed] = sent_for(smtp_sink, "quorum")
    assert emailed.rcpt_tos == [TEAM_EMAIL]
    ts, _ = the_post(fake, "C1")

    await send(stack, click(fake, rid, "gw_approve", user="U0ALICE", respond_id="a1"))
    await progress_reaches(stack, "quorum", 1)
    after = await console_approve(stack, PEOPLE["alice"][2], rid)
    assert "Your vote is recorded: 1 of 2 approvals: Alice (Slack)." in after
    assert 'data-status="pending"' in after

    pending = await wire(stack, "quorum")
    assert pending["gateway_status"] == "pending"
    assert pending["policy_progress"]["approvals"] == 1  # Alice, once
    assert [a["user_id"] for a in pending["policy_progress"]["approvers"]] == ["U0ALICE"]
    assert event_names(await events(stack, "quorum")).count("voted") == 1  # the repeat: nothing
    still = await edited_to(fake, "C1", ":hourglass: 1 of 2 approvals: Alice (Slack)")
    assert buttons(still) == [f"gw:approve:{rid}", f"gw:reject:{rid}"]
    assert receiver.received == []

    await send(stack, click(fake, rid, "gw_approve", user="U0BOB", respond_id="b1"))

    answer = await decided(stack, "quorum")
    assert answer["status"]["approved"] is True
    assert answer["status"]["user_info"]["user_id"] == "U0BOB"
    assert answer["policy_progress"]["approvals"] == 2
    [hook] = await receiver.wait_for(1)
    await eventually(lambda: outbox_idle(stack), within=5)
    assert len(receiver.received) == 1, "exactly one webhook"
    delivered = json.loads(hook.body)
    assert delivered["type"] == "function_call.completed"
    assert delivered["event"]["call_id"] == "quorum"
    assert delivered["event"]["status"]["approved"] is True
    # Every copy shows the outcome: Slack's post (no buttons, one note), the team's email
    # thread, the console.
    _, post = the_post(fake, "C1")
    assert buttons(post) == []
    assert post["text"].startswith(":white_check_mark: Approved by <@U0BOB> at ")
    assert event_types(fake.thread("C1", ts)) == [OUTCOME]
    notes = [
        m for m in smtp_sink.messages if m.message["In-Reply-To"] == emailed.message["Message-ID"]
    ]
    [note] = notes
    assert note.rcpt_tos == [TEAM_EMAIL]
    assert "Approved by Bob in Slack" in note.message.get_content()
    page = await console_page(stack, PEOPLE["carol"][2], rid)
    assert 'data-status="approved"' in page and 'value="approve"' not in page
    trail = event_names(await events(stack, "quorum"))
    assert (trail.count("voted"), trail.count("decided")) == (1, 1)


# --- 3. any_of with a delayed branch


async def test_a_delayed_any_of_branch_is_contacted_at_its_time(
    stack: RunningGateway,
    fake: StampedSlack,
    smtp_sink: SmtpSink,
    request_factory: RequestFactory,
) -> None:
    channel = {
        "any_of": [
            {"email": {"address": DANA}},
            {"timeout": 2, "channel": {"slack": {"channel_or_user_id": "C9"}}},
        ]
    }
    made = await request_factory(stack, "later", fn="deploy", channel=channel)
    start = requested_at(made.wire)
    due = start + timedelta(seconds=2)

    await smtp_sink.wait_for_messages(1)  # the email branch goes out at once
    early = await send(stack, click(fake, made.rid, "gw_approve", respond_id="early"))
    assert early.status_code == 200
    [told] = await fake.wait_for_response("early")
    assert "counts for none" in told["text"], told  # the Slack branch is not open yet
    assert datetime.now(UTC) < due, "the checks above ran before the delay was over"
    assert fake.posts(threaded=False) == []
    [slack_delivery] = [
        d for d in (await events(stack, "later"))["deliveries"] if d["channel"] == "slack"
    ]
    assert slack_delivery["status"] == "queued"
    assert (await wire(stack, "later"))["gateway_status"] == "pending"

    await fake.wait_for("chat.postMessage", 1, within=5, include_failed=False)

    [(post, at)] = fake.posts(threaded=False)
    assert post.params["channel"] == "C9"
    assert due <= at <= due + WAKE_UP_SLACK, (at - start).total_seconds()
    assert [
        call for call, when in fake.arrived if call.method == "chat.postMessage" and when < due
    ] == []
    ts = await recorded_post(stack, fake, "later")
    await send(stack, click(fake, made.rid, "gw_approve", respond_id="late", channel="C9", ts=ts))
    answer = await decided(stack, "later")
    assert answer["status"]["approved"] is True
    assert answer["status"]["user_info"]["channel"] == "slack"


async def test_an_approval_in_a_branch_opened_later_counts_after_an_earlier_one(
    stack: RunningGateway,
    fake: StampedSlack,
    smtp_sink: SmtpSink,
    request_factory: RequestFactory,
) -> None:
    """Alice approves in Slack at once; the email branch (only her address) opens after 1 s
    and she approves there too. Had she answered only by email after 1 s, that one answer
    would have approved both branches; answering early must not leave the request stuck."""
    alice = PEOPLE["alice"][2]
    channel = {
        "all_of": [
            {"slack": {"channel_or_user_id": "C9"}},
            {"timeout": 1, "channel": {"email": {"address": alice}}},
        ]
    }
    made = await request_factory(stack, "opened-later", fn="deploy", channel=channel)
    await fake.wait_for("chat.postMessage", 1, include_failed=False)
    ts = await recorded_post(stack, fake, "opened-later")
    await send(stack, click(fake, made.rid, "gw_approve", user="U0ALICE", channel="C9", ts=ts))
    await progress_reaches(stack, "opened-later", 1)
    [emailed] = await smtp_sink.wait_for_messages(1)  # the branch opened: she may answer

    outcome = await post_inbound(stack, reply(emailed.message, "approved", sender=f"<{alice}>"))

    assert outcome["result"] == "decided", outcome
    answer = await wire(stack, "opened-later")
    assert answer["gateway_status"] == "approved", answer["policy_progress"]


# --- 4. reminders


def reminders(fake: StampedSlack) -> list[tuple[Call, datetime]]:
    return [
        (call, at)
        for call, at in fake.posts(threaded=True)
        if (call.params.get("metadata") or {}).get("event_type") == REMINDER
    ]


async def reminded(fake: StampedSlack, count: int) -> list[tuple[Call, datetime]]:
    async def arrived() -> bool:
        return len(reminders(fake)) >= count

    await eventually(arrived, within=5)
    return reminders(fake)


async def test_reminders_in_the_thread_name_who_is_awaited_and_stop_at_the_decision(
    stack: RunningGateway, fake: StampedSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(stack, "nudge", fn="restart_service")
    start = requested_at(made.wire)
    await fake.wait_for("chat.postMessage", 1, include_failed=False)
    ts, _ = the_post(fake, "C2")

    [(first, first_at)] = await reminded(fake, 1)
    assert first.params["thread_ts"] == ts and first.params["channel"] == "C2"
    assert first.params["text"].startswith(
        "<@U0ALICE> <@U0BOB> <@U0CAROL> Reminder: this request is still waiting for a "
        "decision; it expires at "
    )
    one = start + timedelta(seconds=1)
    assert one <= first_at <= one + WAKE_UP_SLACK, (first_at - start).total_seconds()

    await send(stack, click(fake, made.rid, "gw_approve", user="U0ALICE"))
    await progress_reaches(stack, "nudge", 1)

    [_, (second, second_at)] = await reminded(fake, 2)
    assert second.params["text"].startswith(
        "<@U0BOB> <@U0CAROL> Reminder: this request is still waiting for a decision "
        "(1 of 2 approvals: Alice (Slack)); it expires at "
    )
    two = start + timedelta(seconds=2)
    assert two <= second_at <= two + WAKE_UP_SLACK, (second_at - start).total_seconds()

    await send(stack, click(fake, made.rid, "gw_approve", user="U0BOB"))
    assert (await decided(stack, "nudge"))["status"]["approved"] is True
    await eventually(lambda: outbox_idle(stack), within=5)

    jobs = await jobs_of(stack, made.rid)
    assert not [j for j in jobs if j.status != JobStatus.DONE], "nothing left to run"
    timers = [j for j in jobs if j.kind == JobKind.TIMER]
    fired = sorted(json.loads(j.payload_json)["number"] for j in timers if j.attempts)
    assert fired == [1, 2]
    [expiry] = [j for j in timers if json.loads(j.payload_json)["timer"] == "expire"]
    assert expiry.attempts == 0 and expiry.last_error == "cancelled: the request was decided"
    assert len([j for j in jobs if j.kind == JobKind.REMIND]) == 2
    assert event_types(fake.thread("C2", ts)) == [REMINDER, REMINDER, OUTCOME]
    trail = await events(stack, "nudge")
    mentioned = [e["detail"]["mention"] for e in trail["events"] if e["type"] == "reminded"]
    assert mentioned == [["U0ALICE", "U0BOB", "U0CAROL"], ["U0BOB", "U0CAROL"]]


async def test_a_decision_between_reminders_cancels_the_next_one(
    stack: RunningGateway, fake: StampedSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(stack, "nudge-once", fn="restart_service")
    await fake.wait_for("chat.postMessage", 1, include_failed=False)
    ts, _ = the_post(fake, "C2")
    await reminded(fake, 1)

    # Alice's veto: Reject opens the reason form, its submission decides.
    await send(stack, click(fake, made.rid, "gw_reject", user="U0ALICE"))
    await fake.wait_for("views.open", 1)
    await send(stack, modal_submit(made.rid, "not during the incident"))
    answer = await decided(stack, "nudge-once")
    assert answer["status"]["approved"] is False
    assert answer["status"]["comment"] == "not during the incident"
    assert datetime.now(UTC) < requested_at(answer) + timedelta(seconds=2), "decided in time"
    await eventually(lambda: outbox_idle(stack), within=5)

    jobs = await jobs_of(stack, made.rid)
    timers = {
        json.loads(j.payload_json).get("number", "expire"): j
        for j in jobs
        if j.kind == JobKind.TIMER
    }
    assert timers[1].attempts == 1 and timers[1].status == JobStatus.DONE
    for cancelled in (timers[2], timers["expire"]):  # never claimed, and never will be
        assert cancelled.status == JobStatus.DONE and cancelled.attempts == 0
        assert cancelled.last_error == "cancelled: the request was decided"
    assert len([j for j in jobs if j.kind == JobKind.REMIND]) == 1
    assert event_types(fake.thread("C2", ts)) == [REMINDER, OUTCOME]
    assert len(reminders(fake)) == 1
