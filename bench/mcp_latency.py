"""MCP front door latency, next to the HTTP API's, in the same run against one gateway.

    cd /work/main && .venv/bin/python bench/mcp_latency.py [--postgres]

(a) HTTP create: POST /function_calls, its round trip.
(b) MCP create: tools/call request_approval with wait_seconds=0 (create, answer a ticket).
(c) HTTP decision: create, start GET /function_calls/{id}?wait=30, then POST
    /agent/function_calls/{id}/respond; time from sending the respond to the waiter's answer.
(d) MCP decision: tools/call request_approval with wait_seconds=30; once its request is
    pending, another client POSTs the respond; time from sending the respond to the tool
    result. The respond goes out SETTLE after the waiter's request in (c) and (d) alike.
The official `mcp` client (streamable HTTP, one session) talks to `gateway serve` in a
subprocess on SQLite; with --postgres, on a throwaway PostgreSQL as well.
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
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Implementation, TextContent

from bench import common
from bench.decision_latency import SETTLE

N = 100  # measured iterations per phase, at most
WARMUP = 5  # iterations first, not counted
PHASE_LIMIT = 30.0  # seconds per phase, at most
WAIT = 30  # the long-poll's ?wait= and the tool's wait_seconds
FIND_EVERY = 0.005  # polling for the MCP request to exist (before the timed part)
TIMEOUT = 10.0
CLIENT = "bench-mcp"  # the run_id of every MCP request (its clientInfo.name)
RESPOND_BODY = {"approved": True, "comment": "looks fine"}
ARGUMENTS = {"to": "ops@example.com", "subject": "quarterly report", "amount": 42}


@dataclass
class Phase:
    label: str
    latencies: list[float] = field(default_factory=list)
    errors: Counter[str] = field(default_factory=Counter)
    cut_short: bool = False

    def p(self, pct: float) -> float:
        return common.ms(common.percentile(self.latencies, pct))


Step = Callable[[int], Awaitable[float | None]]


async def run_phase(label: str, step: Step) -> Phase:
    """`step(index)` returns one measured duration, or None when it failed (counted)."""
    phase = Phase(label)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + PHASE_LIMIT
    for index in range(WARMUP + N):
        if loop.time() >= deadline:
            phase.cut_short = True
            break
        try:
            async with asyncio.timeout(WAIT + TIMEOUT):
                took = await step(index)
        except (TimeoutError, httpx.HTTPError, httpx2.HTTPError) as error:
            phase.errors[type(error).__name__] += 1
            continue
        if took is None:
            phase.errors["no decision"] += 1
        elif index >= WARMUP:
            phase.latencies.append(took)
    print(f"  {label}: {len(phase.latencies)} measured, {sum(phase.errors.values())} errors")
    return phase


@contextlib.asynccontextmanager
async def mcp_session(gateway: common.Gateway) -> AsyncIterator[ClientSession]:
    url = gateway.api_base.removesuffix(common.API_PREFIX) + "/mcp"
    timeout = httpx2.Timeout(TIMEOUT, read=WAIT + TIMEOUT)
    async with (
        httpx2.AsyncClient(headers=gateway.headers(), timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write, client_info=Implementation(name=CLIENT, version="1")) as s,
    ):
        await s.initialize()
        yield s


async def request_approval(session: ClientSession, wait: float) -> dict[str, Any]:
    result = await session.call_tool(
        "request_approval", {"action": "send_email", "arguments": ARGUMENTS, "wait_seconds": wait}
    )
    [content] = result.content
    assert isinstance(content, TextContent) and not result.is_error, content
    answer: dict[str, Any] = json.loads(content.text)
    return answer


async def pending_mcp_call(api: httpx.AsyncClient, seen: set[str]) -> str:
    """The call_id of the MCP request just made (the tool holds it until it returns)."""
    while True:
        listed = await api.get(
            "/function_calls", params={"status": "pending", "run_id": CLIENT, "limit": 5}
        )
        fresh = [i["call_id"] for i in listed.json()["items"] if i["call_id"] not in seen]
        if fresh:
            seen.add(fresh[0])
            return str(fresh[0])
        await asyncio.sleep(FIND_EVERY)  # a request made by another process: nothing to await


async def timed_get(client: httpx.AsyncClient, url: str, sent: asyncio.Event) -> httpx.Response:
    async def trace(name: str, _info: dict[str, Any]) -> None:
        if name == "http11.send_request_body.complete":
            sent.set()

    return await client.get(url, params={"wait": WAIT}, extensions={"trace": trace})


async def phases(gateway: common.Gateway) -> list[Phase]:
    tag = uuid.uuid4().hex[:8]
    seen: set[str] = set()
    async with contextlib.AsyncExitStack() as stack:
        agent, poller, human = [
            await stack.enter_async_context(
                httpx.AsyncClient(
                    base_url=gateway.api_base, headers=gateway.headers(), timeout=WAIT + TIMEOUT
                )
            )
            for _ in range(3)
        ]
        for client in (agent, poller, human):  # open each client's connection
            (await client.get("/project")).raise_for_status()
        session = await stack.enter_async_context(mcp_session(gateway))

        async def http_create(index: int) -> float | None:
            body = common.function_call_body(f"create-{tag}-{index}")
            started = time.perf_counter()
            response = await agent.post("/function_calls", json=body)
            took = time.perf_counter() - started
            return took if response.status_code == 200 else None

        async def mcp_create(_index: int) -> float | None:
            started = time.perf_counter()
            ticket = await request_approval(session, 0)
            took = time.perf_counter() - started
            seen.add(ticket["call_id"])
            return took if ticket["status"] == "pending" else None

        async def http_decision(index: int) -> float | None:
            call_id = f"poll-{tag}-{index}"
            (
                await agent.post("/function_calls", json=common.function_call_body(call_id))
            ).raise_for_status()
            sent = asyncio.Event()
            waiter = asyncio.create_task(timed_get(poller, f"/function_calls/{call_id}", sent))
            await sent.wait()
            await asyncio.sleep(SETTLE)  # the waiter is registered: this times the wake-up
            started = time.perf_counter()
            (
                await human.post(f"/agent/function_calls/{call_id}/respond", json=RESPOND_BODY)
            ).raise_for_status()
            answer = await waiter
            took = time.perf_counter() - started
            return took if answer.json()["status"]["approved"] is True else None

        async def mcp_decision(_index: int) -> float | None:
            waiter = asyncio.create_task(request_approval(session, WAIT))
            call_id = await pending_mcp_call(human, seen)
            await asyncio.sleep(SETTLE)
            started = time.perf_counter()
            (
                await human.post(f"/agent/function_calls/{call_id}/respond", json=RESPOND_BODY)
            ).raise_for_status()
            decision = await waiter
            took = time.perf_counter() - started
            ok = decision["status"] == "approved" and decision["call_id"] == call_id
            return took if ok else None

        measured = [
            await run_phase(f"{gateway.label}: HTTP create (POST)", http_create),
            await run_phase(f"{gateway.label}: MCP create (request_approval, wait 0)", mcp_create),
            await run_phase(f"{gateway.label}: HTTP respond -> long-poll answer", http_decision),
            await run_phase(f"{gateway.label}: MCP respond -> tool result", mcp_decision),
        ]
    lines = gateway.log_lines()
    if lines:
        print(f"  {gateway.label}: the gateway logged {len(lines)} line(s) at warning+; first:")
        for line in lines[:5]:
            print(f"    {line}")
    return measured


def run_gateway(database_url: str, label: str) -> list[Phase]:
    with common.gateway_server(database_url, label) as gateway:
        return asyncio.run(phases(gateway))


def report(measured: list[Phase]) -> None:
    """Each MCP figure next to the HTTP figure it corresponds to (the row above it)."""
    rows: list[list[Any]] = []
    for index, phase in enumerate(measured):
        http = measured[index - 1] if "MCP" in phase.label else phase
        rows.append(
            [
                phase.label + (" (time limit)" if phase.cut_short else ""),
                len(phase.latencies),
                common.fmt(phase.p(50)),
                common.fmt(phase.p(99)),
                common.ratio(phase.p(50), http.p(50)),
                common.ratio(phase.p(99), http.p(99)),
            ]
        )
    print()
    common.print_table(["measurement", "n", "p50 ms", "p99 ms", "p50 vs HTTP", "p99 vs HTTP"], rows)
    for phase in measured:
        if phase.errors:
            print(f"errors for {phase.label}: {dict(phase.errors)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--postgres", action="store_true", help="also run on PostgreSQL")
    args = parser.parse_args()

    common.print_machine("MCP latency: request_approval and its decision, next to the HTTP API")
    print(
        f"each phase: up to {N} iterations one at a time ({WARMUP} warm-up first, not counted) "
        f"or {PHASE_LIMIT:.0f} s; waits of {WAIT} s; the respond is sent "
        f"{SETTLE * 1000:.0f} ms after the waiter's request"
    )
    print()
    measured = common.on_each_database(run_gateway, postgres=args.postgres, database="bench_mcp")
    report(measured)
    print()
    print(
        "create: the request's round trip (MCP: one tools/call on an open session). "
        "decision: from sending the respond to the waiter's answer (HTTP: the long-poll's "
        "response; MCP: the tool result on the session's POST stream). 'vs HTTP': divided "
        "by the HTTP figure on the row above, from this same run."
    )
    failed = any(phase.errors for phase in measured) or any(
        math.isnan(phase.p(50)) for phase in measured
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
