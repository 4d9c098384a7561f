"""Long-poll waiters and live pages, woken by `Core.signal` after a commit changed their
request: a commit in this process, a NOTIFY from another replica (PostgreSQL) or the change
feed (SQLite). Nobody polls the database for them."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

ANY = "*"  # watchers of every change: the console's live pages


class Waiters:
    def __init__(self) -> None:
        self._events: defaultdict[str, set[asyncio.Event]] = defaultdict(set)

    @contextmanager
    def watch(self, rid: str) -> Iterator[asyncio.Event]:
        """Register before re-reading the row, so a decision in between is not missed."""
        event = asyncio.Event()
        self._events[rid].add(event)
        try:
            yield event
        finally:
            waiting = self._events.get(rid)
            if waiting is not None:
                waiting.discard(event)
                if not waiting:
                    del self._events[rid]

    def wake(self, rids: Iterable[str]) -> None:
        """The watchers of these requests, and of ANY."""
        for rid in rids:
            for event in self._events.get(rid, ()):
                event.set()
        self.changed()

    def changed(self) -> None:
        """Something was created or decided: wake the watchers of ANY."""
        for event in self._events.get(ANY, ()):
            event.set()

    def wake_all(self) -> None:
        """Every waiter re-reads (after missed notifications, and at shutdown)."""
        for events in self._events.values():
            for event in events:
                event.set()

    def __len__(self) -> int:
        return sum(len(events) for events in self._events.values())
