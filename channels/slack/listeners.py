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
from dataclasses import replace
from typing import Any

from aiohttp import ClientError
from slack_bolt.async_app import AsyncAck, AsyncApp, AsyncBoltRequest, AsyncRespond
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack.edit_form import (
    EDIT_MODAL,
    block_of,
    edit_modal,
    offers_edit,
    typed_arguments,
    typed_comment,
)
from channels.slack.render import escape
from gateway.seam import (
    BUTTON_PATTERN,
    Answered,
    AnsweredIn,
    Answers,
    CallbackId,
    Refusal,
    Refused,
    Responder,
    Verb,
    decode,
)
from gateway.seam.edits import EditProblem, read_edits

_MENTION = re.compile(r"<[@#!][^>]*>")  # "<@U123> approved": the mention is no part of it

REJECT_MODAL = "gw_reject_modal"
REASON_BLOCK = "gw_reason"
REASON_INPUT = "reason"


def thread_key(channel: str, ts: str) -> str:
    """How a post is named by the replies in its thread: its channel and its ts."""
    return f"{channel}:{ts}"


def responder(user: dict[str, Any], team_id: str | None, copy: str | None = None) -> Responder:
    """Who clicked or replied, as Slack names them (users.info adds the real name later), and
    the post they answered (`thread_key`)."""
    user_id = str(user.get("id") or "")
    name = str(user.get("username") or user.get("name") or user_id)
    extra = {"team_id": team_id} if team_id else {}
    return Responder(AnsweredIn.SLACK, user_id, name, extra=extra, copy=copy)


def _copy(body: dict[str, Any]) -> str | None:
    """The post a click came from, as Slack's signed payload names it."""
    container = body.get("container") or {}
    channel, ts = container.get("channel_id"), container.get("message_ts")
    return thread_key(str(channel), str(ts)) if channel and ts else None


def _team(body: dict[str, Any]) -> str | None:
    user = body.get("user") or {}
    team = (body.get("team") or {}).get("id") or user.get("team_id")
    return str(team) if team else None


