"""What Discord sends the bot: button clicks and modal submissions, turned into answers.

Clicks and modal submissions are both read from the custom id alone (`gw:<verb>:<rid>`,
`gw:modal:<verb>:<rid>`), not from discord.py's views: a message posted, or a modal opened,
by an earlier process or another replica is not in this one's memory, and still lands.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import discord

from channels.discord.render import as_it_stands, escape
from gateway.seam import (
    Answered,
    AnsweredIn,
    Answers,
    CallbackId,
    Refused,
    Responder,
    Verb,
    decode,
    encode,
)

log = logging.getLogger(__name__)

TEXT_INPUT_ID = "text"
UNKNOWN_INTERACTION = 10062  # Discord's code for an interaction past its 3 s to answer
ALREADY_ANSWERED = 40060  # "Interaction has already been acknowledged"
# Discord drops an interaction not answered within 3 s; past this, defer and edit later.
DEFER_AFTER_SECONDS = 2.0
WHY = "Why? The agent reads this."


def responder(interaction: discord.Interaction[Any]) -> Responder:
    user = interaction.user
    extra = {"username": user.name}
    if interaction.guild_id is not None:
        extra["guild_id"] = str(interaction.guild_id)
    copy = str(interaction.message.id) if interaction.message is not None else None
    name = user.global_name or user.name
    return Responder(AnsweredIn.DISCORD, str(user.id), name, extra=extra, copy=copy)


def reason_modal(
    click: CallbackId, *, title: str, label: str, prefill: str | None
) -> discord.ui.Modal:
    custom_id = encode(click.verb, click.rid, click.index, modal=True)
    modal = discord.ui.Modal(title=title[:45], custom_id=custom_id, timeout=900)
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
    def __init__(self, answers: Answers) -> None:
        self.answers = answers

    async def received(self, interaction: discord.Interaction[Any]) -> None:
        """Any interaction: one of our buttons or forms is answered, anything else ignored."""
        data: dict[str, Any] = dict(interaction.data or {})
        click = decode(str(data.get("custom_id", "")))
        if click is None:
            return  # not one of ours
        try:
            if interaction.type is discord.InteractionType.modal_submit and click.modal:
                await self.modal_submitted(interaction, click)
            elif interaction.type is discord.InteractionType.component and not click.modal:
                await self.clicked(interaction, click)
        except discord.HTTPException as error:
            if error.code not in (UNKNOWN_INTERACTION, ALREADY_ANSWERED):
                raise
            # Replayed after a takeover: past Discord's 3 s, or answered by the last owner.
            # What it decided stands, and the outbox edits the message.
            log.info("discord: interaction %s could not be answered: %s", interaction.id, error)

    async def clicked(self, interaction: discord.Interaction[Any], click: CallbackId) -> None:
        if click.verb == Verb.REJECT:
            await self._open(interaction, click, "Reject", WHY)
        elif click.verb == Verb.ANSWER:
            await self._open(interaction, click, "Answer", "Your answer")
        elif click.verb == Verb.OPTION and await self._interactive(interaction, click):
            return
        else:
            await self._answer(interaction, click)

    async def _interactive(self, interaction: discord.Interaction[Any], click: CallbackId) -> bool:
        """An interactive option opens its form, prefilled; True when it did."""
        form = await self.answers.option_form(click.rid, responder(interaction), click.index)
        if form is None:
            return False
        await self._open(interaction, click, form.title, WHY, prefill=form.prefill)
        return True

    async def _open(
        self,
        interaction: discord.Interaction[Any],
        click: CallbackId,
        title: str,
        label: str,
        *,
        prefill: str | None = None,
    ) -> None:
        """Open the modal, unless the person could not use it (a modal must answer first)."""
        try:
            async with asyncio.timeout(DEFER_AFTER_SECONDS):
                refused = await self.answers.refusal(click.rid, responder(interaction))
        except TimeoutError:
            refused = None  # a slow store must not cost the modal; the submission checks again
        if refused is not None:
            await _tell(interaction, refused.message)
            return
        modal = reason_modal(click, title=title, label=label, prefill=prefill)
        await interaction.response.send_modal(modal)

    async def modal_submitted(
        self, interaction: discord.Interaction[Any], click: CallbackId
    ) -> None:
        text = submitted_text(dict(interaction.data or {}))
        if not text:
            await _tell(interaction, "give a reason, so the agent knows what to change")
            return
        await self._answer(interaction, click, text=text)

    async def _answer(
        self, interaction: discord.Interaction[Any], click: CallbackId, text: str | None = None
    ) -> None:
        """Answer; show the decided message in place, or privately say why not."""
        work = asyncio.ensure_future(
            self.answers.answer(
                click.rid,
                click.verb,
                responder(interaction),
                text=text,
                choice=click.index,
            )
        )
        done, _ = await asyncio.wait({work}, timeout=DEFER_AFTER_SECONDS)
        if not done:
            await interaction.response.defer()
        outcome = await work
        if isinstance(outcome, Refused):
            await _tell(interaction, outcome.message)
            return
        await _show(interaction, outcome)


async def _show(interaction: discord.Interaction[Any], outcome: Answered) -> None:
    embed, view = as_it_stands(outcome.request)
    if interaction.response.is_done():
        await interaction.edit_original_response(embed=embed, view=view)
    elif interaction.message is not None:
        await interaction.response.edit_message(embed=embed, view=view)
    else:
        await _tell(interaction, "recorded, thank you")


async def _tell(interaction: discord.Interaction[Any], text: str) -> None:
    """Only the person who clicked sees it."""
    send: Callable[..., Awaitable[Any]] = (
        interaction.followup.send
        if interaction.response.is_done()
        else interaction.response.send_message
    )
    await send(escape(text)[:2000], ephemeral=True)  # refusals quote the agent's call_id
