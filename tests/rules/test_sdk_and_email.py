"""The published humanlayer 0.7.9 SDK and the real email channel (to the SMTP sink) against
a gateway whose rules decide: `require_approval` runs the function at once when a rule
approves, reports the rule's comment when one rejects, and waits for a person otherwise.
Nobody is emailed about a request a rule decided, whatever its own `spec.channel` says."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from humanlayer import HumanLayer

from tests.channels.email.helpers import email_gateway, email_settings, sent_for
from tests.helpers import events, eventually, outbox_idle
from tests.rules.helpers import (
    AGENT_MAILBOX,
    ANN,
    DECIDING_RULES,
    PUBLIC_READS_COMMENT,
    RM_ROOT_COMMENT,
    create,
    decided_by,
    respond_as,
    rules_gateway,
    stored,
)
from tests.services.inprocess import RunningGateway, write_config
from tests.services.smtp_sink import SmtpSink, SunkMessage

MAILED_CONFIG = (
    r"""
[people.ann]
email = "ann@example.org"

[people.bob]
email = "bob@example.org"

"""
    + DECIDING_RULES
    + r"""
[[rules]]
name = "reads-to-ann"
fn = "read_file"
target = "person:ann"

[[rules]]
name = "runs-to-bob"
fn = "run"
target = "person:bob"
"""
)


@pytest.fixture
async def mailed(tmp_path: Path, smtp_sink: SmtpSink) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", MAILED_CONFIG)
    settings = email_settings(smtp_sink)
    async with email_gateway(tmp_path, settings, config=config, public_url="http://gw") as gw:
        yield gw


def sdk(gateway: RunningGateway, key: str, sleep: Callable[[int], None]) -> HumanLayer:
    """The SDK with call ids the test can name: call-1, call-2, ..."""
    numbers = itertools.count(1)
    return HumanLayer(
        api_key=key,
        api_base_url=gateway.api_base,
        run_id="sdk-run",
        sleep=sleep,
        genid=lambda prefix: f"{prefix}-{next(numbers)}",
    )


def read_file_tool(hl: HumanLayer, ran: list[str]) -> Callable[..., Any]:
    @hl.require_approval()
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(path)
        return f"contents of {path}"

    return read_file


def run_tool(hl: HumanLayer, ran: list[str]) -> Callable[..., Any]:
    @hl.require_approval()
    def run(cmd: str) -> str:
        """Run a shell command."""
        ran.append(cmd)
        return f"ran {cmd}"

    return run


def poll_briefly(polls: list[int], *, give_up_after: float = 20) -> Callable[[int], None]:
    """The SDK's sleep between polls (3 s), counted and made short. A call still undecided
    after `give_up_after` s ends in the SDK's "Error fetching approval" (the test fails)
    instead of polling for ever in its thread."""
    deadline = time.monotonic() + give_up_after

    def sleep(seconds: int) -> None:
        polls.append(seconds)
        if time.monotonic() > deadline:
            raise TimeoutError("still undecided: the test gives up")
        time.sleep(0.02)  # the SDK polls in its own thread; this only paces it

    return sleep


def body_of(sunk: SunkMessage) -> str:
    part = sunk.message.get_body(preferencelist=("plain",))
    return "" if part is None else str(part.get_content())


async def _emailed(sink: SmtpSink, call_id: str, address: str) -> bool:
    """Whether a copy of the request `call_id` was sent to `address`."""
    return any(address in m.rcpt_tos for m in sent_for(sink, call_id))


async def test_require_approval_runs_at_once_when_a_rule_approves(
    mailed: RunningGateway, smtp_sink: SmtpSink
) -> None:
    agent = await mailed.new_key("default", name="sdk agent")
    polls: list[int] = []
    ran: list[str] = []
    read_file = read_file_tool(sdk(mailed, agent, poll_briefly(polls)), ran)

    result = await asyncio.to_thread(read_file, path="/srv/public/readme.txt")

    assert result == "contents of /srv/public/readme.txt"
    assert ran == ["/srv/public/readme.txt"]
    assert polls == [3]  # its first look found it decided
    record = await stored(mailed, "call-1")
    assert record["spec"]["fn"] == "read_file"
    assert record["status"]["approved"] is True
    assert record["status"]["comment"] == PUBLIC_READS_COMMENT
    assert record["status"]["user_info"] == decided_by("public-reads")
    assert (await events(mailed, "call-1"))["deliveries"] == []

    # A read the `when` does not match waits for Ann, whom the next rule emails.
    polls.clear()
    waiting = asyncio.create_task(asyncio.to_thread(read_file, path="/etc/hosts"))
    await eventually(lambda: _emailed(smtp_sink, "call-2", ANN))
    assert not waiting.done()
    assert (await stored(mailed, "call-2"))["gateway_status"] == "pending"
    assert ran == ["/srv/public/readme.txt"]
    await respond_as(mailed, "ann", "call-2")
    assert await waiting == "contents of /etc/hosts"
    assert ran == ["/srv/public/readme.txt", "/etc/hosts"]
    assert len(polls) >= 1

    # The outbox is done: no message about the request the rule approved, to anyone.
    await eventually(lambda: outbox_idle(mailed))
    assert sent_for(smtp_sink, "call-1") == []
    assert {tuple(m.rcpt_tos) for m in smtp_sink.messages} == {(ANN,)}  # call-2's, to Ann
    assert not [m for m in smtp_sink.messages if "readme.txt" in body_of(m)]


async def test_require_approval_reports_the_rules_rejection(
    mailed: RunningGateway, smtp_sink: SmtpSink
) -> None:
    agent = await mailed.new_key("default", name="sdk agent")
    ran: list[str] = []
    run = run_tool(sdk(mailed, agent, poll_briefly([])), ran)

    result = await asyncio.to_thread(run, cmd="rm -rf /")

    assert result == f"User denied run with message: {RM_ROOT_COMMENT}"
    assert ran == []
    record = await stored(mailed, "call-1")
    assert record["status"]["approved"] is False
    assert record["status"]["comment"] == RM_ROOT_COMMENT
    assert record["status"]["user_info"] == decided_by("no-rm-root")
    await eventually(lambda: outbox_idle(mailed))
    assert smtp_sink.messages == []


@pytest.mark.parametrize(
    "channel",
    [
        {"email": {"address": AGENT_MAILBOX}},
        {"any_of": [{"email": {"address": AGENT_MAILBOX}}, {"person": "ann"}]},
        {"all_of": [{"email": {"address": AGENT_MAILBOX}}], "approvals_required": 1},
    ],
    ids=["own-mailbox", "any-of", "all-of"],
)
async def test_the_requests_own_channel_cannot_bypass_a_reject_rule(
    mailed: RunningGateway, smtp_sink: SmtpSink, channel: dict[str, Any]
) -> None:
    agent = await mailed.new_key("default", name="agent")
    made = await create(mailed, "rm-own", "run", {"cmd": "rm -rf /"}, key=agent, channel=channel)
    assert made["gateway_status"] == "rejected"
    assert made["route"] == []
    record = await stored(mailed, "rm-own")
    assert record["status"]["approved"] is False
    assert record["status"]["comment"] == RM_ROOT_COMMENT
    assert record["status"]["user_info"] == decided_by("no-rm-root")
    assert (await events(mailed, "rm-own"))["deliveries"] == []

    # The same channel on a command the rule does not match does reach the agent's mailbox
    # (as the rule for runs adds Bob): the sink would have seen a message to it.
    await create(mailed, "ls-own", "run", {"cmd": "ls /"}, key=agent, channel=channel)
    await eventually(lambda: _emailed(smtp_sink, "ls-own", AGENT_MAILBOX))
    await eventually(lambda: outbox_idle(mailed))
    assert sent_for(smtp_sink, "rm-own") == []
    assert not [m for m in smtp_sink.messages if "rm -rf" in body_of(m)]
    assert (await stored(mailed, "rm-own"))["gateway_status"] == "rejected"


async def test_an_approve_rule_is_not_bypassed_into_a_person_either(
    mailed: RunningGateway, smtp_sink: SmtpSink
) -> None:
    """The agent's channel on a call an approve rule matches contacts nobody: the rule
    decides before any channel is looked at."""
    agent = await mailed.new_key("default", name="agent")
    channel = {"email": {"address": AGENT_MAILBOX}}
    path = {"path": "/srv/public/x"}
    made = await create(mailed, "pub-own", "read_file", path, key=agent, channel=channel)
    assert made["gateway_status"] == "approved" and made["route"] == []
    await eventually(lambda: outbox_idle(mailed))
    assert smtp_sink.messages == []


NO_COMMENT_CONFIG = """
[[rules]]
name = "no-drops"
fn = "drop_*"
decide = "reject"
"""


async def test_a_reject_rule_without_a_comment_still_satisfies_the_sdk(tmp_path: Path) -> None:
    """The SDK refuses a rejection without a comment ("FunctionCallStatus.Rejected with no
    comment"), so the gateway gives every rejection one (seam.people.default_rejection):
    a rule's rejection too, when its `comment` is left out."""
    db = f"sqlite+aiosqlite:///{tmp_path}/gw.db"
    async with rules_gateway(db, tmp_path, NO_COMMENT_CONFIG) as gw:
        agent = await gw.new_key("default", name="sdk agent")
        hl = sdk(gw, agent, poll_briefly([]))
        ran: list[str] = []

        @hl.require_approval()
        def drop_table(name: str) -> str:
            """Drop a table."""
            ran.append(name)
            return f"dropped {name}"

        result = await asyncio.to_thread(drop_table, name="users")
        assert ran == []
        assert result.startswith("User denied drop_table with message: "), result
        record = await stored(gw, "call-1")
        assert record["status"]["approved"] is False
        assert record["status"]["comment"], record["status"]
