"""The point the Discord session is saved at, for the replica that resumes it next: never
past a click still being handled, whatever order the handlers end in."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from channels.discord.sessions import SessionLog
from gateway.seam import Records, ResumePoint
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

RESUME_URL = "wss://resume.example"


def records(gateway: RunningGateway) -> Records:
    """What the Discord channel keeps, as its context gives it."""
    return gateway.context("discord").records


def websocket(sequence: int) -> Any:
    """What SessionLog reads of discord.py's DiscordWebSocket."""
    return SimpleNamespace(session_id="session-1", gateway=RESUME_URL, sequence=sequence)


async def test_the_saved_point_waits_for_the_slowest_click(tmp_path: Path) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/sessions.db")
    async with running_gateway(settings) as gateway:
        sessions = SessionLog(records(gateway))
        assert await sessions.last() is None
        await sessions.settled(websocket(3))  # READY or RESUMED, nothing being handled
        assert await sessions.last() == ResumePoint("session-1", RESUME_URL, 3)

        sessions.began()  # event 4: a slow click
        sessions.began()  # event 5: a quick one, handled first
        await sessions.ended(websocket(5))
        saved = await sessions.last()
        assert saved is not None and saved.seq == 3  # resuming from 5 would lose click 4

        await sessions.ended(websocket(5))
        saved = await sessions.last()
        assert saved is not None and saved.seq == 5


async def test_a_session_is_saved_where_the_next_owner_reads_it(tmp_path: Path) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/sessions.db")
    async with running_gateway(settings) as gateway:
        await SessionLog(records(gateway)).settled(websocket(7))
    async with running_gateway(settings) as gateway:  # another process, the same database
        assert await SessionLog(records(gateway)).last() == ResumePoint("session-1", RESUME_URL, 7)


async def test_within_a_session_the_saved_point_never_goes_back(tmp_path: Path) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/sessions.db")
    async with running_gateway(settings) as gateway:
        later, earlier = ResumePoint("s1", RESUME_URL, 9), ResumePoint("s1", RESUME_URL, 4)
        kept = records(gateway)
        await kept.save_resume_point(later)
        await kept.save_resume_point(earlier)  # committed out of order
        assert await kept.resume_point() == later
        fresh = ResumePoint("s2", RESUME_URL, 1)  # a new session starts from its own READY
        await kept.save_resume_point(fresh)
        assert await kept.resume_point() == fresh


async def test_a_closing_bot_saves_nothing_more(tmp_path: Path) -> None:
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/sessions.db")
    async with running_gateway(settings) as gateway:
        sessions = SessionLog(records(gateway))
        await sessions.settled(websocket(3))
        sessions.began()
        sessions.stop()  # its bot closes; the next owner will replay from 3
        await sessions.ended(websocket(8))
        saved = await sessions.last()
        assert saved is not None and saved.seq == 3
