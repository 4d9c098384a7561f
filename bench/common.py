"""Shared benchmark helpers: statistics, tables, and the servers under test.

Every server runs in its own subprocess on 127.0.0.1, so the load generator (this process)
never shares an event loop with the server it measures. It does share the machine's CPU
cores with it, which the scripts say in their output.

`python -m bench.common baseline --port N` (from the repository root) serves the baseline:
a bare ASGI function returning a fixed JSON body, under uvicorn with the same settings the
gateway's `serve` command uses.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import httpx  # noqa: E402

from gateway.wire.models import FunctionCallIn  # noqa: E402  (annotations resolve at module level)
from tests.services.gateway_process import GatewayProcess  # noqa: E402
from tests.services.net import free_port  # noqa: E402
from tests.services.postgres import ThrowawayPostgres, createdb, find_bindir  # noqa: E402

API_PREFIX = "/humanlayer/v1"
SECRET_KEY = "bench-secret-key-not-for-production"


# --- statistics and output -------------------------------------------------------------


def percentile(values: Sequence[float], pct: float) -> float:
    """Linear interpolation between closest ranks (numpy's default); NaN when empty."""
    if not values:
        return math.nan
    ordered = sorted(values)
    rank = (len(ordered) - 1) * pct / 100
    low = math.floor(rank)
    high = math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def process_cpu_seconds(pid: int | None) -> float:
    """User + system CPU time of one process so far (Linux /proc); NaN when unknown."""
    if pid is None:
        return math.nan
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ms(seconds: float) -> float:
    return seconds * 1000


def fmt(value: float, digits: int = 2) -> str:
    return "n/a" if math.isnan(value) else f"{value:.{digits}f}"


def ratio(value: float, base: float) -> str:
    if math.isnan(value) or math.isnan(base) or base == 0:
        return "n/a"
    return f"{value / base:.2f}x"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest])

    print(line(cells[0]))
    print("  ".join("-" * width for width in widths))
    for row in cells[1:]:
        print(line(row))


def print_latencies(baseline: Any, phases: Sequence[Any]) -> None:
    """p50/p99 of each phase (anything with .label and .latencies) and its ratio to the
    baseline's."""
    base50 = percentile(baseline.latencies, 50)
    base99 = percentile(baseline.latencies, 99)
    rows = []
    for phase in (baseline, *phases):
        p50 = percentile(phase.latencies, 50)
        p99 = percentile(phase.latencies, 99)
        label = phase.label + (" (cut short)" if getattr(phase, "cut_short", False) else "")
        rows.append(
            [
                label,
                len(phase.latencies),
                fmt(ms(p50)),
                fmt(ms(p99)),
                ratio(p50, base50),
                ratio(p99, base99),
            ]
        )
    print()
    print_table(["measurement", "n", "p50 ms", "p99 ms", "p50 vs base", "p99 vs base"], rows)


def print_machine(title: str) -> None:
    cores = os.cpu_count() or 0
    print(f"== {title} ==")
    print(
        f"machine: {cores} CPU core(s), {platform.python_implementation()} "
        f"{platform.python_version()}, {platform.system()} {platform.machine()}"
    )
    print(
        f"uvicorn: loop={uvicorn_impl('uvloop', 'asyncio')}, "
        f"http={uvicorn_impl('httptools', 'h11')} (its 'auto' choices), one worker process"
    )
    print(
        f"note: every server runs in its own subprocess on 127.0.0.1, but the load generator "
        f"and the server share the same {cores} core(s); absolute numbers are bounded by "
        "that, compare the ratios."
    )
    print()


def uvicorn_impl(fast: str, fallback: str) -> str:
    try:
        __import__(fast)
    except ImportError:
        return fallback
    return fast


# --- request bodies ----------------------------------------------------------------------


def function_call_body(call_id: str, run_id: str = "bench") -> dict[str, Any]:
    return {
        "run_id": run_id,
        "call_id": call_id,
        "spec": {
            "fn": "send_email",
            "kwargs": {"to": "ops@example.com", "subject": "quarterly report", "amount": 42},
        },
    }


# --- the baseline: a bare ASGI app -------------------------------------------------------

