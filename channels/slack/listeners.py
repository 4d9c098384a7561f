"""What Slack sends the gateway: button clicks, modal submissions. Each listener acks first
(Slack's 3-second rule), then turns the click into a core decision; the outbox then edits
the message. A person who may not answer, or who clicks late, is told so privately."""

from __future__ import annotations

import asyncio
import contextlib
import html
import json
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import ClientError
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltRequest, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.render import escape
from gateway.decisions import (
    Decision,
    decide_by_rid,
    function_call_decision,
    human_contact_decision,
)
from gateway.errors import Conflict, NotAllowed, NotFound
from gateway.lifecycle import Event, Kind
from gateway.models import FunctionCallStatusIn, HumanContactStatusIn
from gateway.replies import Reading, read_reply
from gateway.store import requests as request_store
from gateway.store.rows import Request
from gateway.vocabulary import AnsweredIn, ChannelName

if TYPE_CHECKING:  # the composition root hands the core over
    from gateway.core import Core

_OPTION_PATTERN = re.compile(r"^gw_option_\d+$")
_MENTION = re.compile(r"<[@#!][^>]*>")  # "<@U123> approved": the mention is no part of it

REJECT_MODAL = "gw_reject_modal"
REASON_BLOCK = "gw_reason"
REASON_INPUT = "reason"


def user_info(body: dict[str, Any]) -> dict[str, Any]:
    user = body.get("user") or {}
    return {
        "channel": AnsweredIn.SLACK,
        "user_id": user.get("id"),
        "name": user.get("username") or user.get("name") or user.get("id"),
        "team_id": (body.get("team") or {}).get("id") or user.get("team_id"),
    }


def reason_modal(
    rid: str, *, title: str, prefill: str | None, option: str | None
) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "plain_text_input",
        "action_id": REASON_INPUT,
        "multiline": True,
        "min_length": 1,
        "max_length": 3000,
    }
    if prefill:
        element["initial_value"] = prefill[:3000]
    return {
        "type": "modal",
        "callback_id": REJECT_MODAL,
        "private_metadata": json.dumps({"rid": rid, "option": option}),
        "title": {"type": "plain_text", "text": title[:24]},
        "submit": {"type": "plain_text", "text": "Reject"},
        "close": {"type": "plain_text", "text": "Cancel"},
        "blocks": [
            {
                "type": "input",
                "block_id": REASON_BLOCK,
                "label": {"type": "plain_text", "text": "Why? The agent reads this."},
                "element": element,
            }
        ],
    }


