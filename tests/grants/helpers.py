"""Standing grants for the tests of their API, CLI and security: given the one way they are,
a person's "Approve and allow…" through the answer path every channel uses."""

from __future__ import annotations

from typing import Any

from gateway.policies import grants
from gateway.seam import Answered, Responder, Verb
from gateway.seam.grants import GrantView
from gateway.vocabulary import AnsweredIn
from tests.factories import Created, RequestFactory
from tests.services.inprocess import RunningGateway

SLACK = {"slack": {"channel_or_user_id": "C1"}}
ALICE = Responder(AnsweredIn.SLACK, "U0ALICE", "Alice")
FN = "read_file"


async def create(
    gateway: RunningGateway,
    factory: RequestFactory,
    call_id: str,
    *,
    key: str | None = None,
    run_id: str = "run-1",
    **kwargs: Any,
) -> Created:
    """A `read_file` call sent to Slack, by `key` (the test key)."""
    return await factory(
        gateway, call_id, channel=SLACK, run_id=run_id, key=key, fn=FN, kwargs=kwargs
    )


async def give_grant(
    gateway: RunningGateway,
    factory: RequestFactory,
    call_id: str,
    *,
    key: str | None = None,
    grant: str = "run:3600",
    run_id: str = "run-1",
) -> GrantView:
    """Alice approves a new call of `key` in Slack and allows more like it: the grant."""
    made = await create(gateway, factory, call_id, key=key, run_id=run_id, path="/a")
    answered = await gateway.context("slack").answers.answer(
        made.rid, Verb.GRANT, ALICE, grant=grant
    )
    assert isinstance(answered, Answered), answered
    [given] = [g for g in await grants.listing(gateway.core) if g.source_rid == made.rid]
    return given


async def auto_approved(
    gateway: RunningGateway,
    factory: RequestFactory,
    call_id: str,
    *,
    key: str | None = None,
    run_id: str = "run-1",
) -> bool:
    """Whether a new call like the granted ones was approved at once, in its create."""
    made = await create(gateway, factory, call_id, key=key, run_id=run_id, path="/a")
    return made.wire["status"]["approved"] is True
