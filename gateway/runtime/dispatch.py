"""The outbox worker: claim due jobs, run them, record the outcome with the job's end.

Delivery is at least once. A crash between the side effect and its record leaves the job
claimable again, so every handler is idempotent (a send checks whether it already happened).
Jobs are claimed as run slots free up, and each runs on its own: one that waits (a paced
channel's turn, a slow receiver) gives its slot back, so that it holds up no other job
(`gateway.outbox.lanes`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import uuid
from collections.abc import Awaitable, Callable
from datetime import timedelta

import httpx

from gateway.core import Core
from gateway.errors import ChannelDown, DeliveryError
from gateway.lifecycle import Status
from gateway.outbox import deliveries, webhooks
from gateway.outbox.checkpoints import keep_publishing
from gateway.outbox.lanes import Deferred, Lanes, Slots, lane_of
from gateway.policies import grants
from gateway.policies.retention import keep_redacting
from gateway.runtime import due
from gateway.runtime.channel_states import connected
from gateway.runtime.retry import RetryPolicy
from gateway.seam.channel import Noted, Remindable
from gateway.seam.sentences import grant_note
from gateway.seam.targets import Target
from gateway.seam.views import RequestView
from gateway.store import Tx, utcnow
from gateway.store import grants as grant_store
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import DeliveryRow, JobRow, RequestRow
from gateway.vocabulary import AuditEvent, DeliveryStatus, JobKind

log = logging.getLogger(__name__)

Record = Callable[[Tx], None]  # runs in the transaction that completes the job
# A claimed job is another replica's to take once its lease runs out: the worker renews the
# leases of the jobs it runs, so only a dead replica's (kill -9) wait, and not for long.
LEASE = timedelta(seconds=6)
RENEW_EVERY_SECONDS = LEASE.total_seconds() / 3
FINISH_SECONDS = 2.0  # at shutdown, running jobs get this long; the rest are handed back
RELEASE_WITHIN_SECONDS = 1.0


def _nothing(_conn: Tx) -> None:
    return None


def _already_done(delivery: DeliveryRow, row: RequestRow) -> Record | None:
    """What to record instead of a send: nothing for a post sent before a crash (never post
    twice), a skip for a request decided before its post went out; None: send it."""
    if delivery.status == DeliveryStatus.SENT:
        return _nothing
    if row.status == Status.PENDING:
        return None
    delivery_id, status = delivery.id, row.status

    def skipped(conn: Tx) -> None:
        assert delivery_id is not None
        error = f"request was {status} before delivery"
        request_store.update_delivery(conn, delivery_id, status=DeliveryStatus.SKIPPED, error=error)

    return skipped


class Dispatcher:
    def __init__(
        self,
        core: Core,
        http: httpx.AsyncClient,
        *,
        batch: int = 16,
        channel_policy: RetryPolicy | None = None,
        webhook_policy: RetryPolicy | None = None,
    ) -> None:
        self.core = core
        self.http = http
        self.channel_policy = channel_policy or RetryPolicy(
            base=core.settings.channel_retry_base_seconds
        )
        self.webhook_policy = webhook_policy or RetryPolicy(schedule=core.settings.webhook_delays)
        self._stopping = asyncio.Event()
        self._held: set[int] = set()  # claimed, and their outcome not yet recorded
        self._slots = Slots(batch)
        self._lanes = Lanes(self._slots)
        self._running: set[asyncio.Task[None]] = set()
        self.worker = uuid.uuid4().hex  # the name its claims are made in
        self._handlers: dict[str, Callable[[JobRow], Awaitable[Record]]] = {
            JobKind.DELIVER: self._deliver,
            JobKind.UPDATE: self._update,
            JobKind.WEBHOOK: self._webhook,
            JobKind.TIMER: self._timer,
            JobKind.REMIND: self._remind,
            JobKind.NOTE: self._note,
        }

    async def run(self) -> None:
        """Work until stop() or the gateway's shutdown; wake on new jobs, at the next due
        time, or every poll period."""
        if self.core.db.is_sqlite:
            await self.core.db.write(outbox_store.release_leases)
        renewing = asyncio.create_task(self._renew_leases(), name="outbox-leases")
        checkpoints = asyncio.create_task(keep_publishing(self.core), name="audit-checkpoints")
        redacting = asyncio.create_task(keep_redacting(self.core), name="retention")
        try:
            while not self._stopping.is_set() and not self.core.stopping.is_set():
                try:
                    await self._fill()
                except Exception:
                    log.exception("outbox worker error; retrying shortly")
                    await self._sleep(self.core.settings.outbox_poll_seconds)
            if self._running:  # finish() cancels this wait after its grace period
                await asyncio.wait(self._running)
        finally:
            renewing.cancel()
            checkpoints.cancel()
            redacting.cancel()
            await self._cancel_running()

    async def _cancel_running(self) -> None:
        """Their jobs stay held: finish() hands them back."""
        running = list(self._running)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    async def _renew_leases(self) -> None:
        """While jobs run here (a send may wait out a rate limit), keep their leases."""
        while True:
            await asyncio.sleep(RENEW_EVERY_SECONDS)  # a timer: nothing to wait on instead
            if not self._held:
                continue
            try:
                held = sorted(self._held)
                await self.core.db.write(outbox_store.extend_leases, held, LEASE, self.worker)
            except Exception as error:  # the next renewal tries again
                log.warning("outbox: could not renew the leases: %s", error)

    def stop(self) -> None:
        self._stopping.set()
        self._slots.wake()
        self.core.outbox_wakeup.set()

    async def finish(self, worker: asyncio.Task[None], within: float = FINISH_SECONDS) -> None:
        """Stop claiming; give the running jobs `within` seconds; then cancel them and hand
        them back, so that another replica runs them now rather than when their lease ends."""
        self.stop()
        await asyncio.wait([worker], timeout=within)
        if not worker.done():
            worker.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await worker
        if self._held:
            held, self._held = sorted(self._held), set()
            try:
                async with asyncio.timeout(RELEASE_WITHIN_SECONDS):
                    released = await self.core.db.write(outbox_store.release, held, self.worker)
            except Exception as error:  # their leases run out instead (database unreachable)
                log.warning("outbox: could not hand back %d job(s): %s", len(held), error)
                return
            log.info("outbox: handed back %d unfinished job(s) at shutdown", released)

    async def _fill(self) -> None:
        """Claim due jobs into the free slots and start them; then wait for a slot to free
        up, or (when nothing more is due) for new work or the next due time."""
        free = self._slots.free
        if not free:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.core.settings.outbox_poll_seconds):
                    await self._slots.freed()
            return
        jobs = await self.core.db.write(
            outbox_store.claim,
            limit=free,
            lease=LEASE,
            skip_locked=not self.core.db.is_sqlite,
            worker=self.worker,
        )
        for job in jobs:
            self._start(job)
        if len(jobs) < free:
            await self._idle()

    def _start(self, job: JobRow) -> None:
        assert job.id is not None
        self._held.add(job.id)
        self._slots.take(job.id)
        task = asyncio.create_task(self._run(job), name=f"outbox-job-{job.id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _idle(self) -> None:
        timeout = self.core.settings.outbox_poll_seconds
        due = await self.core.db.read(outbox_store.next_due_at)
        if due is not None:
            timeout = min(timeout, max(0.0, (due - utcnow()).total_seconds()))
        await self._sleep(timeout)

    async def _sleep(self, seconds: float) -> None:
        wakeup = self.core.outbox_wakeup
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wakeup.wait(), timeout=seconds)
        wakeup.clear()

    async def _run(self, job: JobRow) -> None:
        assert job.id is not None
        try:
            await self._attempt(job)
        except Exception:  # its outcome could not be recorded: its lease runs out
            log.exception("outbox job %s (%s): its outcome was not recorded", job.id, job.kind)
        finally:
            self._slots.give_back(job.id)
        self._held.discard(job.id)  # not reached when cancelled: finish() hands it back

    async def _attempt(self, job: JobRow) -> None:
        assert job.id is not None
        try:
            record = await self._handlers[job.kind](job)
        except webhooks.EndpointGone as gone:
            await self._endpoint_gone(job, str(gone))
        except ChannelDown as down:
            await self._wait_for_channel(job, down)
        except Deferred as deferred:
            await self._defer(job, deferred.seconds)
        except DeliveryError as error:
            await self._failed(job, error)
        except Exception as error:  # a bug or an unmapped SDK error: retry, never lose the job
            log.exception("outbox job %s (%s) crashed", job.id, job.kind)
            await self._failed(
                job, DeliveryError(f"{type(error).__name__}: {error}", retryable=True)
            )
        else:
            job_id = job.id

            def complete(conn: Tx) -> None:
                record(conn)
                outbox_store.complete(conn, job_id)

            await self._write(job, complete)

    async def _write(self, job: JobRow, record: Record) -> None:
        """A job's outcome, on the writer thread of its request (its rows are that request's)."""
        if job.rid is None:
            await self.core.db.write(record)
        else:
            await self.core.db.write_for(job.rid, record)

    async def _failed(self, job: JobRow, error: DeliveryError) -> None:
        assert job.id is not None
        final = not error.retryable or job.attempts >= job.max_attempts
        policy = self.webhook_policy if job.kind == JobKind.WEBHOOK else self.channel_policy
        delay = policy.delay(job.attempts, retry_after=error.retry_after)

        def record_failure(conn: Tx) -> None:
            assert job.id is not None
            if final:
                outbox_store.bury(conn, job.id, error=str(error))
            else:
                run_at = utcnow() + timedelta(seconds=delay)
                outbox_store.retry(conn, job.id, run_at=run_at, error=str(error))
            _note_failure(conn, job, str(error), final=final)
            if final and error.fallback is not None:
                _fall_back(conn, job, Target.model_validate(error.fallback))

        await self._write(job, record_failure)
        log.warning(
            "outbox job %s (%s) failed%s: %s",
            job.id,
            job.kind,
            " for good" if final else ", will retry",
            error,
        )

    async def _wait_for_channel(self, job: JobRow, down: ChannelDown) -> None:
        """Keep the attempt: the job is due again when the channel connects (or at the cap)."""
        assert job.id is not None
        run_at = utcnow() + timedelta(seconds=self.core.settings.channel_retry_cap_seconds)
        up_meanwhile = connected(self.core.channels.get(down.channel))

        def record_wait(conn: Tx) -> None:
            assert job.id is not None
            outbox_store.postpone(
                conn, job.id, run_at=run_at, error=str(down), waiting_for=down.channel
            )
            _note_failure(conn, job, str(down), final=False)
            if up_meanwhile:
                outbox_store.resume_waiting(conn, down.channel)

        await self._write(job, record_wait)
        log.info("outbox job %s (%s) waits: %s", job.id, job.kind, down)

    async def _defer(self, job: JobRow, seconds: float) -> None:
        assert job.id is not None
        run_at = utcnow() + timedelta(seconds=seconds)
        job_id = job.id
        await self._write(job, lambda tx: outbox_store.defer(tx, job_id, run_at=run_at))

    async def _endpoint_gone(self, job: JobRow, reason: str) -> None:
        assert job.id is not None
        endpoint_id = json.loads(job.payload_json)["endpoint_id"]

        def disable(conn: Tx) -> None:
            assert job.id is not None
            project_store.disable_webhook(conn, endpoint_id, reason)
            outbox_store.bury(conn, job.id, error=reason)
            if job.rid is not None:
                detail = {"endpoint_id": endpoint_id, "reason": reason}
                request_store.add_event(conn, job.rid, AuditEvent.WEBHOOK_ENDPOINT_DISABLED, detail)

        await self._write(job, disable)

    async def _load(self, delivery_id: int) -> tuple[DeliveryRow, RequestRow, str]:
        return await self.core.db.read(_load, delivery_id)

    async def _deliver(self, job: JobRow) -> Record:
        delivery_id = json.loads(job.payload_json)["delivery_id"]
        delivery, row, project = await self._load(delivery_id)
        if (done := _already_done(delivery, row)) is not None:
            return done
        target = Target.model_validate_json(delivery.target_json)
        channel = self.core.channels[delivery.channel]
        assert job.id is not None
        async with self._lanes.post(channel, delivery.channel, target, job.id) as waited:
            if waited:  # its turn came later: the request may have been decided meanwhile
                delivery, row, project = await self._load(delivery_id)
                if (done := _already_done(delivery, row)) is not None:
                    return done
            sent = await channel.send(self.core.view(row, project), target)

        def record(conn: Tx) -> None:
            request_store.update_delivery(
                conn,
                delivery_id,
                status=DeliveryStatus.SENT,
                ref=sent.ref,
                reply_key=sent.reply_key,
            )
            if sent.status_fields:
                request_store.add_wire_status(conn, row.rid, sent.status_fields)
            detail = {"delivery_id": delivery_id, "channel": delivery.channel}
            request_store.add_event(conn, row.rid, AuditEvent.DELIVERED, detail)

        return record

    async def _update(self, job: JobRow) -> Record:
        delivery, row, project = await self._load(json.loads(job.payload_json)["delivery_id"])
        target = Target.model_validate_json(delivery.target_json)
        ref = json.loads(delivery.ref_json or "{}")
        view = self.core.view(row, project)
        assert job.id is not None
        async with self._lanes.lane(lane_of(delivery.channel, target), job.id):
            await self.core.channels[delivery.channel].update(view, target, ref)
        return _nothing

    async def _timer(self, job: JobRow) -> Record:
        await due.fire(self.core, job)
        return _nothing

    async def _remind(self, job: JobRow) -> Record:
        payload = json.loads(job.payload_json)
        delivery, row, project = await self._load(payload["delivery_id"])
        channel = self.core.channels.get(delivery.channel)
        if row.status != Status.PENDING or not isinstance(channel, Remindable):
            return _nothing
        target = Target.model_validate_json(delivery.target_json)
        mention = await self.core.db.read(deliveries.waiting_on, row.rid, target)
        ref = json.loads(delivery.ref_json or "{}")
        view = self.core.view(row, project)
        assert job.id is not None
        async with self._lanes.post(channel, delivery.channel, target, job.id):
            await channel.remind(view, target, ref, mention, number=payload["number"])

        def record(conn: Tx) -> None:
            detail = {"delivery_id": delivery.id, "number": payload["number"], "mention": mention}
            request_store.add_event(conn, row.rid, AuditEvent.REMINDED, detail)

        return record

    async def _note(self, job: JobRow) -> Record:
        """A standing grant's note under each post of the request that gave it: how many
        calls it approved since its last note."""
        note = await grants.next_note(self.core, json.loads(job.payload_json)["grant"])
        if note is None:
            return _nothing
        rid, grant_id, uses = note.grant.source_rid, note.grant.id, note.uses
        row, project = await self.core.db.read(request_store.get_with_project, rid)
        if note.new > 0 and row is not None and project is not None:
            view, text = self.core.view(row, project), grant_note(note.grant, note.new)
            for delivery in await self.core.db.read(request_store.list_deliveries, [rid]):
                await self._note_under(job, delivery, view, text, key=f"grant {grant_id} {uses}")
        return lambda conn: grant_store.noted(conn, grant_id, uses)

    async def _note_under(
        self, job: JobRow, delivery: DeliveryRow, view: RequestView, text: str, *, key: str
    ) -> None:
        channel = self.core.channels.get(delivery.channel)
        if not isinstance(channel, Noted) or delivery.ref_json is None:
            return
        target = Target.model_validate_json(delivery.target_json)
        assert job.id is not None
        async with self._lanes.post(channel, delivery.channel, target, job.id):
            await channel.note(view, target, json.loads(delivery.ref_json), text, key=key)

    async def _webhook(self, job: JobRow) -> Record:
        payload = json.loads(job.payload_json)
        endpoint = await self.core.db.read(project_store.get_webhook, payload["endpoint_id"])
        if endpoint is None or not endpoint.enabled:
            return _nothing
        secret = self.core.box.open(endpoint.sealed_secret)
        body = payload["body"].encode()
        assert job.id is not None
        async with self._lanes.lane(f"webhook:{endpoint.id}", job.id):
            headers = webhooks.signed_headers(secret, payload["msg_id"], body)  # stamped now
            attempt = await webhooks.post(
                self.http,
                endpoint.url,
                body,
                headers,
                allow_private=self.core.settings.webhook_allow_private,
                timeout_seconds=self.core.settings.webhook_timeout_seconds,
            )

        def record(conn: Tx) -> None:
            if job.rid is not None:
                detail = {
                    "endpoint_id": endpoint.id,
                    "msg_id": payload["msg_id"],
                    "status_code": attempt.status_code,
                    "attempt": job.attempts,
                }
                request_store.add_event(conn, job.rid, AuditEvent.WEBHOOK_DELIVERED, detail)

        return record


def _note_failure(conn: Tx, job: JobRow, error: str, *, final: bool) -> None:
    payload = json.loads(job.payload_json)
    if job.kind == JobKind.DELIVER:
        status = DeliveryStatus.FAILED if final else DeliveryStatus.RETRYING
        request_store.update_delivery(conn, payload["delivery_id"], status=status, error=error)
    if final and job.rid is not None:
        event = (
            AuditEvent.WEBHOOK_FAILED if job.kind == JobKind.WEBHOOK else AuditEvent.DELIVERY_FAILED
        )
        detail = {"job_id": job.id, "kind": job.kind, "error": error, "attempts": job.attempts}
        request_store.add_event(conn, job.rid, event, detail)


def _fall_back(conn: Tx, job: JobRow, target: Target) -> None:
    assert job.rid is not None and job.project_id is not None
    failed = json.loads(job.payload_json)["delivery_id"]
    delivery_id = deliveries.queue(conn, job.rid, job.project_id, target)
    detail = {"failed_delivery_id": failed, "delivery_id": delivery_id, "via": target.via}
    request_store.add_event(conn, job.rid, AuditEvent.DELIVERY_FALLBACK, detail)


def _load(conn: Tx, delivery_id: int) -> tuple[DeliveryRow, RequestRow, str]:
    """A delivery, its request and the request's project name."""
    delivery = request_store.get_delivery(conn, delivery_id)
    assert delivery is not None
    row = request_store.get_by_rid(conn, delivery.rid)
    assert row is not None
    project = project_store.get_project_by_id(conn, row.project_id)
    assert project is not None
    return delivery, row, project.name
