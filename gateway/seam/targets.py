"""Where a request goes: a channel and an address in that channel's own terms."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from gateway.vocabulary import ChannelName


class Target(BaseModel):
    """One place a request goes: a channel and a channel-specific address (a Slack channel
    id, a Discord channel or user id, an email address with its extra recipients)."""

    channel: ChannelName
    address: dict[str, Any]
    responders: list[str] | None = None  # platform ids or emails allowed to answer
    via: str


def responders_through(route: list[dict[str, Any]], channel: ChannelName) -> set[str] | None:
    """Who may answer through `channel`: the route's responders there, or None for anyone."""
    targets = [t for t in route if t["channel"] == channel]
    if not targets or any(t.get("responders") is None for t in targets):
        return None
    return {responder for t in targets for responder in t["responders"]}
