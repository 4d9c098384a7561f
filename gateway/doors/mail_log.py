"""What the email channel remembers between messages, kept by the core's store: which
inbound messages were handled (so a copy changes nothing) and how far IMAP has read."""

from __future__ import annotations

from gateway.core import Core
from gateway.store import email as email_store


async def handled(core: Core, message_key: str) -> str | None:
    """What became of this message before, or None if it is new."""
    return await core.db.read(email_store.seen, message_key)


async def record(core: Core, message_key: str, rid: str | None, result: str, reason: str) -> None:
    """Remember a handled message (and on its request why a reply changed nothing)."""
    await core.db.write(email_store.mark_handled, message_key, rid, result, reason)


async def checkpoint(core: Core, mailbox: str) -> tuple[int, int] | None:
    """(UIDVALIDITY, last UID handled) for a mailbox, or None before its first message."""
    return await core.db.read(email_store.checkpoint, mailbox)


async def save_checkpoint(core: Core, mailbox: str, uidvalidity: int, uid: int) -> None:
    await core.db.write(email_store.save_checkpoint, mailbox, uidvalidity, uid)
