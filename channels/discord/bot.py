"""The discord.py client: no privileged intents, no pings; it resumes the session a previous
owner of the websocket left, and keeps the point it has handled up to for the next one."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket, ReconnectWebSocket

from channels.discord.interactions import Interactions
from channels.discord.sessions import SessionLog, point_of
from channels.discord.settings import DiscordSettings
from gateway.seam import Link, ResumePoint, explain

log = logging.getLogger(__name__)

# discord.py warns about these at every login; the gateway uses no voice and no guild cache.
_EXPECTED_WARNINGS = ("voice will NOT be supported", "Guilds intent seems to be disabled")


def _unexpected(record: logging.LogRecord) -> bool:
    return not any(text in record.getMessage() for text in _EXPECTED_WARNINGS)


for _name in ("discord.client", "discord.state"):
    logging.getLogger(_name).addFilter(_unexpected)

# Past this, a 429 is handed to the outbox (which honours Retry-After) instead of waited out.
MAX_RATELIMIT_WAIT_SECONDS = 30.0
# A saved session is tried this many times in a row without reaching RESUMED, waiting a
# second more each time; then a new session.
RESUME_TRIES = 3
RESUME_BACKOFF_SECONDS = 1.0
# Closing with another code than 1000/1001 leaves the session resumable by the next owner.
RESUMABLE_CLOSE = 4000
CLOSE_WITHIN_SECONDS = 2.0
# What ends a resumed session other than Discord asking for a reconnect: then identify anew.
_DROPPED = (
    OSError,
    aiohttp.ClientError,
    TimeoutError,
    discord.ConnectionClosed,
    discord.GatewayNotFound,
    discord.HTTPException,
)


class GatewayBot(discord.Client):
    def __init__(
        self,
        interactions: Interactions | None,
        link: Link | None,
        sessions: SessionLog | None = None,
    ) -> None:
        super().__init__(
            intents=discord.Intents.none(),  # interactions arrive without any intent
            allowed_mentions=discord.AllowedMentions.none(),
            max_ratelimit_timeout=MAX_RATELIMIT_WAIT_SECONDS,
        )
        self.interactions = interactions
        self.link = link
        self.sessions = sessions
        self.resumed = False  # the last RESUME of a saved session reached RESUMED

    # The supervisor's view of the websocket, which discord.py re-opens by itself.
    async def on_connect(self) -> None:  # READY received; on_ready waits 2 s more for guilds
        if self.link is not None:
            self.link.up()
        if self.sessions is not None:
            await self.sessions.settled(self.ws)

    async def on_resumed(self) -> None:
        self.resumed = True
        await self.on_connect()

    async def on_disconnect(self) -> None:
        if self.link is not None and not self.is_closed():
            self.link.down("the websocket dropped; discord.py is reconnecting")

    def dispatch(self, event: str, /, *args: Any, **kwargs: Any) -> None:
        if event == "interaction" and self.sessions is not None:
            self.sessions.began()  # while its sequence number is the websocket's
        super().dispatch(event, *args, **kwargs)

    async def on_interaction(self, interaction: discord.Interaction[Any]) -> None:
        try:
            if self.interactions is not None:
                await self.interactions.received(interaction)
        finally:
            if self.sessions is not None:
                await self.sessions.ended(self.ws)

    async def connect(self, *, reconnect: bool = True) -> None:
        """Take up the session the websocket's last owner left, if Discord still has it
        (it replays what it missed); then discord.py's own loop, which identifies anew."""
        point = await self._saved_point()
        failures = 0
        while point is not None and not self.is_closed() and failures < RESUME_TRIES:
            self.resumed = False
            point = await self._resumed(point)
            failures = 0 if self.resumed else failures + 1
            if point is not None:
                await asyncio.sleep(RESUME_BACKOFF_SECONDS * failures)  # none after a live one
        if not self.is_closed():
            await super().connect(reconnect=reconnect)

    async def close(self) -> None:
        """Close the websocket so that Discord keeps the session for the next owner to
        resume (discord.py's own close says 1000, which ends it), then the rest."""
        if self.sessions is not None:
            self.sessions.stop()  # a click still being handled saves nothing any more
        if self.ws is not None and self.ws.open:
            with contextlib.suppress(*_DROPPED):  # unreachable: it is dropped anyway
                async with asyncio.timeout(CLOSE_WITHIN_SECONDS):
                    await self.ws.close(code=RESUMABLE_CLOSE)
        await super().close()

    async def _saved_point(self) -> ResumePoint | None:
        if self.sessions is None:
            return None
        try:
            return await self.sessions.last()
        except Exception as error:  # the database is away: connect anew all the same
            log.warning("discord: no saved session to resume: %s", explain(error))
            return None

    async def _resumed(self, point: ResumePoint) -> ResumePoint | None:
        """Run a resumed session until it ends: where to resume next, or None to identify."""
        try:
            opening = DiscordWebSocket.from_client(
                self,
                gateway=yarl.URL(point.url),
                session=point.session_id,
                sequence=point.seq,
                resume=True,
            )
            self.ws = await asyncio.wait_for(opening, timeout=60)
            while True:
                await self.ws.poll_event()
        except ReconnectWebSocket as asked:  # an invalid session asks for a new one
            self.dispatch("disconnect")
            return point_of(self.ws) if asked.resume else None
        except _DROPPED as error:
            self.dispatch("disconnect")
            if self.resumed:  # the session ran, then dropped: resume it, as discord.py would
                return point_of(self.ws)
            log.info("discord: could not resume the last session (%s); identifying", error)
            return None


def point_at(settings: DiscordSettings) -> None:
    """discord.py reads both addresses from class attributes: one bot per process."""
    discord.http.Route.BASE = settings.api_url
    discord.gateway.DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.gateway_url)
