"""What Telegram sends the bot (one `Update` at a time, by webhook or getUpdates): button
clicks and replies, turned into answers.

- A click's callback_data must carry our MAC for its chat (`CallbackSigner`), and name the
  request of the message it is on (once that post is recorded); anything else is refused
  and decides nothing.
- Approve and non-interactive options answer at once; the person sees a short notice.
  Reject (and an interactive option) asks for the reason with a ForceReply prompt that
  mentions them: their reply to it is the reason.
- A reply to a request's message is its free-text answer: a question's answer, or an
  approval's yes or no (read by the seam's reply reader).
- Telegram sends an update again until it is confirmed (getUpdates) or answered (webhook):
  an update handled before changes nothing.

The outbox edits the message after a decision (`TelegramChannel.update`); nothing here does.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from telegram import Bot, CallbackQuery, ForceReply, Message, ReplyParameters, Update, User

from channels.telegram.api import call
from channels.telegram.callbacks import CallbackSigner
from channels.telegram.render import escape, prompt
from gateway.errors import DeliveryError
from gateway.seam import (
    Answered,
    AnsweredIn,
    Answers,
    CallbackId,
    Records,
    Refused,
    Responder,
    Verb,
    describe,
    shorten,
)

log = logging.getLogger(__name__)

ALLOWED_UPDATES = ("message", "callback_query")
HANDLED_FOR_SECONDS = 2 * 24 * 3600  # Telegram keeps an unconfirmed update for 24 h
PROMPT_FOR_SECONDS = 24 * 3600  # a reason prompt answered later than this is a plain reply
NOTICE_LIMIT = 200  # answerCallbackQuery's text
PLACEHOLDER_LIMIT = 64  # a ForceReply's input_field_placeholder
WHY = "Why? The agent reads this."
NOT_OURS = "This button is not valid; nothing was decided."


def reply_key(chat_id: int | str, message_id: int | str) -> str:
    """How a post is named by the clicks and replies on it: its chat and message id."""
    return f"{chat_id}:{message_id}"


def responder(user: User, chat_id: int, copy: str | None) -> Responder:
    """Who clicked or replied: their numeric Telegram id (what the config file's `telegram`
    names), and the post they answered."""
    extra = {"chat_id": str(chat_id)}
    if user.username:
        extra["username"] = user.username
    return Responder(AnsweredIn.TELEGRAM, str(user.id), user.full_name, extra=extra, copy=copy)


class Inbound:
    def __init__(self, answers: Answers, records: Records, signer: CallbackSigner, bot: Bot):
        self.answers = answers
        self.records = records
        self.signer = signer
        self.bot = bot

    async def handle(self, update: Update) -> None:
        """One update, once: clicks and replies to our messages; anything else is ignored."""
        key = str(update.update_id)
        if await self.records.get("update", key) is not None:
            return  # sent again (a webhook retried, a poll not yet confirmed): done before
        if update.callback_query is not None:
            await self.clicked(update.callback_query)
        elif update.message is not None:
            await self.replied(update.message)
        await self.records.put("update", key, "handled", ttl=HANDLED_FOR_SECONDS)

    # --- clicks

    async def clicked(self, query: CallbackQuery) -> None:
        message = query.message
        if message is None:  # a button of an inline-mode message: none of ours
            await self._notice(query, NOT_OURS, alert=True)
            return
        chat_id, copy = message.chat.id, reply_key(message.chat.id, message.message_id)
        click = self.signer.read(chat_id, query.data or "")
        # The post's request: another's (a signed button moved by a modified client) is
        # refused; none yet (its send is still being recorded) leaves the copy unknown.
        posted_for = await self.answers.find(copy) if click is not None else None
        if click is None or posted_for not in (None, click.rid):
            log.warning("telegram: a click with callback_data we did not sign, from %s", chat_id)
            await self._notice(query, NOT_OURS, alert=True)
            return
        who = responder(query.from_user, chat_id, copy if posted_for else None)
        if click.verb == Verb.REJECT:
            await self._ask(query, message, click, who, "why reject it? Reply to this message.")
        elif click.verb == Verb.OPTION and await self._interactive(query, message, click, who):
            return
        else:
            outcome = await self.answers.answer(click.rid, click.verb, who, choice=click.index)
            await self._told(query, outcome)

    async def _interactive(
        self, query: CallbackQuery, message: Any, click: CallbackId, who: Responder
    ) -> bool:
        """An interactive option asks for the person's words first; True when it did."""
        form = await self.answers.option_form(click.rid, who, click.index)
        if form is None:
            return False
        question = f"{form.title}: why? Reply to this message."
        if form.prefill:
            question += f' (Suggested: "{form.prefill}")'
        await self._ask(query, message, click, who, question, placeholder=form.prefill)
        return True

    async def _ask(
        self,
        query: CallbackQuery,
        message: Any,
        click: CallbackId,
        who: Responder,
        question: str,
        *,
        placeholder: str | None = None,
    ) -> None:
        """A ForceReply prompt under the request's message, unless the person could not
        answer (nobody types a reason for nothing); their reply to it answers."""
        refused = await self.answers.refusal(click.rid, who)
        if refused is not None:
            await self._notice(query, refused.message, alert=True)
            return
        await self._notice(query, "Reply to the message below with your reason.")
        force = ForceReply(
            selective=True, input_field_placeholder=shorten(placeholder or WHY, PLACEHOLDER_LIMIT)
        )
        asked = await call(
            self.bot.send_message(
                message.chat.id,
                prompt(query.from_user.id, query.from_user.full_name, question),
                parse_mode="HTML",
                reply_markup=force,
                reply_parameters=ReplyParameters(
                    message.message_id, allow_sending_without_reply=True
                ),
            )
        )
        waiting = {"rid": click.rid, "verb": click.verb, "index": click.index, "copy": who.copy}
        waiting["user"] = who.id
        key = reply_key(asked.chat.id, asked.message_id)
        await self.records.put("prompt", key, json.dumps(waiting), ttl=PROMPT_FOR_SECONDS)

    async def _told(self, query: CallbackQuery, outcome: Answered | Refused) -> None:
        if isinstance(outcome, Refused):
            await self._notice(query, outcome.message, alert=True)
        else:
            await self._notice(query, describe(outcome.request))

    async def _notice(self, query: CallbackQuery, text: str, *, alert: bool = False) -> None:
        """The notice only the person who clicked sees; it also stops the button's spinner.
        Past Telegram's time to answer a click it fails, and the decision stands."""
        try:
            await call(
                self.bot.answer_callback_query(
                    query.id, text=shorten(text, NOTICE_LIMIT), show_alert=alert
                )
            )
        except DeliveryError as error:
            log.info("telegram: could not answer click %s: %s", query.id, error)

    # --- replies

    async def replied(self, message: Message) -> None:
        """A reply to a reason prompt, or to a request's message; other messages are not
        for the gateway."""
        replied_to, user = message.reply_to_message, message.from_user
        if replied_to is None or user is None or user.is_bot or not message.text:
            return
        key = reply_key(message.chat.id, replied_to.message_id)
        waiting = await self.records.get("prompt", key)
        if waiting is not None:
            await self._reason(message, user, json.loads(waiting))
            return
        rid = await self.answers.find(key)
        if rid is None:
            return  # a reply to something else
        who = responder(user, message.chat.id, key)
        outcome = await self.answers.answer(rid, Verb.REPLY, who, text=message.text)
        if isinstance(outcome, Refused):
            await self._reply(message, outcome.message)
        elif outcome.reading is not None:  # how an approval's words were read
            await self._reply(message, outcome.reading.sentence)

    async def _reason(self, message: Message, user: User, waiting: dict[str, Any]) -> None:
        """The reason the prompt asked this person for; someone else's reply to it is not."""
        if waiting["user"] != str(user.id):
            return
        who = responder(user, message.chat.id, waiting["copy"])
        outcome = await self.answers.answer(
            waiting["rid"], Verb(waiting["verb"]), who, text=message.text, choice=waiting["index"]
        )
        if isinstance(outcome, Refused):
            await self._reply(message, outcome.message)

    async def _reply(self, message: Message, text: str) -> None:
        """A short reply to the person's message (escaped: it may quote the agent)."""
        try:
            await call(
                self.bot.send_message(
                    message.chat.id,
                    escape(shorten(text, 1000)),
                    parse_mode="HTML",
                    reply_parameters=ReplyParameters(
                        message.message_id, allow_sending_without_reply=True
                    ),
                )
            )
        except DeliveryError as error:
            log.info("telegram: could not reply in chat %s: %s", message.chat.id, error)
