"""What Discord sends the bot: button clicks, the "Approve and allow…" select and modal
submissions, turned into answers.

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

from channels.discord.render import as_it_stands, editable, escape
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
from gateway.seam.edits import MAX_FIELD_CHARS, EditProblem, edit_fields, read_edits

log = logging.getLogger(__name__)

TEXT_INPUT_ID = "text"
UNKNOWN_INTERACTION = 10062  # Discord's code for an interaction past its 3 s to answer
ALREADY_ANSWERED = 40060  # "Interaction has already been acknowledged"
# Discord drops an interaction not answered within 3 s; past this, defer and edit later.
DEFER_AFTER_SECONDS = 2.0
WHY = "Why? The agent reads this."
EDIT_TITLE = "Edit and approve"
LABEL_LIMIT = 45  # a modal's title and a text input's label


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


def edit_modal(click: CallbackId, kwargs: dict[str, Any]) -> discord.ui.Modal:
    """ "Edit and approve": one prefilled text input per argument, whose custom id is the
    argument's place in the call (a name may be too long for a custom id)."""
    custom_id = encode(Verb.EDIT, click.rid, modal=True)
    modal = discord.ui.Modal(title=EDIT_TITLE, custom_id=custom_id, timeout=900)
    for index, field in enumerate(edit_fields(kwargs)):
        several_lines = field.as_json or "\n" in field.text  # a short input drops newlines
        modal.add_item(
            discord.ui.TextInput(
                label=field.name[:LABEL_LIMIT] or "(no name)",
                custom_id=str(index),
                style=discord.TextStyle.paragraph if several_lines else discord.TextStyle.short,
                required=field.kind != "str",  # only a string may be left empty
                max_length=MAX_FIELD_CHARS,
                default=field.text or None,
            )
        )
    return modal


def _inputs(components: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A modal's components, in the classic action-row layout or the newer Label one."""
    for component in components:
        yield component
        yield from _inputs(component.get("components") or [])
        if isinstance(component.get("component"), dict):
            yield from _inputs([component["component"]])


def submitted_text(data: dict[str, Any]) -> str:
    """The modal's text input."""
    values = [c.get("value") for c in _inputs(data.get("components") or [])]
    return next((str(v) for v in values if v is not None), "").strip()


def submitted_values(data: dict[str, Any]) -> dict[str, str]:
    """The modal's text inputs by custom id."""
    return {
        str(c["custom_id"]): str(c["value"])
        for c in _inputs(data.get("components") or [])
        if c.get("custom_id") is not None and c.get("value") is not None
    }


def edits_from(kwargs: dict[str, Any], data: dict[str, Any]) -> dict[str, Any] | EditProblem:
    """The arguments as edited in `edit_modal`: its inputs named back by their place."""
    names = {str(index): field.name for index, field in enumerate(edit_fields(kwargs))}
    values = submitted_values(data)
    return read_edits(kwargs, {names[key]: text for key, text in values.items() if key in names})


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
        elif click.verb == Verb.EDIT:
            await self._open_edit(interaction, click)
        elif click.verb == Verb.GRANT:
            data: dict[str, Any] = dict(interaction.data or {})
            chosen = data.get("values") or [""]
            await self._answer(interaction, click, grant=str(chosen[0]))  # the core checks it
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
        if await self._turned_away(interaction, click):
            return
        modal = reason_modal(click, title=title, label=label, prefill=prefill)
        await interaction.response.send_modal(modal)

    async def _open_edit(self, interaction: discord.Interaction[Any], click: CallbackId) -> None:
        """The "Edit and approve" modal, prefilled with the call's arguments as stored."""
        if await self._turned_away(interaction, click):
            return
        request = await self.answers.view(click.rid)
        if request is None or not editable(request):  # a crafted click: there is no form
            await _tell(interaction, "editing the arguments is not offered on this request")
            return
        kwargs = request.spec.get("kwargs") or {}
        await interaction.response.send_modal(edit_modal(click, kwargs))

    async def _turned_away(self, interaction: discord.Interaction[Any], click: CallbackId) -> bool:
        """Whether the person cannot answer the request now (then told privately)."""
        try:
            async with asyncio.timeout(DEFER_AFTER_SECONDS):
                refused = await self.answers.refusal(click.rid, responder(interaction))
        except TimeoutError:
            return False  # a slow store must not cost the modal; the submission checks again
        if refused is not None:
            await _tell(interaction, refused.message)
        return refused is not None

    async def modal_submitted(
        self, interaction: discord.Interaction[Any], click: CallbackId
    ) -> None:
        data = dict(interaction.data or {})
        if click.verb == Verb.EDIT:
            await self._edit_submitted(interaction, click, data)
            return
        text = submitted_text(data)
        if not text:
            await _tell(interaction, "give a reason, so the agent knows what to change")
            return
        await self._answer(interaction, click, text=text)

    async def _edit_submitted(
        self, interaction: discord.Interaction[Any], click: CallbackId, data: dict[str, Any]
    ) -> None:
        """Read the edits against the arguments as stored, never as the client sent them."""
        request = await self.answers.view(click.rid)
        if request is None:
            await _tell(interaction, "this request no longer exists")
            return
        edited = edits_from(request.spec.get("kwargs") or {}, data)
        if isinstance(edited, EditProblem):
            await _tell(interaction, f"{edited.field}: {edited.message}. Nothing was decided.")
            return
        await self._answer(interaction, click, edited=edited)

    async def _answer(
        self,
        interaction: discord.Interaction[Any],
        click: CallbackId,
        *,
        text: str | None = None,
        grant: str | None = None,
        edited: dict[str, Any] | None = None,
    ) -> None:
        """Answer; show the decided message in place, or privately say why not."""
        work = asyncio.ensure_future(
            self.answers.answer(
                click.rid,
                click.verb,
                responder(interaction),
                text=text,
                choice=click.index,
                grant=grant,
                edited=edited,
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
