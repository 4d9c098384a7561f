"""Refuse webhook URLs that reach loopback, private, link-local or otherwise non-public
addresses, including IPv4 hidden inside IPv6 (mapped, 6to4, NAT64, Teredo)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from dataclasses import dataclass

import httpx

from gateway.errors import DeliveryError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def embedded_ipv4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if ip.teredo is not None:
        return ip.teredo[1]
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return None


def is_public(ip: IPAddress) -> bool:
    # Python 3.11 calls 64:ff9b::7f00:1 global although it embeds 127.0.0.1.
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_ipv4(ip)
        if inner is not None:
            return is_public(inner)
    return ip.is_global and not ip.is_multicast and not ip.is_reserved


@dataclass(frozen=True)
class PinnedURL:
    """Where to connect (an IP checked to be public) and the name to present."""

    url: httpx.URL
    host: str


def check_scheme(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise DeliveryError(f"invalid URL {url!r}: {error}", retryable=False) from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise DeliveryError(f"webhook URL must be http(s)://host/..., got {url!r}", retryable=False)
    return parsed


async def pin_public(url: str) -> PinnedURL:
    """Resolve once and check every address, then connect to that IP (no DNS rebinding)."""
    parsed = check_scheme(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(
            parsed.host, port, type=socket.SOCK_STREAM
        )
    except OSError as error:
        raise DeliveryError(f"cannot resolve {parsed.host}: {error}", retryable=True) from None
    addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    for ip in addresses:
        if not is_public(ip):
            raise DeliveryError(
                f"{parsed.host} resolves to {ip}, which is not a public address; "
                "set GATEWAY_WEBHOOK_ALLOW_PRIVATE=true to allow it",
                retryable=False,
            )
    ip = addresses[0]
    ip_host = f"[{ip}]" if ip.version == 6 else str(ip)
    return PinnedURL(url=parsed.copy_with(host=ip_host.strip("[]")), host=parsed.host)