def reason_modal(
    rid: str,
    *,
    title: str,
    prefill: str | None,
    option: int | str | None,
    copy: str | None = None,
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
        "private_metadata": json.dumps({"rid": rid, "option": option, "copy": copy}),
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
    def __init__(self, answers: Answers) -> None:
        self.answers = answers
        self._people: dict[str, tuple[str | None, str | None]] = {}

    async def _person(self, client: AsyncWebClient, who: Responder, within: float = 2) -> Responder:
        """Add the person's real name and email (users.info, cached).

        Best effort: without the users:read.email scope, or if Slack is slow, the answer
        still goes through with the id and username."""
        if who.id and who.id not in self._people:
            try:
                async with asyncio.timeout(within):
                    user = (await client.users_info(user=who.id))["user"]
            except (SlackApiError, ClientError, TimeoutError, KeyError):
                return who
            profile = user.get("profile") or {}
            name = user.get("real_name") or profile.get("real_name")
            self._people[who.id] = (name, profile.get("email"))
        name, email = self._people.get(who.id, (None, None))
        return replace(who, name=name or who.name, email=email or who.email)

    async def _answer(
        self,
        rid: str,
        verb: Verb,
        who: Responder,
        tell: Callable[[str], Awaitable[Any]],
        **details: Any,
    ) -> Answered | None:
        """Answer through the core; a refusal is told to the person, privately."""
        outcome = await self.answers.answer(rid, verb, who, **details)
        if isinstance(outcome, Refused):
            await tell(escape(outcome.message))  # refusals quote the agent's call_id
            return None
        return outcome

    async def clicked(
        self, ack: AsyncAck, body: dict[str, Any], respond: AsyncRespond, client: AsyncWebClient
    ) -> None:
        await ack()
        action = body["actions"][0]
        click = _clicked(action)
        if click is None:
            return  # a button that is not ours
        who = responder(body.get("user") or {}, _team(body), _copy(body))
        if click.verb == Verb.EDIT:
            await self._open_edit(client, body, click.rid, who, _ephemeral(respond))
            return
        if click.verb == Verb.REJECT:
            refused = await self.answers.refusal(click.rid, who)
            if refused is not None:  # nobody types a reason for nothing
                await _ephemeral(respond)(escape(refused.message))
                return
            await self._open(client, body, click.rid, title="Reject", prefill=None, choice=None)
            return
        if click.verb == Verb.OPTION and await self._interactive(client, body, click, who):
            return
        who = await self._person(client, who)
        # "Approve and allow…" is a select: the chosen option's value names the grant.
        grant = {"grant": _selected(action)} if click.verb == Verb.GRANT else {}
        tell = _ephemeral(respond)
        await self._answer(click.rid, click.verb, who, tell, choice=click.index, **grant)

    async def _open_edit(
        self,
        client: AsyncWebClient,
        body: dict[str, Any],
        rid: str,
        who: Responder,
        tell: Callable[[str], Awaitable[Any]],
    ) -> None:
        """The "Edit and approve" modal, with the request's own arguments; none for a person
        who may not answer, or a request that does not offer editing."""
        refused = await self.answers.refusal(rid, who)
        if refused is not None:
            await tell(escape(refused.message))
            return
        request = await self.answers.view(rid)
        if request is None or not offers_edit(request):
            await tell("Editing the arguments is not offered on this request.")
            return
        view = edit_modal(request, copy=_copy(body))
        await client.views_open(trigger_id=body["trigger_id"], view=view)

    async def edit_submitted(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        """Approve with the edited arguments. Answered before the ack (Slack waits 3 s), so
        a field that does not read, or arguments the core refuses, show in the modal."""
        meta = json.loads(view["private_metadata"])
        rid = str(meta.get("rid") or "")
        request = await self.answers.view(rid)
        # The arguments as stored: the modal's own copy of them is the client's.
        kwargs: dict[str, Any] = (request.spec.get("kwargs") or {}) if request else {}
        edited = read_edits(kwargs, typed_arguments(view, kwargs))
        if isinstance(edited, EditProblem):
            await ack(
                response_action="errors", errors={block_of(kwargs, edited.field): edited.message}
            )
            return
        user = body.get("user") or {}
        who = responder(user, _team(body), meta.get("copy"))
        who = await self._person(client, who, within=1)  # within Slack's 3 s
        outcome = await self.answers.answer(
            rid, Verb.EDIT, who, edited=edited, text=typed_comment(view)
        )
        if isinstance(outcome, Refused) and outcome.why == Refusal.INVALID:
            await ack(response_action="errors", errors={block_of(kwargs): outcome.message})
            return
        await ack()
        if isinstance(outcome, Refused):
            await _direct(client, who)(escape(outcome.message))

    async def _interactive(
        self, client: AsyncWebClient, body: dict[str, Any], click: CallbackId, who: Responder
    ) -> bool:
        """An interactive option opens its form, prefilled; True when it did."""
        form = await self.answers.option_form(click.rid, who, click.index)
        if form is None:
            return False
        await self._open(
            client, body, click.rid, title=form.title, prefill=form.prefill, choice=click.index
        )
        return True

    async def _open(
        self,
        client: AsyncWebClient,
        body: dict[str, Any],
        rid: str,
        *,
        title: str,
        prefill: str | None,
        choice: int | None,
    ) -> None:
        """The reason form (within 3 s of the click: Slack's trigger_id expires)."""
        view = reason_modal(rid, title=title, prefill=prefill, option=choice, copy=_copy(body))
        await client.views_open(trigger_id=body["trigger_id"], view=view)

    async def reason_submitted(
        self, ack: AsyncAck, body: dict[str, Any], view: dict[str, Any], client: AsyncWebClient
    ) -> None:
        reason = view["state"]["values"][REASON_BLOCK][REASON_INPUT].get("value") or ""
        if not reason.strip():
            await ack(response_action="errors", errors={REASON_BLOCK: "Give a reason"})
            return
        await ack()
        meta = json.loads(view["private_metadata"])
        user = body.get("user") or {}
        who = await self._person(client, responder(user, _team(body), meta.get("copy")))
        verb = Verb.REJECT if meta.get("option") is None else Verb.OPTION
        tell = _direct(client, who)
        await self._answer(meta["rid"], verb, who, tell, text=reason, choice=meta.get("option"))

    async def _thread_request(self, channel: str, thread_ts: str) -> str | None:
        """The request whose Slack message starts this thread, in this channel."""
        return await self.answers.find(thread_key(channel, thread_ts))

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
        rid = await self._thread_request(channel, str(thread_ts))
        if rid is None:
            return  # a thread that is not one of ours
        text, user = str(event.get("text") or "").strip(), str(event.get("user") or "")
        team = str(event.get("team")) if event.get("team") else None
        copy = thread_key(channel, str(thread_ts))
        who = await self._person(client, responder({"id": user}, team, copy))
        # Slack redelivers an event it thinks we missed; the first copy may have decided.
        # Socket Mode stamps every event with retry_attempt 0: only a count above 0 is a retry.
        retried = int((request.headers.get("x-slack-retry-num") or ["0"])[0]) > 0

        async def tell(note: str) -> None:
            if not retried:
                await client.chat_postEphemeral(
                    channel=channel, user=user, text=note, thread_ts=thread_ts
                )

        readable = html.unescape(_MENTION.sub("", text))  # Slack escapes &<> in what it sends
        answered = await self._answer(rid, Verb.REPLY, who, tell, text=readable)
        # Say how it was read, so who meant otherwise learns it now; a courtesy: it may fail.
        if answered is not None and answered.reading is not None and text:
            with contextlib.suppress(SlackApiError, ClientError):
                await tell(escape(answered.reading.sentence))

    def register(self, app: AsyncApp) -> None:
        app.event("message")(self.thread_reply)
        app.action(re.compile(f"^{BUTTON_PATTERN}$"))(self.clicked)
        app.action(_LEGACY_ACTION)(self.clicked)
        app.view(REJECT_MODAL)(self.reason_submitted)
        app.view(EDIT_MODAL)(self.edit_submitted)


# Buttons posted before the shared callback ids: action_id gw_approve/gw_reject/gw_option_N,
# value the rid. Pending messages still carry them.
_LEGACY_ACTION = re.compile(r"^gw_(approve|reject|option_\d+)$")


def _clicked(action: dict[str, Any]) -> CallbackId | None:
    """What a click means: a button carries its callback id as its value, a select (which
    has no value) as its action_id."""
    if action.get("type") == "static_select":
        return decode(str(action.get("action_id") or ""))
    return decode(str(action.get("value") or "")) or _legacy(action)


def _selected(action: dict[str, Any]) -> str:
    """The value of the option a select's click chose ("" for none: the core refuses it)."""
    return str((action.get("selected_option") or {}).get("value") or "")


def _legacy(action: dict[str, Any]) -> CallbackId | None:
    match = _LEGACY_ACTION.match(str(action.get("action_id") or ""))
    if match is None:
        return None
    kind, rid = match.group(1), str(action.get("value") or "")
    if kind.startswith("option_"):
        return CallbackId(Verb.OPTION, rid, int(kind.removeprefix("option_")))
    return CallbackId(Verb(kind), rid)


def _direct(client: AsyncWebClient, who: Responder) -> Callable[[str], Awaitable[Any]]:
    """Tell the person in a DM: a modal has no response_url."""

    async def tell(text: str) -> None:
        await client.chat_postMessage(channel=who.id, text=text)

    return tell


def _ephemeral(respond: AsyncRespond) -> Callable[[str], Awaitable[Any]]:
    async def tell(text: str) -> None:
        await respond(text=text, response_type="ephemeral", replace_original=False)

    return tell
