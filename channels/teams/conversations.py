"""What the channel learns from Teams and keeps (`ChannelContext.records`): each person's 1:1
conversation reference (captured when they install the app or write to the bot), the service
URL each tenant's activities come from, and people's names for mentions."""

from __future__ import annotations

import logging

from microsoft_agents.activity import Activity, ConversationReference

from channels.teams.activities import personal_reference, tenant_of
from gateway.seam import Records

log = logging.getLogger(__name__)

CONVERSATION = "conversation"  # AAD object id -> ConversationReference (JSON)
SERVICE_URL = "service_url"  # tenant id -> the service URL its activities named
NAME = "name"  # AAD object id -> display name


class Conversations:
    def __init__(self, records: Records) -> None:
        self.records = records
        # What was last written, so that each activity writes only what changed.
        self._written: dict[tuple[str, str], str] = {}

    async def remember(self, activity: Activity) -> None:
        """Keep what a (verified) activity says about where and who its sender is."""
        tenant = tenant_of(activity)
        if tenant and activity.service_url:
            await self._put(SERVICE_URL, tenant, str(activity.service_url))
        person = activity.from_property
        if person is not None and person.aad_object_id and person.name:
            await self._put(NAME, str(person.aad_object_id), str(person.name))
        found = personal_reference(activity)
        if found is not None:
            aad, reference = found
            await self.save(aad, reference)

    async def save(self, aad: str, reference: ConversationReference) -> None:
        value = reference.model_dump_json(by_alias=True, exclude_none=True)
        await self._put(CONVERSATION, aad, value)

    async def _put(self, kind: str, key: str, value: str) -> None:
        if self._written.get((kind, key)) == value:
            return
        await self.records.put(kind, key, value)
        self._written[(kind, key)] = value
        if kind == CONVERSATION:
            log.info("teams: kept the 1:1 conversation with %s", key)

    async def person(self, aad: str) -> ConversationReference | None:
        """The 1:1 conversation with this person, if the bot has one."""
        stored = await self.records.get(CONVERSATION, aad)
        if stored is None:
            return None
        return ConversationReference.model_validate_json(stored)

    async def service_url(self, tenant: str | None) -> str | None:
        """The service URL the tenant's activities came from (proactive posts go there)."""
        return await self.records.get(SERVICE_URL, tenant) if tenant else None

    async def name(self, aad: str) -> str | None:
        return await self.records.get(NAME, aad)
