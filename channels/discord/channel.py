"""The Discord channel: post a request (channel or DM), edit it as approvals come in and once
decided, reply under it to remind, take clicks.

REST calls (send, edit) work as soon as the bot has logged in; clicks arrive over the
gateway websocket, which discord.py keeps open, resuming or re-identifying after a drop.
With several replicas one owns the websocket; the others send and edit through a REST-only
login, and the next owner resumes the websocket session the last one left.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from typing import Any

import aiohttp
import discord

from channels.discord.bot import GatewayBot, point_at
from channels.discord.interactions import Interactions
from channels.discord.render import (
    CONTENT_LIMIT,
    approval,
    as_it_stands,
    button_view,
    escape,
    grant_menu,
    question,
    reminder,
)
from channels.discord.sessions import SessionLog
from channels.discord.settings import DiscordSettings
from gateway.errors import ChannelDown, ChannelNotConfigured, DeliveryError
from gateway.lifecycle import Kind
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

DM_REFUSED = 50007  # "Cannot send messages to this user": DMs closed, or no shared server
# What the bot needs where it posts: see, send, embed, and post in threads.
PERMISSIONS = discord.Permissions(
    view_channel=True,
    send_messages=True,
    send_messages_in_threads=True,
    embed_links=True,
    read_message_history=True,
)


def as_delivery_error(error: Exception) -> DeliveryError:
    """discord.py's errors, mapped once onto the gateway's tree (retryable or not)."""
    if isinstance(error, discord.RateLimited):
        return DeliveryError(
            f"discord rate limit ({error.retry_after:.1f} s)",
            retryable=True,
            retry_after=error.retry_after,
        )
    if isinstance(error, discord.HTTPException):
        retryable = error.status == 429 or error.status >= 500
        text = f"discord {error.code or 'error'} (HTTP {error.status}): {error.text}"
        return DeliveryError(text, retryable=retryable)
    if isinstance(error, discord.LoginFailure):
        return DeliveryError(f"discord refused the bot token: {error}", retryable=False)
    return DeliveryError(f"discord unreachable: {type(error).__name__}: {error}", retryable=True)


_ERRORS = (discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError)


def nonce(rid: str, target: Target, what: str = "") -> str:
    """Discord drops a second message with the same nonce (enforce_nonce), so a send
    retried after a crash does not post twice; at most 25 characters."""
    where = target.address.get("channel_id") or target.address.get("user_id")
    suffix = f":{what}" if what else ""  # the request's own post keeps its old nonce
    return hashlib.sha256(f"{rid}:{where}{suffix}".encode()).hexdigest()[:25]


def fallback(target: Target) -> dict[str, Any] | None:
    """Where a refused DM goes instead: the person's team channel, same responders."""
    channel_id = target.address.get("fallback_channel_id")
    if not channel_id:
        return None
    address = {"channel_id": channel_id, "instead_of_user_id": target.address["user_id"]}
    via = f"{target.via}, DM refused"
    return target.model_copy(update={"address": address, "via": via}).model_dump(mode="json")


def _fallback_line(target: Target) -> tuple[str | None, discord.AllowedMentions]:
    """Agent text never pings; a fallback post pings the one person whose DM failed."""
    user_id = target.address.get("instead_of_user_id")
    if not user_id:
        return None, discord.AllowedMentions.none()
    line = f"<@{user_id}>, your DMs are closed, so this request is posted here."
    mentions = discord.AllowedMentions.none()
    mentions.users = [discord.Object(int(user_id))]
    return line, mentions


