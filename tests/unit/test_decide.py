"""`decide` refuses a decision with the error that is true: 409 (and who decided) only for
a request that is no longer pending, a 422 naming the mismatch for a wrong-kind event."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime
from typing import Any, cast

import pytest

from gateway.answers.decisions import decide, next_status
from gateway.answers.verbs import Decision
from gateway.core import Core
from gateway.errors import Conflict, InvalidInput
from gateway.lifecycle import Event, Kind, Status
from gateway.store.rows import RequestRow

DECIDED_AT = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
LEGAL = {
    Kind.FUNCTION_CALL: {Event.APPROVE, Event.REJECT, Event.EXPIRE, Event.CANCEL},
    Kind.HUMAN_CONTACT: {Event.RESPOND, Event.EXPIRE, Event.CANCEL},
}


def row(kind: Kind, status: Status) -> RequestRow:
    decided = status is not Status.PENDING
    return RequestRow(
        rid="r" * 22,
        project_id=1,
        kind=kind.value,
        call_id="call-1",
        run_id="run-1",
        spec_json="{}",
        body_hash="0" * 64,
        route_json="[]",
        status=status.value,
        user_info_json=json.dumps({"name": "alice", "channel": "slack"}) if decided else None,
        requested_at=DECIDED_AT,
        responded_at=DECIDED_AT if decided else None,
    )


@pytest.mark.parametrize(("kind", "status", "event"), list(itertools.product(Kind, Status, Event)))
def test_next_status_says_what_is_true(kind: Kind, status: Status, event: Event) -> None:
    request = row(kind, status)
    if status is not Status.PENDING:
        with pytest.raises(Conflict) as conflict:
            next_status(request, event)
        message = str(conflict.value)
        assert f"was already {status.value} by alice in Slack" in message, message
        assert DECIDED_AT.isoformat() in message
    elif event not in LEGAL[kind]:
        with pytest.raises(InvalidInput) as invalid:
            next_status(request, event)
        message = str(invalid.value)
        assert f"cannot take a '{event.value}' decision" in message, message
        assert "already" not in message and "someone" not in message
    else:
        assert next_status(request, event) is not Status.PENDING


class NoDatabase:
    """A Core whose database fails the test if touched: these refusals come first."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"decide used core.{name} for a decision it must refuse")


async def test_decide_refuses_an_approval_of_a_human_contact_as_invalid() -> None:
    core = cast(Core, NoDatabase())
    decision = Decision(Event.APPROVE, {"name": "bob"})
    with pytest.raises(InvalidInput, match="human contact 'call-1' cannot take a 'approve'"):
        await decide(core, row(Kind.HUMAN_CONTACT, Status.PENDING), decision)


async def test_decide_on_a_decided_request_is_a_conflict_naming_who() -> None:
    core = cast(Core, NoDatabase())
    decision = Decision(Event.REJECT, {"name": "bob"}, comment="no")
    with pytest.raises(Conflict, match="already approved by alice in Slack"):
        await decide(core, row(Kind.FUNCTION_CALL, Status.APPROVED), decision)
