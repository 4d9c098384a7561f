"""One error tree for the gateway; the HTTP edge maps each to a status code once."""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """Base of every error the gateway raises on purpose."""

    status_code = 400


class NotFound(GatewayError):
    status_code = 404


class Conflict(GatewayError):
    status_code = 409


class NotAllowed(GatewayError):
    """The person is authenticated by the channel but may not answer this request."""

    status_code = 403


class OutOfScope(GatewayError):
    """The API key is valid, but its scope does not cover this operation."""

    status_code = 403


class InvalidInput(GatewayError):
    """Input that passed the schema but breaks a rule (unknown team, bad option name)."""

    status_code = 422


class Unauthorized(GatewayError):
    status_code = 401


class BadToken(GatewayError, ValueError):
    """A signed link, cookie or notice is forged, damaged or expired (the message says which)."""

    status_code = 403


class IllegalTransition(GatewayError):
    """A lifecycle transition that the state machine does not allow."""

    status_code = 409


class DeliveryError(GatewayError):
    """A channel or webhook failed to deliver; `retryable` says whether to try again.

    `fallback` is a target (as JSON) to deliver to instead once this one has failed for good,
    e.g. a team's Discord channel when a person's DMs are closed."""

    def __init__(
        self,
        message: str,
        *,
        retryable: bool,
        retry_after: float | None = None,
        fallback: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after
        self.fallback = fallback


class ChannelNotConfigured(DeliveryError):
    def __init__(self, message: str) -> None:
        super().__init__(message, retryable=False)


class ChannelDown(DeliveryError):
    """The channel's platform connection is not up: the job waits for it without spending
    an attempt, and goes out as soon as the connection is back."""

    def __init__(self, channel: str, health: str) -> None:
        super().__init__(f"{channel} is not connected: {health}", retryable=True)
        self.channel = channel
