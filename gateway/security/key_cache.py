"""API keys, remembered after their first use: an API request needs no read to know its
caller. A revoke (in this process, another replica or the CLI) reaches every process as a
change and empties the cache; a key is also looked up again after KEEP_SECONDS."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from gateway.store.rows import ApiKeyRow, ProjectRow

KEEP_SECONDS = 300.0  # even without a change heard of, a cached key is checked again
MAX_KEYS = 10_000


@dataclass
class KeyCache:
    _found: dict[str, tuple[float, ApiKeyRow, ProjectRow]] = field(default_factory=dict)
    # Bumped by each clear: a lookup that began before a revoke must not cache its answer.
    generation: int = 0

    def get(self, key_hash: str) -> tuple[ApiKeyRow, ProjectRow] | None:
        hit = self._found.get(key_hash)
        if hit is None or time.monotonic() - hit[0] > KEEP_SECONDS:
            return None
        return hit[1], hit[2]

    def put(self, key_hash: str, key: ApiKeyRow, project: ProjectRow, *, generation: int) -> None:
        """Remember a key read from the store at `generation` (if nothing was revoked since)."""
        if generation != self.generation:
            return
        if len(self._found) >= MAX_KEYS:
            self._found.clear()
        self._found[key_hash] = (time.monotonic(), key, project)

    def clear(self) -> None:
        self._found.clear()
        self.generation += 1
