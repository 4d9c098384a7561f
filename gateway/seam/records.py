"""What a channel keeps in the gateway's database between messages (`ChannelContext.records`),
through the core's store: nothing a channel keeps needs a table or SQL of its own."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ResumePoint:
    """Where a platform's websocket session stands: the replica that takes the connection
    over resumes it, and the platform replays what happened in between."""

    session_id: str
    url: str  # where the platform asked to be resumed
    seq: int  # every event up to this one has been handled


class Records(Protocol):
    """Each channel's own records: another channel's are out of its reach."""

    async def handled(self, message_key: str) -> str | None:
        """What became of this inbound message before (an email's Message-ID), or None if
        it is new: a second copy changes nothing."""
        ...

    async def remember(self, message_key: str, rid: str | None, result: str, reason: str) -> None:
        """Remember a handled message (and on its request why a reply changed nothing)."""
        ...

    async def checkpoint(self, mailbox: str) -> tuple[int, int] | None:
        """How far a mailbox was read: (UIDVALIDITY, last UID handled), or None."""
        ...

    async def save_checkpoint(self, mailbox: str, uidvalidity: int, uid: int) -> None: ...
    async def resume_point(self) -> ResumePoint | None:
        """Where this channel's websocket session was left, or None."""
        ...

    async def save_resume_point(self, point: ResumePoint) -> None: ...
    async def get(self, kind: str, key: str) -> str | None:
        """A small record (an installation, an OAuth state) by kind and key, unless expired."""
        ...

    async def put(self, kind: str, key: str, value: str, *, ttl: float | None = None) -> None:
        """Keep `value` under (kind, key), replacing what was there; gone after `ttl` s."""
        ...

    async def take(self, kind: str, key: str) -> str | None:
        """Read and delete a record: only one caller gets it (a one-time OAuth state)."""
        ...

    async def keys(self, kind: str, *, limit: int) -> list[str]:
        """Some keys of a kind, unexpired (to tell "none", "one" and "several" apart)."""
        ...
