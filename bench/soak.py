"""Kill -9 soak on PostgreSQL: racing decisions while the gateway is killed and restarted.

    cd /work/main && .venv/bin/python bench/soak.py [--seconds 60] [--kills 20] [--workers 2]

A throwaway PostgreSQL (fsync and `synchronous_commit` on) and `gateway serve` on it, in its
own process group. For `--seconds`, CLIENTS httpx clients create function calls, and each
request is answered by RACERS of the clients at once (POST .../respond with an admin key,
each racer a different answer). Meanwhile the script SIGKILLs the gateway's process group
`--kills` times at random moments and starts it again on the same port.

Clients retry connection errors and 5xx answers (every 5xx is counted) for up to RETRY_FOR
seconds: a create with the same body (the gateway answers a repeated create with the stored
request), a respond with the same Idempotency-Key (a respond that was stored before the kill
is answered 200 again). An operation still failing after that is "cut".

At the end, with the gateway up, it counts:
- deadlocks: `deadlock detected` in PostgreSQL's server log, during this run;
- 5xx answers, by code;
- lost: a create answered 200 that GET does not find, or a respond answered 200 whose answer
  (approved, comment) is not the stored decision. Each raced request must have exactly one
  200 among its racers; when a racer was cut, the stored state must be one of the answers
  sent or still pending (and not pending when a racer was refused with 409).
With `--workers N`, the whole run again on a fresh database with `gateway serve --workers N`
(its parent and workers are one process group: the kill takes them all).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from bench import common
from tests.services.net import free_port
from tests.services.postgres import ThrowawayPostgres, createdb

CLIENTS = 8
RACERS = 3  # clients answering each request at once
REQUEST_TIMEOUT = 10.0  # one HTTP request
RETRY_FOR = 30.0  # an operation is retried after connection errors and 5xx this long
RETRY_PAUSE = (0.05, 0.2)  # seconds between retries, uniform
START_TIMEOUT = 60.0  # a (re)start until /healthz answers 200
START_ATTEMPTS = 3  # a start whose process exits at once (say, the port not yet free)
STOP_TIMEOUT = 30.0  # SIGTERM at the end, then SIGKILL
MIN_UP = 0.3  # seconds at least between a restart answering /healthz and the next kill
LATE_KILLS = 120.0  # seconds past the end of the load after which no further kill starts
VERIFY_CONCURRENCY = 16
LOG_LINES_SHOWN = 5


# --- the gateway in its own process group ---------------------------------------------------


class KillableGateway:
    """`python -m gateway serve` (with --workers N: its parent and workers) in a new session,
    so that one os.killpg reaches every process of it. Output goes to one log file."""

    def __init__(self, workdir: Path, database_url: str, workers: int) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.workers = workers
        self.env = {
            **os.environ,
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_PORT": str(self.port),
            "GATEWAY_DATABASE_URL": database_url,
            "GATEWAY_SECRET_KEY": common.SECRET_KEY,
            "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "true",
            "GATEWAY_LOG_LEVEL": "warning",
            "GATEWAY_CREATES_PER_SECOND": "0",  # clients create as fast as they can
            "GATEWAY_CONFIG": "",
            "GATEWAY_WORKERS": str(workers),
        }
        self.log_path = workdir / "gateway.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.start_seconds: list[float] = []  # each restart after a kill, to /healthz 200
        self.stop_code: int | None = None  # the parent's exit code after the final SIGTERM

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_base(self) -> str:
        return self.base_url + common.API_PREFIX

    def _spawn(self, log: TextIO) -> subprocess.Popen[bytes]:
        self.starts += 1
        log.write(f"--- start {self.starts} ---\n")
        log.flush()
        return subprocess.Popen(
            [sys.executable, "-m", "gateway", "serve"],
            cwd=self.workdir,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    async def start(self, health: httpx.AsyncClient) -> float:
        """Start it and wait for /healthz 200; the seconds that took."""
        loop = asyncio.get_running_loop()
        started = loop.time()
        for attempt in range(1, START_ATTEMPTS + 1):
            with self.log_path.open("a") as log:
                self.proc = self._spawn(log)
            if await self._healthy(health, loop.time() + START_TIMEOUT):
                return loop.time() - started
            if self.proc.poll() is None or attempt == START_ATTEMPTS:
                break
            await asyncio.sleep(0.5)  # it exited at once: try again
        await asyncio.to_thread(self.kill)
        raise RuntimeError(f"the gateway did not start; its log:\n{self.log_tail()}")

    async def _healthy(self, health: httpx.AsyncClient, deadline: float) -> bool:
        loop = asyncio.get_running_loop()
        while loop.time() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            try:
                if (await health.get(self.base_url + "/healthz", timeout=1)).status_code == 200:
                    return True
            except httpx.TransportError:
                pass
            await asyncio.sleep(0.05)  # polling a starting process; nothing to wait on instead
        return False

    def kill(self) -> None:
        """SIGKILL to the whole process group; returns once none of it runs."""
        self._signal_group(signal.SIGKILL)
        self._wait_group_gone(10.0)

    def stop(self) -> None:
        """SIGTERM to the group (the parent forwards it to its workers), then SIGKILL to
        whatever is left after STOP_TIMEOUT; `stop_code`: the parent's exit code (None: it
        had to be killed)."""
        if self.proc is None:
            return
        self._signal_group(signal.SIGTERM)
        try:
            self.stop_code = self.proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.stop_code = None
        self.kill()

    def _signal_group(self, sig: signal.Signals) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, sig)  # start_new_session: its pid is the group's id
        if sig == signal.SIGKILL:
            self.proc.wait(timeout=10)

    def _wait_group_gone(self, timeout: float) -> None:
        """Until no process of the group runs (an exited one can linger as a zombie until
        its new parent reaps it; it holds no socket by then)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while group_members(self.proc.pid) and time.monotonic() < deadline:
            time.sleep(0.01)

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def error_lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return [line for line in text.splitlines() if "ERROR" in line or "Traceback" in line]

    def cli(self, *args: str) -> str:
        return common.run_cli(self.workdir, self.env, *args)


