"""The Slack channel's outbound side: post a request, edit it as it progresses and once
decided, remind the people it waits on."""

from __future__ import annotations

import logging
from typing import Any

from aiohttp import ClientError
from fastapi import FastAPI, Request, Response
from slack_bolt.adapter.starlette.async_handler import AsyncSlackRequestHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.web.async_client import AsyncWebClient

from channels.slack import socket_mode
from channels.slack.install import Installations
from channels.slack.listeners import SlackListeners, thread_key
from channels.slack.pacing import Pacer
from channels.slack.render import (
    decided_message,
    escape,
    outcome_line,
    posted_message,
    progress_message,
    reminder_line,
)
from channels.slack.settings import SlackSettings
from gateway.errors import ChannelNotConfigured, DeliveryError
from gateway.lifecycle import Status
from gateway.seam import (
    ChannelContext,
    ChannelName,
    Connection,
    Link,
    RequestView,
    Sent,
    Target,
    require_up,
)

log = logging.getLogger(__name__)

# Slack errors worth another try; everything else (channel_not_found, not_in_channel,
# invalid_auth, ...) will fail the same way again.
_RETRYABLE = {
    "ratelimited",
    "internal_error",
    "fatal_error",
    "service_unavailable",
    "request_timeout",
}


def as_delivery_error(error: Exception) -> DeliveryError:
    """Slack's errors, mapped once onto the gateway's tree (retryable or not)."""
    if isinstance(error, SlackApiError):
        status = error.response.status_code
        code = str(error.response.get("error", "unknown_error"))
        retry_after = error.response.headers.get("Retry-After") or error.response.headers.get(
            "retry-after"
        )
        retryable = status == 429 or status >= 500 or code in _RETRYABLE
        seconds = float(retry_after) if retry_after else None
        return DeliveryError(
            f"slack {code} (HTTP {status})", retryable=retryable, retry_after=seconds
        )
    return DeliveryError(f"slack unreachable: {type(error).__name__}: {error}", retryable=True)


OUTCOME_EVENT = "gateway_outcome"  # message metadata that marks the gateway's thread note


def outcome_metadata(request: RequestView) -> dict[str, Any]:
    payload = {"rid": request.rid, "status": request.status}
    return {"event_type": OUTCOME_EVENT, "event_payload": payload}


REMINDER_EVENT = "gateway_reminder"  # message metadata that marks a reminder in the thread
NOTE_EVENT = "gateway_note"  # and a note (a standing grant's uses)


def reminder_metadata(request: RequestView, number: int = 1) -> dict[str, Any]:
    return {"event_type": REMINDER_EVENT, "event_payload": {"rid": request.rid, "number": number}}


