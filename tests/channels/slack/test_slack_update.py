"""A retried Slack update leaves one edited message and one thread note (the seam promises
that `update` is idempotent)."""

from __future__ import annotations

import json

from tests.channels.slack.helpers import TO_C1
from tests.factories import RequestFactory
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually, jobs, outbox_idle
from tests.services.inprocess import RunningGateway


async def test_two_retried_updates_edit_once_and_note_once(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    made = await request_factory(gateway, "upd-1", channel=TO_C1, settle=True)
    [(channel, ts)] = [key for key, message in fake.messages.items() if "thread_ts" not in message]
    # Each of the first two update attempts does its work but loses Slack's answer.
    fake.fail_after_accepting("chat.update", 1)
    fake.fail_after_accepting("chat.postMessage", 1)
    async with gateway.client() as client:
        body = {"approved": False, "comment": "not on a Friday"}
        response = await client.post("/agent/function_calls/upd-1/respond", json=body)
        assert response.status_code == 200, response.text
    await eventually(lambda: outbox_idle(gateway))

    [update_job] = [job for job in await jobs(gateway) if job["kind"] == "update"]
    assert update_job["status"] == "done" and update_job["attempts"] == 3
    notes = fake.thread(channel, ts)
    assert len(notes) == 1, notes
    assert "not on a Friday" in notes[0]["text"]
    assert notes[0]["metadata"]["event_payload"] == {"rid": made.rid, "status": "rejected"}
    edited = fake.messages[(channel, ts)]
    assert "actions" not in json.dumps(edited["blocks"]), "the buttons are gone"
    assert len(fake.calls_to("chat.update", include_failed=False)) == 2  # same edit, twice


async def test_an_update_without_history_access_still_notes_the_outcome(
    gateway: RunningGateway, fake: FakeSlack, request_factory: RequestFactory
) -> None:
    await request_factory(gateway, "upd-2", channel=TO_C1, settle=True)
    [(channel, ts)] = [key for key, message in fake.messages.items() if "thread_ts" not in message]
    del fake.messages[(channel, ts)]  # conversations.replies: thread_not_found, as without scope
    async with gateway.client() as client:
        response = await client.post("/agent/function_calls/upd-2/respond", json={"approved": True})
        assert response.status_code == 200, response.text
    await eventually(lambda: outbox_idle(gateway))
    notes = [
        c
        for c in fake.calls_to("chat.postMessage", include_failed=False)
        if "thread_ts" in c.params
    ]
    assert len(notes) == 1
