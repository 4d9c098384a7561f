"""Stand-ins for platform channels this version does not ship yet.

They tell the operator which setting is missing, or that the channel is not built, so a
request routed there is still recorded, pending and answerable from the API and CLI.
"""

from __future__ import annotations

import os
from typing import Any

from dotenv import dotenv_values

from gateway.errors import ChannelNotConfigured
from gateway.routing import Target
from gateway.views import RequestView, Sent


class NotYetAvailable:
    def __init__(self, name: str, required: list[str]) -> None:
        self.name = name
        self._required = required

    def missing_settings(self) -> list[str]:
        values = dotenv_values(".env") | os.environ  # the same sources the settings read
        return [setting for setting in self._required if not values.get(setting)]

    async def start(self) -> None:
        return None

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        raise ChannelNotConfigured(f"the {self.name} channel is not available in this version")

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        return None

    async def aclose(self) -> None:
        return None
