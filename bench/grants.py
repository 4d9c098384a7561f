"""Standing grants: a create a grant covers against a create that goes to a person.

    cd /work/main && .venv/bin/python bench/grants.py [--seconds 10] [--rounds 2]

`gateway serve` on SQLite (a file on disk, `synchronous=FULL`), loaded by `wrk` at 16
connections with the intake bench's unique `send_email` calls (a 2 s warm-up not counted).
Phases, interleaved for `--rounds` rounds:
- "to a person": no grant covers the call (it is stored, routed to the console, pending);
- "to a person, 1,000 other grants": the same, with 1,000 live grants of the same key for
  other functions (the lookup's index is what keeps these creates as fast);
- "covered by a grant": one live grant of the key for `send_email` (stored approved, audited
  `auto_approved`, its webhook queued; nobody contacted).
The grants are written straight into the gateway's database between phases, as a person's
answer would (`gateway.store.grants.add`). Prints req/s, p50/p99, the server's CPU per create,
and each phase's ratio to "to a person" in the same round.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from datetime import timedelta
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import sqlalchemy as sa

from bench import common, wrk
from gateway.security.crypto import hash_api_key, new_rid
from gateway.store import feed
from gateway.store import grants as grant_store
from gateway.store import projects as project_store
from gateway.store.changes import Changes
from gateway.store.rows import GrantRow
from gateway.store.values import dumps, utcnow
from gateway.vocabulary import GrantScope

CONNECTIONS = 16
WARMUP_SECONDS = 2.0
PHASES = ("to a person", "to a person, 1,000 other grants", "covered by a grant")
OTHER_GRANTS = 1000
GRANTED_BY = {"channel": "web", "user_id": "operator", "name": "bench"}


class GrantWriter:
    """Writes and revokes grants in the gateway's SQLite file, between phases."""

    def __init__(self, gateway: common.Gateway) -> None:
        self.engine = sa.create_engine(f"sqlite:///{gateway.workdir / 'gateway.db'}")
        with self.engine.begin() as conn:
            found = project_store.find_key(conn, hash_api_key(gateway.api_key))
        assert found is not None
        key, project = found
        assert key.id is not None and project.id is not None
        self.key_id, self.project_id = key.id, project.id
        with self.engine.begin() as conn:  # any request will do as the grants' source
            self.source = conn.execute(sa.text("SELECT rid FROM request LIMIT 1")).scalar_one()

    def add(self, fns: list[str]) -> None:
        """New grants, and the change feed's word of them: the gateway (another process)
        reads it within a poll period, before the phase's warm-up ends."""
        now = utcnow()
        with self.engine.begin() as conn:
            for fn in fns:
                grant_store.add(conn, self._grant(fn, now))
            feed.append(conn, "bench", Changes(keys=True))

    def revoke_all(self) -> None:
        with self.engine.begin() as conn:
            ids = [row[0] for row in conn.execute(sa.text("SELECT id FROM standing_grant"))]
            grant_store.revoke(conn, ids, "bench", utcnow())

    def _grant(self, fn: str, now: object) -> GrantRow:
        return GrantRow(
            id=new_rid(),
            project_id=self.project_id,
            key_id=self.key_id,
            fn=fn,
            scope=GrantScope.KEY.value,
            granted_by_json=dumps(GRANTED_BY),
            person="operator",
            source_rid=self.source,
            created_at=utcnow(),
            expires_at=utcnow() + timedelta(hours=8),
        )


def measure(gateway: common.Gateway, seconds: float) -> tuple[wrk.WrkResult, float]:
    url = gateway.api_base.removesuffix(common.API_PREFIX)
    key, nonce = gateway.api_key, uuid.uuid4().hex[:8]
    wrk.post_creates(
        url, connections=CONNECTIONS, seconds=WARMUP_SECONDS, api_key=key, nonce=nonce + "w"
    )
    before = common.process_cpu_seconds(gateway.pid)
    result = wrk.post_creates(
        url, connections=CONNECTIONS, seconds=seconds, api_key=key, nonce=nonce
    )
    cpu = common.process_cpu_seconds(gateway.pid) - before
    return result, common.ms(cpu / max(result.requests, 1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not wrk.available():
        sys.exit("wrk is not installed: `make bench` provisions it (apt-get install wrk)")
    common.print_machine(
        f"grants: a create a grant covers against one to a person (wrk, {CONNECTIONS} conns)"
    )
    rows: list[list[object]] = []
    ratios: dict[str, list[float]] = {phase: [] for phase in PHASES}
    with common.gateway_server(common.sqlite_url(), "gateway, SQLite") as gateway:
        measure(gateway, WARMUP_SECONDS)  # a request to name as the grants' source
        grants = GrantWriter(gateway)
        for round_ in range(1, args.rounds + 1):
            results = {}
            for phase in PHASES:
                grants.revoke_all()
                if phase == PHASES[1]:
                    grants.add([f"other_fn_{i}" for i in range(OTHER_GRANTS)])
                if phase == PHASES[2]:
                    grants.add(["send_email"])
                results[phase] = measure(gateway, args.seconds)
            base = results[PHASES[0]][0].rps
            for phase, (result, cpu) in results.items():
                ratios[phase].append(result.rps / base)
                rows.append(
                    [
                        round_,
                        phase,
                        f"{result.rps:,.0f}",
                        common.fmt(result.p50_ms),
                        common.fmt(result.p99_ms),
                        common.fmt(cpu, 3),
                        common.ratio(result.rps, base),
                    ]
                )
    headers = ["round", "phase", "creates/s", "p50 ms", "p99 ms", "CPU ms/create", "vs person"]
    common.print_table(headers, rows)
    for phase, values in ratios.items():
        print(f"{phase}: median {statistics.median(values):.2f}x the creates/s to a person")


if __name__ == "__main__":
    main()
