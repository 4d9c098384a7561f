"""Answers arriving from any channel: one path (the answer door) decides who may answer,
reads options and free text, lets the first answer win and names who won."""

from __future__ import annotations

from typing import Any

import pytest

from gateway.seam import Answers
from gateway.seam.answers import Answered, Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.people import Responder
from gateway.seam.sentences import describe
from gateway.vocabulary import AnsweredIn
from tests.factories import RequestFactory
from tests.helpers import events
from tests.services.inprocess import RunningGateway

SLACK_C1 = {"slack": {"channel_or_user_id": "C1"}}


def answers(gateway: RunningGateway) -> Answers:
    """The answer path, as every channel is given it."""
    return gateway.context("slack").answers


def on_slack(user: str) -> Responder:
    return Responder(AnsweredIn.SLACK, user, user)


def on_discord(user: str) -> Responder:
    return Responder(AnsweredIn.DISCORD, user, user)


async def test_only_allowed_responders_decide(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    slack = {"slack": {"channel_or_user_id": "C1", "allowed_responder_ids": ["U0ALICE"]}}
    rid = (await request_factory(gateway, "allowed", channel=slack)).rid
    refused = await answers(gateway).answer(rid, Verb.APPROVE, on_slack("U0MALLORY"))
    assert refused == Refused(Refusal.NOT_ALLOWED, "you are not allowed to answer this request")
    async with gateway.client() as client:
        assert (await client.get("/function_calls/allowed")).json()["gateway_status"] == "pending"
    decided = await answers(gateway).answer(rid, Verb.APPROVE, on_slack("U0ALICE"))
    assert isinstance(decided, Answered) and decided.request.status == "approved"


async def test_anyone_in_the_channel_when_no_list(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "open", channel=SLACK_C1)).rid
    decided = await answers(gateway).answer(rid, Verb.APPROVE, on_slack("U0ANY"))
    assert isinstance(decided, Answered) and decided.request.user_info == {
        "channel": "slack",
        "user_id": "U0ANY",
        "name": "U0ANY",
    }


async def test_late_answers_are_told_who_decided_in_the_same_words_everywhere(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    rid = (await request_factory(gateway, "late", channel=SLACK_C1)).rid
    await answers(gateway).answer(rid, Verb.APPROVE, on_slack("U0ALICE"))
    late_slack = await answers(gateway).answer(rid, Verb.APPROVE, on_slack("U0BOB"))
    late_discord = await answers(gateway).answer(rid, Verb.REPLY, on_discord("42"), text="no")
    assert isinstance(late_slack, Refused) and isinstance(late_discord, Refused)
    assert late_slack == late_discord  # the same refusal, word for word
    assert late_slack.why == Refusal.DECIDED
    assert "already approved by U0ALICE in Slack at" in late_slack.message
    gone = await answers(gateway).answer("no-such-rid", Verb.APPROVE, on_slack("U0BOB"))
    assert gone == Refused(Refusal.GONE, "this request no longer exists")


@pytest.mark.parametrize(
    ("verb", "text", "choice", "status", "comment"),
    [
        (Verb.REJECT, "not today", None, "rejected", "not today"),
        (Verb.REJECT, None, None, "rejected", "Rejected in Slack by U0ALICE"),
        (Verb.OPTION, None, 0, "rejected", "marked as spam"),
        (Verb.OPTION, "my own words", "spam", "rejected", "my own words"),
        (Verb.REPLY, "LGTM 👍", None, "approved", None),
        (Verb.REPLY, "No, not on prod", None, "rejected", "No, not on prod"),
    ],
)
async def test_each_verb_decides_by_the_core_rules(
    gateway: RunningGateway,
    request_factory: RequestFactory,
    verb: Verb,
    text: str | None,
    choice: int | str | None,
    status: str,
    comment: str | None,
) -> None:
    spam = [{"name": "spam", "prompt_fill": "marked as spam"}]
    made = await request_factory(gateway, channel=SLACK_C1, reject_options=spam)
    done = await answers(gateway).answer(
        made.rid, verb, on_slack("U0ALICE"), text=text, choice=choice
    )
    assert isinstance(done, Answered)
    assert (done.request.status, done.request.comment) == (status, comment)
    assert describe(done.request).startswith(f"{status.capitalize()} by U0ALICE in Slack at ")


async def test_wrong_verbs_unknown_options_and_missing_answers_are_refused(
    gateway: RunningGateway, request_factory: RequestFactory
) -> None:
    call = await request_factory(gateway, channel=SLACK_C1)
    question = await request_factory(gateway, contact=True, channel=SLACK_C1)
    who = on_slack("U0ALICE")
    cases: list[tuple[str, Verb, dict[str, Any], Refusal]] = [
        (call.rid, Verb.ANSWER, {"text": "eu"}, Refusal.WRONG_VERB),
        (question.rid, Verb.APPROVE, {}, Refusal.WRONG_VERB),
        (call.rid, Verb.OPTION, {"choice": 3}, Refusal.UNKNOWN_OPTION),
        (call.rid, Verb.OPTION, {"choice": "later"}, Refusal.UNKNOWN_OPTION),
        (question.rid, Verb.ANSWER, {"text": "  "}, Refusal.MISSING_TEXT),
        (call.rid, Verb.REPLY, {"text": "yes, but not on Friday"}, Refusal.UNCLEAR),
    ]
    for rid, verb, details, why in cases:
        refused = await answers(gateway).answer(rid, verb, who, **details)
        assert isinstance(refused, Refused) and refused.why == why, (verb, details, refused)
    for made in (call, question):
        trail = await events(gateway, made.call_id)
        assert "decided" not in [e["type"] for e in trail["events"]]
