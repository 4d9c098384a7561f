"""A throwaway PostgreSQL server from the machine's own binaries.

initdb + pg_ctl as a non-root user (postgres when we are root), in a temp dir, on a free
loopback port; stopped and removed afterwards.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.services.net import free_port


def find_bindir() -> Path | None:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    if candidates:
        return Path(candidates[0]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).resolve().parent if initdb else None


class ThrowawayPostgres:
    def __init__(self, bindir: Path, *, durable: bool = False) -> None:
        self.bindir = bindir
        self.durable = durable  # fsync on, as in production (benchmarks); tests skip it
        self.root = Path(tempfile.mkdtemp(prefix="gw-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self._as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []

    def _run(self, *args: str) -> None:
        subprocess.run([*self._as_user, *args], check=True, capture_output=True, timeout=120)

    def start(self) -> ThrowawayPostgres:
        if self._as_user:
            shutil.chown(self.root, "postgres", "postgres")
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            "postgres",
            "--auth=trust",
            "--no-sync",
            "-E",
            "UTF8",
        )
        # fsync off for tests: they exercise the gateway, not PostgreSQL's own durability.
        fsync = "on" if self.durable else "off"
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.root} "
            f"-c fsync={fsync} -c synchronous_commit=on -c max_connections=200"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.root / "server.log"),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+asyncpg://postgres@127.0.0.1:{self.port}/{database}"

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        try:
            self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def _client(server: ThrowawayPostgres, program: str, *args: str, check: bool) -> None:
    address = ["-h", "127.0.0.1", "-p", str(server.port), "-U", "postgres"]
    command = [str(server.bindir / program), *address, *args]
    subprocess.run(command, check=check, capture_output=True, timeout=60)


def createdb(server: ThrowawayPostgres, name: str, *, template: str | None = None) -> None:
    copy = ["-T", template] if template else []
    _client(server, "createdb", *copy, name, check=True)


def dropdb(server: ThrowawayPostgres, name: str) -> None:
    _client(server, "dropdb", "--force", "--if-exists", name, check=False)
