"""The answer door (`gateway.seam.context.Answers`): one answer path for every channel. A
channel turns a platform event into one `answer(...)` and renders what comes back; who may
answer, the request's options and the refusals exist here once, and the decision itself is
`gateway.answers.decisions.submit`, as for the API and the CLI."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from gateway.answers.decisions import submit
from gateway.answers.verbs import decision_for, option
from gateway.core import Core
from gateway.errors import Conflict, InvalidInput, NotAllowed
from gateway.lifecycle import Kind, Status
from gateway.policies import votes
from gateway.policies.votes import OPERATOR, person_of
from gateway.seam.answers import Answered, Form, Refusal, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.people import BY_LINK, Responder, already_decided
from gateway.seam.targets import responders_through
from gateway.seam.views import RequestView
from gateway.store import requests as request_store
from gateway.store.rows import RequestRow
from gateway.vocabulary import AnsweredIn, AuditEvent, ChannelName

UNCLEAR_KEPT_CHARS = 4000  # of an unclear reply's text, in its audit event


class AnswerDoor:
    """The answer path as `channel` uses it (its replies are found among its own posts)."""

    def __init__(self, core: Core, channel: ChannelName) -> None:
        self.core = core
        self.channel = channel

    def __repr__(self) -> str:
        return f"AnswerDoor({self.channel.value!r})"

    async def answer(
        self,
        rid: str,
        verb: Verb,
        responder: Responder,
        *,
        text: str | None = None,
        choice: int | str | None = None,
        grant: str | None = None,
        edited: dict[str, Any] | None = None,
    ) -> Answered | Refused:
        """Apply one person's answer: the decision, or the refusal to tell them."""
        found = await self._answerable(rid, responder)
        if isinstance(found, Refused):
            return found
        row, project = found
        made = decision_for(
            row, verb, responder, text=text, choice=choice, grant=grant, edited=edited
        )
        if isinstance(made, Refused) and made.why == Refusal.UNCLEAR:
            await self._keep_unclear(row, responder, text or "", made.message)
        if isinstance(made, Refused):
            return made
        decision, reading = made
        decision = replace(decision, copy=await self._copy_index(row, responder.copy))
        try:
            decided = await submit(self.core, row, decision)
        except Conflict as conflict:
            return Refused(Refusal.DECIDED, str(conflict))
        except NotAllowed as refused:
            return Refused(Refusal.NOT_ALLOWED, str(refused))
        except InvalidInput as invalid:
            return Refused(Refusal.INVALID, str(invalid))
        return Answered(self.core.view(decided, project), reading)

    async def _keep_unclear(
        self, row: RequestRow, responder: Responder, text: str, why: str
    ) -> None:
        """An unclear reply decides nothing, and its words stay in the audit trail."""
        detail = {"by": responder.user_info(), "text": text[:UNCLEAR_KEPT_CHARS], "read": why}
        await self.core.db.write_for(
            row.rid, request_store.add_event, row.rid, AuditEvent.UNCLEAR_REPLY, detail
        )

    async def refusal(self, rid: str, responder: Responder) -> Refused | None:
        found = await self._answerable(rid, responder)
        return found if isinstance(found, Refused) else None

    async def option_form(self, rid: str, responder: Responder, index: int | None) -> Form | None:
        found = await self._answerable(rid, responder)
        if isinstance(found, Refused):
            return None
        row, _project = found
        chosen = option(row, index)
        if chosen is None or row.kind != Kind.FUNCTION_CALL or not chosen.get("interactive"):
            return None
        return Form(chosen.get("title") or chosen["name"], chosen.get("prompt_fill"))

    async def view(self, rid: str) -> RequestView | None:
        row, project = await self.core.db.read(request_store.get_with_project, rid)
        if row is None or project is None:
            return None
        return self.core.view(row, project)

    async def find(self, reply_key: str) -> str | None:
        return await self.core.db.read(request_store.find_by_reply_key, self.channel, reply_key)

    async def _copy_index(self, row: RequestRow, copy: str | None) -> int | None:
        """Which route target the answered post was sent for; None when unknown."""
        if copy is None:
            return None
        found = await self.core.db.read(request_store.copy_target, row.rid, self.channel, copy)
        route = json.loads(row.route_json)
        target = None if found is None else json.loads(found)
        return route.index(target) if target in route else None

    async def _answerable(self, rid: str, responder: Responder) -> tuple[RequestRow, str] | Refused:
        """The pending request this person may answer, with its project; or the refusal."""
        row, project = await self.core.db.read(request_store.get_with_project, rid)
        if row is None or project is None:
            return Refused(Refusal.GONE, "this request no longer exists")
        if not self._may_answer(row, responder):
            return Refused(Refusal.NOT_ALLOWED, "you are not allowed to answer this request")
        if row.status != Status.PENDING:
            return Refused(Refusal.DECIDED, already_decided(row))
        return row, project

    def _may_answer(self, row: RequestRow, responder: Responder) -> bool:
        """A platform's people answer where the route lets them. In the console, the
        operator and admins answer anything; anyone else only what was sent to them (as a
        person, a team member, or a request sent to the console and nobody in particular)."""
        config, info = self.core.config, responder.user_info()
        person = person_of(config, info)
        if person == OPERATOR:
            return True
        route = json.loads(row.route_json)
        if responder.via == AnsweredIn.WEB:
            admin = votes.is_admin(config, person) and info.get("by") != BY_LINK
            return admin or bool(votes.counted_targets(config, route, info, person))
        channel = _channel_of(responder)
        allowed = responders_through(route, channel) if channel else None
        return allowed is None or responder.id in allowed


def _channel_of(responder: Responder) -> ChannelName | None:
    """The routed channel whose responders this person must be one of (none for the API)."""
    value = str(responder.via)
    return ChannelName(value) if value in ChannelName._value2member_map_ else None
