"""`gateway serve` in a subprocess, as an operator would run it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from tests.services.net import free_port

KEY_LINE = re.compile(r"export HUMANLAYER_API_KEY=(\S+)")
CONSOLE_LINE = re.compile(r"^\s+(http\S+/console/link/\S+)")


class GatewayProcess:
    def __init__(self, workdir: Path, env: dict[str, str] | None = None) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.env = {
            **os.environ,
            "GATEWAY_PORT": str(self.port),
            "GATEWAY_DATABASE_URL": f"sqlite+aiosqlite:///{workdir / 'gateway.db'}",
            "GATEWAY_SECRET_KEY": "test-secret-key",
            "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "true",
            "GATEWAY_LOG_LEVEL": "warning",
            **(env or {}),
        }
        self.proc: subprocess.Popen[str] | None = None
        self.api_key: str | None = None
        self.console_link: str | None = None
        self.output: list[str] = []
        self.started_at: float | None = None  # time.monotonic() at spawn
        self.listening_at: float | None = None  # ... at its "listening on" line
        self.healthy_at: float | None = None  # ... at its first /healthz 200
        self._reader: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return f"{self.base_url}/humanlayer/v1"

    def start(self, timeout: float = 30) -> GatewayProcess:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve"],
            cwd=self.workdir,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        ready = threading.Event()
        self._reader = threading.Thread(target=self._read_output, args=(ready,), daemon=True)
        self._reader.start()
        if not ready.wait(timeout):
            self.kill()
            raise RuntimeError("gateway did not start:\n" + "".join(self.output))
        self._wait_healthy(timeout)
        return self

    def _read_output(self, ready: threading.Event) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line)
            match = KEY_LINE.search(line)
            if match:
                self.api_key = match.group(1)
            if found := CONSOLE_LINE.search(line):
                self.console_link = found.group(1)
            if "listening on" in line:
                self.listening_at = time.monotonic()
                ready.set()

    def _wait_healthy(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError("gateway exited:\n" + "".join(self.output))
            try:
                if httpx.get(f"{self.base_url}/healthz", timeout=1).status_code == 200:
                    self.healthy_at = time.monotonic()
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling a starting process; nothing to wait on instead
        raise RuntimeError("gateway never became healthy:\n" + "".join(self.output))

    def new_key(self, scope: str, *extra: str) -> str:
        """A key made by `gateway keys create --scope` on this gateway's database (the key it
        printed at first start is an agent key)."""
        made = subprocess.run(
            [sys.executable, "-m", "gateway", "keys", "create", "--scope", scope, *extra],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return made.stdout.strip().splitlines()[-1]

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no shutdown code runs, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
        self._close_output()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_output()

    def _close_output(self) -> None:
        if self._reader is not None:
            self._reader.join(timeout=10)  # ends at EOF, once the process has exited
        if self.proc is not None and self.proc.stdout is not None:
            self.proc.stdout.close()
