"""Decision latency: from a human's respond to the agent (long-poll) or a webhook hearing it.

    cd /work/main && .venv/bin/python bench/decision_latency.py [--postgres]

(a) long-poll: create a function call, start GET /function_calls/{id}?wait=30, then POST
    /agent/function_calls/{id}/respond; time from sending the respond to the waiter's answer.
(b) webhook: with an endpoint registered (`python -m gateway webhooks add URL`) pointing at a
    local aiohttp receiver, time from sending the respond to the receiver having the body.
Baseline: the round trip of one plain request to a bare ASGI endpoint under the same uvicorn.
The gateway runs on SQLite; with --postgres, on a throwaway PostgreSQL as well.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from aiohttp import web

from bench import common
from gateway.security.crypto import sign_webhook
from tests.services.gateway_process import GatewayProcess
from tests.services.net import free_port

N = 200  # measured decisions per phase, at most
WARMUP = 5  # iterations first, not counted
PHASE_LIMIT = 20.0  # seconds per phase, at most
BASELINE_N = 200
WAIT = 30  # the long-poll's ?wait=
SETTLE = 0.1  # before each respond: after the waiter is sent (a), after the create (b)
GAP = 0.02  # after each decision, for its remaining outbox work to finish
TIMEOUT = 10.0  # for one answer or one webhook

RESPOND_BODY = {"approved": True, "comment": "looks fine"}


@dataclass
class Phase:
    label: str
    latencies: list[float] = field(default_factory=list)
    respond_rtts: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    cut_short: bool = False

    def p(self, pct: float, values: list[float] | None = None) -> float:
        return common.ms(common.percentile(self.latencies if values is None else values, pct))

    async def time(self, one: Callable[[int], Awaitable[float]]) -> None:
        """`one(index)`'s seconds, WARMUP + N times, cut short after PHASE_LIMIT seconds."""
        deadline = time.monotonic() + PHASE_LIMIT
        for index in range(WARMUP + N):
            if time.monotonic() >= deadline:
                self.cut_short = True
                return
            took = await one(index)
            if index >= WARMUP:
                self.latencies.append(took)


