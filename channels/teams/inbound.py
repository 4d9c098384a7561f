"""`POST /teams/messages`: what the Bot Connector sends the gateway. Nothing is read before
the JWT is verified; a forged, stale or misdirected activity gets 401 and changes nothing.

The Agents SDK's hosting (`CloudAdapter`, `ChannelServiceAdapter`, `TurnContext`) is not used
here: it opens a connector client and a user-token client (each a token request through MSAL)
for every activity before any handler runs, even for a click answered in the HTTP response,
and its default error handler posts the exception's text into the chat. A click is answered
in its invoke response instead; the SDK's models shape what comes in and goes out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from fastapi import Request, Response
from fastapi.responses import JSONResponse
from microsoft_agents.activity import Activity
from pydantic import ValidationError

from channels.teams.activities import Click, clicked, parse, responder, tenant_of, thread_reply
from channels.teams.auth import BotFrameworkAuth, KeysUnavailable
from channels.teams.connector import Connector, card_activity
from channels.teams.conversations import Conversations
from channels.teams.render import (
    ADAPTIVE,
    ANSWER,
    COMMENT,
    GRANT,
    REASON,
    as_it_stands,
    edit_input,
    editable,
    note_card,
)
from channels.teams.settings import TeamsSettings
from gateway.errors import Unauthorized
from gateway.seam import Answered, Answers, Refused, Responder, Verb
from gateway.seam.edits import EditProblem, edit_fields, read_edits

log = logging.getLogger(__name__)

MESSAGE = "application/vnd.microsoft.activity.message"  # shown to the person who clicked
ERROR = "application/vnd.microsoft.error"
NO_IDENTITY = "Teams did not say who you are (no Entra ID): answer in the web console instead."


def card_response(card: dict[str, Any]) -> dict[str, Any]:
    """The card the person who clicked sees at once (the outbox updates everyone's)."""
    return {"statusCode": 200, "type": ADAPTIVE, "value": card}


def message_response(text: str) -> dict[str, Any]:
    """Words for the person who clicked alone (the SDK's AdaptiveCardInvokeResponse types its
    value as an object, so these three are written out)."""
    return {"statusCode": 200, "type": MESSAGE, "value": text}


def error_response(message: str) -> dict[str, Any]:
    return {"statusCode": 400, "type": ERROR, "value": {"code": "BadRequest", "message": message}}


class TeamsInbound:
    def __init__(
        self,
        settings: TeamsSettings,
        auth: BotFrameworkAuth,
        answers: Answers,
        conversations: Conversations,
        connector: Connector,
    ) -> None:
        self.settings = settings
        self.auth = auth
        self.answers = answers
        self.conversations = conversations
        self.connector = connector

    async def handle(self, request: Request) -> Response:
        """Verify, then act on one activity: a click is answered in the HTTP response."""
        try:
            claims, key = await self.auth.verify(request.headers.get("authorization"))
        except Unauthorized as error:
            return _refused(error)
        except KeysUnavailable as error:
            log.warning("teams: %s; activity refused for now", error)
            return JSONResponse({"detail": "cannot verify Teams tokens now"}, status_code=503)
        try:
            activity = parse(await request.json())
        except (ValueError, ValidationError):
            return JSONResponse({"detail": "the body is not a Bot Framework activity"}, 400)
        try:
            self.auth.check_activity(claims, key, activity)
            self._check_origin(activity)
        except Unauthorized as error:
            return _refused(error)
        answer = await self._act(activity)
        await self.conversations.remember(activity)
        return JSONResponse(answer) if answer is not None else Response(status_code=200)

    def _check_origin(self, activity: Activity) -> None:
        """From the configured tenant, through an allowed service URL: a token sent there
        later goes to Microsoft, never to whoever posted the activity."""
        if not self.settings.allows(str(activity.service_url or "")):
            raise Unauthorized("the activity's serviceUrl is not under TEAMS_ALLOWED_SERVICE_URLS")
        if tenant_of(activity) != self.settings.tenant_id:
            raise Unauthorized("the activity comes from another tenant")

    async def _act(self, activity: Activity) -> dict[str, Any] | None:
        click = clicked(activity)
        if click is not None:
            return await self._clicked(activity, click)
        if activity.type == "invoke":
            return error_response("not a button of this gateway")
        reply = thread_reply(activity)
        if reply is not None:
            await self._replied(activity, *reply)
        return None

    async def _clicked(self, activity: Activity, click: Click) -> dict[str, Any]:
        who = responder(activity)
        if who is None:
            return message_response(NO_IDENTITY)
        callback, inputs = click.callback, click.inputs
        details: dict[str, Any] = {"choice": callback.index}
        if callback.verb == Verb.EDIT:
            edited = await self._edited(callback.rid, inputs)
            if isinstance(edited, str):
                return message_response(edited)
            details["edited"] = edited
        if callback.verb == Verb.GRANT:
            details["grant"] = str(inputs.get(GRANT) or "")
        details["text"] = _typed(callback.verb, callback.index, inputs)
        outcome = await self.answers.answer(callback.rid, callback.verb, who, **details)
        if isinstance(outcome, Refused):
            return message_response(outcome.message)
        return card_response(as_it_stands(outcome.request))

    async def _edited(self, rid: str, inputs: dict[str, Any]) -> dict[str, Any] | str:
        """The arguments as edited on the card, read against the request as stored; or
        what is wrong with them, for the person."""
        request = await self.answers.view(rid)
        if request is None or not editable(request):
            return "Editing the arguments is not offered on this request."
        kwargs: dict[str, Any] = request.spec.get("kwargs") or {}
        texts = {
            field.name: str(inputs[edit_input(index)])
            for index, field in enumerate(edit_fields(kwargs))
            if inputs.get(edit_input(index)) is not None
        }
        edited = read_edits(kwargs, texts)
        if isinstance(edited, EditProblem):
            return f"{edited.field}: {edited.message}"
        return edited

    async def _replied(self, activity: Activity, key: str, text: str) -> None:
        """A reply in a request's thread: read as the answer (a question) or a yes/no (an
        approval); the person is told in the thread how it was read, or why it was not."""
        rid = await self.answers.find(key)
        who = responder(activity)
        if rid is None or who is None or not text:
            return
        outcome = await self.answers.answer(rid, Verb.REPLY, who, text=text)
        said = _said(who, outcome)
        if said is not None:
            with contextlib.suppress(Exception):  # a courtesy: the answer stands regardless
                async with asyncio.timeout(5):
                    await self._tell(activity, said)

    async def _tell(self, activity: Activity, text: str) -> None:
        """Plain words in the thread of a person's message."""
        note = card_activity(note_card(text), text[:200])
        service_url, conversation = str(activity.service_url), str(activity.conversation.id)
        await self.connector.reply(service_url, conversation, str(activity.id), note)


def _typed(verb: Verb, index: int | None, inputs: dict[str, Any]) -> str | None:
    """What the person typed on the card for this button (each form has its own input)."""
    ident = {Verb.REJECT: REASON, Verb.ANSWER: ANSWER, Verb.EDIT: COMMENT}.get(verb)
    if verb == Verb.OPTION and index is not None:
        ident = f"{REASON}_{index}"
    value = inputs.get(ident) if ident else None
    return str(value) if value is not None else None


def _said(who: Responder, outcome: Answered | Refused) -> str | None:
    if isinstance(outcome, Refused):
        return f"{who.name}: {outcome.message}"
    if outcome.reading is not None:
        return f"{who.name}: {outcome.reading.sentence}"
    return None


def _refused(error: Unauthorized) -> Response:
    log.warning("teams: refused an activity: %s", error)
    return JSONResponse({"detail": "unauthorized"}, status_code=401)
