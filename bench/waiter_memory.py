"""Memory per waiting agent: where the bytes of one idle long-poll go.

    cd /work/main && .venv/bin/python bench/waiter_memory.py [--waiters 3000] [--frames 16]

`gateway serve` on SQLite, N pending function calls (bulk-loaded), then N agents long-polling
their own (`GET /function_calls/{id}?wait=60`, aiohttp, one connection each), as
bench/longpoll_scale.py does. Measured between "no waiter" and "N waiting" (after a warm-up
round of waiters that came and went, so what is made once is made before the first figure):

1. RSS per waiter, from a server without tracing;
2. in a second server with `tracemalloc` (bench/probe/sitecustomize.py, started before any
   import), the snapshot difference: top lines (file:line), then grouped by package, both by
   the line that allocated and by the innermost non-standard-library frame that led there
   (so an asyncio Task made by uvicorn counts for uvicorn in the second grouping);
3. the collector's objects by type (count and shallow size per waiter);
4. RSS again after glibc's `malloc_trim(0)` while they wait, after they left, and trimmed then:
   how much of the RSS is memory held for the waiters, and how much is freed memory the
   allocators kept from the burst of N requests arriving at once.

Per-waiter figures divide by N. tracemalloc sees Python's allocators only: what C libraries
allocate with plain malloc (libuv, llhttp) shows in RSS alone.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import shutil
import sys
import tempfile
import time
import tracemalloc
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp

from bench import common
from bench.load import load_pending
from bench.longpoll_scale import rss_mb

PROBE = Path(__file__).resolve().parent / "probe"
WAIT = 60
WARMUP_WAITERS = 200


@contextmanager
def probed_gateway(probe_dir: str, frames: int) -> Iterator[common.Gateway]:
    """`gateway serve` on SQLite with the probe loaded (its env is copied at construction)."""
    extra = {
        "PYTHONPATH": os.pathsep.join(filter(None, [str(PROBE), os.environ.get("PYTHONPATH")])),
        "GW_PROBE_DIR": probe_dir,
        "GW_PROBE_TRACEMALLOC": str(frames),
    }
    saved = {name: os.environ.get(name) for name in extra}
    os.environ.update(extra)
    try:
        with common.gateway_server(common.sqlite_url(), "gateway, SQLite") as gateway:
            for name, value in saved.items():  # our own later subprocesses go unprobed
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
            yield gateway
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def ask(probe_dir: str, label: str, kind: str, answer: str, timeout: float = 300) -> Path:
    """Drop a request for the probe; the path of its answer once written."""
    Path(probe_dir, f"{label}.{kind}").touch()
    target = Path(probe_dir, f"{label}.{answer}")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if target.exists():
            return target
        error = Path(probe_dir, f"{label}.{kind}.error")
        if error.exists():
            raise RuntimeError(f"probe failed: {error.read_text()}")
        time.sleep(0.2)  # the probe polls its folder; nothing to wait on instead
    raise RuntimeError(f"the probe did not answer {label}.{kind}")


async def wait_for(session: aiohttp.ClientSession, url: str, wait: float = WAIT) -> None:
    async with session.get(url, params={"wait": wait}) as answer:
        await answer.read()


def ask_json(probe_dir: str, label: str, kind: str) -> dict[str, object]:
    answer: dict[str, object] = json.loads(ask(probe_dir, label, kind, "json").read_text())
    return answer


async def waiting_now(probe_dir: str) -> int:
    answer = await asyncio.to_thread(ask_json, probe_dir, f"w{uuid.uuid4().hex[:6]}", "waiters")
    waiting = answer["waiting"]
    assert isinstance(waiting, int)
    return waiting


async def all_waiting(probe_dir: str, waiters: int) -> int:
    """Until the server holds `waiters` long-polls (a traced server is several times slower),
    at most WAIT seconds (then they begin to answer)."""
    deadline = time.monotonic() + WAIT
    count = 0
    while time.monotonic() < deadline:
        count = await waiting_now(probe_dir)
        if count >= waiters:
            break
        await asyncio.sleep(1.0)
    return count


async def none_waiting(probe_dir: str) -> float:
    """Seconds until the server holds no long-poll (at most WAIT + 15)."""
    started = time.monotonic()
    while time.monotonic() - started < WAIT + 15:
        if await waiting_now(probe_dir) == 0:
            break
        await asyncio.sleep(1.0)
    return time.monotonic() - started


async def hold_waiters(
    gateway: common.Gateway,
    call_ids: list[str],
    during: list[tuple[str, str]],
    probe_dir: str,
    *,
    trim: bool = False,
) -> dict[str, float]:
    """Connect a waiter per call_id; once all wait, read RSS, ask the probe for each of
    `during` ((label, kind)); with `trim`, RSS again after malloc_trim; then let them go."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=WAIT + 300)
    figures: dict[str, float] = {}
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, headers=gateway.headers()
    ) as session:
        base = f"{gateway.api_base}/function_calls/"
        tasks = [asyncio.create_task(wait_for(session, base + call_id)) for call_id in call_ids]
        started = time.monotonic()
        figures["waiting"] = await all_waiting(probe_dir, len(call_ids))
        figures["seconds_to_wait"] = time.monotonic() - started
        await asyncio.sleep(1.0)
        figures["rss_mb"] = rss_mb(gateway.pid)
        for label, kind in during:
            answer = "tm" if kind == "snap" else "json"
            await asyncio.to_thread(ask, probe_dir, label, kind, answer)
        if trim:
            await asyncio.to_thread(ask_json, probe_dir, "trim-held", "trim")
            figures["rss_trimmed_mb"] = rss_mb(gateway.pid)
        figures["ended_early"] = sum(1 for task in tasks if task.done())
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    # The clients are gone; the server ends a long-poll whose client left only when its
    # wait ends (nothing reads the disconnect while it waits).
    figures["seconds_to_release"] = await none_waiting(probe_dir)
    figures["rss_after_mb"] = rss_mb(gateway.pid)
    return figures


