"""The stored vocabulary: each enum holds exactly the documented values, stores them as the
bare strings (no migration), and every member fits the column that keeps it."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import get_args

import pytest
import sqlalchemy as sa
from sqlmodel import SQLModel

from channels.registry import REGISTRY
from gateway.api.extensions import JobStatusParam
from gateway.lifecycle import Kind, Status
from gateway.outbox.deliveries import SERVED_BY_GATEWAY
from gateway.store import tables  # noqa: F401  (its tables on SQLModel.metadata)
from gateway.vocabulary import (
    AnsweredIn,
    AuditEvent,
    ChannelName,
    DeliveryStatus,
    GrantScope,
    JobKind,
    JobStatus,
    Timer,
)
from tests.helpers import detached

# Written out by hand from what the code writes (grep gateway/ and channels/ for the store's
# add_event/add_events, add_delivery/update_delivery, enqueue and the outbox's status
# updates, and user_info's "channel"). A new member must be added here on purpose.
DOCUMENTED: dict[type[StrEnum], set[str]] = {
    Kind: {"function_call", "human_contact"},
    Status: {"pending", "approved", "rejected", "responded", "expired", "cancelled"},
    DeliveryStatus: {"queued", "sent", "retrying", "failed", "skipped", "unconfigured"},
    JobKind: {"deliver", "update", "webhook", "timer", "remind", "note"},
    JobStatus: {"pending", "running", "done", "dead"},
    AuditEvent: {
        "created",
        "routed",
        "delivered",
        "delivery_failed",
        "delivery_fallback",
        "voted",
        "decided",
        "reminded",
        "escalated",
        "webhook_delivered",
        "webhook_failed",
        "webhook_endpoint_disabled",
        "email_reply_ignored",
        "unclear_reply",
        "granted",
        "auto_approved",
        "grant_revoked",
        "edited",
    },
    ChannelName: {"web", "slack", "discord", "email", "teams", "telegram", "sms", "whatsapp"},
    AnsweredIn: {
        *("api", "cli", "gateway", "grant", "web"),
        *("slack", "discord", "email", "teams", "telegram"),
    },
    Timer: {"expire", "remind", "escalate"},
    GrantScope: {"args", "run", "key"},
}

# Where each vocabulary is stored. AnsweredIn lives inside user_info_json and Timer inside an
# outbox job's payload_json (text): no limit.
TABLES = SQLModel.metadata.tables
COLUMNS: dict[type[StrEnum], list[sa.Column[str]]] = {
    Kind: [TABLES["request"].c.kind],
    Status: [TABLES["request"].c.status],
    DeliveryStatus: [TABLES["delivery"].c.status],
    JobKind: [TABLES["outbox_job"].c.kind],
    JobStatus: [TABLES["outbox_job"].c.status],
    AuditEvent: [TABLES["request_event"].c.type],
    GrantScope: [TABLES["standing_grant"].c.scope],
    ChannelName: [
        TABLES["delivery"].c.channel,
        TABLES["outbox_job"].c.waiting_for,
        TABLES["channel_record"].c.channel,
    ],
}

VOCABULARIES = list(DOCUMENTED)


def _name(enum: type[StrEnum]) -> str:
    return enum.__name__


@pytest.mark.parametrize("enum", VOCABULARIES, ids=_name)
def test_values_are_the_documented_ones(enum: type[StrEnum]) -> None:
    assert {member.value for member in enum} == DOCUMENTED[enum]


@pytest.mark.parametrize("enum", VOCABULARIES, ids=_name)
def test_members_are_stored_as_their_bare_strings(enum: type[StrEnum]) -> None:
    for member in enum:
        assert member == member.value
        assert hash(member) == hash(member.value)  # found in dicts keyed by row strings
        assert str(member) == f"{member}" == member.value
        assert json.dumps({member: member}) == json.dumps({member.value: member.value})
        assert member.name == member.value.upper()  # one spelling, nothing to look up


@pytest.mark.parametrize("enum", list(COLUMNS), ids=_name)
def test_every_member_fits_its_column(enum: type[StrEnum]) -> None:
    for column in COLUMNS[enum]:
        length = getattr(column.type, "length", None)
        assert isinstance(length, int), f"{column} has no length"
        too_long = [m.value for m in enum if len(m.value) > length]
        assert not too_long, f"{too_long} do not fit {column} (VARCHAR({length}))"


def test_every_stored_vocabulary_has_a_column_or_a_reason() -> None:
    assert set(VOCABULARIES) - set(COLUMNS) == {AnsweredIn, Timer}


def test_registry_is_keyed_by_channel_names() -> None:
    assert set(REGISTRY) <= set(ChannelName)
    for name, factory in REGISTRY.items():
        assert factory(detached(name)).name == name  # the channel's own name
    assert set(SERVED_BY_GATEWAY) <= set(REGISTRY)


def test_answered_in_is_the_channels_plus_the_api_cli_gateway_and_grants() -> None:
    others = {AnsweredIn.API, AnsweredIn.CLI, AnsweredIn.GATEWAY, AnsweredIn.GRANT}
    assert {a.value for a in AnsweredIn} == {*REGISTRY, *others}


def test_jobs_api_parameter_lists_the_job_statuses() -> None:
    """The API keeps a Literal (an inline enum in the OpenAPI document): same values."""
    assert list(get_args(JobStatusParam)) == [status.value for status in JobStatus]