def group_members(pgid: int) -> list[int]:
    """Live (not zombie) processes in process group `pgid` (Linux /proc)."""
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return members


# --- what the clients saw -----------------------------------------------------------------


@dataclass
class Attempt:
    """One racer's answer to one request and what finally came of it."""

    approved: bool
    comment: str
    outcome: str = ""  # "200", "409", "cut" (gave up after retries), "HTTP <code>"


@dataclass
class Race:
    call_id: str
    attempts: list[Attempt]


@dataclass
class Tally:
    creates_ok: list[str] = field(default_factory=list)  # call_ids answered 200
    creates_cut: int = 0
    creates_other: Counter[int] = field(default_factory=Counter)  # final non-200 codes
    races: list[Race] = field(default_factory=list)
    server_errors: Counter[int] = field(default_factory=Counter)  # every 5xx answer seen
    connection_errors: int = 0  # every transport error seen (each retried)
    kills: int = 0


async def send(
    client: httpx.AsyncClient,
    tally: Tally,
    method: str,
    url: str,
    *,
    body: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response | None:
    """The request, retried after connection errors and 5xx (each counted) for RETRY_FOR
    seconds; its first other answer, or None ("cut")."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + RETRY_FOR
    while True:
        try:
            response = await client.request(method, url, json=body, headers=headers)
        except httpx.TransportError:
            tally.connection_errors += 1
        else:
            if response.status_code < 500:
                return response
            tally.server_errors[response.status_code] += 1
        if loop.time() >= deadline:
            return None
        await asyncio.sleep(random.uniform(*RETRY_PAUSE))


async def respond(client: httpx.AsyncClient, tally: Tally, call_id: str, attempt: Attempt) -> None:
    body = {"approved": attempt.approved, "comment": attempt.comment}
    headers = {"Idempotency-Key": f"{attempt.comment}"}  # unique per request and racer
    url = f"/agent/function_calls/{call_id}/respond"
    response = await send(client, tally, "POST", url, body=body, headers=headers)
    attempt.outcome = "cut" if response is None else str(response.status_code)


async def client_loop(
    index: int, clients: Sequence[httpx.AsyncClient], tally: Tally, tag: str, stop: asyncio.Event
) -> None:
    """Create a request, then answer it from RACERS clients at once; again until `stop`."""
    number = 0
    while not stop.is_set():
        call_id = f"soak-{tag}-{index}-{number}"
        number += 1
        body = common.function_call_body(call_id, run_id=f"soak-{tag}")
        created = await send(clients[index], tally, "POST", "/function_calls", body=body)
        if created is None:
            tally.creates_cut += 1
            continue
        if created.status_code != 200:
            tally.creates_other[created.status_code] += 1
            continue
        tally.creates_ok.append(call_id)
        race = Race(
            call_id,
            [
                Attempt(approved=(number + racer) % 2 == 0, comment=f"{call_id} racer {racer}")
                for racer in range(RACERS)
            ],
        )
        tally.races.append(race)
        await asyncio.gather(
            *(
                respond(clients[(index + racer) % len(clients)], tally, call_id, attempt)
                for racer, attempt in enumerate(race.attempts)
            )
        )


# --- kills --------------------------------------------------------------------------------


async def killer(
    gateway: KillableGateway,
    health: httpx.AsyncClient,
    tally: Tally,
    *,
    kills: int,
    seconds: float,
    rng: random.Random,
) -> None:
    """`kills` SIGKILLs spread at random over `seconds`, each followed by a restart; then
    the load runs on to the end of `seconds`."""
    loop = asyncio.get_running_loop()
    end = loop.time() + seconds
    restart = 1.5  # seconds a restart takes: a first guess, then the last one's
    for done in range(kills):
        if loop.time() > end + LATE_KILLS:
            break  # restarts took so long that the kills overran the run: stop there
        per_kill = max(0.0, end - loop.time()) / (kills - done)
        # Uptimes average per_kill - restart, so the kills (and restarts) fill `seconds`.
        await asyncio.sleep(rng.uniform(MIN_UP, max(MIN_UP, 2 * (per_kill - restart))))
        await asyncio.to_thread(gateway.kill)
        tally.kills += 1
        restart = await gateway.start(health)
        gateway.start_seconds.append(restart)
    await asyncio.sleep(max(0.0, end - loop.time()))


# --- the end: what is stored ----------------------------------------------------------------


@dataclass
class Verdict:
    missing_creates: int = 0  # answered 200, not found
    lost_decisions: int = 0  # respond answered 200, another answer (or none) stored
    two_winners: int = 0  # requests with more than one respond answered 200
    no_winner: int = 0  # no 200 and nobody cut: every racer refused
    cut_pending: int = 0  # no 200, a racer cut, still pending
    cut_decided: int = 0  # no 200, a racer cut, one of the answers sent stored
    bad_state: int = 0  # stored an answer nobody sent, or pending after a 409
    other_outcomes: Counter[str] = field(default_factory=Counter)  # racers' non-200/409/cut
    unreadable: int = 0  # GET failed (cut or not 200/404)

    @property
    def lost(self) -> int:
        return self.missing_creates + self.lost_decisions


async def stored_states(
    client: httpx.AsyncClient, tally: Tally
) -> dict[str, tuple[bool | None, str | None] | None]:
    """Each created call_id's stored (approved, comment); None when GET answers 404."""
    states: dict[str, tuple[bool | None, str | None] | None] = {}
    gate = asyncio.Semaphore(VERIFY_CONCURRENCY)

    async def read(call_id: str) -> None:
        async with gate:
            response = await send(client, tally, "GET", f"/function_calls/{call_id}")
        if response is not None and response.status_code == 200:
            status = response.json()["status"]
            states[call_id] = (status["approved"], status["comment"])
        elif response is not None and response.status_code == 404:
            states[call_id] = None

    await asyncio.gather(*(read(call_id) for call_id in tally.creates_ok))
    return states


def judge(tally: Tally, states: dict[str, tuple[bool | None, str | None] | None]) -> Verdict:
    verdict = Verdict()
    verdict.unreadable = len(set(tally.creates_ok) - set(states))
    verdict.missing_creates = sum(1 for state in states.values() if state is None)
    for race in tally.races:
        if race.call_id not in states or (stored := states[race.call_id]) is None:
            continue  # counted above
        outcomes = [attempt.outcome for attempt in race.attempts]
        verdict.other_outcomes.update(o for o in outcomes if o not in ("200", "409", "cut"))
        winners = [a for a in race.attempts if a.outcome == "200"]
        verdict.lost_decisions += sum(1 for a in winners if (a.approved, a.comment) != stored)
        verdict.two_winners += len(winners) > 1
        if winners:
            continue
        cut = [a for a in race.attempts if a.outcome == "cut"]
        if not cut:
            verdict.no_winner += 1
        elif stored == (None, None) and "409" not in outcomes:
            verdict.cut_pending += 1
        elif stored in [(a.approved, a.comment) for a in cut]:
            verdict.cut_decided += 1
        else:
            verdict.bad_state += 1
    return verdict


def postgres_log(server: ThrowawayPostgres) -> Path:
    return server.root / "server.log"


def postgres_errors(text: str) -> Counter[str]:
    """PostgreSQL's ERROR lines by message (its timestamp and pid prefix dropped)."""
    found: Counter[str] = Counter()
    for line in text.splitlines():
        if "ERROR:" in line:
            found[line.split("ERROR:", 1)[1].strip()[:80]] += 1
    return found


# --- one soak -----------------------------------------------------------------------------


@dataclass
class Result:
    label: str
    tally: Tally
    verdict: Verdict
    deadlocks: int
    pg_errors: Counter[str]
    pg_log_lines: int
    restarts: list[float]
    gateway_errors: list[str]
    stop_code: int | None
    seconds: float


@contextlib.asynccontextmanager
async def running(gateway: KillableGateway, health: httpx.AsyncClient) -> AsyncIterator[None]:
    try:
        await gateway.start(health)
        yield
    finally:
        await asyncio.to_thread(gateway.stop)


async def soak(
    server: ThrowawayPostgres, database: str, workers: int, args: argparse.Namespace
) -> Result:
    label = f"--workers {workers}" if workers > 1 else "1 process"
    createdb(server, database)
    log_offset = postgres_log(server).stat().st_size
    tally = Tally()
    tag = uuid.uuid4().hex[:6]
    rng = random.Random(args.seed + workers)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="gw-soak-") as tmp:
        gateway = KillableGateway(Path(tmp), server.url(database), workers)
        async with httpx.AsyncClient() as health, running(gateway, health):
            key = await asyncio.to_thread(gateway.cli, "keys", "create", "--scope", "admin")
            headers = {"Authorization": f"Bearer {key.strip().splitlines()[-1]}"}
            async with contextlib.AsyncExitStack() as stack:
                clients = [
                    await stack.enter_async_context(
                        httpx.AsyncClient(
                            base_url=gateway.api_base, headers=headers, timeout=REQUEST_TIMEOUT
                        )
                    )
                    for _ in range(CLIENTS)
                ]
                stop = asyncio.Event()
                loops = [
                    asyncio.create_task(client_loop(i, clients, tally, tag, stop))
                    for i in range(CLIENTS)
                ]
                try:
                    await killer(
                        gateway,
                        health,
                        tally,
                        kills=args.kills,
                        seconds=args.seconds,
                        rng=rng,
                    )
                finally:
                    stop.set()
                    await asyncio.gather(*loops)
                print(
                    f"  {label}: load done after {time.monotonic() - started:.0f} s; reading back "
                    f"{len(tally.creates_ok)} requests",
                    flush=True,
                )
                states = await stored_states(clients[0], tally)
        gateway_errors = gateway.error_lines()
    text = postgres_log(server).read_bytes()[log_offset:].decode(errors="replace")
    return Result(
        label=label,
        tally=tally,
        verdict=judge(tally, states),
        deadlocks=text.count("deadlock detected"),
        pg_errors=postgres_errors(text),
        pg_log_lines=len(text.splitlines()),
        restarts=gateway.start_seconds,
        gateway_errors=gateway_errors,
        stop_code=gateway.stop_code,
        seconds=time.monotonic() - started,
    )


