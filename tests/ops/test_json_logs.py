"""GATEWAY_LOG_FORMAT=json: `gateway serve` writes one JSON object per line (access lines
included, with the request id), and no token of a request target reaches them."""

from __future__ import annotations

import asyncio
import contextvars
import io
import json
import logging
import os
import re
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.runtime.logs import ACCESS_LOGGER, REQUEST_ID, JsonFormatter, RedactTokens
from tests.helpers import access_record, eventually
from tests.services.net import free_port

REPO = Path(__file__).resolve().parents[2]
LINK_TOKEN = "eyJyIjoiYWJjIn0.bGluay10b2tlbg"
SIGN_IN_TOKEN = "c2lnbi1pbi10b2tlbi1zZWNyZXQ"
KEY_LINE = re.compile(r"export HUMANLAYER_API_KEY=(\S+)")


async def test_gateway_serve_writes_json_lines_without_tokens(tmp_path: Path) -> None:
    port = free_port()
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),  # the code under test, wherever the package is installed
        "GATEWAY_PORT": str(port),
        "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'gateway.db'}",
        "GATEWAY_SECRET_KEY": "test-secret-key",
        "GATEWAY_LOG_FORMAT": "json",
        "GATEWAY_LOG_LEVEL": "info",
    }
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "gateway",
            "serve",
            cwd=tmp_path,
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=5) as client:
            await eventually(lambda: _serving(client, proc), within=30)
            await client.get("/healthz", headers={"X-Request-ID": "ops-json-1"})
            await client.get(f"/r/abc?t={LINK_TOKEN}")
            await client.get(f"/console/link/{SIGN_IN_TOKEN}")
    finally:
        proc.send_signal(signal.SIGTERM)
        exit_code = await asyncio.wait_for(proc.wait(), 15)
    assert exit_code in (0, -signal.SIGTERM)  # uvicorn re-raises the signal once it has stopped

    printed = out.read_text()
    assert "listening on" in printed  # what the CLI prints stays as it was
    key = KEY_LINE.search(printed)
    assert key is not None
    lines = [line for line in err.read_text().splitlines() if line.strip()]
    entries = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all({"time", "level", "logger", "message"} <= set(entry) for entry in entries)
    assert {"uvicorn.error", ACCESS_LOGGER} <= {entry["logger"] for entry in entries}
    for secret in (LINK_TOKEN, SIGN_IN_TOKEN, key.group(1)):
        assert not [line for line in lines if secret in line]
    access = {entry["path"]: entry for entry in entries if entry["logger"] == ACCESS_LOGGER}
    health = access["/healthz"]
    assert (health["request_id"], health["method"], health["status"]) == ("ops-json-1", "GET", 200)
    assert "/r/abc?t=[redacted]" in access
    assert "/console/link/[redacted]" in access
    assert access["/console/link/[redacted]"]["request_id"] != "ops-json-1"


async def _serving(client: httpx.AsyncClient, proc: asyncio.subprocess.Process) -> bool:
    assert proc.returncode is None, "gateway serve exited"
    try:
        return (await client.get("/healthz")).status_code == 200
    except httpx.TransportError:
        return False


@pytest.fixture
def json_log() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("tests.ops.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield logger, stream
    finally:
        logger.removeHandler(handler)
        logger.propagate = True


def _one(stream: io.StringIO) -> dict[str, Any]:
    [line] = stream.getvalue().splitlines()
    entry: dict[str, Any] = json.loads(line)
    return entry


def test_an_exception_is_one_line_with_its_traceback(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log
    try:
        raise ValueError("boom\nsecond line")
    except ValueError:
        logger.exception("outbox job %s crashed", 7)
    entry = _one(stream)
    assert (entry["level"], entry["logger"]) == ("error", "tests.ops.json")
    assert entry["message"] == "outbox job 7 crashed"
    assert entry["exception"].startswith("Traceback")
    assert "ValueError: boom\nsecond line" in entry["exception"]
    assert entry["time"].endswith("Z")
    assert "request_id" not in entry  # not while serving a request


def test_a_line_written_while_serving_carries_the_request_id(
    json_log: tuple[logging.Logger, io.StringIO],
) -> None:
    logger, stream = json_log

    def serving() -> None:
        REQUEST_ID.set("req-42")
        logger.warning("slow answer")

    contextvars.copy_context().run(serving)
    assert _one(stream)["request_id"] == "req-42"


def test_an_access_line_is_redacted_before_it_is_formatted() -> None:
    record = access_record(f"/r/abc?t={LINK_TOKEN}")
    assert RedactTokens().filter(record)
    line = JsonFormatter().format(record)
    assert LINK_TOKEN not in line
    entry = json.loads(line)
    assert entry["path"] == "/r/abc?t=[redacted]" and entry["status"] == 200
    assert entry["message"] == '127.0.0.1:5000 - "GET /r/abc?t=[redacted] HTTP/1.1" 200'
