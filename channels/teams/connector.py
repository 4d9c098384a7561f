"""The Bot Connector's REST API (learn.microsoft.com/azure/bot-service/rest-api/
bot-framework-rest-connector-api-reference), through the Agents SDK's `ConnectorClient`.

The app's token goes only to a service URL under `TEAMS_ALLOWED_SERVICE_URLS`: a service URL
comes from an activity (or a stored reference made from one), and a forged one would
otherwise collect the token. Errors are mapped once onto the gateway's tree.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import aiohttp
from microsoft_agents.activity import (
    Activity,
    Attachment,
    ChannelAccount,
    ConversationParameters,
)
from microsoft_agents.hosting.core.connector.client import ConnectorClient

from channels.teams.render import ADAPTIVE, Card
from channels.teams.settings import TeamsSettings
from channels.teams.tokens import ConnectorTokens
from gateway.errors import DeliveryError

TIMEOUT_SECONDS = 10
_HEADERS = {"Accept": "application/json", "Content-Type": "application/json"}
_ERRORS = (aiohttp.ClientError, TimeoutError)


def card_activity(card: Card, text: str) -> Activity:
    """A message holding one card; `text` is the plain notification text, never rendered."""
    attachment = Attachment(content_type=ADAPTIVE, content=card)
    return Activity(type="message", summary=text, attachments=[attachment])


class Gone(Exception):
    """The post (or its conversation) no longer exists: 404 from the connector."""


def as_delivery_error(error: BaseException) -> DeliveryError:
    """aiohttp's errors (the SDK raises them), mapped once (retryable or not)."""
    if isinstance(error, aiohttp.ClientResponseError):
        retry_after = error.headers.get("Retry-After") if error.headers else None
        seconds = float(retry_after) if retry_after and retry_after.isdigit() else None
        retryable = error.status == 429 or error.status >= 500
        text = f"teams connector: HTTP {error.status} {error.message}".rstrip()
        return DeliveryError(text, retryable=retryable, retry_after=seconds)
    return DeliveryError(f"teams unreachable: {type(error).__name__}: {error}", retryable=True)


class Connector:
    def __init__(self, settings: TeamsSettings, tokens: ConnectorTokens) -> None:
        self.settings = settings
        self.tokens = tokens
        self._sessions: dict[str, aiohttp.ClientSession] = {}  # one per service URL

    def checked(self, service_url: str) -> str:
        """The service URL, if the app's token may go there; refused otherwise."""
        if not self.settings.allows(service_url):
            raise DeliveryError(
                f"teams: the service URL {service_url!r} is not under "
                "TEAMS_ALLOWED_SERVICE_URLS; nothing is sent there",
                retryable=False,
            )
        return service_url if service_url.endswith("/") else service_url + "/"

    async def _client(self, service_url: str) -> ConnectorClient:
        url = self.checked(service_url)
        token = await self.tokens.token()
        session = self._sessions.get(url)
        if session is None or session.closed:
            timeout = aiohttp.ClientTimeout(total=TIMEOUT_SECONDS)
            session = aiohttp.ClientSession(base_url=url, headers=_HEADERS, timeout=timeout)
            self._sessions[url] = session
        return ConnectorClient(url, token, session=session)  # it sets the bearer token

    async def send(self, service_url: str, conversation_id: str, activity: Activity) -> str:
        """Post a new message (in a channel, a new thread); returns its activity id."""
        client = await self._client(service_url)
        try:
            sent = await client.conversations.send_to_conversation(conversation_id, activity)
        except _ERRORS as error:
            raise as_delivery_error(error) from None
        return str(sent.id)

    async def reply(
        self, service_url: str, conversation_id: str, activity_id: str, activity: Activity
    ) -> None:
        """Post under a message: in its thread in a channel, in the chat in a 1:1."""
        client = await self._client(service_url)
        posting = client.conversations.reply_to_activity(conversation_id, activity_id, activity)
        await _on_a_post(posting, conversation_id)

    async def update(
        self, service_url: str, conversation_id: str, activity_id: str, activity: Activity
    ) -> None:
        """Replace a message the bot posted, for everyone who sees it."""
        client = await self._client(service_url)
        updating = client.conversations.update_activity(conversation_id, activity_id, activity)
        await _on_a_post(updating, activity_id)

    async def open_personal(self, service_url: str, aad: str, tenant: str) -> str:
        """Open (or find) the bot's 1:1 chat with a person by their AAD object id; Teams
        allows it once the app is installed for them. Returns the conversation id."""
        client = await self._client(service_url)
        parameters = ConversationParameters(
            is_group=False,
            agent=ChannelAccount(id=f"28:{self.settings.app_id}"),
            members=[ChannelAccount(id=aad)],
            tenant_id=tenant,
            channel_data={"tenant": {"id": tenant}},
        )
        try:
            opened = await client.conversations.create_conversation(parameters)
        except _ERRORS as error:
            raise as_delivery_error(error) from None
        return str(opened.id)

    async def aclose(self) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()


async def _on_a_post(call: Awaitable[Any], what: str) -> None:
    """A call about a post that may be gone (404: `Gone`); other failures mapped once."""
    try:
        await call
    except aiohttp.ClientResponseError as error:
        if error.status == 404:
            raise Gone(what) from None
        raise as_delivery_error(error) from None
    except _ERRORS as error:
        raise as_delivery_error(error) from None
