"""How far one create and one Slack click travel through the code: the modules they enter,
in how many threads and tasks, and how many moves between modules go back into a module
already visited.

The gateway runs in this process (uvicorn, SQLite) with its Slack channel pointed at the
fake Slack Web API. A profile hook sees every function call in `gateway/` and `channels/`
(resumed coroutines are not new calls); a move is a call from one project module into
another (the caller is the nearest project function up the stack).

- create: `POST /function_calls` routed to Slack, until the delivery is recorded as sent;
- click: a signed Approve click on the posted button, until the agent's long-poll answers.

Run: `.venv/bin/python bench/module_trace.py` (add `--moves` to print each path).
"""

from __future__ import annotations

import asyncio
import dis
import json
import sqlite3
import sys
import tempfile
import threading
import time
import types
import urllib.parse
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.channels.slack.helpers import button_rid, click, signed_headers, slack_channel
from tests.fakes.slack import FakeSlack
from tests.services.inprocess import running_gateway, test_settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = (str(ROOT / "gateway") + "/", str(ROOT / "channels") + "/")
WAIT_LIMIT = 10.0


def _module(filename: str) -> str | None:
    if not filename.startswith(PACKAGES):
        return None
    return filename[len(str(ROOT)) + 1 :].removesuffix(".py").replace("/", ".")


_RESUME_AT: dict[types.CodeType, int] = {}


def _fresh(frame: types.FrameType) -> bool:
    """A new call, not a coroutine or generator resumed after an await or a yield."""
    code = frame.f_code
    first = _RESUME_AT.get(code)
    if first is None:
        first = next((i.offset for i in dis.get_instructions(code) if i.opname == "RESUME"), 0)
        _RESUME_AT[code] = first
    return frame.f_lasti <= first


@dataclass
class Trace:
    recording: bool = False
    moves: list[tuple[str, str, str]] = field(default_factory=list)  # (context, from, to)
    entered: dict[str, list[str]] = field(default_factory=dict)  # context -> modules in order

    def hook(self, frame: types.FrameType, event: str, _arg: object) -> None:
        if not self.recording or event != "call":
            return
        module = _module(frame.f_code.co_filename)
        if module is None or not _fresh(frame):
            return
        context = _context()
        self.entered.setdefault(context, []).append(module)
        caller = _caller(frame)
        if caller is not None and caller != module:
            self.moves.append((context, caller, module))

    def report(self, label: str, *, show: bool) -> None:
        modules = {m for ms in self.entered.values() for m in ms}
        outside = [move for move in self.moves if not _in_store(move[1]) or not _in_store(move[2])]
        print(
            f"{label}: {len(modules)} modules in {len(self.entered)} threads and tasks; "
            f"{_summary(self.moves)}; outside the store: {_summary(outside)}"
        )
        if show:
            for context, source, target in self.moves:
                print(f"    [{context}] {source} -> {target}")
            print("    modules:", ", ".join(sorted(modules)))


def _summary(moves: list[tuple[str, str, str]]) -> str:
    """How many moves, and how many of them go back into a module visited before."""
    visited: set[str] = set()
    back = 0
    for _context, source, target in moves:  # in the order they were made
        visited.add(source)
        back += target in visited
        visited.add(target)
    return f"{len(moves)} moves between modules, {back} back into one already visited"


def _in_store(module: str) -> bool:
    """The store's own calls (SQL, rows, the writer), which a reader of the path skips."""
    return module.startswith("gateway.store")


def _caller(frame: types.FrameType) -> str | None:
    """The module of the nearest project function up the stack (None: a new task's start,
    a thread's, or a library's callback)."""
    back = frame.f_back
    while back is not None:
        module = _module(back.f_code.co_filename)
        if module is not None:
            return module
        back = back.f_back
    return None


def _context() -> str:
    thread = threading.current_thread().name
    loop = asyncio._get_running_loop()
    task = asyncio.current_task(loop) if loop is not None else None
    return f"{thread}/{task.get_name()}" if task is not None else thread


async def _until(check: Callable[[], Awaitable[bool]]) -> None:
    deadline = time.monotonic() + WAIT_LIMIT
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError("the gateway did not get there in time")
        await asyncio.sleep(0.01)


def _delivery_sent(db: Path) -> Callable[[], Awaitable[bool]]:
    """Read with sqlite3 itself, so that waiting runs none of the gateway's code."""

    async def check() -> bool:
        with sqlite3.connect(db) as conn:
            row = conn.execute("SELECT status FROM delivery").fetchone()
        return row is not None and row[0] == "sent"

    return check


async def measure(show: bool) -> None:
    trace = Trace()
    sys.setprofile(trace.hook)
    threading.setprofile(trace.hook)
    try:
        async with FakeSlack() as fake:
            with tempfile.TemporaryDirectory(prefix="gw-trace-") as tmp:
                db = Path(tmp) / "trace.db"
                # A long poll period: the outbox and the change feed wait to be woken.
                settings = test_settings(f"sqlite+aiosqlite:///{db}", outbox_poll_seconds=30)
                channels = {"slack": slack_channel(fake)}
                async with running_gateway(settings, channels=channels) as gateway:
                    await _create(gateway, fake, db, trace, show)
                    await _click(gateway, fake, trace, show)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)


async def _create(gateway: Any, fake: FakeSlack, db: Path, trace: Trace, show: bool) -> None:
    body = {
        "run_id": "trace",
        "call_id": "trace-1",
        "spec": {
            "fn": "drop_table",
            "kwargs": {},
            "channel": {"slack": {"channel_or_user_id": "C1"}},
        },
    }
    async with gateway.client() as client:
        trace.recording = True
        (await client.post("/function_calls", json=body)).raise_for_status()
        await fake.wait_for("chat.postMessage", 1)
        await _until(_delivery_sent(db))
        trace.recording = False
    trace.report("create", show=show)


async def _click(gateway: Any, fake: FakeSlack, trace: Trace, show: bool) -> None:
    trace.moves.clear()
    trace.entered.clear()
    [posted] = fake.calls_to("chat.postMessage")
    button = next(
        element
        for block in posted.params["blocks"]
        for element in block.get("elements", [])
        if str(element.get("value", "")).startswith("gw:approve:")
    )
    payload = click(fake, button_rid(button), "gw_approve")
    body = "payload=" + urllib.parse.quote(json.dumps(payload))
    async with gateway.client() as api, httpx.AsyncClient(base_url=gateway.base_url) as slack:
        waiter = asyncio.create_task(api.get("/function_calls/trace-1", params={"wait": 30}))
        await _until(lambda: _waiting(gateway))
        trace.recording = True
        (await slack.post("/slack/interactions", content=body, headers=signed_headers(body)))
        answer = await waiter
        trace.recording = False
    assert answer.json()["status"]["approved"] is True, answer.text
    trace.report("click", show=show)


async def _waiting(gateway: Any) -> bool:
    return len(gateway.core.waiters) > 0


def main() -> int:
    asyncio.run(measure(show="--moves" in sys.argv))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
