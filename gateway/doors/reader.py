"""How channels read requests: views, never store rows (the one reader they use)."""

from __future__ import annotations

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


async def find(core: Core, channel: ChannelName, reply_key: str) -> str | None:
    """The rid of the request whose post through `channel` a reply names (`Sent.reply_key`)."""
    return await core.db.read(request_store.find_by_reply_key, channel, reply_key)
