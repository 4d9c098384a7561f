"""The Bot API client (python-telegram-bot's `Bot`), its errors mapped once onto the gateway's
tree, and the bot token kept out of every log line.

The token is part of every Bot API URL (`/bot<token>/sendMessage`), which httpx logs at INFO
and python-telegram-bot at DEBUG: a filter on those loggers blanks it first.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import warnings
from collections.abc import Awaitable
from typing import TypeVar

from telegram import Bot
from telegram.error import (
    BadRequest,
    ChatMigrated,
    Conflict,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
)
from telegram.request import HTTPXRequest
from telegram.warnings import PTBDeprecationWarning

from gateway.errors import DeliveryError

T = TypeVar("T")

TIMEOUT_SECONDS = 10.0  # each Bot API call's connect, read and write
LONG_POLL_SECONDS = 25  # getUpdates waits this long for an update (the read timeout adds it)
NOT_MODIFIED = "message is not modified"  # Telegram's 400 for an edit that changes nothing
GONE = "message to edit not found"  # ... and for a message someone deleted
_TOKEN = re.compile(r"bot\d+:[A-Za-z0-9_-]+")


def hide_token(text: str) -> str:
    return _TOKEN.sub("bot[redacted]", text)


class _HideToken(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(_TOKEN.search(str(a)) for a in record.args):
            record.args = tuple(
                hide_token(str(a)) if _TOKEN.search(str(a)) else a for a in record.args
            )
        if isinstance(record.msg, str) and _TOKEN.search(record.msg):
            record.msg = hide_token(record.msg)
        return True


for _name in ("httpx", "telegram.Bot", "telegram.request.HTTPXRequest"):
    logging.getLogger(_name).addFilter(_HideToken())


def _pool(size: int) -> HTTPXRequest:
    return HTTPXRequest(
        connection_pool_size=size,
        connect_timeout=TIMEOUT_SECONDS,
        read_timeout=TIMEOUT_SECONDS,
        write_timeout=TIMEOUT_SECONDS,
        pool_timeout=TIMEOUT_SECONDS,
    )


class Client:
    """A bot on `api_url`, and its two HTTP connection pools: getUpdates has one of its own,
    so a long poll never holds up a send. Nothing is sent until the bot is used."""

    def __init__(self, token: str, api_url: str) -> None:
        self._pools = (_pool(16), _pool(1))
        self.bot = Bot(
            token,
            base_url=f"{api_url}/bot",
            base_file_url=f"{api_url}/file/bot",
            request=self._pools[0],
            get_updates_request=self._pools[1],
        )

    async def aclose(self) -> None:
        """Close both pools (Bot.shutdown would only after Bot.initialize, a getMe)."""
        for pool in self._pools:
            await pool.shutdown()


def as_delivery_error(error: Exception) -> DeliveryError:
    """python-telegram-bot's errors, mapped once onto the gateway's tree (retryable or not)."""
    text = hide_token(str(error))
    if isinstance(error, RetryAfter):
        seconds = retry_after(error)
        return DeliveryError(
            f"telegram flood control ({seconds:g} s)", retryable=True, retry_after=seconds
        )
    if isinstance(error, InvalidToken):
        return DeliveryError(f"telegram refused the bot token: {text}", retryable=False)
    if isinstance(error, ChatMigrated):  # a group became a supergroup: its id changed
        return DeliveryError(
            f"telegram: the group is now the supergroup {error.new_chat_id}; "
            "update its id in the config file",
            retryable=False,
        )
    if isinstance(error, Forbidden | BadRequest):  # not in the chat, blocked, no such chat
        return DeliveryError(f"telegram refused: {text}", retryable=False)
    if isinstance(error, Conflict):  # another poller, or a webhook is set: it passes
        return DeliveryError(f"telegram conflict: {text}", retryable=True)
    if isinstance(error, NetworkError | TelegramError):
        return DeliveryError(f"telegram unreachable: {text}", retryable=True)
    return DeliveryError(f"telegram: {type(error).__name__}: {text}", retryable=True)


def retry_after(error: RetryAfter) -> float:
    """Seconds to wait, read without python-telegram-bot's deprecation warning for ints."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PTBDeprecationWarning)
        value: int | dt.timedelta = error.retry_after
    return value.total_seconds() if isinstance(value, dt.timedelta) else float(value)


async def call(step: Awaitable[T]) -> T:
    """A Bot API call, its errors as DeliveryError."""
    try:
        return await step
    except (TelegramError, OSError, TimeoutError) as error:
        raise as_delivery_error(error) from None


def not_modified(error: DeliveryError) -> bool:
    """An edit Telegram refused because the message already reads so (an edit retried)."""
    return NOT_MODIFIED in str(error)


def gone(error: DeliveryError) -> bool:
    """An edit Telegram refused because the message was deleted: nothing left to edit."""
    return GONE in str(error)
