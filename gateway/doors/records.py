"""The records door (`gateway.seam.records.Records`): what a channel keeps between messages,
in the core's store and scoped to that channel."""

from __future__ import annotations

from datetime import timedelta

from gateway.seam.records import ResumePoint
from gateway.store import Database, utcnow
from gateway.store import email as email_store
from gateway.store import records as record_store
from gateway.store import resume_points as resume_store
from gateway.vocabulary import ChannelName


class RecordsDoor:
    def __init__(self, db: Database, channel: ChannelName) -> None:
        self.db = db
        self.channel = channel

    def __repr__(self) -> str:
        return f"RecordsDoor({self.channel.value!r})"

    async def handled(self, message_key: str) -> str | None:
        return await self.db.read(email_store.seen, message_key)

    async def remember(self, message_key: str, rid: str | None, result: str, reason: str) -> None:
        await self.db.write(email_store.mark_handled, message_key, rid, result, reason)

    async def checkpoint(self, mailbox: str) -> tuple[int, int] | None:
        return await self.db.read(email_store.checkpoint, mailbox)

    async def save_checkpoint(self, mailbox: str, uidvalidity: int, uid: int) -> None:
        await self.db.write(email_store.save_checkpoint, mailbox, uidvalidity, uid)

    async def resume_point(self) -> ResumePoint | None:
        saved = await self.db.read(resume_store.get, self.channel)
        return None if saved is None else ResumePoint(*saved)

    async def save_resume_point(self, point: ResumePoint) -> None:
        await self.db.write(resume_store.save, self.channel, point.session_id, point.url, point.seq)

    async def get(self, kind: str, key: str) -> str | None:
        return await self.db.read(record_store.get, self.channel, kind, key)

    async def put(self, kind: str, key: str, value: str, *, ttl: float | None = None) -> None:
        expires_at = None if ttl is None else utcnow() + timedelta(seconds=ttl)
        await self.db.write(record_store.put, self.channel, kind, key, value, expires_at)

    async def take(self, kind: str, key: str) -> str | None:
        return await self.db.write(record_store.take, self.channel, kind, key)

    async def keys(self, kind: str, *, limit: int) -> list[str]:
        return await self.db.read(record_store.keys, self.channel, kind, limit)
