"""What Discord sends the bot: button clicks and modal submissions, turned into decisions.

Buttons are one `DynamicItem` matched on its custom id (`gw:<verb>:<rid>`), so a click on a
message sent by an earlier process still lands. Modal submissions are read in
`on_interaction` from the custom id alone (`gw:modal:<verb>:<rid>`): a modal opened before a
restart is no longer in discord.py's memory, and this way it is still handled.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

import discord

from channels.discord.render import custom_id, decided
from gateway.decisions import (
    Decision,
    answerable,
    decide,
    function_call_decision,
    human_contact_decision,
)
from gateway.errors import Conflict, InvalidInput, NotAllowed, NotFound
from gateway.lifecycle import Event, Kind
from gateway.models import FunctionCallStatusIn, HumanContactStatusIn
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import Request
from gateway.views import RequestView
from gateway.vocabulary import AnsweredIn, ChannelName

if TYPE_CHECKING:  # the composition root hands the core over
    from gateway.core import Core

# `<verb>:<rid>` or `option:<index>:<rid>`; rids are URL-safe base64 (crypto.new_rid).
_TAIL = r"(?:(?P<index>\d{1,2}):)?(?P<rid>[A-Za-z0-9_-]{1,64})"
BUTTON_TEMPLATE = r"gw:(?P<verb>approve|reject|answer|option):" + _TAIL
MODAL_ID = re.compile(r"^gw:modal:(?P<verb>reject|answer|option):" + _TAIL + "$")
TEXT_INPUT_ID = "text"
# Discord drops an interaction not answered within 3 s; past this, defer and edit later.
DEFER_AFTER_SECONDS = 2.0
_REFUSALS = (NotAllowed, Conflict, NotFound, InvalidInput)


def user_info(interaction: discord.Interaction[Any]) -> dict[str, Any]:
    user = interaction.user
    info = {
        "channel": AnsweredIn.DISCORD,
        "user_id": str(user.id),
        "name": user.global_name or user.name,
        "username": user.name,
    }
    if interaction.guild_id is not None:
        info["guild_id"] = str(interaction.guild_id)
    return info


def reason_modal(
    verb: str, rid: str, *, title: str, label: str, prefill: str | None, index: int | None
) -> discord.ui.Modal:
    modal = discord.ui.Modal(
        title=title[:45], custom_id=custom_id(f"modal:{verb}", rid, index), timeout=900
    )
    modal.add_item(
        discord.ui.TextInput(
            label=label[:45],
            custom_id=TEXT_INPUT_ID,
            style=discord.TextStyle.paragraph,
            required=True,
            min_length=1,
            max_length=4000,
            default=prefill[:4000] if prefill else None,
        )
    )
    return modal


def submitted_text(data: dict[str, Any]) -> str:
    """The modal's text input, in the classic action-row layout or the newer Label one."""

    def inputs(components: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for component in components:
            yield component
            yield from inputs(component.get("components") or [])
            if isinstance(component.get("component"), dict):
                yield component["component"]

    values = [c.get("value") for c in inputs(data.get("components") or [])]
    return next((str(v) for v in values if v is not None), "").strip()


class Interactions:
    def __init__(self, core: Core) -> None:
        self.core = core

    async def clicked(
        self, interaction: discord.Interaction[Any], verb: str, rid: str, index: int | None
    ) -> None:
        who = user_info(interaction)
        if verb == "approve":
            await self._decide(interaction, rid, lambda _row: Decision(Event.APPROVE, who))
        elif verb == "reject":
            await self._open(interaction, rid, "reject", "Reject", "Why? The agent reads this.")
        elif verb == "answer":
            await self._open(interaction, rid, "answer", "Answer", "Your answer")
        else:
            await self._option(interaction, rid, index or 0, who)

    async def _option(
        self, interaction: discord.Interaction[Any], rid: str, index: int, who: dict[str, Any]
    ) -> None:
        row = await self._row(rid)
        option = _option(row, index) if row else None
        if row is None or option is None:
            await _tell(interaction, "this option no longer exists")
        elif row.kind == Kind.FUNCTION_CALL and option.get("interactive"):
            title = option.get("title") or option["name"]
            await self._open(
                interaction,
                rid,
                "option",
                title,
                "Why? The agent reads this.",
                prefill=option.get("prompt_fill"),
                index=index,
            )
        else:
            await self._decide(interaction, rid, lambda r: _option_decision(r, option, who))

    async def _open(
        self,
        interaction: discord.Interaction[Any],
        rid: str,
        verb: str,
        title: str,
        label: str,
        *,
        prefill: str | None = None,
        index: int | None = None,
    ) -> None:
        """Open the modal, unless the person could not use it (a modal must answer first)."""
        actor = str(interaction.user.id)
        try:
            async with asyncio.timeout(DEFER_AFTER_SECONDS):
                await answerable(self.core, rid, channel=ChannelName.DISCORD, actor_id=actor)
        except _REFUSALS as refusal:
            await _tell(interaction, str(refusal))
            return
        except TimeoutError:
            pass  # a slow store must not cost the modal; the submission checks again
        modal = reason_modal(verb, rid, title=title, label=label, prefill=prefill, index=index)
        await interaction.response.send_modal(modal)

    async def modal_submitted(self, interaction: discord.Interaction[Any]) -> None:
        data: dict[str, Any] = dict(interaction.data or {})
        match = MODAL_ID.match(str(data.get("custom_id", "")))
        if match is None:
            return  # not one of ours
        text, who = submitted_text(data), user_info(interaction)
        if not text:
            await _tell(interaction, "give a reason, so the agent knows what to change")
            return
        verb, index = match["verb"], int(match["index"] or 0)

        def decision(row: Request) -> Decision:
            if verb == "answer":
                return human_contact_decision(row, HumanContactStatusIn(response=text), who)
            option = _option(row, index) if verb == "option" else None
            if verb == "option" and option is None:
                raise NotFound("this option no longer exists")
            name = option["name"] if option else None
            return Decision(Event.REJECT, who, comment=text, option_name=name)

        await self._decide(interaction, match["rid"], decision)

    async def _decide(
        self,
        interaction: discord.Interaction[Any],
        rid: str,
        decision: Callable[[Request], Decision],
    ) -> None:
        """Decide; answer with the decided message in place, or privately say why not."""
        work = asyncio.ensure_future(self._apply(interaction, rid, decision))
        done, _ = await asyncio.wait({work}, timeout=DEFER_AFTER_SECONDS)
        if not done:
            await interaction.response.defer()
        try:
            row = await work
        except _REFUSALS as refusal:
            await _tell(interaction, str(refusal))
            return
        embed = decided(await self._view(row))
        if interaction.response.is_done():
            await interaction.edit_original_response(embed=embed, view=None)
        elif interaction.message is not None:
            await interaction.response.edit_message(embed=embed, view=None)
        else:
            await _tell(interaction, "recorded, thank you")

    async def _apply(
        self,
        interaction: discord.Interaction[Any],
        rid: str,
        decision: Callable[[Request], Decision],
    ) -> Request:
        actor = str(interaction.user.id)
        row = await answerable(self.core, rid, channel=ChannelName.DISCORD, actor_id=actor)
        return await decide(self.core, row, decision(row))

    async def _row(self, rid: str) -> Request | None:
        return await self.core.db.read(request_store.get_by_rid, rid)

    async def _view(self, row: Request) -> RequestView:
        project = await self.core.db.read(project_store.get_project_by_id, row.project_id)
        return self.core.view(row, project.name if project else "")


def _option(row: Request, index: int) -> dict[str, Any] | None:
    key = "reject_options" if row.kind == Kind.FUNCTION_CALL else "response_options"
    options = json.loads(row.spec_json).get(key) or []
    return options[index] if index < len(options) else None


def _option_decision(row: Request, option: dict[str, Any], who: dict[str, Any]) -> Decision:
    """The core's rules, as for the API: the option's prompt_fill is the comment or answer."""
    if row.kind == Kind.HUMAN_CONTACT:
        answer = HumanContactStatusIn(response_option_name=option["name"])
        return human_contact_decision(row, answer, who)
    rejection = FunctionCallStatusIn(approved=False, reject_option_name=option["name"])
    return function_call_decision(row, rejection, who)


async def _tell(interaction: discord.Interaction[Any], text: str) -> None:
    """Only the person who clicked sees it."""
    send: Callable[..., Awaitable[Any]] = (
        interaction.followup.send
        if interaction.response.is_done()
        else interaction.response.send_message
    )
    await send(text[:2000], ephemeral=True)
