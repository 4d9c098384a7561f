"""The Telegram channel: post a request to a chat (a group, or a person's private chat), edit
it as approvals come in and once decided, reply under it to remind, take clicks and replies.

Updates arrive one of two ways (TELEGRAM_MODE):
- polling: `getUpdates` long polls, which Telegram allows one at a time per bot, so it is a
  supervised connection that one replica owns (like Discord's websocket);
- webhook: Telegram posts each update to `/telegram/<secret path>` with the secret token in
  `X-Telegram-Bot-Api-Secret-Token`; every replica serves it. The supervised connection then
  only registers the webhook (setWebhook), from one replica.
Sends wait for that connection (a message whose clicks cannot arrive helps nobody); a replica
standing by sends through the Bot API all the same.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
from typing import Any

from fastapi import FastAPI, Request, Response
from telegram import Bot, LinkPreviewOptions, ReplyParameters, Update

from channels.telegram.api import LONG_POLL_SECONDS, Client, call, gone, not_modified
from channels.telegram.callbacks import CallbackSigner
from channels.telegram.render import Post, as_it_stands, escape, keyboard, posted, reminder
from channels.telegram.settings import TelegramSettings
from channels.telegram.updates import ALLOWED_UPDATES, Inbound, reply_key
from gateway.errors import ChannelNotConfigured, DeliveryError
from gateway.seam import (
    ChannelContext,
    ChannelName,
    Connection,
    Link,
    RequestView,
    Sent,
    Target,
    require_up,
)

log = logging.getLogger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
KEPT_FOR_SECONDS = 30 * 24 * 3600  # what was sent and edited, for a retry to find
NO_PREVIEW = LinkPreviewOptions(is_disabled=True)  # an agent's URL unfurls nothing


class TelegramChannel:
    name = ChannelName.TELEGRAM

    def __init__(self, context: ChannelContext, settings: TelegramSettings | None = None) -> None:
        self.settings = settings or TelegramSettings()
        self.records = context.records
        self.signer = CallbackSigner(context.keys)
        self.connection: Connection | None = None
        self._client: Client | None = None
        self.inbound: Inbound | None = None
        if not self.missing_settings():
            assert self.settings.bot_token is not None
            token = self.settings.bot_token.get_secret_value()
            self._client = Client(token, self.settings.api_url)
            self.inbound = Inbound(context.answers, context.records, self.signer, self.bot)
            session = self._polling if self.polling else self._registering
            self.connection = context.supervise(self.name, session)

    @property
    def polling(self) -> bool:
        return self.settings.mode == "polling"

    def missing_settings(self) -> list[str]:
        missing = [] if self.settings.bot_token else ["TELEGRAM_BOT_TOKEN"]
        if not self.polling:
            missing += [
                name
                for name, value in (
                    ("TELEGRAM_WEBHOOK_SECRET", self.settings.webhook_secret),
                    ("TELEGRAM_WEBHOOK_URL", self.settings.webhook_url),
                )
                if not value
            ]
        return missing

    @property
    def bot(self) -> Bot:
        if self._client is None:
            raise ChannelNotConfigured(
                f"telegram is not configured: set {', '.join(self.missing_settings())}"
            )
        return self._client.bot

    async def start(self) -> None:
        if self.connection is not None:
            self.connection.start()

    # --- the supervised connection

    async def _polling(self, link: Link) -> None:
        """Long-poll getUpdates and handle each update in order. Telegram confirms what was
        fetched at the next poll (its offset), so what a replica fetched and did not finish
        is fetched again by the next owner; handled ones are skipped."""
        await call(self.bot.delete_webhook())  # getUpdates is refused while a webhook is set
        link.up()
        offset: int | None = None
        while True:
            updates = await call(
                self.bot.get_updates(
                    offset=offset, timeout=LONG_POLL_SECONDS, allowed_updates=ALLOWED_UPDATES
                )
            )
            for update in updates:
                await self._handle(update)
                offset = update.update_id + 1

    async def _registering(self, link: Link) -> None:
        """Webhook mode: register the webhook with its secret token, then hold nothing."""
        url = f"{self.settings.webhook_url}{self.settings.webhook_path}"
        assert self.settings.webhook_secret is not None
        await call(
            self.bot.set_webhook(
                url,
                secret_token=self.settings.webhook_secret.get_secret_value(),
                allowed_updates=ALLOWED_UPDATES,
            )
        )
        link.up()
        await asyncio.Event().wait()  # every replica serves the route; nothing to watch

    async def _handle(self, update: Update) -> None:
        """One update; a failure is logged and the next update goes on."""
        assert self.inbound is not None
        try:
            await self.inbound.handle(update)
        except Exception:
            log.exception("telegram: update %s failed", update.update_id)

    # --- webhook

    def mount(self, app: FastAPI, /) -> None:
        """Webhook mode: serve POST /telegram/<secret path>."""
        path = self.settings.webhook_path
        if self.polling:
            return
        if path is None or self.inbound is None:
            partly = self.settings.bot_token or self.settings.webhook_secret
            log.log(
                logging.WARNING if partly else logging.DEBUG,
                "telegram webhook is off: set %s",
                ", ".join(self.missing_settings()),
            )
            return
        secret = self.settings.webhook_secret
        assert secret is not None
        expected = hashlib.sha256(secret.get_secret_value().encode()).digest()

        async def webhook(request: Request) -> Response:
            given = request.headers.get(SECRET_HEADER, "")
            if not hmac.compare_digest(hashlib.sha256(given.encode()).digest(), expected):
                return Response(status_code=401)
            update = _update(await request.body(), self.bot)
            if update is None:
                return Response(status_code=400)
            assert self.inbound is not None
            await self.inbound.handle(update)  # a failure answers 500: Telegram sends it again
            return Response(status_code=200)

        app.add_api_route(path, webhook, methods=["POST"], include_in_schema=False)

    # --- outbound

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        """Post once: the message id is kept as soon as Telegram gives it, and a retried
        send (the outbox runs sends at least once) finds it instead of posting again."""
        chat_id = str(target.address["chat_id"])
        kept = f"{request.rid}:{chat_id}"
        found = await self.records.get("sent", kept)
        if found is None:
            require_up(self.name, self.connection)
            message_id = await self._post(chat_id, posted(request))
            await self.records.put("sent", kept, str(message_id), ttl=KEPT_FOR_SECONDS)
        else:
            message_id = int(found)
        ref = {"chat_id": chat_id, "message_id": message_id}
        return Sent(ref=ref, reply_key=reply_key(chat_id, message_id))

    async def _post(self, chat_id: str, post: Post, *, under: int | None = None) -> int:
        reply_to = ReplyParameters(under, allow_sending_without_reply=True) if under else None
        message = await call(
            self.bot.send_message(
                chat_id,
                post.text,
                parse_mode="HTML",
                reply_markup=keyboard(post, lambda button: self.signer.data(chat_id, button)),
                link_preview_options=NO_PREVIEW,
                reply_parameters=reply_to,
            )
        )
        return message.message_id

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """Edit the post to show the request as it stands: the outcome and no keyboard once
        decided. Once: an edit retried finds the one made before."""
        post = as_it_stands(request)
        chat_id, message_id = str(ref["chat_id"]), int(ref["message_id"])
        markup = keyboard(post, lambda button: self.signer.data(chat_id, button))
        edited = _digest(post)
        key = reply_key(chat_id, message_id)
        if await self.records.get("edit", key) == edited:
            return
        require_up(self.name, self.connection)
        try:
            await call(
                self.bot.edit_message_text(
                    post.text,
                    chat_id=chat_id,
                    message_id=message_id,
                    parse_mode="HTML",
                    reply_markup=markup,  # none: the keyboard goes
                    link_preview_options=NO_PREVIEW,
                )
            )
        except DeliveryError as error:
            if gone(error):
                log.info("telegram: message %s was deleted; nothing to edit", key)
                return
            if not not_modified(error):
                raise
        await self.records.put("edit", key, edited, ttl=KEPT_FOR_SECONDS)

    async def remind(
        self,
        request: RequestView,
        target: Target,
        ref: dict[str, Any],
        mention: list[str],
        /,
        *,
        number: int = 1,
    ) -> None:
        """Reply under the post, mentioning the people still awaited; once per reminder."""
        text = reminder(request, mention)
        await self._once(request, ref, f"reminder {number}", text)

    async def note(
        self, request: RequestView, target: Target, ref: dict[str, Any], text: str, /, *, key: str
    ) -> None:
        """A note under the post (a standing grant's uses); once per key."""
        await self._once(request, ref, f"note {key}", escape(text))

    async def _once(self, request: RequestView, ref: dict[str, Any], what: str, text: str) -> None:
        chat_id = str(ref["chat_id"])
        kept = f"{request.rid}:{chat_id}:{what}"
        if await self.records.get("sent", kept) is not None:
            return
        require_up(self.name, self.connection)
        message_id = await self._post(chat_id, Post(text), under=int(ref["message_id"]))
        await self.records.put("sent", kept, str(message_id), ttl=KEPT_FOR_SECONDS)

    # --- the rest of the seam

    async def check(self) -> str:
        """getMe with the bot token, as `gateway check` does for every channel."""
        me = await call(self.bot.get_me())
        line = f"signed in as @{me.username} ({me.id}), {self.settings.mode}"
        if not self.polling:
            info = await call(self.bot.get_webhook_info())
            line += f", webhook {'registered' if info.url else 'not registered yet'}"
        return line

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
        if self._client is not None:
            await self._client.aclose()


def _update(body: bytes, bot: Bot) -> Update | None:
    """The update a webhook body holds; None for anything that is not one."""
    try:
        data = json.loads(body)
        return Update.de_json(data, bot) if isinstance(data, dict) else None
    except (ValueError, KeyError, TypeError):
        return None


def _digest(post: Post) -> str:
    """What an edit showed, to know it again."""
    rows = [[(b.label, b.id) for b in row] for row in post.rows]
    return hashlib.sha256(json.dumps([post.text, rows]).encode()).hexdigest()