# Shaped and sized like the gateway's answer to a create, so both put the same bytes on
# the wire.
BASELINE_BODY = (
    b'{"run_id":"bench","call_id":"baseline","spec":{"fn":"send_email","kwargs":'
    b'{"to":"ops@example.com","subject":"quarterly report","amount":42},"channel":null,'
    b'"reject_options":null,"state":null},"status":{"requested_at":'
    b'"2025-01-01T00:00:00+00:00","responded_at":null,"slack_message_ts":null,'
    b'"user_info":null,"approved":null,"comment":null,"reject_option_name":null,'
    b'"slack_context":null},"route":[{"channel":"web","address":{},'
    b'"responders":null,"via":"default"}],"gateway_status":"pending"}'
)
BASELINE_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(BASELINE_BODY)).encode()),
]


async def baseline_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Reads the whole request body, then answers 200 with BASELINE_BODY, on any path."""
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] != "http":
        return
    more = True
    while more:
        message = await receive()
        more = message.get("more_body", False)
    await send({"type": "http.response.start", "status": 200, "headers": BASELINE_HEADERS})
    await send({"type": "http.response.body", "body": BASELINE_BODY})


def fastapi_baseline_app() -> Any:
    """FastAPI validating the create body with the gateway's own pydantic model, no store:
    the framework's floor for the same request."""
    from fastapi import FastAPI, Response

    app = FastAPI()

    @app.post(API_PREFIX + "/function_calls")
    async def create(body: FunctionCallIn) -> Response:
        return Response(BASELINE_BODY, media_type="application/json")

    @app.get("/")
    async def root() -> Response:
        return Response(BASELINE_BODY, media_type="application/json")

    return app


def serve_baseline(port: int, kind: str = "bare") -> None:
    import uvicorn

    app = baseline_app if kind == "bare" else fastapi_baseline_app()
    # The same call as `gateway serve`: uvicorn.run(app, host, port, log_level).
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


