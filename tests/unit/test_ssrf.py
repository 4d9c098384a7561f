"""SSRF guard: public-address checks, URL pinning and refusal before any connection."""

from __future__ import annotations

import asyncio
import ipaddress

import httpx
import pytest

from gateway.errors import DeliveryError
from gateway.outbox import webhooks
from gateway.security.ssrf import check_scheme, is_public, pin_public

NOT_PUBLIC = [
    "127.0.0.1",
    "10.0.0.1",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",  # cloud metadata
    "100.64.0.1",  # carrier-grade NAT
    "0.0.0.0",
    "::1",
    "::ffff:127.0.0.1",  # IPv4-mapped loopback
    "64:ff9b::7f00:1",  # NAT64 of 127.0.0.1
    "2002:7f00:1::",  # 6to4 of 127.0.0.1
    "fd00::1",  # unique local
    "fe80::1",  # link-local
    # beyond the required corpus
    "224.0.0.1",  # multicast
    "240.0.0.1",  # reserved
    "255.255.255.255",
    "::ffff:10.0.0.1",
    "2002:a00:1::",  # 6to4 of 10.0.0.1
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",  # Teredo, client 192.0.2.45
    "ff02::1",  # IPv6 multicast
]

PUBLIC = ["1.1.1.1", "8.8.8.8", "2606:4700:4700::1111"]


@pytest.mark.parametrize("address", NOT_PUBLIC)
def test_is_public_refuses(address: str) -> None:
    assert is_public(ipaddress.ip_address(address)) is False


@pytest.mark.parametrize("address", PUBLIC)
def test_is_public_accepts(address: str) -> None:
    assert is_public(ipaddress.ip_address(address)) is True


LOCAL_URLS = [
    "http://127.0.0.1/x",
    "http://2130706433/",  # 127.0.0.1 as one decimal number
    "http://0x7f.1/",  # hex, short form
    "http://127.1/",  # short form
    "http://localhost/",
    "http://[::1]/",
    "https://127.0.0.1:8443/hook",
]


@pytest.mark.parametrize("url", LOCAL_URLS)
async def test_pin_public_refuses_local_urls(url: str) -> None:
    with pytest.raises(DeliveryError) as caught:
        await pin_public(url)
    assert caught.value.retryable is False
    assert "GATEWAY_WEBHOOK_ALLOW_PRIVATE" in str(caught.value)
    assert "not a public address" in str(caught.value)


async def test_pin_public_refuses_octal_loopback() -> None:
    # httpx rejects leading-zero octets outright, so this never reaches the address check:
    # it is refused as an invalid URL (allowing private addresses would not help).
    with pytest.raises(DeliveryError) as caught:
        await pin_public("http://0177.0.0.1/")
    assert caught.value.retryable is False
    assert "invalid URL" in str(caught.value)


@pytest.mark.parametrize(
    ("url", "host", "port", "path"),
    [
        ("http://1.1.1.1/hook", "1.1.1.1", None, "/hook"),
        ("https://8.8.8.8:8443/a?b=1", "8.8.8.8", 8443, "/a"),
        ("http://[2606:4700:4700::1111]:8080/p", "2606:4700:4700::1111", 8080, "/p"),
    ],
)
async def test_pin_public_keeps_public_literals(
    url: str, host: str, port: int | None, path: str
) -> None:
    pinned = await pin_public(url)
    assert pinned.url.host == host
    assert pinned.url.port == port
    assert pinned.url.path == path
    assert pinned.host == host


@pytest.mark.parametrize(
    "url", ["ftp://example.com/x", "file:///etc/passwd", "not a url", "javascript:alert(1)"]
)
def test_check_scheme_refuses(url: str) -> None:
    with pytest.raises(DeliveryError) as caught:
        check_scheme(url)
    assert caught.value.retryable is False


@pytest.mark.parametrize("url", ["http://example.com/hook", "https://example.com:8443/x"])
def test_check_scheme_accepts_http_and_https(url: str) -> None:
    assert check_scheme(url).host == "example.com"


class Canary:
    """A loopback listener that counts connections and answers each with 200."""

    def __init__(self) -> None:
        self.connections = 0
        self.server: asyncio.Server | None = None
        self.port = 0

    async def __aenter__(self) -> Canary:
        self.server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self.server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
            await writer.wait_closed()


async def test_post_refuses_loopback_before_connecting() -> None:
    async with Canary() as canary, httpx.AsyncClient(trust_env=False) as client:
        with pytest.raises(DeliveryError) as caught:
            await webhooks.post(
                client,
                f"http://127.0.0.1:{canary.port}/",
                b"{}",
                {"content-type": "application/json"},
                allow_private=False,
                timeout_seconds=2,
            )
    assert canary.connections == 0
    assert caught.value.retryable is False
    assert "GATEWAY_WEBHOOK_ALLOW_PRIVATE" in str(caught.value)


async def test_canary_does_count_when_private_is_allowed() -> None:
    # The control for the test above: the same call with allow_private=True connects.
    async with Canary() as canary, httpx.AsyncClient(trust_env=False) as client:
        attempt = await webhooks.post(
            client,
            f"http://127.0.0.1:{canary.port}/",
            b"{}",
            {"content-type": "application/json"},
            allow_private=True,
            timeout_seconds=2,
        )
    assert attempt.status_code == 200
    assert canary.connections == 1
