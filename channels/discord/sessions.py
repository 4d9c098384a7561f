"""Discord's websocket session outlives the replica that opened it.

Discord delivers a click only to the session that is connected, and keeps a session that
dropped (without a clean close) resumable for a while, replaying on RESUME what it missed.
So the owner of the websocket saves where its session stands, and the replica that takes
the websocket over resumes that session instead of identifying anew: a click made while no
replica was connected is handled once, after the takeover, rather than lost.
"""

from __future__ import annotations

import logging

import discord

from gateway.seam import Records, ResumePoint, explain

log = logging.getLogger(__name__)


def point_of(ws: discord.gateway.DiscordWebSocket | None) -> ResumePoint | None:
    """Where the websocket's session stands now (None before READY or RESUMED)."""
    if ws is None or not ws.session_id or ws.sequence is None:
        return None
    return ResumePoint(ws.session_id, str(ws.gateway), ws.sequence)


class SessionLog:
    """How far the bot has handled its session, saved for the next owner.

    `began` runs while discord.py parses an interaction (before it reads the next event),
    `ended` when its handler returns; whenever none is being handled, every event up to the
    websocket's sequence number has been handled, and that is the point saved."""

    def __init__(self, records: Records) -> None:
        self.records = records
        self.handling = 0
        self._saved: ResumePoint | None = None
        self._stopped = False

    async def last(self) -> ResumePoint | None:
        return await self.records.resume_point()

    def stop(self) -> None:
        """The bot is closing: what its handlers reach now, the next owner replays."""
        self._stopped = True

    def began(self) -> None:
        self.handling += 1

    async def ended(self, ws: discord.gateway.DiscordWebSocket | None) -> None:
        self.handling -= 1
        await self.settled(ws)

    async def settled(self, ws: discord.gateway.DiscordWebSocket | None) -> None:
        """Save the point reached, if nothing is being handled and it moved."""
        point = point_of(ws)
        if self.handling or self._stopped or point is None or point == self._saved:
            return
        try:
            await self.records.save_resume_point(point)
        except Exception as error:  # a stale point only replays more: never fail a click
            log.warning("discord: could not save the session's resume point: %s", explain(error))
            return
        self._saved = point
