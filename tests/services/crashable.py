"""A gateway subprocess a test kills with -9 and starts again on the same database."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.services.gateway_process import GatewayProcess

# Short retries so the test does not wait out Svix's minutes; 40 tries never run out here.
FAST_RETRIES = ",".join(["0"] + ["0.3"] * 39)


class Crashable:
    """A gateway subprocess that can be killed and started again on the same database."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.env = {
            "GATEWAY_WEBHOOK_RETRY_SCHEDULE": FAST_RETRIES,
            "GATEWAY_OUTBOX_POLL_SECONDS": "0.2",
        }
        self.process: GatewayProcess | None = None
        self.api_key = ""

    async def start(self) -> GatewayProcess:
        process = GatewayProcess(self.workdir, self.env)
        self.process = await asyncio.to_thread(process.start)
        if not self.api_key:  # the first start: it printed an agent key; the tests are the
            # operator (they also answer and read /gateway/v1), so they make an admin key.
            assert process.api_key, "the first start prints a key"
            self.api_key = await asyncio.to_thread(process.new_key, "admin", "--name", "operator")
        return process

    def client(self, **kwargs: Any) -> httpx.AsyncClient:
        assert self.process is not None
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.AsyncClient(
            base_url=self.process.base_url, headers=headers, timeout=30, **kwargs
        )

    def cli(self, *args: str) -> str:
        assert self.process is not None
        result = subprocess.run(
            [sys.executable, "-m", "gateway", *args],
            cwd=self.workdir,
            env=self.process.env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout
