"""Start-up: seconds from spawning `gateway serve` to its first created function call.

    cd /work/main && .venv/bin/python bench/startup.py [--runs 9]

The gateway runs as an operator starts it, on a fresh SQLite database, with Discord, Slack
(Socket Mode) and email configured and every platform refusing connections: the API must
not wait for any of them (a function call within 2 s of start). Each run spawns a new
process and times spawn → "listening" line → /healthz → one POST /function_calls.
Baseline in the same run: FastAPI serving the same POST, validated with the gateway's own
model, spawned and polled the same way: what any Python web process pays to start here.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common
from tests.services.gateway_process import GatewayProcess
from tests.services.net import free_port


@dataclass
class Phase:
    label: str
    latencies: list[float] = field(default_factory=list)


def platforms_refusing() -> dict[str, str]:
    """Every platform configured, at a port where nothing listens."""
    dead = free_port()
    return {
        "DISCORD_BOT_TOKEN": "x" * 59,
        "DISCORD_API_URL": f"http://127.0.0.1:{dead}/api/v10",
        "DISCORD_GATEWAY_URL": f"ws://127.0.0.1:{dead}/gateway",
        "SLACK_BOT_TOKEN": "xoxb-bench",
        "SLACK_SIGNING_SECRET": "bench-signing-secret",
        "SLACK_APP_TOKEN": "xapp-1-bench",
        "SLACK_API_URL": f"http://127.0.0.1:{dead}/api/",
        "SMTP_HOST": "127.0.0.1",
        "SMTP_PORT": str(dead),
        "IMAP_HOST": "127.0.0.1",
        "IMAP_PORT": str(dead),
        "SMTP_USERNAME": "bench",
        "SMTP_PASSWORD": "bench",
        "EMAIL_FROM": "Approvals <approvals@example.test>",
        "EMAIL_REPLY_TO": "approvals@example.test",
        "IMAP_USERNAME": "bench",
        "IMAP_PASSWORD": "bench",
        "GATEWAY_CHANNEL_CONNECT_TIMEOUT_SECONDS": "1",
    }


def gateway_start(listening: Phase, healthy: Phase) -> float:
    """Spawn to first create; also records spawn to the "listening" line and to /healthz
    (polled every 50 ms): what start-up does before uvicorn, and in the app's lifespan."""
    process = GatewayProcess(Path(tempfile.mkdtemp(prefix="bench-start-")), platforms_refusing())
    process.start()
    try:
        started = process.started_at
        assert started is not None and process.listening_at and process.healthy_at
        headers = {"Authorization": f"Bearer {process.api_key}"}
        body = common.function_call_body("first")
        created = httpx.post(f"{process.api_base}/function_calls", json=body, headers=headers)
        took = time.monotonic() - started
        created.raise_for_status()
        listening.latencies.append(process.listening_at - started)
        healthy.latencies.append(process.healthy_at - started)
        return took
    finally:
        process.stop()


def baseline_start() -> float:
    started = time.monotonic()
    with common.baseline_server("fastapi") as server:
        body = common.function_call_body("first")
        created = httpx.post(f"{server.api_base}/function_calls", json=body)
        took = time.monotonic() - started
        created.raise_for_status()
        return took


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="starts of each (default 9)")
    args = parser.parse_args(argv)
    common.print_machine("start-up: spawn to first created function call")
    baseline = Phase("FastAPI + the gateway's model (baseline)")
    gateway = Phase("gateway serve, SQLite, 3 platforms refusing")
    listening = Phase("  of which spawn to 'listening' line")
    healthy = Phase("  of which spawn to /healthz 200")
    for _ in range(args.runs):  # interleaved: a noisy moment costs both alike
        baseline.latencies.append(baseline_start())
        gateway.latencies.append(gateway_start(listening, healthy))
    common.print_latencies(baseline, [gateway, listening, healthy])


if __name__ == "__main__":
    main()