async def _in_thread(client: AsyncWebClient, ref: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether the thread already holds a message with this metadata (an earlier attempt
    posted it)."""
    try:
        thread = await client.conversations_replies(
            channel=ref["channel"], ts=ref["ts"], include_all_metadata=True, limit=200
        )
    except SlackApiError as error:  # e.g. a BYO app without *:history: post rather than skip
        log.warning("slack: cannot read the thread to find an earlier note: %s", error)
        return False
    return any(message.get("metadata") == wanted for message in thread.get("messages") or [])


def _paced_as(target: Target) -> str:
    """The Slack channel a post to `target` goes to, as the pacer counts it."""
    return str(target.address.get("channel") or "")


class SlackChannel:
    name = ChannelName.SLACK

    def __init__(
        self,
        context: ChannelContext,
        settings: SlackSettings | None = None,
        *,
        pacer: Pacer | None = None,
    ) -> None:
        self.settings = settings or SlackSettings()
        self.pacer = pacer or Pacer()
        self._clients: dict[str, AsyncWebClient] = {}
        self.installations = (
            Installations(self.settings, context.records) if self.installable else None
        )
        self.listeners = SlackListeners(context.answers)  # clicks, modals, thread replies
        # Bolt takes Slack's callbacks: over HTTP (`mount`), or over Socket Mode (`connection`).
        self._bolt = self._callbacks()
        self.connection: Connection | None = None
        if self._bolt is not None and self.settings.app_token is not None:
            self.connection = context.supervise(self.name, self._socket_session)

    @property
    def installable(self) -> bool:
        return bool(self.settings.client_id and self.settings.client_secret)

    def missing_settings(self) -> list[str]:
        return [] if self.settings.bot_token or self.installable else ["SLACK_BOT_TOKEN"]

    async def start(self) -> None:
        if self.connection is not None:
            self.connection.start()

    async def _socket_session(self, link: Link) -> None:
        """Socket Mode: Slack's events arrive over a WebSocket, no public URL needed."""
        assert self._bolt is not None and self.settings.app_token is not None
        token = self.settings.app_token.get_secret_value()
        try:
            handler = await socket_mode.connect(
                self._bolt, token, self.settings.api_url, within=None
            )
        except (SlackApiError, ClientError) as error:
            raise as_delivery_error(error) from None
        try:
            link.up()
            await socket_mode.watch(handler, link.up, link.down)
        finally:
            await socket_mode.disconnect(handler)

    async def _token(self, request: RequestView, target: Target | None) -> str:
        """The request's own bot token (HumanLayer's BYO app), else its workspace's
        installation, else the only installation, else SLACK_BOT_TOKEN."""
        token = request.secrets.get("slack_bot_token")
        if token is None and self.installations is not None:
            team_id = target.address.get("team_id") if target is not None else None
            token = await self.installations.bot_token(team_id)
        if token is None and self.settings.bot_token is not None:
            token = self.settings.bot_token.get_secret_value()
        if token is None:
            raise ChannelNotConfigured(
                "no Slack token for this request: install the app in its workspace "
                "(/slack/install) or set SLACK_BOT_TOKEN"
            )
        return token

    async def client(self, request: RequestView, target: Target | None = None) -> AsyncWebClient:
        token = await self._token(request, target)
        if token not in self._clients:
            # No 429/5xx retry handlers here: the outbox retries, honouring Retry-After.
            self._clients[token] = AsyncWebClient(
                token=token,
                base_url=self.settings.api_url,
                timeout=10,
                retry_handlers=[AsyncConnectionErrorRetryHandler()],
            )
        return self._clients[token]

    def wait_before(self, target: Target, /) -> float:
        return self.pacer.wait(_paced_as(target))

    def later_slot(self, target: Target, /) -> float:
        return self.pacer.later(_paced_as(target))

    async def send(self, request: RequestView, target: Target, /) -> Sent:
        channel = _paced_as(target)
        message = posted_message(request, target.responders)
        extra: dict[str, Any] = {}
        if target.address.get("thread_ts"):
            extra["thread_ts"] = target.address["thread_ts"]
        require_up(self.name, self.connection)  # in Socket Mode, clicks need the socket
        await self.pacer.wait_turn(channel)
        try:
            client = await self.client(request, target)
            posted = await client.chat_postMessage(
                channel=channel, unfurl_links=False, unfurl_media=False, **message, **extra
            )
        except (SlackApiError, ClientError, TimeoutError) as error:
            raise as_delivery_error(error) from None
        ts, where = str(posted["ts"]), str(posted["channel"])
        # chat.update needs the channel id Slack answered with (a DM's D…, not the user's U…).
        return Sent(
            ref={"channel": where, "ts": ts},
            reply_key=thread_key(where, ts),
            status_fields={"slack_message_ts": ts},
        )

    async def update(self, request: RequestView, target: Target, ref: dict[str, Any], /) -> None:
        """Edit the post to show the outcome, and note it once in the thread: a retried update
        edits to the same state and finds the note it posted before. A pending request (an
        approval policy still counting) keeps its buttons and shows its progress, unnoted."""
        pending = request.status == Status.PENDING
        if pending:
            message = progress_message(request, target.responders)
        else:
            message = decided_message(request)
        require_up(self.name, self.connection)
        try:
            client = await self.client(request, target)
            await client.chat_update(channel=ref["channel"], ts=ref["ts"], **message)
            if not pending and not await _in_thread(client, ref, outcome_metadata(request)):
                await client.chat_postMessage(
                    channel=ref["channel"],
                    thread_ts=ref["ts"],
                    text=outcome_line(request),
                    metadata=outcome_metadata(request),
                )
        except (SlackApiError, ClientError, TimeoutError) as error:
            raise as_delivery_error(error) from None

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
        """Reply in the post's thread, mentioning the people the request still waits on;
        a retried reminder finds the one it posted before."""
        line = reminder_line(request, mention)
        await self._post_in_thread(request, target, ref, line, reminder_metadata(request, number))

    async def note(
        self, request: RequestView, target: Target, ref: dict[str, Any], text: str, /, *, key: str
    ) -> None:
        """A note in the post's thread (a standing grant's uses); a retry finds it."""
        metadata = {"event_type": NOTE_EVENT, "event_payload": {"rid": request.rid, "key": key}}
        await self._post_in_thread(request, target, ref, escape(text), metadata)

    async def _post_in_thread(
        self,
        request: RequestView,
        target: Target,
        ref: dict[str, Any],
        text: str,
        metadata: dict[str, Any],
    ) -> None:
        """Post `text` in the post's thread once: a message with this metadata there already
        is an earlier attempt's."""
        require_up(self.name, self.connection)
        await self.pacer.wait_turn(ref["channel"])
        try:
            client = await self.client(request, target)
            if await _in_thread(client, ref, metadata):
                return
            await client.chat_postMessage(
                channel=ref["channel"], thread_ts=ref["ts"], text=text, metadata=metadata
            )
        except (SlackApiError, ClientError, TimeoutError) as error:
            raise as_delivery_error(error) from None

    async def check(self) -> str:
        """auth.test with the configured bot token."""
        if self.settings.bot_token is None:
            raise ChannelNotConfigured("slack is not configured: set SLACK_BOT_TOKEN")
        client = AsyncWebClient(
            token=self.settings.bot_token.get_secret_value(),
            base_url=self.settings.api_url,
            timeout=10,
        )
        try:
            auth = await client.auth_test()
        except (SlackApiError, ClientError, TimeoutError) as error:
            raise as_delivery_error(error) from None
        return f"signed in as {auth.get('user')} ({auth.get('user_id')}) in {auth.get('team')}"

    def _callbacks(self) -> AsyncApp | None:
        """Bolt with the gateway's listeners, or None until the settings allow callbacks."""
        if self.settings.signing_secret is None or not (
            self.settings.bot_token or self.installable
        ):
            return None
        signing_secret = self.settings.signing_secret.get_secret_value()
        if self.installations is not None:
            bolt = AsyncApp(
                signing_secret=signing_secret,
                client=AsyncWebClient(base_url=self.settings.api_url),
                oauth_settings=self.installations.oauth_settings(),
            )
        else:
            assert self.settings.bot_token is not None
            token = self.settings.bot_token.get_secret_value()
            bolt = AsyncApp(
                signing_secret=signing_secret,
                client=AsyncWebClient(token=token, base_url=self.settings.api_url),
            )
        self.listeners.register(bolt)
        return bolt

    def mount(self, app: FastAPI, /) -> None:
        """Serve Slack's callbacks at /slack/events (alias /slack/interactions) via Bolt, and
        with SLACK_CLIENT_ID/SECRET the "Add to Slack" pages /slack/install and
        /slack/oauth_redirect."""
        if self._bolt is None:
            settings = self.settings
            # Half a configuration is a mistake worth a warning; none is a choice.
            partly = any((settings.bot_token, settings.signing_secret, settings.client_id))
            log.log(
                logging.WARNING if partly else logging.DEBUG,
                "slack callbacks are off: set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN "
                "(or SLACK_CLIENT_ID and SLACK_CLIENT_SECRET)",
            )
            return
        handler = AsyncSlackRequestHandler(self._bolt)

        async def callbacks(request: Request) -> Response:
            return await handler.handle(request)

        for path in ("/slack/events", "/slack/interactions"):
            app.add_api_route(path, callbacks, methods=["POST"], include_in_schema=False)
        if self.installable:
            for path in ("/slack/install", "/slack/oauth_redirect"):
                app.add_api_route(path, callbacks, methods=["GET"], include_in_schema=False)

    async def aclose(self) -> None:
        if self.connection is not None:
            await self.connection.aclose()
        self._clients.clear()
