"""The IMAP watcher: new mail within a second of its arrival (IDLE), nothing read twice.

Each pass fetches the UIDs after the checkpoint with BODY.PEEK[] (so a crash leaves the
mail unread), hands each message to the pipeline, and only once that has committed marks it
\\Seen and moves the `(mailbox, UIDVALIDITY, last UID)` checkpoint. IDLE is re-issued every
IMAP_POLL_SECONDS, and each wake-up searches again, so a missed push costs one period at
most. A dropped connection (a server restart) ends the session; the channel's supervisor
opens a new one with backoff.
"""

from __future__ import annotations

import asyncio
import logging
import re
import ssl
from collections.abc import Awaitable, Callable
from typing import Any

import aioimaplib

from channels.email.settings import EmailSettings
from channels.email.smtp import tls_context
from gateway.seam import Link, Records

log = logging.getLogger(__name__)

Receive = Callable[[bytes], Awaitable[Any]]
_UIDVALIDITY = re.compile(rb"UIDVALIDITY (\d+)")
_FETCHED_UID = re.compile(rb"UID (\d+)")


class ImapError(Exception):
    """The server said no, or the connection is gone."""


def _ok(response: Any, what: str) -> Any:
    if response.result != "OK":
        lines = b" ".join(response.lines).decode(errors="replace")
        raise ImapError(f"IMAP {what} failed: {lines}")
    return response


def new_client(settings: EmailSettings) -> aioimaplib.IMAP4:
    """A client that starts connecting at once, over TLS or plain TCP as IMAP_SECURITY says."""
    client_class = aioimaplib.IMAP4_SSL if settings.imap_security == "tls" else aioimaplib.IMAP4
    kwargs: dict[str, Any] = (
        {"ssl_context": tls_context(settings.imap_ca_file)}
        if settings.imap_security == "tls"
        else {}
    )
    return client_class(host=settings.imap_host, port=settings.imap_port, timeout=30, **kwargs)


async def sign_in(client: aioimaplib.IMAP4, settings: EmailSettings) -> None:
    """Wait for the greeting, upgrade with STARTTLS when asked to, and log in."""
    context = tls_context(settings.imap_ca_file)
    await client.wait_hello_from_server()
    if settings.imap_security == "starttls":
        await _starttls(client, str(settings.imap_host), context)
    password = settings.imap_password.get_secret_value() if settings.imap_password else ""
    _ok(await client.login(settings.imap_username or "", password), "LOGIN")


async def _starttls(client: aioimaplib.IMAP4, host: str, context: ssl.SSLContext) -> None:
    """aioimaplib has no STARTTLS helper: send the command, then upgrade the transport."""
    protocol = client.protocol
    if "STARTTLS" not in protocol.capabilities:
        raise ImapError("the IMAP server does not offer STARTTLS (IMAP_SECURITY=starttls)")
    command = aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop)
    _ok(await protocol.execute(command), "STARTTLS")
    loop = asyncio.get_running_loop()
    protocol.transport = await loop.start_tls(
        protocol.transport, protocol, context, server_hostname=host
    )
    await protocol.capability()  # capabilities may change after the upgrade (RFC 3501)


