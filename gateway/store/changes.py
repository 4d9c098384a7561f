"""What a write changed, recorded by the store functions that make the change, and signalled
once after the commit is durable: waiters of those requests, the console's live pages and
the outbox worker in this process; other processes through NOTIFY (PostgreSQL) or the
change feed (SQLite)."""

from __future__ import annotations

from dataclasses import dataclass, field

from sqlalchemy.engine import Connection

_KEY = "gateway_changes"  # where the running write keeps its Changes, in Connection.info


@dataclass
class Changes:
    rids: set[str] = field(default_factory=set)  # requests created or decided
    jobs: bool = False  # outbox jobs became due
    keys: bool = False  # API keys were revoked or a grant given: forget cached ones
    everything: bool = False  # notifications may have been lost: everyone looks again

    def __bool__(self) -> bool:
        return bool(self.rids) or self.jobs or self.keys or self.everything

    def merge(self, other: Changes) -> None:
        self.rids |= other.rids
        self.jobs = self.jobs or other.jobs
        self.keys = self.keys or other.keys
        self.everything = self.everything or other.everything


def collect(conn: Connection, changes: Changes | None) -> None:
    """Record what `conn`'s next writes change into `changes` (None: stop recording)."""
    if changes is None:
        conn.info.pop(_KEY, None)
    else:
        conn.info[_KEY] = changes


def request_changed(conn: Connection, rid: str) -> None:
    changes: Changes | None = conn.info.get(_KEY)
    if changes is not None:
        changes.rids.add(rid)


def keys_changed(conn: Connection) -> None:
    changes: Changes | None = conn.info.get(_KEY)
    if changes is not None:
        changes.keys = True


def jobs_queued(conn: Connection) -> None:
    changes: Changes | None = conn.info.get(_KEY)
    if changes is not None:
        changes.jobs = True