class SlackListeners:
    def __init__(self, core: Core) -> None:
        self.core = core
        self._people: dict[str, dict[str, Any]] = {}

    async def _person(self, client: AsyncWebClient, info: dict[str, Any]) -> dict[str, Any]:
        """Add the person's real name and email (users.info, cached) to who decided.

        Best effort: without the users:read.email scope, or if Slack is slow, the decision
        still goes through with the id and username."""
        user_id = str(info.get("user_id") or "")
        if user_id and user_id not in self._people:
            try:
                async with asyncio.timeout(2):
                    user = (await client.users_info(user=user_id))["user"]
            except (SlackApiError, ClientError, TimeoutError, KeyError):
                return info
            profile = user.get("profile") or {}
            self._people[user_id] = {
                "name": user.get("real_name") or profile.get("real_name") or info.get("name"),
                "email": profile.get("email"),
            }
        known = {k: v for k, v in self._people.get(user_id, {}).items() if v}
        return info | known

    async def _decide(
        self,
        body: dict[str, Any],
        rid: str,
        decision: Decision,
        tell: Callable[[str], Awaitable[Any]],
    ) -> None:
        actor = str((body.get("user") or {}).get("id") or "")
        try:
            await decide_by_rid(self.core, rid, decision, channel=ChannelName.SLACK, actor_id=actor)
        except (NotAllowed, Conflict, NotFound) as refusal:
            await tell(str(refusal))

    async def _row(self, rid: str) -> Request | None:
        return await self.core.db.read(request_store.get_by_rid, rid)

    async def approve(
        self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        rid = body["actions"][0]["value"]
        who = await self._person(client, user_info(body))
        await self._decide(body, rid, Decision(Event.APPROVE, who), _ephemeral(respond))

    async def reject(self, ack: AsyncAck, body: dict[str, Any], client: AsyncWebClient) -> None:
        await ack()
        rid = body["actions"][0]["value"]
        view = reason_modal(rid, title="Reject", prefill=None, option=None)
        await client.views_open(trigger_id=body["trigger_id"], view=view)  # within 3 s

    async def option(
        self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        action = body["actions"][0]
        rid, index = action["value"], int(action["action_id"].removeprefix("gw_option_"))
        row = await self._row(rid)
        key = "reject_options" if row and row.kind == Kind.FUNCTION_CALL else "response_options"
        options = json.loads(row.spec_json).get(key) or [] if row else []
        if row is None or index >= len(options):
            await _ephemeral(respond)("this option no longer exists")
            return
        option = options[index]
        if row.kind == Kind.FUNCTION_CALL and option.get("interactive"):
            view = reason_modal(
                rid,
                title=option.get("title") or option["name"],
                prefill=option.get("prompt_fill"),
                option=option["name"],
            )
            await client.views_open(trigger_id=body["trigger_id"], view=view)
            return
        who = await self._person(client, user_info(body))
        # The core's rules, as for the API: the option's prompt_fill is the comment or answer.
        if row.kind == Kind.HUMAN_CONTACT:
            answer = HumanContactStatusIn(response_option_name=option["name"])
            decision = human_contact_decision(row, answer, who)
        else:
            rejection = FunctionCallStatusIn(approved=False, reject_option_name=option["name"])
            decision = function_call_decision(row, rejection, who)
        await self._decide(body, rid, decision, _ephemeral(respond))

    async def reason_submitted(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        reason = view["state"]["values"][REASON_BLOCK][REASON_INPUT].get("value") or ""
        if not reason.strip():
            await ack(response_action="errors", errors={REASON_BLOCK: "Give a reason"})
            return
        await ack()
        meta = json.loads(view["private_metadata"])
        decision = Decision(
            Event.REJECT,
            await self._person(client, user_info(body)),
            comment=reason.strip(),
            option_name=meta.get("option"),
        )
        user = str((body.get("user") or {}).get("id") or "")

        async def tell(text: str) -> None:  # a modal has no response_url: DM the person
            await client.chat_postMessage(channel=user, text=text)

        await self._decide(body, meta["rid"], decision, tell)

    async def _thread_request(self, channel: str, thread_ts: str) -> Request | None:
        """The request whose Slack message starts this thread, in this channel."""
        rows, deliveries = await self.core.db.read(request_store.thread_candidates, thread_ts)
        ours = {
            d.rid
            for d in deliveries
            if d.channel == ChannelName.SLACK
            and json.loads(d.ref_json or "{}").get("channel") == channel
        }
        return next((row for row in rows if row.rid in ours), None)

    async def thread_reply(
        self, event: dict[str, Any], client: AsyncWebClient, request: AsyncBoltRequest
    ) -> None:
        thread_ts, channel = event.get("thread_ts"), str(event.get("channel", ""))
        if (
            event.get("bot_id")
            or event.get("subtype")
            or not thread_ts
            or thread_ts == event.get("ts")
        ):
            return  # not a person's reply inside a thread
        row = await self._thread_request(channel, str(thread_ts))
        if row is None:
            return  # a thread that is not one of ours
        text, user = str(event.get("text") or "").strip(), str(event.get("user") or "")
        info = await self._person(
            client,
            {
                "channel": AnsweredIn.SLACK,
                "user_id": user,
                "name": user,
                "team_id": event.get("team"),
            },
        )
        # The core's rules: a rejection without text still gets a comment.
        reading: Reading | None = None
        if row.kind == Kind.HUMAN_CONTACT:
            decision = human_contact_decision(row, HumanContactStatusIn(response=text), info)
        else:
            reading = read_reply(html.unescape(_MENTION.sub("", text)))  # Slack escapes &<>
            reply = FunctionCallStatusIn(approved=reading.approved, comment=text or None)
            decision = function_call_decision(row, reply, info)
        # Slack redelivers an event it thinks we missed; the first copy may have decided.
        # Socket Mode stamps every event with retry_attempt 0: only a count above 0 is a retry.
        retried = int((request.headers.get("x-slack-retry-num") or ["0"])[0]) > 0

        async def tell(text: str) -> None:
            if not retried:
                await client.chat_postEphemeral(
                    channel=channel, user=user, text=text, thread_ts=thread_ts
                )

        try:
            await decide_by_rid(
                self.core, row.rid, decision, channel=ChannelName.SLACK, actor_id=user
            )
        except (NotAllowed, Conflict, NotFound) as refusal:
            await tell(str(refusal))
            return
        # Say how it was read, so who meant otherwise learns it now; a courtesy: it may fail.
        if reading is not None and text:
            with contextlib.suppress(SlackApiError, ClientError):
                await tell(escape(reading.sentence))

    def register(self, app: AsyncApp) -> None:
        app.event("message")(self.thread_reply)
        app.action("gw_approve")(self.approve)
        app.action("gw_reject")(self.reject)
        app.action(_OPTION_PATTERN)(self.option)
        app.view(REJECT_MODAL)(self.reason_submitted)


def _ephemeral(respond: AsyncRespond) -> Callable[[str], Awaitable[Any]]:
    async def tell(text: str) -> None:
        await respond(text=text, response_type="ephemeral", replace_original=False)

    return tell
