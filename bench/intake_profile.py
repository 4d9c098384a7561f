"""Where a create's time goes: `py-spy` on the server while `wrk` posts function calls.

    cd /work/main && .venv/bin/python bench/intake_profile.py [--target sqlite|postgres|fastapi]
        [--connections 32] [--seconds 15] [--rate 500] [--log-level warning] [--keep DIR]

One server under the load bench/intake.py uses (unique creates, a 3 s warm-up not counted),
`py-spy record --gil --threads --nonblocking` for the measured seconds (wall-clock samples of
the thread holding the GIL). Prints, per create:
- the server's CPU (user + system, every thread), and PostgreSQL's own CPU on PostgreSQL;
- each thread's GIL-held time;
- the event loop thread's time by stage: each sample goes to the innermost frame that marks
  a stage (a middleware, routing, dependency solving, body, our create, the store, response,
  logging; see STAGES), so the stages add up to the thread's total;
- the collector's time (bench/probe/sitecustomize.py), the writer's creates per batch, and on
  PostgreSQL the statements per create (pg_stat_statements, preloaded in a throwaway server).

`--target fastapi` profiles the FastAPI-with-body baseline of bench/intake.py the same way.
py-spy's own sampling costs the server some speed: compare stages, not throughput, with
bench/intake.py. `py-spy` comes from the virtualenv (`.venv/bin/pip install py-spy`).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import common, wrk
from tests.services.gateway_process import GatewayProcess
from tests.services.postgres import ThrowawayPostgres, createdb, find_bindir

PROBE = Path(__file__).resolve().parent / "probe"
WARMUP_SECONDS = 3

# (stage, alternatives): a sample counts for the innermost frame ("function (file)") that
# starts with one of a stage's alternatives (regular expressions).
STAGES: list[tuple[str, tuple[str, ...]]] = [
    (
        "uvicorn: parse, dispatch, task",
        (r"HttpToolsProtocol\.", r"RequestResponseCycle\.(receive|run_asgi)", "FlowControl"),
    ),
    ("uvicorn: send (headers, body, socket writes)", (r"RequestResponseCycle\.send ",)),
    ("mw: ProxyHeadersMiddleware (uvicorn)", ("ProxyHeadersMiddleware",)),
    ("mw: FastAPI/Starlette.__call__", (r"FastAPI\.__call__", r"Starlette\.__call__")),
    ("mw: ServerErrorMiddleware", ("ServerErrorMiddleware",)),
    ("mw: ExceptionTelemetryMiddleware", ("ExceptionTelemetryMiddleware",)),
    ("mw: AppBodyLimitMiddleware", ("AppBodyLimitMiddleware",)),
    ("mw: AllowedMethods (ours)", ("AllowedMethods",)),
    ("mw: RequestId (ours)", ("RequestId", "_incoming_id", "token_hex")),
    ("mw: BodyLimit (ours)", ("BodyLimit", "_replay")),
    (
        "mw: ExceptionMiddleware, wrap_app_handling_exceptions",
        ("ExceptionMiddleware", "wrap_app_handling_exceptions"),
    ),
    (
        "mw: AsyncExitStackMiddleware, AsyncExitStack",
        ("AsyncExitStackMiddleware", "AsyncExitStack"),
    ),
    (
        "routing (Router, APIRouter, _IncludedRouter)",
        (
            r"Router\.",
            r"APIRouter\.",
            "_IncludedRouter",
            r"APIRoute\.(handle|matches)",
            r"Route\.matches",
            "_EffectiveRouteContext",
            "get_route_path",
        ),
    ),
    (
        "request_response wrappers, Request objects",
        ("request_response", "StrictJSONRoute", r"Request\.__init__", "HTTPConnection"),
    ),
    ("FastAPI request handler (own lines)", ("get_request_handler",)),
    (
        "dependency solving",
        (
            "solve_dependencies",
            "request_params_to_args",
            "_get_cache_key",
            "_is_gen_callable",
            "_is_async",
            r"Dependant\.",
        ),
    ),
    ("auth (ApiKeyAuth, find_caller)", ("ApiKeyAuth", "find_caller", "hash_api_key", "KeyCache")),
    (
        "body: read, strict JSON parse",
        (
            r"Request\.body",
            r"Request\.stream",
            "StrictJSONRequest",
            "strict_loads",
            "json_shape_problem",
            "_unique_keys",
            "_finite_float",
        ),
    ),
    (
        "body: pydantic validation",
        (
            "request_body_to_args",
            "_validate_value_with_model_field",
            r"ModelField\.validate",
            r"BaseModel\.model_validate",
            ".*_omit_unset",
            ".*validator",
        ),
    ),
    ("endpoint call", ("run_endpoint_function", "create_function_call", "_operation")),
    (
        "ours: intake.create and small helpers",
        (
            r"create \(.*gateway/intake",
            "_spec_and_secrets",
            "_decided_by_rule",
            "new_rid",
            "utcnow",
            "__create_fn__",
            "iso ",
            "status_of",
            "_approved",
            "public_target",
            "_policy_fields",
            "SecretBox",
        ),
    ),
    ("ours: fingerprint", ("fingerprint ",)),
    (
        "ours: routing plan (_plan, plans.plan, rules)",
        (
            "_plan",
            r"plan \(.*gateway/policies",
            "facts ",
            "Facts",
            "RoutingConfig",
            "_schedule",
            r"Plan\.",
            r"Rule\.",
            "_Builder",
            "_delays",
            "_first_answer",
            "web_target",
            r".*conditions\.py",
        ),
    ),
    ("ours: deliveries.plan", (r"(plan|_planned) \(.*gateway/outbox",)),
    ("ours: to_wire", ("to_wire",)),
    ("store: Database.write, Writer.submit", (r"Database\.write", r"Writer\.submit", "_bind")),
    ("store: commit signal, futures resolved", ("_resolve", r"Core\.signal", r"Waiters\.")),
    (
        "response: serialize_response (validate, dump_json)",
        (
            "serialize_response",
            "TypeAdapter",
            r"ModelField\.serialize",
            "jsonable_encoder",
            "_prepare_response_content",
        ),
    ),
    (
        "response: Response object, __call__",
        (r"Response\.", "JSONResponse", "_build_response_args", "MutableHeaders"),
    ),
    (
        "logging (access log)",
        (
            r"Logger\.",
            r"Handler\.",
            "StreamHandler",
            "Formatter",
            "AccessFormatter",
            "RedactTokens",
        ),
    ),
]
_COMPILED = [(stage, re.compile("^(" + "|".join(alts) + ")")) for stage, alts in STAGES]
UNMATCHED = "other: event loop internals, asyncio, unmatched"


def stage_of(frames: list[str]) -> str:
    for frame in reversed(frames):
        for stage, pattern in _COMPILED:
            if pattern.search(frame):
                return stage
    return UNMATCHED


@contextlib.contextmanager
def postgres_with_statements() -> Iterator[tuple[str, Path]]:
    """A throwaway PostgreSQL (fsync on) with pg_stat_statements preloaded: its URL and data
    directory."""
    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("no PostgreSQL binaries found (initdb); run tests/services/provision.sh")
    server = ThrowawayPostgres(bindir, durable=True)
    as_user = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    try:
        server.start()
        import psycopg

        with psycopg.connect(server.dsn(), autocommit=True) as conn:
            conn.execute("ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'")
        restart = [str(bindir / "pg_ctl"), "-D", str(server.data), "-l", str(server.root / "log")]
        subprocess.run(
            [*as_user, *restart, "-w", "-t", "60", "restart"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        createdb(server, "bench")
        with psycopg.connect(server.dsn("bench"), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION pg_stat_statements")
        yield server.url("bench"), server.data
    finally:
        server.stop()


def postgres_cpu_seconds(data: Path | None) -> float:
    """CPU time of a PostgreSQL server so far: the postmaster and its children."""
    if data is None:
        return 0.0
    master = int((data / "postmaster.pid").read_text().split()[0])
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(entry.name) == master or int(fields[1]) == master:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _psycopg_dsn(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def reset_statements(url: str) -> None:
    import psycopg

    with psycopg.connect(_psycopg_dsn(url), autocommit=True) as conn:
        conn.execute("SELECT pg_stat_statements_reset()")
        conn.execute("SELECT pg_stat_reset()")


def print_statements(url: str, creates: int) -> None:
    import psycopg

    with psycopg.connect(_psycopg_dsn(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT calls, rows, left(regexp_replace(query, '\\s+', ' ', 'g'), 90)"
            " FROM pg_stat_statements WHERE query NOT LIKE '%pg_stat%'"
            " ORDER BY calls DESC LIMIT 12"
        ).fetchall()
        commits = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    calls = sum(row[0] for row in rows)
    print(f"\nPostgreSQL statements: {calls / creates:.2f} per create (executemany rows count")
    print("each; BEGIN and COMMIT are sent straight to the driver and not listed):")
    for count, affected, query in rows:
        print(f"  {count / creates:5.2f} per create  {affected / max(count, 1):4.1f} rows  {query}")
    if commits:
        print(f"  transactions committed (writer batches and autocommit reads): {commits[0]:,}")


class Probe:
    """Asks bench/probe/sitecustomize.py in the server for figures (a file per request)."""

    def __init__(self) -> None:
        self.folder = tempfile.mkdtemp(prefix="gw-probe-")

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(filter(None, [str(PROBE), os.environ.get("PYTHONPATH")]))
        return {"PYTHONPATH": path, "GW_PROBE_DIR": self.folder, "GW_PROBE_GC": "1"}

    def ask(self, kind: str) -> dict[str, Any]:
        label = uuid.uuid4().hex[:8]
        Path(self.folder, f"{label}.{kind}").touch()
        answer = Path(self.folder, f"{label}.json")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if answer.exists():
                figures: dict[str, Any] = json.loads(answer.read_text())
                return figures
            time.sleep(0.1)  # the probe polls its folder
        raise RuntimeError(f"the server's probe did not answer {kind}")


@contextlib.contextmanager
def target_server(
    target: str, probe: Probe, log_level: str
) -> Iterator[tuple[str, str, int, str | None, Path | None]]:
    """(base URL, API key, pid, database URL, PostgreSQL data directory) of the server."""
    if target == "fastapi":
        with common.baseline_server("fastapi") as base:
            assert base.pid is not None
            yield base.base_url, "unused", base.pid, None, None
        return
    with contextlib.ExitStack() as stack:
        data: Path | None = None
        if target == "postgres":
            url, data = stack.enter_context(postgres_with_statements())
        else:
            url = common.sqlite_url()
        workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="gw-bench-")))
        env = {
            "GATEWAY_HOST": "127.0.0.1",
            "GATEWAY_DATABASE_URL": url,
            "GATEWAY_SECRET_KEY": common.SECRET_KEY,
            "GATEWAY_WEBHOOK_ALLOW_PRIVATE": "true",
            "GATEWAY_LOG_LEVEL": log_level,  # info (the default) writes an access line each
            "GATEWAY_CONFIG": "",
            "GATEWAY_CREATES_PER_SECOND": "0",  # one key creates thousands a second here
            **probe.env(),
        }
        process = GatewayProcess(workdir, env=env)
        stack.callback(process.stop)
        process.start(timeout=60)
        key = process.new_key("admin", "--name", "bench operator")
        assert process.proc is not None
        yield process.base_url, key, process.proc.pid, url, data


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(found).exists():
        raise SystemExit("py-spy is not installed: .venv/bin/pip install py-spy")
    return found


OUTER = ("<module> (", "main (", "serve (")  # frames under every sample: not worth listing
WRITER_FRAMES = (
    "Connection.execute (",
    "DefaultDialect.do_execute",
    "Cursor.execute",
    "Cursor.executemany",
    "Connection.wait (",
    "create.<locals>.insert",
    "_record_route",
)


def summarize(raw: Path, creates: int, rate: int, top: int) -> None:
    per_thread: collections.Counter[str] = collections.Counter()
    stages: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    writer: collections.Counter[str] = collections.Counter()
    loop_samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():  # py-spy's line for a thread it caught outside any frame
            continue
        frames = [re.sub(r":\d+\)$", ")", frame) for frame in stack.split(";")]
        thread = re.sub(r"[-_]\d+$", "", frames[0].split(": ", 1)[-1])
        per_thread[thread] += int(count)
        if thread == "db-writer":
            for frame in set(frames[1:]):
                if frame.startswith(WRITER_FRAMES) or "gateway/store/" in frame:
                    writer[frame] += int(count)
        if thread != "MainThread":
            continue
        loop_samples += int(count)
        stages[stage_of(frames[1:])] += int(count)
        for frame in set(frames[1:]):
            if ("gateway/" in frame or "channels/" in frame) and not frame.startswith(OUTER):
                ours[frame] += int(count)

    def us(samples: int) -> float:
        return samples / rate / creates * 1e6

    print("\nGIL held, per create, by thread:")
    for thread, samples in per_thread.most_common():
        print(f"  {us(samples):7.1f} us  {thread}")
    print(f"\nthe event loop thread by stage ({us(loop_samples):.0f} us per create in all):")
    for stage, samples in stages.most_common():
        print(f"  {us(samples):7.1f} us  {100 * samples / loop_samples:4.1f} %  {stage}")
    print(f"\nthe event loop thread: our functions, inclusive (top {top}):")
    for frame, samples in ours.most_common(top):
        print(f"  {us(samples):7.1f} us  {frame}")
    print(f"\nthe writer threads, GIL held: the store and the driver, inclusive (top {top}):")
    for frame, samples in writer.most_common(top):
        print(f"  {us(samples):7.1f} us  {frame}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", choices=("sqlite", "postgres", "fastapi"), default="sqlite")
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--seconds", type=int, default=15)
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument(
        "--log-level", default="warning", help="the gateway's (info, its default: access log)"
    )
    parser.add_argument("--top", type=int, default=20)
    parser.add_argument("--keep", type=Path, help="keep py-spy's raw output in this file")
    args = parser.parse_args(argv)
    if not wrk.available():
        sys.exit("wrk is not installed: `make bench` provisions it (apt-get install wrk)")
    spy = py_spy()
    common.print_machine(f"intake profile: {args.target}, {args.connections} connections")
    probe = Probe()
    with target_server(args.target, probe, args.log_level) as (base, key, pid, url, data):
        nonce = uuid.uuid4().hex[:8]
        wrk.post_creates(
            base, connections=args.connections, seconds=WARMUP_SECONDS, api_key=key, nonce=nonce
        )
        gateway = args.target != "fastapi"
        gc0 = probe.ask("gc") if gateway else None
        batches0 = probe.ask("writer")["batches"] if gateway else 0
        if data is not None and url is not None:
            reset_statements(url)
        raw = args.keep or Path(tempfile.mkdtemp(prefix="gw-spy-")) / "raw.txt"
        record = [
            *(spy, "record", "--pid", str(pid), "--rate", str(args.rate)),
            *("--duration", str(args.seconds), "--gil", "--threads", "--nonblocking"),
            *("--format", "raw", "--output", str(raw)),
        ]
        sampler = subprocess.Popen(record, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(0.3)  # py-spy attaches
        cpu0, pg0 = common.process_cpu_seconds(pid), postgres_cpu_seconds(data)
        load: dict[str, wrk.WrkResult] = {}

        def post() -> None:
            load["result"] = wrk.post_creates(
                base,
                connections=args.connections,
                seconds=args.seconds - 1,
                api_key=key,
                nonce=nonce + "m",
            )

        poster = threading.Thread(target=post)
        poster.start()
        poster.join()
        cpu = common.process_cpu_seconds(pid) - cpu0
        pg_cpu = postgres_cpu_seconds(data) - pg0
        sampler.wait(timeout=args.seconds + 60)
        result = load["result"]
        creates = max(result.requests, 1)
        print(
            f"{result.requests:,} creates in {result.seconds:.1f} s ({result.rps:,.0f}/s, "
            f"p50 {result.p50_ms:.1f} ms, p99 {result.p99_ms:.1f} ms, {result.errors} errors) "
            f"under py-spy; server CPU {cpu / creates * 1e6:.0f} us per create"
        )
        if data is not None:
            print(
                f"PostgreSQL's own CPU: {pg_cpu / creates * 1e6:.0f} us per create "
                f"({100 * pg_cpu / result.seconds:.0f} % of one core)"
            )
        if gc0 is not None:
            gc1 = probe.ask("gc")
            batches = probe.ask("writer")["batches"] - batches0
            spent = [(gc1["seconds"][g] - gc0["seconds"][g]) / creates * 1e6 for g in range(3)]
            runs = [(gc1["collections"][g] - gc0["collections"][g]) / creates for g in range(3)]
            print(
                f"garbage collector: {sum(spent):.1f} us per create (generations 0/1/2: "
                f"{spent[0]:.1f}/{spent[1]:.1f}/{spent[2]:.1f} us; "
                f"{runs[0]:.3f}/{runs[1]:.4f}/{runs[2]:.4f} collections per create); "
                f"thresholds {gc1['threshold']}"
            )
            print(f"writer: {batches:,} batches, {creates / max(batches, 1):.1f} creates per batch")
        if data is not None and url is not None:
            print_statements(url, creates)
        if sampler.returncode != 0 or not raw.exists():
            error = sampler.stderr.read().decode() if sampler.stderr else ""
            raise SystemExit(f"py-spy failed: {error}")
        summarize(raw, creates, args.rate, args.top)


if __name__ == "__main__":
    main()
