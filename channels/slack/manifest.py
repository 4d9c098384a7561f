"""Slack app manifest for "Create an app from a manifest" (api.slack.com/reference/manifests)."""

from __future__ import annotations

from typing import Any

BOT_SCOPES = [
    "chat:write",  # post requests and outcomes
    "chat:write.public",  # post in public channels the bot has not joined
    "im:write",  # open DMs with a person
    "users:read",
    "users:read.email",  # record who decided, with their email
    "channels:history",  # read thread replies in channels
    "groups:history",
    "im:history",
    "mpim:history",
    "app_mentions:read",
]
BOT_EVENTS = ["message.channels", "message.groups", "message.im", "message.mpim", "app_mention"]


def manifest(public_url: str, *, name: str = "HITL Gateway") -> dict[str, Any]:
    base = public_url.rstrip("/")
    return {
        "display_information": {
            "name": name,
            "description": "Approvals and questions from AI agents, answered where you work.",
        },
        "features": {"bot_user": {"display_name": "hitl-gateway", "always_online": True}},
        "oauth_config": {
            "redirect_urls": [f"{base}/slack/oauth_redirect"],
            "scopes": {"bot": BOT_SCOPES},
        },
        "settings": {
            "event_subscriptions": {
                "request_url": f"{base}/slack/events",
                "bot_events": BOT_EVENTS,
            },
            "interactivity": {"is_enabled": True, "request_url": f"{base}/slack/interactions"},
            "org_deploy_enabled": False,
            "socket_mode_enabled": False,
            "token_rotation_enabled": False,
        },
    }