async def warm_up(gateway: common.Gateway, call_ids: list[str], probe_dir: str) -> None:
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, headers=gateway.headers()) as session:
        base = f"{gateway.api_base}/function_calls/"
        await asyncio.gather(*(wait_for(session, base + call_id, 2) for call_id in call_ids))
    await none_waiting(probe_dir)


PACKAGES = (
    "uvicorn",
    "httptools",
    "h11",
    "uvloop",
    "starlette",
    "fastapi",
    "pydantic",
    "pydantic_core",
    "anyio",
    "sqlalchemy",
    "aiohttp",
    "mcp",
)


def package(filename: str) -> str:
    path = filename.replace("\\", "/")
    if "site-packages/" in path:
        top = path.split("site-packages/", 1)[1].split("/", 1)[0]
        return top if top in PACKAGES else f"other: {top}"
    for ours in ("/gateway/", "/channels/"):
        if ours in path:
            return "ours (" + ours.strip("/") + ")"
    if "/asyncio/" in path:
        return "asyncio"
    if path.startswith("<"):  # generated code (dataclasses, SQLAlchemy wrappers), frozen
        return "generated/frozen"
    return "stdlib (other)"


def responsible(traceback: tracemalloc.Traceback) -> str:
    """The innermost frame outside the standard library (and outside asyncio)."""
    for frame in reversed(traceback):  # oldest first: the last is where it was allocated
        kind = package(frame.filename)
        if kind not in ("asyncio", "stdlib (other)", "generated/frozen"):
            return kind
    return package(traceback[-1].filename) if len(traceback) else "?"


def short(filename: str) -> str:
    path = filename.replace("\\", "/")
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in path:
            return path.split(marker, 1)[1]
    for ours in ("/gateway/", "/channels/"):
        if ours in path:
            return ours.strip("/") + "/" + path.split(ours, 1)[1]
    return path


def report_tracemalloc(before: Path, after: Path, waiters: int, top: int) -> None:
    old = tracemalloc.Snapshot.load(str(before))
    new = tracemalloc.Snapshot.load(str(after))
    ignore = [
        tracemalloc.Filter(False, tracemalloc.__file__),
        tracemalloc.Filter(False, "<frozen importlib._bootstrap*>"),
        tracemalloc.Filter(False, "*/bench/probe/sitecustomize.py"),
    ]
    old, new = old.filter_traces(ignore), new.filter_traces(ignore)
    lines = new.compare_to(old, "lineno")
    total = sum(stat.size_diff for stat in lines)
    print(f"\ntracemalloc: {total / 1024 / waiters:.1f} KB per waiter in all (N = {waiters:,})")
    print(f"top {top} lines (bytes and blocks per waiter):")
    for stat in lines[:top]:
        frame = stat.traceback[-1]
        print(
            f"  {stat.size_diff / waiters:8.0f} B  {stat.count_diff / waiters:5.2f}  "
            f"{short(frame.filename)}:{frame.lineno}"
        )
    by_leaf: collections.Counter[str] = collections.Counter()
    by_owner: collections.Counter[str] = collections.Counter()
    for stat in new.compare_to(old, "traceback"):
        by_leaf[package(stat.traceback[-1].filename)] += stat.size_diff
        by_owner[responsible(stat.traceback)] += stat.size_diff
    print("\nby package, per waiter: [where allocated]  |  [innermost non-stdlib frame]")

    def shown(counter: collections.Counter[str]) -> list[tuple[str, int]]:
        return [(k, v) for k, v in counter.most_common() if abs(v) >= waiters]  # >= 1 B each

    owners = shown(by_owner)
    leaves = shown(by_leaf)

    def cell(rows: list[tuple[str, int]], index: int) -> str:
        return f"{rows[index][1] / waiters:8.0f} B  {rows[index][0]}" if index < len(rows) else ""

    for index in range(max(len(owners), len(leaves))):
        print(f"  {cell(leaves, index):<40}|  {cell(owners, index)}")


