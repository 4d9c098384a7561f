"""The Microsoft Teams channel: post a request as an Adaptive Card to a team's channel or to a
person's 1:1 chat, update the card for everyone as it progresses and once decided, remind
and note under it, and take clicks at `POST /teams/messages` (`inbound.py`).

Teams keeps no connection open: every replica serves /teams/messages. What the channel
supervises is its token for the Bot Connector (`_session`): fetched at start and renewed
before it expires, so the Channels page and `gateway check` say when the login service or the
app's credentials fail, and posts wait (and go out once a token comes) meanwhile.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from typing import Any
from urllib.parse import urlsplit

from fastapi import FastAPI
from microsoft_agents.activity import (
    ChannelAccount,
    ConversationAccount,
    ConversationReference,
)

from channels.teams.activities import post_key
from channels.teams.auth import BotFrameworkAuth, KeysUnavailable
from channels.teams.connector import Connector, Gone, card_activity
from channels.teams.conversations import Conversations
from channels.teams.inbound import TeamsInbound
from channels.teams.render import (
    Card,
    as_it_stands,
    note_card,
    posted_card,
    reminder_card,
    summary,
)
from channels.teams.settings import TeamsSettings
from channels.teams.tokens import ConnectorTokens
from gateway.errors import ChannelNotConfigured, DeliveryError
from gateway.seam import (
    ChannelContext,
    ChannelName,
    Connection,
    Link,
    RequestView,
    Sent,
    Target,
    reminder_text,
    require_up,
)

log = logging.getLogger(__name__)

# Records that make a retried send, edit, reminder or note do nothing more: kept a week,
# far longer than any retry of the outbox.
SENT, EDITED, POSTED = "sent", "edited", "posted"
ONCE_SECONDS = 7 * 24 * 3600


def once_key(*parts: Any) -> str:
    """A record key for one effect (conversation ids are long; keys are at most 255)."""
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()


def sent(ref: dict[str, str]) -> Sent:
    return Sent(ref=ref, reply_key=post_key(ref["conversation_id"], ref["activity_id"]))


class TeamsChannel:
    name = ChannelName.TEAMS

    def __init__(self, context: ChannelContext, settings: TeamsSettings | None = None) -> None:
        self.settings = settings or TeamsSettings()
        self.records = context.records
        self.tokens = ConnectorTokens(self.settings)
        self.connector = Connector(self.settings, self.tokens)
        self.auth = BotFrameworkAuth(self.settings)
        self.conversations = Conversations(context.records)
        self.inbound = TeamsInbound(
            self.settings, self.auth, context.answers, self.conversations, self.connector
        )
        self.connection: Connection | None = None
        if not self.missing_settings():
            # A token, not a connection: every replica holds its own and sends with it.
            self.connection = context.supervise(self.name, self._session, singleton=False)

    def missing_settings(self) -> list[str]:
        settings = self.settings
        missing = [] if settings.app_id else ["TEAMS_APP_ID"]
        if not settings.tenant_id:
            missing.append("TEAMS_TENANT_ID")
        if settings.app_password is None and not settings.certificate_file:
            missing.append("TEAMS_APP_PASSWORD (or TEAMS_CERTIFICATE_FILE)")
        return missing

    async def start(self) -> None:
        if self.connection is not None:
            self.connection.start()

    async def _session(self, link: Link) -> None:
        """Hold a valid token for the Bot Connector: renewed before it expires; a failure
        ends the session, and the supervisor tries again with backoff."""
        while True:
            token = await self.tokens.renew()
            link.up()
            await asyncio.sleep(max(token.renew_in(), 1.0))  # even for an odd, short token

    # --- outbound

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        """Post the request's card; a send retried after it posted finds the post it made."""
        require_up(self.name, self.connection)
        key = once_key(request.rid, target.address)
        done = await self.records.get(SENT, key)
        if done is not None:
            return sent(json.loads(done))
        service_url, conversation_id = await self._destination(target)
        activity = card_activity(posted_card(request), summary(request))
        activity_id = await self.connector.send(service_url, conversation_id, activity)
        ref = {
            "service_url": service_url,
            "conversation_id": conversation_id,
            "activity_id": activity_id,
        }
        await self.records.put(SENT, key, json.dumps(ref), ttl=ONCE_SECONDS)
        return sent(ref)

    async def _destination(self, target: Target) -> tuple[str, str]:
        """(service URL, conversation id) of a team's channel or of a person's 1:1 chat."""
        channel = target.address.get("conversation_id")
        if channel:
            stored = await self.conversations.service_url(self.settings.tenant_id)
            return stored or self.settings.service_url, str(channel)
        aad = str(target.address.get("user_id") or "")
        reference = await self.conversations.person(aad)
        if reference is not None:
            return str(reference.service_url), str(reference.conversation.id)
        return await self._open_personal(aad)

    async def _open_personal(self, aad: str) -> tuple[str, str]:
        """No 1:1 chat is known: ask Teams to open one (it can once the app is installed
        for the person). If it cannot, the delivery fails with the reason and the outbox
        tries again later: the person may install the app meanwhile."""
        tenant = str(self.settings.tenant_id)
        service_url = await self.conversations.service_url(tenant) or self.settings.service_url
        self.connector.checked(service_url)  # a refused service URL is no reason to retry
        try:
            conversation_id = await self.connector.open_personal(service_url, aad, tenant)
        except DeliveryError as error:
            raise DeliveryError(
                f"teams: no 1:1 chat with {aad} yet, and Teams would not open one ({error}); "
                "they must install the app (or message the bot) first",
                retryable=True,
                retry_after=error.retry_after,
            ) from None
        reference = ConversationReference(
            conversation=ConversationAccount(
                id=conversation_id, conversation_type="personal", tenant_id=tenant
            ),
            user=ChannelAccount(aad_object_id=aad),
            agent=ChannelAccount(id=f"28:{self.settings.app_id}"),
            service_url=service_url,
            channel_id="msteams",
        )
        await self.conversations.save(aad, reference)
        return service_url, conversation_id

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """Replace the card for everyone with the request as it stands; an update retried
        after it was made (the same card) edits nothing more."""
        require_up(self.name, self.connection)
        card = as_it_stands(request)
        digest = once_key(card)
        key = once_key(ref["conversation_id"], ref["activity_id"])
        if await self.records.get(EDITED, key) == digest:
            return
        activity = card_activity(card, summary(request))
        activity.id = ref["activity_id"]
        try:
            await self.connector.update(
                ref["service_url"], ref["conversation_id"], ref["activity_id"], activity
            )
        except Gone:
            log.info("teams: message %s was deleted; nothing to update", ref["activity_id"])
            return
        await self.records.put(EDITED, key, digest, ttl=ONCE_SECONDS)

    async def remind(
        self,
        request: RequestView,
        target: Target,
        ref: dict[str, Any],
        mention: list[str],
        /,
        *,
        number: int = 1,
    ) -> None:
        """Reply under the post, mentioning only the people it still waits on (AAD ids)."""
        people = [(aad, await self.conversations.name(aad) or "") for aad in mention]
        card = reminder_card(request, people)
        key = once_key(request.rid, ref, number)
        await self._post_under(ref, card, reminder_text(request), key)

    async def note(
        self, request: RequestView, target: Target, ref: dict[str, Any], text: str, /, *, key: str
    ) -> None:
        """A note under the post (a standing grant's uses), mentioning nobody."""
        await self._post_under(ref, note_card(text), text, once_key(request.rid, ref, key))

    async def _post_under(self, ref: dict[str, Any], card: Card, text: str, key: str) -> None:
        require_up(self.name, self.connection)
        if await self.records.get(POSTED, key) is not None:
            return  # an earlier attempt posted it
        activity = card_activity(card, text[:200])
        try:
            await self.connector.reply(
                ref["service_url"], ref["conversation_id"], ref["activity_id"], activity
            )
        except Gone:
            log.info("teams: conversation %s is gone; no reply", ref["conversation_id"])
            return
        await self.records.put(POSTED, key, "1", ttl=ONCE_SECONDS)

    # --- supervision and routes

    async def check(self) -> str:
        """A fresh token from the token endpoint, and the keys inbound tokens are checked
        with, as `gateway check` does for every channel."""
        missing = self.missing_settings()
        if missing:
            raise ChannelNotConfigured(f"teams is not configured: set {', '.join(missing)}")
        token = await self.tokens.renew()
        try:
            keys = await self.auth.refresh()
        except KeysUnavailable as error:
            raise DeliveryError(str(error), retryable=True) from None
        minutes = round(token.valid_for() / 60)
        login = urlsplit(self.settings.token_endpoint).hostname
        metadata = urlsplit(self.settings.openid_metadata_url).hostname
        return (
            f"token for app {self.settings.app_id} from {login} (valid {minutes} min); "
            f"{keys} signing keys from {metadata}"
        )

    def mount(self, app: FastAPI, /) -> None:
        """Serve the Bot Connector's activities at /teams/messages (the Azure Bot's
        messaging endpoint), on every replica."""
        if self.missing_settings():
            partly = any((self.settings.app_id, self.settings.app_password))
            log.log(
                logging.WARNING if partly else logging.DEBUG,
                "teams is off: set %s",
                ", ".join(self.missing_settings()),
            )
            return
        app.add_api_route(
            "/teams/messages", self.inbound.handle, methods=["POST"], include_in_schema=False
        )

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
        await self.connector.aclose()
        await self.tokens.aclose()
        await self.auth.aclose()
