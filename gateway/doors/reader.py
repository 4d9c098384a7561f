"""How channels read requests: views, never store rows (the one reader they use)."""

from __future__ import annotations

import json

from gateway.core import Core
from gateway.seam.views import RequestView
from gateway.store import requests as request_store
from gateway.vocabulary import ChannelName


async def view(core: Core, rid: str) -> RequestView | None:
    """The request as channels see it, or None when there is no such request."""
    row, project = await core.db.read(request_store.get_with_project, rid)
    if row is None or project is None:
        return None
    return core.view(row, project)


async def find_by_slack_message(core: Core, channel: str, ts: str) -> str | None:
    """The rid of the request whose Slack message (`channel`, `ts`) starts a thread."""
    rows, deliveries = await core.db.read(request_store.thread_candidates, ts)
    ours = {
        delivery.rid
        for delivery in deliveries
        if delivery.channel == ChannelName.SLACK
        and json.loads(delivery.ref_json or "{}").get("channel") == channel
    }
    return next((row.rid for row in rows if row.rid in ours), None)