class BaselineProcess:
    def __init__(self, kind: str = "bare") -> None:
        self.kind = kind
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return self.base_url + API_PREFIX

    @property
    def pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def start(self, timeout: float = 20) -> BaselineProcess:
        self.proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "bench.common", "baseline"),
                *("--port", str(self.port), "--kind", self.kind),
            ],
            cwd=REPO_ROOT,
            stdout=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"baseline server exited with {self.proc.returncode}")
            try:
                if httpx.get(self.base_url + "/", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.05)  # polling a starting process; nothing to wait on instead
        self.stop()
        raise RuntimeError("baseline server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)


@contextlib.contextmanager
def baseline_server(kind: str = "bare") -> Iterator[BaselineProcess]:
    """`kind` "bare": an ASGI function returning a fixed body; "fastapi": FastAPI validating
    the body with the gateway's model first."""
    server = BaselineProcess(kind)
    try:
        yield server.start()
    finally:
        server.stop()


# --- the gateway as an operator runs it --------------------------------------------------


@dataclass
class Gateway:
    process: GatewayProcess
    workdir: Path
    label: str

    @property
    def api_base(self) -> str:
        return self.process.api_base

    @property
    def api_key(self) -> str:
        assert self.process.api_key is not None
        return self.process.api_key

    @property
    def pid(self) -> int | None:
        return None if self.process.proc is None else self.process.proc.pid

    @property
    def env(self) -> dict[str, str]:
        return self.process.env

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def log_lines(self) -> list[str]:
        """What the gateway printed after starting (warnings and errors at this log level)."""
        lines = [line.rstrip("\n") for line in self.process.output]
        after = [i for i, line in enumerate(lines) if "listening on" in line]
        return [line for line in lines[(after[0] + 1 if after else 0) :] if line.strip()]

    def cli(self, *args: str, timeout: float = 60) -> str:
        return run_cli(self.workdir, self.env, *args, timeout=timeout)


def run_cli(workdir: Path, env: dict[str, str], *args: str, timeout: float = 60) -> str:
    """`python -m gateway ARGS` in a gateway's working directory, with its env: its output."""
    done = subprocess.run(
        [sys.executable, "-m", "gateway", *args],
        cwd=workdir,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"gateway {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


@contextlib.contextmanager
def gateway_server(
    database_url: str, label: str, *, api_key: str | None = None
) -> Iterator[Gateway]:
    """`python -m gateway serve` in a subprocess on a free 127.0.0.1 port, with an admin key
    made after its first start. `api_key`: for a replica joining a database whose first
    replica already has that key."""
    with tempfile.TemporaryDirectory(prefix="gw-bench-") as tmp:
        workdir = Path(tmp)
        env = {
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_DATABASE_URL": database_url,
            "GATEWAY_SECRET_KEY": SECRET_KEY,
            "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "true",
            "GATEWAY_LOG_LEVEL": "warning",
            "GATEWAY_CREATES_PER_SECOND": "0",  # one key creates thousands a second here
            "GATEWAY_CONFIG": "",
        }
        process = GatewayProcess(workdir, env=env)
        try:
            process.start(timeout=60)
            if process.api_key is not None:
                # First start printed an agent key; a bench also answers and reads
                # /gateway/v1, as the operator does: it uses an admin key.
                process.api_key = process.new_key("admin", "--name", "bench operator")
            process.api_key = process.api_key or api_key
            if process.api_key is None:
                raise RuntimeError("gateway printed no API key:\n" + "".join(process.output))
            yield Gateway(process=process, workdir=workdir, label=label)
        finally:
            process.stop()


def sqlite_url(workdir_hint: str = "gateway.db") -> str:
    """A database file in the gateway's (relative) working directory."""
    return f"sqlite+aiosqlite:///./{workdir_hint}"


@contextlib.contextmanager
def throwaway_postgres(database: str) -> Iterator[str]:
    """A PostgreSQL server from the machine's binaries with one fresh database; its URL."""
    with postgres_server(database) as (_server, url):
        yield url


def postgres_available() -> bool:
    return find_bindir() is not None


T = TypeVar("T")


def on_each_database(
    run: Callable[[str, str], list[T]], *, postgres: bool, database: str
) -> list[T]:
    """`run(url, label)` on SQLite, then with `postgres` on a throwaway PostgreSQL."""
    print("-- gateway on SQLite", flush=True)
    results = run(sqlite_url(), "SQLite")
    if postgres and not postgres_available():
        print("-- gateway on PostgreSQL: skipped (no PostgreSQL binaries on this machine)")
    elif postgres:
        print("-- gateway on PostgreSQL (throwaway server, fsync on)", flush=True)
        with throwaway_postgres(database) as url:
            results += run(url, "PostgreSQL")
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="bench.common")
    commands = parser.add_subparsers(dest="command", required=True)
    baseline = commands.add_parser("baseline", help="serve the bare ASGI baseline")
    baseline.add_argument("--port", type=int, required=True)
    baseline.add_argument("--kind", choices=("bare", "fastapi"), default="bare")
    args = parser.parse_args(argv)
    if args.command == "baseline":
        serve_baseline(args.port, args.kind)


# --- process trees and PostgreSQL's processes (bench/soak.py, bench/workers.py) ----------


@contextlib.contextmanager
def postgres_server(database: str) -> Iterator[tuple[ThrowawayPostgres, str]]:
    """`throwaway_postgres`, also giving the server (its log: `server.root / "server.log"`;
    its processes: `postmaster_pid`)."""
    bindir = find_bindir()
    if bindir is None:
        raise RuntimeError("no PostgreSQL binaries found (initdb); run tests/services/provision.sh")
    server = ThrowawayPostgres(bindir, durable=True)  # fsync and synchronous_commit on
    try:
        server.start()
        createdb(server, database)
        yield server, server.url(database)
    finally:
        server.stop()


def postmaster_pid(server: ThrowawayPostgres) -> int:
    """The server's main process (the first line of its postmaster.pid)."""
    return int((server.data / "postmaster.pid").read_text().split()[0])


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/PID/stat after the command name: fields[0] is the state, [1] the parent."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_tree(root: int) -> list[int]:
    """`root` and every live process descended from it (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo += children.get(pid, [])
    return tree


def tree_cpu_seconds(root: int) -> float:
    """User + system CPU time so far of `root` and its descendants, counting those that
    exited and were waited for (their parent's cutime + cstime): a difference of two
    readings is what the tree used in between, even as processes come and go."""
    ticks = 0
    for pid in process_tree(root):
        fields = _stat_fields(pid)
        if fields is not None:
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