class Watcher:
    def __init__(self, settings: EmailSettings, records: Records, receive: Receive) -> None:
        self.settings = settings
        self.records = records
        self.receive = receive
        self.mailbox = settings.imap_mailbox
        self.connected = asyncio.Event()  # set while logged in and watching (tests wait on it)

    async def session(self, link: Link) -> None:
        """Sign in, then drain and IDLE until the connection fails; the channel's supervisor
        reconnects with backoff."""
        client = new_client(self.settings)
        try:
            await sign_in(client, self.settings)
            uidvalidity = await self._select(client)
            self.connected.set()
            link.up()
            while True:
                await self._drain(client, uidvalidity)
                await self._idle(client)
        finally:
            signed_in = self.connected.is_set()
            self.connected.clear()
            await _close(client, polite=signed_in)

    async def _select(self, client: aioimaplib.IMAP4) -> int:
        response = _ok(await client.select(self.mailbox), f"SELECT {self.mailbox}")
        found = _UIDVALIDITY.search(b" ".join(response.lines))
        if found is None:
            raise ImapError("the server sent no UIDVALIDITY")
        return int(found.group(1))

    async def _drain(self, client: aioimaplib.IMAP4, uidvalidity: int) -> None:
        """Hand every message after the checkpoint to the pipeline, oldest first."""
        saved = await self.records.checkpoint(self.mailbox)
        # A new UIDVALIDITY means the old UIDs mean nothing: read the mailbox again (the
        # pipeline's Message-ID check keeps that from deciding anything twice).
        last = saved[1] if saved and saved[0] == uidvalidity else 0
        for uid in await self._uids_after(client, last):
            raw = await self._fetch(client, uid)
            if raw is not None:
                await self.receive(raw)
                _ok(await client.uid("store", str(uid), "+FLAGS.SILENT", r"(\Seen)"), "STORE")
            await self.records.save_checkpoint(self.mailbox, uidvalidity, uid)

    async def _uids_after(self, client: aioimaplib.IMAP4, last: int) -> list[int]:
        response = _ok(await client.uid_search(f"UID {last + 1}:*"), "UID SEARCH")
        uids = [int(part) for line in response.lines for part in line.split() if part.isdigit()]
        # "n:*" always matches the highest UID, even when it is below n (RFC 3501 §6.4.8).
        return sorted(uid for uid in set(uids) if uid > last)

    async def _fetch(self, client: aioimaplib.IMAP4, uid: int) -> bytes | None:
        response = _ok(await client.uid("fetch", str(uid), "(UID BODY.PEEK[])"), "FETCH")
        for index, line in enumerate(response.lines[:-1]):
            if isinstance(line, bytes) and b"FETCH" in line and _FETCHED_UID.search(line):
                literal = response.lines[index + 1]
                return bytes(literal)
        return None  # expunged meanwhile

    async def _idle(self, client: aioimaplib.IMAP4) -> None:
        """Wait for a push (or the poll period), then leave IDLE so the caller can search."""
        idle = await client.idle_start(timeout=self.settings.imap_poll_seconds)
        try:
            while client.has_pending_idle():
                push = await client.wait_server_push(timeout=self.settings.imap_poll_seconds + 5)
                if _says_bye(push) or _gone(client):
                    # aioimaplib leaves the IDLE future pending when the server goes away.
                    raise ImapError("the IMAP server closed the connection")
                if push == aioimaplib.STOP_WAIT_SERVER_PUSH or _has_news(push):
                    break
        finally:
            if not _gone(client):
                if client.has_pending_idle():
                    client.idle_done()
                await asyncio.wait_for(idle, timeout=30)
            else:
                idle.cancel()


async def check(settings: EmailSettings) -> str:
    """Log in and select the mailbox, as `gateway check` does."""
    client = new_client(settings)
    try:
        await sign_in(client, settings)
        _ok(await client.select(settings.imap_mailbox), f"SELECT {settings.imap_mailbox}")
    finally:
        await _close(client, polite=True)
    return f"IMAP signed in as {settings.imap_username}, {settings.imap_mailbox} selected"


def _lines(push: Any) -> list[bytes]:
    lines = push if isinstance(push, list) else [push]
    return [line for line in lines if isinstance(line, bytes)]


def _says_bye(push: Any) -> bool:
    return any(line.startswith(b"BYE") for line in _lines(push))


def _gone(client: aioimaplib.IMAP4) -> bool:
    transport = client.protocol.transport
    return transport is None or transport.is_closing()


def _has_news(push: Any) -> bool:
    return any(b"EXISTS" in line for line in _lines(push))


async def _close(client: aioimaplib.IMAP4, *, polite: bool) -> None:
    """LOGOUT when signed in; otherwise (a server that never answered) just hang up."""
    if not polite:
        client._client_task.cancel()  # still connecting, perhaps
    if _gone(client):
        return
    if not polite:
        client.protocol.transport.close()
        return
    try:
        await asyncio.wait_for(client.logout(), timeout=5)
    except Exception:
        transport = client.protocol.transport
        if transport is not None:
            transport.close()
