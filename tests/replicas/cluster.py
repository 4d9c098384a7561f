"""Several `gateway serve` replicas on one PostgreSQL database, and what they say about the
connections each of them owns or stands by for."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.services.dovecot import ThrowawayDovecot
from tests.services.gateway_process import GatewayProcess
from tests.services.receiver import VerifyingReceiver

# The connections held by one owner each, by the channel that shows them.
SINGLETONS = ("discord", "slack", "email")
# Short retries so that nothing waits out Svix's minutes (40 tries never run out here).
FAST_RETRIES = ",".join(["0"] + ["0.3"] * 39)
SECRET_ENV = "REPLICAS_WEBHOOK_SECRET"


@dataclass
class Replica:
    process: GatewayProcess
    api_key: str = ""

    @property
    def proc(self) -> subprocess.Popen[str]:
        assert self.process.proc is not None
        return self.process.proc

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def replica_id(self) -> str:
        """What the gateway calls itself by default: hostname:pid."""
        return f"{socket.gethostname()}:{self.pid}"

    def client(self) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {self.api_key}"}
        return httpx.AsyncClient(base_url=self.process.api_base, headers=headers, timeout=30)

    async def channels(self) -> dict[str, dict[str, Any]]:
        """GET /gateway/v1/channels, by channel name."""
        async with self.client() as api:
            response = await api.get(f"{self.process.base_url}/gateway/v1/channels")
        assert response.status_code == 200, response.text
        return {c["name"]: c for c in response.json()["channels"]}


@contextlib.asynccontextmanager
async def clients(replicas: list[Replica]) -> AsyncIterator[list[httpx.AsyncClient]]:
    """An API client for each replica, closed on exit."""
    async with contextlib.AsyncExitStack() as stack:
        yield [await stack.enter_async_context(replica.client()) for replica in replicas]


@dataclass
class Cluster:
    workdir: Path
    env: dict[str, str]
    replicas: list[Replica] = field(default_factory=list)

    async def start(self) -> Replica:
        """One more replica. After the first one starts, an admin key (the operator's: the
        tests respond and read /gateway/v1) is made on the shared database for all of them."""
        process = GatewayProcess(self.workdir, self.env)
        try:
            await asyncio.to_thread(process.start)
        except BaseException:
            await asyncio.to_thread(process.kill)  # one that never became healthy runs on
            raise
        if self.replicas:
            key = self.replicas[0].api_key
        else:
            assert process.api_key, "the first replica prints the (agent) key it created"
            key = await asyncio.to_thread(process.new_key, "admin", "--name", "operator")
        replica = Replica(process, key)
        self.replicas.append(replica)
        return replica

    def alive(self) -> list[Replica]:
        return [r for r in self.replicas if r.process.alive()]

    async def kill(self, replica: Replica) -> None:
        """kill -9: no shutdown code runs, as in a crash."""
        await asyncio.to_thread(replica.process.kill)

    async def restart(self, replica: Replica) -> None:
        """The same replica again, on its port and with its settings (a new pid), once it is
        healthy; killed first if it still runs."""
        await asyncio.to_thread(replica.process.kill)
        try:
            await asyncio.to_thread(replica.process.start)
        except BaseException:
            await asyncio.to_thread(replica.process.kill)
            raise

    async def stop(self) -> None:
        await asyncio.gather(*(asyncio.to_thread(r.process.stop) for r in self.replicas))


async def owners(replicas: list[Replica]) -> dict[str, dict[str, str | None]]:
    """For each singleton, each replica's view: `{channel: {replica_id: owner}}`."""
    views = await asyncio.gather(*(r.channels() for r in replicas))
    return {
        name: {r.replica_id: view[name]["owner"] for r, view in zip(replicas, views, strict=True)}
        for name in SINGLETONS
    }


async def connection_texts(replicas: list[Replica]) -> dict[str, dict[str, str]]:
    """For each singleton, what each replica's channel state says: `{channel: {id: text}}`."""
    views = await asyncio.gather(*(r.channels() for r in replicas))
    return {
        name: {
            r.replica_id: str(view[name]["connection"])
            for r, view in zip(replicas, views, strict=True)
        }
        for name in SINGLETONS
    }


def imap_sessions(dovecot: ThrowawayDovecot, user: str) -> int:
    """IMAP sessions Dovecot has open for `user` now (`doveadm who`, from its anvil)."""
    result = subprocess.run(
        ["doveadm", "-c", str(dovecot.config), "who", "-1", user],
        capture_output=True,
        text=True,
        timeout=10,
        check=True,
    )
    rows = [line.split() for line in result.stdout.splitlines()[1:]]
    return sum(1 for row in rows if row[:2] == [user, "imap"])


def webhook_env(tmp_path: Path, pg_url: str, receiver: VerifyingReceiver) -> dict[str, str]:
    """The replicas' settings: the receiver as the default project's webhook endpoint, from
    the config file with its secret in the environment."""
    config = tmp_path / "gateway.toml"
    config.write_text(f'[[webhooks]]\nurl = "{receiver.url}"\nsecret_env = "{SECRET_ENV}"\n')
    return {
        "GATEWAY_DATABASE_URL": pg_url,
        "GATEWAY_CONFIG": str(config),
        SECRET_ENV: receiver.secret,
        "GATEWAY_WEBHOOK_RETRY_SCHEDULE": FAST_RETRIES,
        "GATEWAY_OUTBOX_POLL_SECONDS": "0.2",
    }