# --- output -------------------------------------------------------------------------------


def report(results: Sequence[Result]) -> None:
    rows = []
    for r in results:
        t, v = r.tally, r.verdict
        answered = sum(a.outcome in ("200", "409") for race in t.races for a in race.attempts)
        cut = t.creates_cut + sum(a.outcome == "cut" for race in t.races for a in race.attempts)
        rows.append(
            [
                r.label,
                len(t.creates_ok),
                answered,
                cut,
                t.kills,
                r.deadlocks,
                t.server_errors[503],
                sum(n for code, n in t.server_errors.items() if code != 503),
                v.lost,
            ]
        )
    print()
    headers = ["run", "creates", "responds", "cut", "kills", "deadlocks", "503s", "other 5xx"]
    common.print_table([*headers, "lost"], rows)
    print(
        "(creates: answered 200; responds: answered 200 or 409; cut: operations still failing "
        f"after {RETRY_FOR:.0f} s of retries; 503s and other 5xx: every such answer, retried)"
    )
    for r in results:
        details(r)


def details(r: Result) -> None:
    t, v = r.tally, r.verdict
    races = len(t.races)
    winners = sum(any(a.outcome == "200" for a in race.attempts) for race in t.races)
    restarts = sorted(r.restarts)
    print()
    print(f"{r.label} ({r.seconds:.0f} s in all):")
    print(
        f"  races: {races}, with exactly one 200: {winners - v.two_winners}, two or more: "
        f"{v.two_winners}, none and nobody cut: {v.no_winner}; cut with no 200: "
        f"{v.cut_pending} still pending, {v.cut_decided} holding an answer that was sent, "
        f"{v.bad_state} in another state"
    )
    print(
        f"  lost: {v.missing_creates} created but not found, {v.lost_decisions} responds "
        f"answered 200 whose answer is not the one stored; {v.unreadable} could not be read"
    )
    if restarts:
        print(
            f"  restarts after a kill, to /healthz 200: median "
            f"{common.percentile(restarts, 50):.2f} s, max {restarts[-1]:.2f} s"
        )
    print(
        f"  connection errors seen (each retried): {t.connection_errors}; 5xx by code: "
        f"{dict(t.server_errors) or 'none'}"
    )
    if t.creates_other or v.other_outcomes:
        print(
            f"  other answers: creates {dict(t.creates_other)}, responds {dict(v.other_outcomes)}"
        )
    print(
        f"  PostgreSQL's log in this run: {r.pg_log_lines} lines, "
        f"{sum(r.pg_errors.values())} ERROR lines"
    )
    if r.pg_errors:
        for message, count in r.pg_errors.most_common(LOG_LINES_SHOWN):
            print(f"    {count:>5} x {message}")
    if r.gateway_errors:
        print(f"  the gateway logged {len(r.gateway_errors)} ERROR/Traceback line(s); first:")
        for line in r.gateway_errors[:LOG_LINES_SHOWN]:
            print(f"    {line[:160]}")
    if r.stop_code != 0:
        print(f"  the gateway's exit code after the final SIGTERM: {r.stop_code}")