class Receiver:
    """Webhook receiver on 127.0.0.1: notes when each call_id's delivery arrived."""

    def __init__(self) -> None:
        self.port = free_port()
        self.secret: str | None = None
        self.arrivals: dict[str, asyncio.Future[float]] = {}
        self.duplicates = 0
        self.bad_signatures = 0
        self.unexpected = 0
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def expect(self, call_id: str) -> asyncio.Future[float]:
        future: asyncio.Future[float] = asyncio.get_running_loop().create_future()
        self.arrivals[call_id] = future
        return future

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        arrived = time.perf_counter()
        if self.secret is not None:
            headers = request.headers
            expected = sign_webhook(
                self.secret, headers["webhook-id"], int(headers["webhook-timestamp"]), body
            )
            if expected not in headers["webhook-signature"].split():
                self.bad_signatures += 1
        call_id = json.loads(body)["event"]["call_id"]
        future = self.arrivals.get(call_id)
        if future is None:
            self.unexpected += 1
        elif future.done():
            self.duplicates += 1
        else:
            future.set_result(arrived)
        return web.json_response({"ok": True})

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[Receiver]:
        app = web.Application()
        app.router.add_post("/hook", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        try:
            await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
            yield self
        finally:
            await self._runner.cleanup()


async def timed_get(client: httpx.AsyncClient, url: str, sent: asyncio.Event) -> tuple[Any, float]:
    """The long-poll; sets `sent` once its request is on the wire; stamps its answer."""

    async def trace(name: str, _info: dict[str, Any]) -> None:
        if name == "http11.send_request_body.complete":
            sent.set()

    response = await client.get(url, params={"wait": WAIT}, extensions={"trace": trace})
    return response, time.perf_counter()


async def create(client: httpx.AsyncClient, call_id: str) -> bool:
    try:
        response = await client.post("/function_calls", json=common.function_call_body(call_id))
    except httpx.HTTPError:
        return False
    return response.status_code == 200


async def long_poll_phase(
    agent: httpx.AsyncClient, poller: httpx.AsyncClient, human: httpx.AsyncClient
) -> Phase:
    phase = Phase("respond -> long-poll answer")
    tag = uuid.uuid4().hex[:8]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PHASE_LIMIT
    for index in range(WARMUP + N):
        if loop.time() >= deadline:
            phase.cut_short = True
            break
        call_id = f"poll-{tag}-{index}"
        if not await create(agent, call_id):
            phase.errors["create failed"] += 1
            continue
        sent = asyncio.Event()
        waiter = asyncio.create_task(timed_get(poller, f"/function_calls/{call_id}", sent))
        try:
            async with asyncio.timeout(TIMEOUT):
                await sent.wait()
            # Let the gateway register the waiter, so this measures the wake-up path
            # (a decision that lands before the waiter is registered is answered at once).
            await asyncio.sleep(SETTLE)
            started = time.perf_counter()
            response = await human.post(
                f"/agent/function_calls/{call_id}/respond", json=RESPOND_BODY
            )
            responded = time.perf_counter()
            async with asyncio.timeout(WAIT + TIMEOUT):
                answer, answered = await waiter
        except (TimeoutError, httpx.HTTPError) as error:
            waiter.cancel()
            await asyncio.gather(waiter, return_exceptions=True)
            phase.errors[type(error).__name__] += 1
            continue
        if response.status_code != 200:
            phase.errors[f"respond HTTP {response.status_code}"] += 1
        elif answer.status_code != 200 or answer.json()["status"]["approved"] is not True:
            phase.errors["waiter had no decision"] += 1
        elif index >= WARMUP:
            phase.latencies.append(answered - started)
            phase.respond_rtts.append(responded - started)
        await asyncio.sleep(GAP)
    return phase


async def webhook_phase(
    agent: httpx.AsyncClient, human: httpx.AsyncClient, receiver: Receiver
) -> Phase:
    phase = Phase("respond -> webhook received")
    tag = uuid.uuid4().hex[:8]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PHASE_LIMIT
    for index in range(WARMUP + N):
        if loop.time() >= deadline:
            phase.cut_short = True
            break
        call_id = f"hook-{tag}-{index}"
        if not await create(agent, call_id):
            phase.errors["create failed"] += 1
            continue
        await asyncio.sleep(SETTLE)
        arrival = receiver.expect(call_id)
        try:
            started = time.perf_counter()
            response = await human.post(
                f"/agent/function_calls/{call_id}/respond", json=RESPOND_BODY
            )
            responded = time.perf_counter()
            async with asyncio.timeout(TIMEOUT):
                arrived = await arrival
        except (TimeoutError, httpx.HTTPError) as error:
            phase.errors[type(error).__name__] += 1
            continue
        if response.status_code != 200:
            phase.errors[f"respond HTTP {response.status_code}"] += 1
        elif index >= WARMUP:
            phase.latencies.append(arrived - started)
            phase.respond_rtts.append(responded - started)
        await asyncio.sleep(GAP)
    return phase


async def gateway_phases(gateway: common.Gateway) -> list[Phase]:
    headers = gateway.headers()
    async with contextlib.AsyncExitStack() as stack:
        agent, poller, human = [
            await stack.enter_async_context(
                httpx.AsyncClient(base_url=gateway.api_base, headers=headers, timeout=WAIT + 10)
            )
            for _ in range(3)
        ]
        for client in (agent, poller, human):  # open each client's connection
            (await client.get("/project")).raise_for_status()
        phases = [await long_poll_phase(agent, poller, human)]
        receiver = Receiver()
        async with receiver.running():
            # Registered only now, so phase (a) has no webhook work in its way.
            output = await asyncio.to_thread(gateway.cli, "webhooks", "add", receiver.url)
            receiver.secret = output.strip().splitlines()[-1]
            phases.append(await webhook_phase(agent, human, receiver))
            await asyncio.sleep(0.5)  # late duplicates, if any, are counted
        if receiver.duplicates or receiver.bad_signatures or receiver.unexpected:
            print(
                f"  receiver: {receiver.duplicates} duplicate(s), "
                f"{receiver.bad_signatures} bad signature(s), {receiver.unexpected} unexpected"
            )
    for phase in phases:
        phase.label = f"{gateway.label}: {phase.label}"
        print(
            f"  {phase.label}: {len(phase.latencies)} measured, "
            f"{sum(phase.errors.values())} errors" + (" (time limit)" if phase.cut_short else ""),
            flush=True,
        )
    lines = gateway.log_lines()
    if lines:
        print(f"  {gateway.label}: the gateway logged {len(lines)} line(s) at warning+; first:")
        for line in lines[:5]:
            print(f"    {line}")
    return phases


@contextlib.asynccontextmanager
async def served(
    workdir: Path, env: dict[str, str]
) -> AsyncIterator[tuple[GatewayProcess, httpx.AsyncClient, httpx.AsyncClient]]:
    """`gateway serve` (SQLite) in `workdir` with `env`, and two clients: the agent's (its
    API key, at the API's base) and a bare one at the gateway's root (a platform's calls)."""
    process = await asyncio.to_thread(GatewayProcess(workdir, env).start)
    try:
        headers = {"Authorization": f"Bearer {process.api_key}"}
        async with (
            httpx.AsyncClient(base_url=process.api_base, headers=headers, timeout=40) as api,
            httpx.AsyncClient(base_url=process.base_url, timeout=10) as root,
        ):
            yield process, api, root
    finally:
        await asyncio.to_thread(process.stop)


def click_bench(
    title: str, measure: Callable[[], Coroutine[Any, Any, list[Phase]]], said: str
) -> int:
    """A channel's click bench: the same-run baseline, then `measure`'s phases against it."""
    common.print_machine(title)
    with common.baseline_server() as server:
        baseline = asyncio.run(baseline_round_trips(server))
    phases = asyncio.run(measure())
    for phase in phases:
        print(f"  {phase.label}: {len(phase.latencies)} measured", flush=True)
    common.print_latencies(baseline, phases)
    print(f"\n{said}")
    return 0


async def baseline_round_trips(server: common.BaselineProcess) -> Phase:
    """The bare round trip, after the same pause the gateway's phases make before each
    respond: an idle virtual CPU takes milliseconds to wake up, on both sides alike."""
    phase = Phase("baseline: one plain request round trip")
    async with httpx.AsyncClient(base_url=server.api_base, timeout=TIMEOUT) as client:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + PHASE_LIMIT
        for index in range(WARMUP + BASELINE_N):
            if loop.time() >= deadline:
                phase.cut_short = True
                break
            await asyncio.sleep(SETTLE)
            started = time.perf_counter()
            try:
                response = await client.post(
                    "/agent/function_calls/baseline/respond", json=RESPOND_BODY
                )
            except httpx.HTTPError as error:
                phase.errors[type(error).__name__] += 1
                continue
            took = time.perf_counter() - started
            if response.status_code != 200:
                phase.errors[f"HTTP {response.status_code}"] += 1
            elif index >= WARMUP:
                phase.latencies.append(took)
    print(f"  {phase.label}: {len(phase.latencies)} measured", flush=True)
    return phase


def run_gateway(database_url: str, label: str) -> list[Phase]:
    with common.gateway_server(database_url, label) as gateway:
        return asyncio.run(gateway_phases(gateway))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="also run on PostgreSQL")
    args = parser.parse_args()

    common.print_machine("decision latency: respond -> long-poll waiter / webhook")
    print(
        f"each phase: up to {N} decisions one at a time ({WARMUP} warm-up first, not counted) "
        f"or {PHASE_LIMIT:.0f} s; long-poll ?wait={WAIT}; the respond is sent "
        f"{SETTLE * 1000:.0f} ms after the waiter's request is on the wire"
    )
    print()

    print("-- baseline: bare ASGI function under uvicorn", flush=True)
    with common.baseline_server() as server:
        baseline = asyncio.run(baseline_round_trips(server))

    phases = common.on_each_database(
        run_gateway, postgres=args.postgres, database="bench_decisions"
    )

    print()
    base50, base99 = baseline.p(50), baseline.p(99)
    rows: list[list[Any]] = [
        [
            baseline.label,
            len(baseline.latencies),
            common.fmt(base50),
            common.fmt(base99),
            *["", "", "1.00x", "1.00x"],
        ]
    ]
    for phase in phases:
        p50, p99 = phase.p(50), phase.p(99)
        rows.append(
            [
                phase.label + (" (time limit)" if phase.cut_short else ""),
                len(phase.latencies),
                common.fmt(p50),
                common.fmt(p99),
                common.fmt(phase.p(50, phase.respond_rtts)),
                common.fmt(phase.p(99, phase.respond_rtts)),
                common.ratio(p50, base50),
                common.ratio(p99, base99),
            ]
        )
    common.print_table(
        [
            "measurement",
            "n",
            "p50 ms",
            "p99 ms",
            "respond p50",
            "respond p99",
            "p50 vs base",
            "p99 vs base",
        ],
        rows,
    )
    for phase in [baseline, *phases]:
        if phase.errors:
            print(f"errors for {phase.label}: {dict(phase.errors)}")
    print()
    print(
        "Latency: from sending the respond to the waiter's answer / the webhook body being "
        "received. 'respond' columns: the respond request's own round trip. 'vs base': "
        "divided by the bare-ASGI round trip from this same run."
    )
    slow = [phase for phase in phases if phase.latencies and max(phase.latencies) > 0.9]
    for phase in slow:
        worst = sorted(phase.latencies)[-3:]
        print(f"note: {phase.label}: slowest {[round(common.ms(w)) for w in worst]} ms")
    failed = any(phase.errors for phase in [baseline, *phases]) or any(
        math.isnan(phase.p(50)) for phase in phases
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