def report_types(before: Path, after: Path, waiters: int, top: int) -> None:
    old, new = json.loads(before.read_text()), json.loads(after.read_text())
    rows = []
    for kind, count in new["counts"].items():
        extra = count - old["counts"].get(kind, 0)
        size = new["sizes"].get(kind, 0) - old["sizes"].get(kind, 0)
        if extra / waiters >= 0.5:
            rows.append((size / waiters, extra / waiters, kind))
    rows.sort(reverse=True)
    total = sum(row[0] for row in rows)
    print(f"\ncollector-tracked objects per waiter (shallow sizes, {total:,.0f} B in these rows):")
    for size, count, kind in rows[:top]:
        print(f"  {count:6.2f} x  {size:7.0f} B  {kind}")


def keep(probe_dir: str, folder: Path, label: str) -> None:
    """Copy the snapshots and type counts for a later look (`--keep`)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ("s0.tm", "s1.tm", "t0.json", "t1.json"):
        if Path(probe_dir, name).exists():
            shutil.copy(Path(probe_dir, name), folder / f"{label.replace(' ', '-')}-{name}")


async def run(args: argparse.Namespace) -> None:
    waiters = args.waiters
    nonce = uuid.uuid4().hex[:6]
    warm = [f"warm-{nonce}-{n}" for n in range(WARMUP_WAITERS)]
    everyone = [f"idle-{nonce}-{n}" for n in range(max(waiters, args.traced_waiters))]
    rss_rows: list[tuple[str, float, dict[str, float], int]] = []
    for traced in (False, True):
        if traced and args.frames <= 0:
            break
        with tempfile.TemporaryDirectory(prefix="gw-probe-") as probe_dir:
            frames = args.frames if traced else 0
            with probed_gateway(probe_dir, frames) as gateway:
                database = f"sqlite+aiosqlite:///{gateway.workdir}/gateway.db"
                idle = everyone[: args.traced_waiters if traced else waiters]
                await load_pending(database, warm + everyone)
                # Warm-up: short long-polls that come and go (and end in the server too).
                await warm_up(gateway, warm, probe_dir)
                before: list[tuple[str, str]] = [("t0", "types")]
                during: list[tuple[str, str]] = [("t1", "types")]
                if traced:
                    before.insert(0, ("s0", "snap"))
                    during.insert(0, ("s1", "snap"))
                for label, kind in before:
                    await asyncio.to_thread(
                        ask, probe_dir, label, kind, "tm" if kind == "snap" else "json"
                    )
                rss0 = rss_mb(gateway.pid)
                figures = await hold_waiters(gateway, idle, during, probe_dir, trim=not traced)
                label = "with tracemalloc" if traced else "untraced"
                if not traced:
                    await asyncio.to_thread(ask_json, probe_dir, "trim-after", "trim")
                    figures["rss_after_trim_mb"] = rss_mb(gateway.pid)
                rss_rows.append((label, rss0, figures, len(idle)))
                print(
                    f"  {label}: {figures['waiting']:.0f} of {len(idle):,} waiting after "
                    f"{figures['seconds_to_wait']:.0f} s; {figures['ended_early']:.0f} ended "
                    f"early; the server let go of them {figures['seconds_to_release']:.0f} s "
                    "after their clients left"
                )
                if args.keep is not None:
                    keep(probe_dir, args.keep, label)
                if not traced:
                    report_types(
                        Path(probe_dir, "t0.json"), Path(probe_dir, "t1.json"), waiters, args.top
                    )
                else:
                    report_tracemalloc(
                        Path(probe_dir, "s0.tm"), Path(probe_dir, "s1.tm"), len(idle), args.top
                    )
    print()

    rows = []
    for label, rss0, figures, count in rss_rows:

        def per_waiter(mb: float, base: float, count: int = count) -> str:
            return f"{mb:.0f} ({(mb - base) * 1024 / count:.1f} KB each)"

        trimmed = figures.get("rss_trimmed_mb")
        after_trim = figures.get("rss_after_trim_mb")
        rows.append(
            [
                f"{label}, N = {count:,}",
                f"{rss0:.0f}",
                per_waiter(figures["rss_mb"], rss0),
                per_waiter(trimmed, rss0) if trimmed else "-",
                per_waiter(figures["rss_after_mb"], rss0),
                per_waiter(after_trim, rss0) if after_trim else "-",
            ]
        )
    common.print_table(
        [
            "server (RSS MB)",
            "no waiter",
            "N waiting",
            "same, malloc_trim",
            "after they left",
            "same, malloc_trim",
        ],
        rows,
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--waiters", type=int, default=3000)
    parser.add_argument("--frames", type=int, default=8, help="tracemalloc frames; 0: no trace")
    parser.add_argument(
        "--traced-waiters",
        type=int,
        default=1000,
        help="N for the traced server (it must get them all waiting within 60 s)",
    )
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--keep", type=Path, help="copy the snapshots and type counts here")
    args = parser.parse_args(argv)
    common.print_machine(f"memory per waiter ({args.waiters:,} idle long-polls)")
    started = time.monotonic()
    asyncio.run(run(args))
    print(f"(run took {time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
