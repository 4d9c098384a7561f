"""`gateway serve --workers N`: N processes serving one listening socket.

The parent migrates, makes the first key, binds the port and starts the workers, each a
`gateway serve` of its own on the inherited socket. On PostgreSQL the workers are replicas
of each other: advisory-lock singletons, NOTIFY wake-ups. SIGTERM or SIGINT to the parent
goes to every worker as SIGTERM (a graceful stop); a worker that dies is started again.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from types import FrameType

from gateway.settings import Settings

log = logging.getLogger(__name__)

# A worker's graceful stop: 3 s for open requests, the rest for the lifespan's end.
STOP_SECONDS = 15.0
RESTART_DELAY_SECONDS = 1.0
SOCKET_ARG = "--listen-fd"


def refusal(settings: Settings, workers: int) -> str | None:
    """Why this database cannot have `workers` processes, or None."""
    if workers <= 1 or not settings.is_sqlite:
        return None
    return (
        f"--workers {workers} needs PostgreSQL (GATEWAY_DATABASE_URL=postgresql://...). On "
        "SQLite one process writes the file, and another process would hear of its "
        "decisions only once per poll period (GATEWAY_OUTBOX_POLL_SECONDS), so a waiting "
        "agent's answer would be up to a second late: run one worker, or use PostgreSQL"
    )


def listen(host: str, port: int) -> socket.socket:
    """The socket every worker accepts on (bound here, so a taken port fails once, now)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.create_server((host, port), family=family, backlog=2048)
    sock.set_inheritable(True)
    return sock


class Workers:
    def __init__(self, sock: socket.socket, count: int, host: str, port: int) -> None:
        self.sock = sock
        self.count = count
        self.address = ["--host", host, "--port", str(port)]  # for what uvicorn logs
        self.procs: list[subprocess.Popen[bytes]] = []
        self.stopping = threading.Event()

    def _start_one(self) -> subprocess.Popen[bytes]:
        fd = self.sock.fileno()
        command = [sys.executable, "-m", "gateway", "serve", *self.address, SOCKET_ARG, str(fd)]
        return subprocess.Popen(command, pass_fds=(fd,))

    def run(self) -> int:
        """Start the workers; keep them running until SIGTERM or SIGINT; stop them."""
        previous = {
            sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)
        }
        try:
            self.procs = [self._start_one() for _ in range(self.count)]
            log.info("started %d workers: %s", self.count, [p.pid for p in self.procs])
            while not self.stopping.wait(RESTART_DELAY_SECONDS):
                self._restart_the_dead()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        return 0

    def _on_signal(self, _sig: int, _frame: FrameType | None) -> None:
        self.stopping.set()

    def _restart_the_dead(self) -> None:
        for index, proc in enumerate(self.procs):
            if proc.poll() is not None and not self.stopping.is_set():
                log.warning("worker %d exited with %s; starting another", proc.pid, proc.returncode)
                self.procs[index] = self._start_one()

    def _stop_all(self) -> None:
        """SIGTERM to each worker (even after a Ctrl-C reached them too: uvicorn takes a
        SIGTERM after a SIGINT as the same graceful stop); SIGKILL to any still running."""
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                log.warning("worker %d did not stop within %.0f s: killed", proc.pid, STOP_SECONDS)
                proc.kill()
                proc.wait()
        self.sock.close()


def inherited_socket(fd: int) -> socket.socket:
    sock = socket.socket(fileno=fd)
    os.set_inheritable(fd, False)
    return sock
