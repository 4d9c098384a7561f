"""A deadline from the config file, seen through the published humanlayer SDK: nobody answers,
the gateway rejects the call when its time is up, and `@hl.require_approval()` hands the
agent the SDK's own denial string, carrying the gateway's expiry comment."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from humanlayer import HumanLayer

from tests.services.gateway_process import GatewayProcess

EXPIRES_AFTER = 2  # seconds, from the rule below
POLL_BUDGET = 12.0  # the SDK polls forever; the test gives up after this many seconds
ROUTING = f"""
[[rules]]
fn = "send_deadline_email"
target = "web"
expires_after = {EXPIRES_AFTER}
"""


@pytest.fixture
def live(tmp_path: Path) -> Iterator[GatewayProcess]:
    config = tmp_path / "routing.toml"
    config.write_text(ROUTING)
    env = {"GATEWAY_CONFIG": str(config), "GATEWAY_OUTBOX_POLL_SECONDS": "0.2"}
    server = GatewayProcess(tmp_path, env).start()
    try:
        yield server
    finally:
        server.stop()


def bounded_sleep(give_up_at: float) -> Any:
    """The SDK's poll interval, shortened; past `give_up_at` it raises, which the SDK's
    wrapper turns into an "Error fetching approval" string the test then fails on."""

    def sleep(_seconds: int) -> None:
        if time.monotonic() > give_up_at:
            raise TimeoutError("no decision reached the SDK in time")
        time.sleep(0.1)  # the SDK polls every 3 s; the test only needs it to poll again

    return sleep


def test_an_unanswered_call_is_denied_with_the_expiry_comment(live: GatewayProcess) -> None:
    started = time.monotonic()
    hl = HumanLayer(
        api_key=live.api_key,
        api_base_url=live.api_base,
        run_id="deadline-run",
        sleep=bounded_sleep(started + POLL_BUDGET),
    )
    ran: list[dict[str, Any]] = []

    @hl.require_approval()
    def send_deadline_email(to: str, body: str) -> str:
        """Send an email."""
        ran.append({"to": to, "body": body})
        return f"sent to {to}"

    result = send_deadline_email(to="ceo@corp.com", body="hi")
    waited = time.monotonic() - started

    expected_comment = f"No decision within {EXPIRES_AFTER}s; expired"
    assert result == f"User denied send_deadline_email with message: {expected_comment}"
    assert ran == [], "the wrapped function must not run on a denial"
    assert waited >= EXPIRES_AFTER - 0.5, "denied before the deadline"

    admin = live.new_key("admin", "--name", "operator")  # the audit trail is for admins
    headers = {"Authorization": f"Bearer {admin}"}
    with httpx.Client(base_url=live.api_base, headers=headers, timeout=10) as client:
        [item] = client.get("/function_calls").json()["items"]
        call_id = item["call_id"]
        trail = client.get(f"{live.base_url}/gateway/v1/calls/{call_id}/events").json()
    assert item["run_id"] == "deadline-run" and item["spec"]["fn"] == "send_deadline_email"
    status = item["status"]
    assert (status["approved"], status["comment"]) == (False, expected_comment)
    assert status["user_info"]["channel"] == "gateway"
    requested = datetime.fromisoformat(status["requested_at"])
    responded = datetime.fromisoformat(status["responded_at"])
    assert (responded - requested).total_seconds() >= EXPIRES_AFTER
    assert [e["type"] for e in trail["events"]].count("decided") == 1