class DiscordChannel:
    name = ChannelName.DISCORD

    def __init__(self, context: ChannelContext, settings: DiscordSettings | None = None) -> None:
        self.settings = settings or DiscordSettings()
        self.interactions = Interactions(context.answers)  # clicks come over the websocket
        self.records = context.records
        self.connection: Connection | None = None
        if not self.missing_settings():
            self.connection = context.supervise(self.name, self._session)
        self._bot: GatewayBot | None = None  # the websocket session's, while it runs
        self._rest: GatewayBot | None = None  # logged in without a websocket
        self._rest_login = asyncio.Lock()

    def missing_settings(self) -> list[str]:
        return [] if self.settings.bot_token else ["DISCORD_BOT_TOKEN"]

    async def start(self) -> None:
        if self.connection is not None:
            self.connection.start()

    async def _session(self, link: Link) -> None:
        """Log in (REST works from then on), open the websocket, run until it ends for good;
        discord.py resumes or re-identifies after a drop by itself."""
        bot = GatewayBot(self.interactions, link, SessionLog(self.records))  # one log per bot
        try:
            await self._login(bot)
            self._bot = bot
            await bot.connect(reconnect=True)  # the bot tells `link` when READY arrives
        finally:
            self._bot = None
            await bot.close()  # the session stays resumable for the next owner

    async def _login(self, bot: GatewayBot) -> None:
        if self.settings.bot_token is None:
            raise ChannelNotConfigured("discord is not configured: set DISCORD_BOT_TOKEN")
        point_at(self.settings)
        try:
            await bot.login(self.settings.bot_token.get_secret_value())
        except _ERRORS as error:
            raise as_delivery_error(error) from None

    async def bot(self) -> GatewayBot:
        """The logged-in bot: the websocket session's where this process runs it; a REST-only
        login where none runs here (the CLI, or a replica standing by for the owner)."""
        if self.connection is not None and self.connection.owned and self.connection.wanted:
            require_up(self.name, self.connection)
            if self._bot is None:  # the session is just tearing down
                raise ChannelDown(self.name, "the websocket session ended")
            return self._bot
        async with self._rest_login:
            if self._rest is None:
                bot = GatewayBot(None, None)
                try:
                    await self._login(bot)
                except BaseException:
                    await bot.close()
                    raise
                self._rest = bot
        return self._rest

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        embed, buttons = (approval if request.kind == Kind.FUNCTION_CALL else question)(request)
        bot = await self.bot()
        content, mentions = _fallback_line(target)
        try:
            destination = await self._destination(bot, target)
            message = await destination.send(
                content=content,
                embed=embed,
                view=button_view(buttons, grant_menu(request)),
                nonce=nonce(request.rid, target),
                allowed_mentions=mentions,
            )
        except discord.Forbidden as error:
            refused = error.code == DM_REFUSED and "user_id" in target.address
            failure = as_delivery_error(error)
            failure.fallback = fallback(target) if refused else None
            raise failure from None
        except _ERRORS as error:
            raise as_delivery_error(error) from None
        ref = {"channel_id": str(message.channel.id), "message_id": str(message.id)}
        return Sent(ref=ref, reply_key=str(message.id))

    async def _destination(self, bot: GatewayBot, target: Target) -> discord.abc.Messageable:
        channel_id = target.address.get("channel_id")
        if channel_id:
            return bot.get_partial_messageable(int(channel_id))
        return await bot.create_dm(discord.Object(int(target.address["user_id"])))

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        embed, view = as_it_stands(request)
        bot = await self.bot()
        channel = bot.get_partial_messageable(int(ref["channel_id"]))
        try:
            await channel.get_partial_message(int(ref["message_id"])).edit(embed=embed, view=view)
        except discord.NotFound:
            log.info("discord: message %s was deleted; nothing to edit", ref["message_id"])
        except _ERRORS as error:
            raise as_delivery_error(error) from None

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
        """Reply under the post, pinging only `mention`; a deleted post leaves a plain message.
        The nonce makes a retried reminder post once."""
        content, mentions = reminder(request, mention)
        await self._reply(ref, content, mentions, nonce(request.rid, target, f"reminder {number}"))

    async def note(
        self, request: RequestView, target: Target, ref: dict[str, Any], text: str, /, *, key: str
    ) -> None:
        """A note under the post (a standing grant's uses), pinging nobody; the nonce makes a
        retried note post once."""
        content = escape(text)[:CONTENT_LIMIT]
        none = discord.AllowedMentions.none()
        await self._reply(ref, content, none, nonce(request.rid, target, key))

    async def _reply(
        self,
        ref: dict[str, Any],
        content: str,
        mentions: discord.AllowedMentions,
        once: str,
    ) -> None:
        """Reply under the post; a deleted post leaves a plain message, a gone channel none."""
        reply_to = discord.MessageReference(
            message_id=int(ref["message_id"]),
            channel_id=int(ref["channel_id"]),
            fail_if_not_exists=False,
        )
        bot = await self.bot()
        channel = bot.get_partial_messageable(int(ref["channel_id"]))
        try:
            await channel.send(
                content=content, reference=reply_to, allowed_mentions=mentions, nonce=once
            )
        except discord.NotFound:
            log.info("discord: channel %s is gone; no reply", ref["channel_id"])
        except _ERRORS as error:
            raise as_delivery_error(error) from None

    async def check(self) -> str:
        """Log in with the bot token, as `gateway check` does for every channel."""
        bot = await self.bot()
        user = bot.user
        return f"signed in as {user} ({user.id})" if user else "signed in"

    async def invite_url(self) -> str:
        """The OAuth2 URL that adds the bot to a server with the permissions it needs."""
        application_id = self.settings.application_id
        if application_id is None:
            bot = await self.bot()
            application_id = str((await bot.application_info()).id)
        return str(discord.utils.oauth_url(application_id, permissions=PERMISSIONS))

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
        if self._rest is not None:
            await self._rest.close()
        self._bot = self._rest = None
