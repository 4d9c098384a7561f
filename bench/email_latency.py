"""Email reply delivered to the mailbox -> decision answered to a long-poll, p50/p99.

The gateway runs as `gateway serve` in a subprocess with its email channel on an SMTP sink
(aiosmtpd, STARTTLS + AUTH) and a real Dovecot, as in the tests. Each reply is delivered
over LMTP, as a mail server would; the clock runs from the LMTP delivery starting to the
long-poll waiter's answer (IMAP IDLE push, fetch, parse, decide, commit, wake-up).
The same replies POSTed to /email/inbound show the cost of the pipeline without IMAP, and
a bare ASGI round trip is the baseline. Bounded: at most N replies or PHASE_LIMIT s a phase.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from email.message import EmailMessage
from pathlib import Path

import httpx
from aioimaplib import IMAP4

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common
from bench.decision_latency import SETTLE, Phase, baseline_round_trips
from tests.channels.email.helpers import ALICE, email_env, reply, sent_for
from tests.services.dovecot import ThrowawayDovecot, find_dovecot
from tests.services.gateway_process import GatewayProcess
from tests.services.smtp_sink import SmtpSink, SunkMessage

N = 60
WARMUP = 3
PHASE_LIMIT = 45.0
INBOUND_SECRET = "bench-inbound-secret"

Deliver = Callable[[bytes, str], Awaitable[None]]


def gateway_env(sink: SmtpSink, dovecot: ThrowawayDovecot) -> dict[str, str]:
    return email_env(sink, dovecot, dovecot.user, dovecot.password) | {
        "EMAIL_INBOUND_SECRET": INBOUND_SECRET,
        "GATEWAY_LOG_LEVEL": "warning",
    }


async def request_email(api: httpx.AsyncClient, sink: SmtpSink, call_id: str) -> SunkMessage:
    spec = {"fn": "deploy", "kwargs": {"id": call_id}, "channel": {"email": {"address": ALICE}}}
    created = await api.post(
        "/function_calls", json={"run_id": "bench", "call_id": call_id, "spec": spec}
    )
    created.raise_for_status()
    while not (found := sent_for(sink, call_id)):
        await sink.wait_for_messages(len(sink.messages) + 1, timeout=15)
    return found[0]


async def long_poll(api: httpx.AsyncClient, call_id: str) -> tuple[httpx.Response, float]:
    """The answer and when it arrived: POST /email/inbound returns only after the
    confirmation email is sent, which can be after the waiter was answered."""
    response = await api.get(f"/function_calls/{call_id}", params={"wait": 30})
    return response, time.perf_counter()


async def one_reply(
    api: httpx.AsyncClient, sink: SmtpSink, deliver: Deliver, call_id: str
) -> float:
    sunk = await request_email(api, sink, call_id)
    # As a mail client quotes: its attribution line, then the request (a bare "> …" under
    # the answer would read as answering quoted words).
    quote = "On Thu, Nov 26, 2026 at 10:00 AM Approvals <approvals@example.test> wrote:"
    answer = reply(sunk.message, f"Approve\n\n{quote}\n> the request\n")
    waiter = asyncio.create_task(long_poll(api, call_id))
    await asyncio.sleep(SETTLE)
    started = time.perf_counter()
    await deliver(answer, str(sunk.message["Reply-To"]))
    response, answered = await waiter
    took = answered - started
    if response.json()["status"]["approved"] is not True:
        raise RuntimeError(f"{call_id} was not approved: {response.text[:200]}")
    return took


async def run_phase(
    label: str, prefix: str, api: httpx.AsyncClient, sink: SmtpSink, deliver: Deliver
) -> Phase:
    phase = Phase(label)
    deadline = time.monotonic() + PHASE_LIMIT
    for index in range(WARMUP + N):
        if time.monotonic() >= deadline:
            phase.cut_short = True
            break
        took = await one_reply(api, sink, deliver, f"{prefix}-{index}")
        if index >= WARMUP:
            phase.latencies.append(took)
    print(f"  {phase.label}: {len(phase.latencies)} measured", flush=True)
    return phase


async def idle_push_baseline(dovecot: ThrowawayDovecot) -> Phase:
    """Dovecot alone: LMTP delivery -> the EXISTS push reaching a bare IDLE client."""
    phase = Phase("Dovecot alone: LMTP delivery -> IDLE push (EXISTS)")
    dovecot.add_user("idle", "idle-secret")
    client = IMAP4(host=dovecot.host, port=dovecot.imap_port, timeout=10)
    await client.wait_hello_from_server()
    await client.login("idle", "idle-secret")
    await client.select("INBOX")
    deadline = time.monotonic() + PHASE_LIMIT
    note = reply(request_mail_stub(), "Approve")
    for index in range(WARMUP + N):
        if time.monotonic() >= deadline:
            phase.cut_short = True
            break
        idle = await client.idle_start(timeout=30)  # returns once the server said "+ idling"
        started = time.perf_counter()
        await asyncio.to_thread(dovecot.deliver, note, dovecot.address_of("idle"))
        while b"EXISTS" not in b" ".join(_lines(await client.wait_server_push(timeout=10))):
            pass
        took = time.perf_counter() - started
        client.idle_done()
        await asyncio.wait_for(idle, timeout=10)
        if index >= WARMUP:
            phase.latencies.append(took)
    await client.logout()
    print(f"  {phase.label}: {len(phase.latencies)} measured", flush=True)
    return phase


def request_mail_stub() -> EmailMessage:
    stub = EmailMessage()
    stub["From"], stub["Subject"] = "approvals@example.test", "Approval"
    stub["Reply-To"], stub["Message-ID"] = "idle@example.test", "<stub@example.test>"
    return stub


def _lines(push: object) -> list[bytes]:
    lines = push if isinstance(push, list) else [push]
    return [line for line in lines if isinstance(line, bytes)]


async def measure(dovecot: ThrowawayDovecot) -> list[Phase]:
    sink = SmtpSink().start()
    try:
        with tempfile.TemporaryDirectory(prefix="gw-bench-email-") as tmp:
            process = GatewayProcess(Path(tmp), gateway_env(sink, dovecot))
            await asyncio.to_thread(process.start)
            try:
                return await both_phases(process, sink, dovecot)
            finally:
                await asyncio.to_thread(process.stop)
    finally:
        sink.stop()


async def both_phases(
    process: GatewayProcess, sink: SmtpSink, dovecot: ThrowawayDovecot
) -> list[Phase]:
    headers = {"Authorization": f"Bearer {process.api_key}"}
    inbound_headers = {"Authorization": f"Bearer {INBOUND_SECRET}"}
    async with (
        httpx.AsyncClient(base_url=process.api_base, headers=headers, timeout=40) as api,
        httpx.AsyncClient(
            base_url=process.base_url, headers=inbound_headers, timeout=30
        ) as inbound,
    ):

        async def over_lmtp(raw: bytes, recipient: str) -> None:
            await asyncio.to_thread(dovecot.deliver, raw, recipient)

        async def over_http(raw: bytes, recipient: str) -> None:
            (await inbound.post("/email/inbound", content=raw)).raise_for_status()

        imap = await run_phase(
            "SQLite: LMTP delivery -> IMAP IDLE -> long-poll answer", "imap", api, sink, over_lmtp
        )
        posted = await run_phase(
            "SQLite: POST /email/inbound -> long-poll answer", "http", api, sink, over_http
        )
        return [imap, posted]


def main() -> int:
    binary = find_dovecot()
    if binary is None:
        print("Dovecot is not installed: run `make test` once (it installs it) or apt it.")
        return 1
    common.print_machine("Email reply -> long-poll waiter")
    with common.baseline_server() as server:
        baseline = asyncio.run(baseline_round_trips(server))
    dovecot = ThrowawayDovecot(binary).start()
    try:
        idle_alone = asyncio.run(idle_push_baseline(dovecot))
        phases = [idle_alone, *asyncio.run(measure(dovecot))]
    finally:
        dovecot.close()
    common.print_latencies(baseline, phases)
    print("\nFrom the reply leaving the mail server (or the HTTP client) to the waiter's answer.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
