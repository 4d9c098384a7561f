"""Retention: `gateway retention run` replaces the content of old decided requests by its
hashes. The content is gone from the database's bytes (the SQLite file and its write-ahead
log, a PostgreSQL dump), the request still reads and lists as decided, the audit chain
still verifies, and pending requests keep theirs."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import sqlite3
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import make_url

from gateway.cli import retention as retention_cli
from gateway.policies import retention
from gateway.routing import load_config
from gateway.seam import Answered, Verb
from gateway.settings import Settings
from gateway.store import Database, engine
from gateway.store.canonical import sha256_hex
from tests.audit.chain import gateway_audit, sql
from tests.factories import RequestFactory
from tests.grants.helpers import ALICE, create
from tests.helpers import events, eventually
from tests.services.inprocess import RunningGateway, write_config

GONE = "zq-gone-7f3a"  # in every decided request's content
KEPT = "zq-kept-19bd"  # in the pending request's
API = ""  # the client is based at /humanlayer/v1
PG_DUMP = "/usr/lib/postgresql/15/bin/pg_dump"
CONFIG = '[projects.default]\nretention = { decided_after = "90d" }\n'


async def retention_run(url: str, config: Path, *args: str) -> str:
    """`gateway retention run ARGS` through the command line's own parser, in this process."""
    parser = argparse.ArgumentParser(prog="gateway")
    retention_cli.add_commands(parser.add_subparsers(dest="command", required=True))
    parsed = parser.parse_args(["retention", "run", *args])
    settings = Settings(_env_file=None, database_url=url, config=config)
    out = io.StringIO()

    def run() -> int:
        with contextlib.redirect_stdout(out):
            code: int = parsed.run(settings, parsed)
            return code

    assert await asyncio.to_thread(run) == 0
    return out.getvalue()


def stored_bytes(url: str) -> bytes:
    """What the database holds: the SQLite file and its write-ahead log, or a pg_dump."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(str(parsed.database))
        wal = path.with_name(path.name + "-wal")
        return path.read_bytes() + (wal.read_bytes() if wal.exists() else b"")
    dsn = parsed.set(drivername="postgresql").render_as_string(hide_password=False)
    return subprocess.run([PG_DUMP, dsn], check=True, capture_output=True).stdout


async def decided_and_pending(client: httpx.AsyncClient) -> dict[str, Any]:
    """An approval and a question, decided with the marker in every free text, and a
    pending approval; returns the approval's kwargs."""
    # A long value too: stored in overflow pages, which SQLite frees without erasing them
    # unless told to (secure_delete).
    kwargs = {"to": f"{GONE}@example.com", "amount": 125.5, "memo": f"{GONE} " * 2000}
    call = {"fn": "pay", "kwargs": kwargs, "state": {"note": GONE}}
    made = await client.post(
        f"{API}/function_calls", json={"run_id": "r", "call_id": "old", "spec": call}
    )
    assert made.status_code == 200, made.text
    answer = {"approved": False, "comment": f"never to {GONE}"}
    decided = await client.post(f"{API}/agent/function_calls/old/respond", json=answer)
    assert decided.status_code == 200, decided.text
    question = {"run_id": "r", "call_id": "asked", "spec": {"msg": f"which region for {GONE}?"}}
    assert (await client.post(f"{API}/contact_requests", json=question)).status_code == 200
    reply = {"response": f"eu-west-1 says {GONE}"}
    responded = await client.post(f"{API}/agent/human_contacts/asked/respond", json=reply)
    assert responded.status_code == 200, responded.text
    waiting = {"fn": "pay", "kwargs": {"to": KEPT}}
    made = await client.post(
        f"{API}/function_calls", json={"run_id": "r", "call_id": "new", "spec": waiting}
    )
    assert made.status_code == 200, made.text
    return kwargs


