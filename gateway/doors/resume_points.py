"""Where a platform's websocket session stands, kept by the core's store: the replica that
takes over a connection resumes the session its last owner left, and the platform replays
what happened in between (a click made while no replica was connected)."""

from __future__ import annotations

from dataclasses import dataclass

from gateway.core import Core
from gateway.store import resume_points as store


@dataclass(frozen=True)
class ResumePoint:
    session_id: str
    url: str  # where the platform asked to be resumed
    seq: int  # every event up to this one has been handled


async def load(core: Core, name: str) -> ResumePoint | None:
    saved = await core.db.read(store.get, name)
    return None if saved is None else ResumePoint(*saved)


async def save(core: Core, name: str, point: ResumePoint) -> None:
    await core.db.write(store.save, name, point.session_id, point.url, point.seq)
