"""Rows the email channel keeps: inbound messages already handled, and IMAP checkpoints."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection

from gateway.store import requests as request_store
from gateway.store.tables import EmailSeen, ImapCheckpoint
from gateway.store.values import utcnow
from gateway.vocabulary import AuditEvent

_seen = EmailSeen.__table__  # type: ignore[attr-defined]
_checkpoint = ImapCheckpoint.__table__  # type: ignore[attr-defined]
_INSERT_NEW = {
    "sqlite": sqlite.insert(_seen).on_conflict_do_nothing().returning(_seen.c.message_key),
    "postgresql": postgresql.insert(_seen).on_conflict_do_nothing().returning(_seen.c.message_key),
}


def seen(conn: Connection, message_key: str) -> str | None:
    """The outcome recorded for this message, or None if it is new."""
    query = sa.select(_seen.c.outcome).where(_seen.c.message_key == message_key)
    outcome = (conn.execute(query)).scalar_one_or_none()
    return None if outcome is None else str(outcome)


def mark_seen(conn: Connection, message_key: str, rid: str | None, outcome: str) -> bool:
    """Record a handled message; False when another copy was recorded first."""
    values = {"message_key": message_key, "rid": rid, "outcome": outcome, "at": utcnow()}
    result = conn.execute(_INSERT_NEW[conn.dialect.name], values)
    return result.first() is not None


def checkpoint(conn: Connection, mailbox: str) -> tuple[int, int] | None:
    """(UIDVALIDITY, last UID handled) for a mailbox, or None before the first message."""
    query = sa.select(_checkpoint.c.uidvalidity, _checkpoint.c.last_uid).where(
        _checkpoint.c.mailbox == mailbox
    )
    row = (conn.execute(query)).first()
    return None if row is None else (int(row[0]), int(row[1]))


def save_checkpoint(conn: Connection, mailbox: str, uidvalidity: int, uid: int) -> None:
    where = _checkpoint.c.mailbox == mailbox
    values = {"uidvalidity": uidvalidity, "last_uid": uid}
    updated = conn.execute(sa.update(_checkpoint).where(where).values(values))
    if updated.rowcount == 0:
        conn.execute(sa.insert(_checkpoint).values({"mailbox": mailbox, **values}))


def mark_handled(
    conn: Connection, message_key: str, rid: str | None, result: str, reason: str
) -> None:
    """Record a handled message, and on its request why a reply changed nothing."""
    mark_seen(conn, message_key, rid, f"{result}: {reason}")
    if rid is not None and result not in ("decided", "unclear"):  # the answer path keeps those
        detail = {"result": result, "reason": reason, "message_id": message_key}
        request_store.add_event(conn, rid, AuditEvent.EMAIL_REPLY_IGNORED, detail)
