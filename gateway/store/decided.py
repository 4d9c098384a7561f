"""The `decision` table: one narrow row per decided request, written in the transaction that
decides it (`requests.insert_request` for a request decided at create, `set_decided` for the
others), so that the console's insights (`gateway.store.insights`) count decisions from
indexes instead of reading every request's content.

Each row keeps:
- `day`, the decision's UTC date, and `took_ms`, creation to decision in whole milliseconds;
- `decided_by`: a person, or the gateway by itself (`DecidedBy`);
- `answered_in`: `user_info.channel`; `decider`: the fields of user_info that say who
  (`DECIDER_FIELDS`, each cut to `DECIDER_TEXT` characters) as sorted JSON, so that alike
  decisions group together (an email reply's own message id is not among them);
- `alone`: no vote under a policy decided it (votes are counted from the `vote` table);
- `route_json`: where the request went (a team is matched in it as the config has it now).
"""

from __future__ import annotations

import json
from datetime import timedelta
from enum import StrEnum
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from gateway.lifecycle import Status
from gateway.store import tables
from gateway.store.rows import RequestRow
from gateway.store.values import as_utc, utcnow
from gateway.vocabulary import AnsweredIn

# What of a decision's user_info says who decided (`decider`), each value cut to so many
# characters: `decider` is indexed, and PostgreSQL refuses an index entry over ~2.7 kB
# (an API caller's user_info may hold 1,000 characters in a field).
DECIDER_FIELDS = ("channel", "user_id", "person", "by", "rule", "grant", "name")
DECIDER_TEXT = 64

_decision = tables.Decision.__table__  # type: ignore[attr-defined]
_INSERT = sa.insert(_decision)
RECORDED = True  # only bench/audit_chain.py turns it off, to measure what the rows cost


class DecidedBy(StrEnum):
    PERSON = "person"
    RULE = "rule"  # a rule decided it at create
    GRANT = "grant"  # a standing grant approved it at create
    DEADLINE = "deadline"  # nobody answered in time: the gateway applied the expiry


def decided_by(info: dict[str, Any]) -> DecidedBy:
    """Who decided, as user_info says: the gateway names a rule, or it was a deadline."""
    channel = info.get("channel")
    if channel == AnsweredIn.GATEWAY:
        return DecidedBy.RULE if info.get("rule") else DecidedBy.DEADLINE
    return DecidedBy.GRANT if channel == AnsweredIn.GRANT else DecidedBy.PERSON


def facts(row: RequestRow) -> dict[str, Any]:
    """The `decision` row of a decided request."""
    found = json.loads(row.user_info_json or "{}")
    info: dict[str, Any] = found if isinstance(found, dict) else {}
    decided_at = as_utc(row.responded_at or utcnow())  # every decision sets it; store tests may not
    who = {key: _short(info[key]) for key in DECIDER_FIELDS if info.get(key) is not None}
    channel = info.get("channel")
    return {
        "rid": row.rid,
        "project_id": row.project_id,
        "decided_at": decided_at,
        "day": decided_at.date().isoformat(),
        "status": row.status,
        "fn": row.fn,
        "decided_by": decided_by(info).value,
        "answered_in": None if channel is None else str(channel),
        "decider": json.dumps(who, sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        "alone": row.policy_json is None or row.status == Status.RESPONDED,
        # Never negative: replicas' clocks may differ by a little.
        "took_ms": max((decided_at - as_utc(row.requested_at)) // timedelta(milliseconds=1), 0),
        "route_json": row.route_json,
    }


def record(conn: Connection, row: RequestRow) -> None:
    """Write the decision row of `row`, which was decided in this transaction."""
    if RECORDED:
        conn.execute(_INSERT, facts(row))


def _short(value: Any) -> str:
    """At most DECIDER_TEXT characters of UTF-8 (a lone surrogate becomes "?"): with the
    JSON unescaped, seven such values stay well under PostgreSQL's index entry limit."""
    return str(value)[:DECIDER_TEXT].encode("utf-8", "replace").decode("utf-8")
