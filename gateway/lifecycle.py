"""The request state machine: statuses, events and the pure transition function."""

from __future__ import annotations

from enum import StrEnum

from gateway.errors import IllegalTransition


class Kind(StrEnum):
    FUNCTION_CALL = "function_call"
    HUMAN_CONTACT = "human_contact"


class Status(StrEnum):
    PENDING = "pending"
    APPROVED = "approved"
    REJECTED = "rejected"
    RESPONDED = "responded"
    EXPIRED = "expired"
    CANCELLED = "cancelled"


class Event(StrEnum):
    APPROVE = "approve"
    REJECT = "reject"
    RESPOND = "respond"
    EXPIRE = "expire"
    CANCEL = "cancel"


_OUTCOME = {
    Event.APPROVE: Status.APPROVED,
    Event.REJECT: Status.REJECTED,
    Event.RESPOND: Status.RESPONDED,
    Event.EXPIRE: Status.EXPIRED,
    Event.CANCEL: Status.CANCELLED,
}

_ALLOWED = {
    Kind.FUNCTION_CALL: {Event.APPROVE, Event.REJECT, Event.EXPIRE, Event.CANCEL},
    Kind.HUMAN_CONTACT: {Event.RESPOND, Event.EXPIRE, Event.CANCEL},
}


def transition(kind: Kind, status: Status, event: Event) -> Status:
    """Return the status after `event`, or raise IllegalTransition."""
    if status is not Status.PENDING:
        raise IllegalTransition(f"a {kind.value} that is {status.value} cannot {event.value}")
    if event not in _ALLOWED[kind]:
        raise IllegalTransition(f"a {kind.value} cannot {event.value}")
    return _OUTCOME[event]


def is_terminal(status: Status) -> bool:
    return status is not Status.PENDING


_NOUN = {Kind.FUNCTION_CALL: "function call", Kind.HUMAN_CONTACT: "human contact"}


def noun(kind: str) -> str:
    """ "function call" or "human contact": the kind in a sentence."""
    return _NOUN[Kind(kind)]