def without_secure_delete(monkeypatch: pytest.MonkeyPatch) -> None:
    """SQLite connections opened from now on start as on a build that leaves freed space as
    it was (this one's default erases it): the gateway's own settings must erase it."""
    pragmas = engine._sqlite_pragmas

    def leaving_freed_bytes(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.execute("PRAGMA secure_delete=0")
        pragmas(dbapi_connection, record)

    monkeypatch.setattr(engine, "_sqlite_pragmas", leaving_freed_bytes)


async def edited_approval(gateway: RunningGateway, factory: RequestFactory) -> dict[str, Any]:
    """An approval whose arguments the approver edited: both versions are in its audit
    events (which retention redacts through their field hashes); returns the edit."""
    made = await create(gateway, factory, "edited", path=f"/{GONE}")
    edited = {"path": f"/safe/{GONE}"}
    answered = await gateway.context("slack").answers.answer(
        made.rid, Verb.EDIT, ALICE, edited=edited
    )
    assert isinstance(answered, Answered), answered
    return edited


async def test_retention_run_removes_the_content_and_keeps_the_decision(
    gateway: RunningGateway,
    db_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request_factory: RequestFactory,
) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with gateway.client() as client:
        kwargs = await decided_and_pending(client)
        edit = await edited_approval(gateway, request_factory)
        # Decided 100 days ago, as far as retention can tell.
        sql(
            db_url,
            (
                "UPDATE request SET responded_at = requested_at - INTERVAL '100 days'"
                " WHERE status <> 'pending'"
            )
            if "postgres" in db_url
            else (
                "UPDATE request SET responded_at = datetime(requested_at, '-100 days')"
                " WHERE status <> 'pending'"
            ),
        )
        assert sql(db_url, "SELECT responded_at FROM request WHERE call_id = 'new'") == [(None,)]
        assert GONE.encode() in stored_bytes(db_url)

        said = await retention_run(db_url, config, "--dry-run")
        assert said.strip() == "project 'default': would redact 3 requests"
        assert GONE.encode() in stored_bytes(db_url)  # a dry run changes nothing
        assert sql(db_url, "SELECT count(*) FROM request WHERE redacted_at IS NOT NULL") == [(0,)]

        without_secure_delete(monkeypatch)  # the command's connections: the engine erases
        said = await retention_run(db_url, config)
        assert said.strip() == "project 'default': redacted 3 requests"
        assert GONE.encode() not in stored_bytes(db_url)
        assert KEPT.encode() in stored_bytes(db_url)  # pending: never redacted
        assert (
            await retention_run(db_url, config)
        ).strip() == "project 'default': redacted 0 requests"

        old = (await client.get(f"{API}/function_calls/old")).json()
        assert old["status"]["approved"] is False and old["gateway_status"] == "rejected"
        assert old["spec"]["kwargs"] == {"redacted_sha256": sha256_hex(kwargs)}  # provable
        assert old["spec"]["fn"] == "pay" and "redacted_at" in old
        listed = (await client.get(f"{API}/function_calls", params={"status": "rejected"})).json()
        assert [c["call_id"] for c in _items(listed)] == ["old"]
        asked = (await client.get(f"{API}/human_contacts/asked")).json()
        assert asked["status"]["response"] is not None and GONE not in str(asked)
        edited = (await client.get(f"{API}/function_calls/edited")).json()
        assert edited["status"]["approved"] is True
        assert edited["status"]["updated_kwargs"] == {"redacted_sha256": sha256_hex(edit)}
        [trail] = [e for e in (await events(gateway, "edited"))["events"] if e["type"] == "edited"]
        assert trail["detail"]["updated"] == {"redacted_sha256": sha256_hex(edit)}
        assert trail["detail"]["changed"] == ["path"]  # not content: kept
        new = (await client.get(f"{API}/function_calls/new")).json()
        assert new["spec"]["kwargs"] == {"to": KEPT} and "redacted_at" not in new

        # The same create again answers the stored, redacted record (its body hash stayed).
        again = {
            "run_id": "r",
            "call_id": "old",
            "spec": {"fn": "pay", "kwargs": kwargs, "state": {"note": GONE}},
        }
        repeated = await client.post(f"{API}/function_calls", json=again)
        assert repeated.status_code == 200, repeated.text
        assert repeated.json()["spec"]["kwargs"] == old["spec"]["kwargs"]
        other = again | {"spec": {"fn": "pay", "kwargs": {"to": "someone else"}}}
        assert (await client.post(f"{API}/function_calls", json=other)).status_code == 409

    verified = await gateway_audit(db_url, "verify")
    assert verified.returncode == 0, verified
    assert ": intact: " in verified.stdout


def _items(page: Any) -> list[dict[str, Any]]:
    return page if isinstance(page, list) else page["items"]


@pytest.mark.parametrize("setting", ['"23h"', '"0d"', "3600", '"1439m"'])
def test_a_retention_shorter_than_a_day_is_refused_at_load(tmp_path: Path, setting: str) -> None:
    path = write_config(
        tmp_path / "routing.toml", f"[projects.acme]\nretention = {{ decided_after = {setting} }}\n"
    )
    with pytest.raises(ValueError) as refused:
        load_config(path)
    assert "projects.acme.retention.decided_after" in str(refused.value)
    assert "a retention shorter than 1 day is refused" in str(refused.value)


def test_a_day_or_more_loads(tmp_path: Path) -> None:
    path = write_config(tmp_path / "routing.toml", CONFIG.replace("90d", "1d"))
    retention = load_config(path).projects["default"].retention
    assert retention is not None and retention.decided_after == 86400


async def test_the_daily_job_redacts_what_is_due_at_once(
    sqlite_gateway: RunningGateway, tmp_path: Path
) -> None:
    """The timer every gateway runs (`keep_redacting`) redacts at its start, then daily."""
    gateway = sqlite_gateway
    async with gateway.client() as client:
        await decided_and_pending(client)
    url = gateway.core.settings.database_url
    sql(url, "UPDATE request SET responded_at = datetime(requested_at, '-100 days')")
    config = load_config(write_config(tmp_path / "routing.toml", CONFIG))
    job = asyncio.create_task(retention.keep_redacting(replace(gateway.core, config=config)))
    try:
        redacted = "SELECT call_id FROM request WHERE redacted_at IS NOT NULL ORDER BY call_id"

        async def both() -> bool:
            return sql(url, redacted) == [("asked",), ("old",)]

        await eventually(both)
    finally:
        job.cancel()
    assert sql(url, "SELECT redacted_at FROM request WHERE call_id = 'new'") == [(None,)]


async def test_the_write_ahead_log_is_emptied_once_no_reader_holds_it(
    sqlite_gateway: RunningGateway,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A reader in a transaction keeps SQLite from emptying its write-ahead log (the old
    pages stay in it): said as a warning, and the next run, with nothing left to redact,
    empties it."""
    async with sqlite_gateway.client() as client:
        await decided_and_pending(client)
    url = sqlite_gateway.core.settings.database_url
    sql(url, "UPDATE request SET responded_at = datetime(requested_at, '-100 days')")
    config = load_config(write_config(tmp_path / "routing.toml", CONFIG))
    pragmas = engine._sqlite_pragmas

    def not_waiting(dbapi_connection: Any, record: Any) -> None:
        pragmas(dbapi_connection, record)
        dbapi_connection.execute("PRAGMA busy_timeout=0")  # refused at once, not in 5 s

    monkeypatch.setattr(engine, "_sqlite_pragmas", not_waiting)
    reader = sqlite3.connect(str(make_url(url).database), isolation_level=None)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM request").fetchall()
    try:
        assert await _run(url, config) == {"default": 2}
    finally:
        reader.close()
    assert "a reader kept the SQLite write-ahead log from being emptied" in caplog.text
    assert GONE.encode() in wal_bytes(url)  # the pages as they were, still there

    assert await _run(url, config) == {"default": 0}
    assert wal_bytes(url) == b""


def wal_bytes(url: str) -> bytes:
    return Path(str(make_url(url).database) + "-wal").read_bytes()


async def _run(url: str, config: Any) -> dict[str, int]:
    db = Database(url)
    try:
        return await retention.run(db, config)
    finally:
        await db.aclose()