def failed(result: Result) -> bool:
    v = result.verdict
    return bool(
        result.deadlocks
        or result.tally.server_errors
        or v.lost
        or v.two_winners
        or v.no_winner
        or v.bad_state
        or v.unreadable
    )


async def run_all(args: argparse.Namespace) -> list[Result]:
    # Every restart is bounded (START_TIMEOUT) and so is every operation (RETRY_FOR): this is
    # a safety net for the run as a whole.
    bound = args.seconds + LATE_KILLS + START_TIMEOUT * START_ATTEMPTS + 3 * RETRY_FOR + 300
    runs = [1] + ([args.workers] if args.workers else [])
    results = []
    with common.postgres_server("soak") as (server, _url):
        for workers in runs:
            print(f"-- soak: {args.seconds:g} s, {args.kills} kills, workers {workers}", flush=True)
            async with asyncio.timeout(bound):
                results.append(await soak(server, f"soak_w{workers}", workers, args))
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="of load, kills included")
    parser.add_argument("--kills", type=int, default=20)
    parser.add_argument("--workers", type=int, help="also soak `gateway serve --workers N`")
    parser.add_argument("--seed", type=int, default=None, help="for the kill times")
    args = parser.parse_args(argv)
    if args.workers is not None and args.workers < 2:
        parser.error("--workers: 2 or more (the single-process run always happens)")
    if not common.postgres_available():
        print("no PostgreSQL binaries on this machine (tests/services/provision.sh)")
        return 1
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    common.print_machine("kill -9 soak on PostgreSQL: racing decisions, kills and restarts")
    print(
        f"{CLIENTS} clients; each request answered by {RACERS} of them at once; "
        f"{args.kills} SIGKILLs of the gateway's process group at random over "
        f"{args.seconds:g} s, each followed by a restart on the same port; seed {args.seed}"
    )
    print()
    results = asyncio.run(run_all(args))
    report(results)
    return 1 if any(failed(result) for result in results) else 0


if __name__ == "__main__":
    sys.exit(main())
