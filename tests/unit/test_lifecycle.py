"""The request state machine, checked over every Kind x Status x Event."""

from __future__ import annotations

import itertools

import pytest

from gateway.errors import GatewayError, IllegalTransition
from gateway.lifecycle import Event, Kind, Status, is_terminal, transition

# The expected table, written out by hand: (kind, event) -> status reached from pending.
# Anything not listed is illegal, and nothing is legal from a status other than pending.
LEGAL_FROM_PENDING: dict[tuple[str, str], str] = {
    ("function_call", "approve"): "approved",
    ("function_call", "reject"): "rejected",
    ("function_call", "expire"): "expired",
    ("function_call", "cancel"): "cancelled",
    ("human_contact", "respond"): "responded",
    ("human_contact", "expire"): "expired",
    ("human_contact", "cancel"): "cancelled",
}

KINDS = ["function_call", "human_contact"]
STATUSES = ["pending", "approved", "rejected", "responded", "expired", "cancelled"]
EVENTS = ["approve", "reject", "respond", "expire", "cancel"]

ALL_CASES = list(itertools.product(KINDS, STATUSES, EVENTS))


def test_enums_have_exactly_the_expected_members() -> None:
    # If a member is added, the hand-written table above must be extended too.
    assert sorted(k.value for k in Kind) == sorted(KINDS)
    assert sorted(s.value for s in Status) == sorted(STATUSES)
    assert sorted(e.value for e in Event) == sorted(EVENTS)


def test_table_covers_every_combination() -> None:
    assert len(ALL_CASES) == 2 * 6 * 5


@pytest.mark.parametrize(("kind", "status", "event"), ALL_CASES)
def test_transition(kind: str, status: str, event: str) -> None:
    expected = LEGAL_FROM_PENDING.get((kind, event)) if status == "pending" else None
    if expected is None:
        with pytest.raises(IllegalTransition):
            transition(Kind(kind), Status(status), Event(event))
    else:
        result = transition(Kind(kind), Status(status), Event(event))
        assert isinstance(result, Status)
        assert result.value == expected


@pytest.mark.parametrize(("kind", "status", "event"), [c for c in ALL_CASES if c[1] != "pending"])
def test_non_pending_is_final_and_message_names_the_state(
    kind: str, status: str, event: str
) -> None:
    with pytest.raises(IllegalTransition) as caught:
        transition(Kind(kind), Status(status), Event(event))
    message = str(caught.value)
    assert kind in message
    assert status in message
    assert event in message


def test_function_call_cannot_respond() -> None:
    with pytest.raises(IllegalTransition, match="function_call cannot respond"):
        transition(Kind.FUNCTION_CALL, Status.PENDING, Event.RESPOND)


@pytest.mark.parametrize("event", ["approve", "reject"])
def test_human_contact_cannot_approve_or_reject(event: str) -> None:
    with pytest.raises(IllegalTransition, match=f"human_contact cannot {event}"):
        transition(Kind.HUMAN_CONTACT, Status.PENDING, Event(event))


def test_illegal_transition_is_a_conflict() -> None:
    assert issubclass(IllegalTransition, GatewayError)
    assert IllegalTransition.status_code == 409


@pytest.mark.parametrize("status", STATUSES)
def test_is_terminal(status: str) -> None:
    assert is_terminal(Status(status)) is (status != "pending")
