"""The Teams app package for `gateway teams manifest`: a zip of manifest.json and its two icons,
to upload in Teams (Apps → Manage your apps → Upload an app) or the Teams admin center
(learn.microsoft.com/microsoftteams/platform/resources/schema/manifest-schema)."""

from __future__ import annotations

import json
import math
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from gateway.errors import ChannelNotConfigured

SCHEMA = "https://developer.microsoft.com/en-us/json-schemas/teams/v1.19/MicrosoftTeams.schema.json"
ACCENT = (0x4F, 0x6B, 0xED)
COLOR_SIZE, OUTLINE_SIZE = 192, 32  # the icons Teams asks for, in pixels
DESCRIPTION = (
    "Your AI agents ask before they act. Approve, reject with a reason, or answer their "
    "questions from an Adaptive Card in a channel or in a chat with the bot; the agent gets "
    "the decision at once."
)

Pixel = tuple[int, int, int, int]


def manifest(app_id: str, public_url: str, *, name: str = "HITL Gateway") -> dict[str, Any]:
    """manifest.json: one bot (the Azure Bot's app id) in personal chats, teams and group
    chats. The messaging endpoint is the Azure Bot's setting, not the manifest's."""
    base = public_url.rstrip("/")
    host = urlsplit(base).hostname
    if not host or not base.startswith("https://"):
        raise ChannelNotConfigured(f"--public-url must be an https URL, not {public_url!r}")
    return {
        "$schema": SCHEMA,
        "manifestVersion": "1.19",
        "version": "1.0.0",
        "id": app_id,
        "developer": {
            "name": name,
            "websiteUrl": base,
            "privacyUrl": base,
            "termsOfUseUrl": base,
        },
        "name": {"short": name[:30], "full": f"{name}: approvals for AI agents"[:100]},
        "description": {"short": "Approve what your AI agents ask, in Teams", "full": DESCRIPTION},
        "icons": {"color": "color.png", "outline": "outline.png"},
        "accentColor": "#{:02X}{:02X}{:02X}".format(*ACCENT),
        "bots": [
            {
                "botId": app_id,
                "scopes": ["personal", "team", "groupChat"],
                "isNotificationOnly": False,
                "supportsFiles": False,
            }
        ],
        "permissions": ["identity", "messageTeamMembers"],
        "validDomains": [host],
    }


def write_package(
    path: Path, app_id: str | None, public_url: str, *, name: str = "HITL Gateway"
) -> Path:
    """Write the zip Teams takes: manifest.json, color.png (192 px), outline.png (32 px,
    white on transparent)."""
    if not app_id:
        raise ChannelNotConfigured("set TEAMS_APP_ID (the Azure Bot's Microsoft App ID) first")
    document = json.dumps(manifest(app_id, public_url, name=name), indent=2)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as package:
        package.writestr("manifest.json", document)
        package.writestr("color.png", png(COLOR_SIZE, _check((*ACCENT, 255), COLOR_SIZE)))
        package.writestr("outline.png", png(OUTLINE_SIZE, _check((0, 0, 0, 0), OUTLINE_SIZE)))
    return path


def _check(background: Pixel, size: int) -> Callable[[int, int], Pixel]:
    """A white check mark on `background`."""
    white = (255, 255, 255, 255)
    stroke = [((0.27, 0.52), (0.43, 0.68)), ((0.43, 0.68), (0.74, 0.35))]

    def pixel(x: int, y: int) -> Pixel:
        point = ((x + 0.5) / size, (y + 0.5) / size)
        near = min(_distance(point, a, b) for a, b in stroke)
        return white if near < 0.06 else background

    return pixel


def _distance(p: tuple[float, float], a: tuple[float, float], b: tuple[float, float]) -> float:
    """From point `p` to the segment a-b."""
    dx, dy = b[0] - a[0], b[1] - a[1]
    t = max(0.0, min(1.0, ((p[0] - a[0]) * dx + (p[1] - a[1]) * dy) / (dx * dx + dy * dy)))
    return math.dist(p, (a[0] + t * dx, a[1] + t * dy))


def png(size: int, pixel: Callable[[int, int], Pixel]) -> bytes:
    """A square RGBA PNG, `pixel(x, y)` giving each pixel."""
    rows = (
        b"\x00" + bytes(value for x in range(size) for value in pixel(x, y)) for y in range(size)
    )
    header = struct.pack(">IIBBBBB", size, size, 8, 6, 0, 0, 0)  # 8-bit RGBA
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", header)
        + _chunk(b"IDAT", zlib.compress(b"".join(rows)))
        + _chunk(b"IEND", b"")
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data) & 0xFFFFFFFF
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)
