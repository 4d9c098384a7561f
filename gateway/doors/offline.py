"""A context for a channel built outside a running gateway (`gateway check`, `gateway
discord invite-url`): it may log in to its platform, and nothing else. Every door that would
need the gateway's database says so."""

from __future__ import annotations

from typing import Any, NoReturn

from gateway.doors.connections import detached_supervisor
from gateway.doors.keys import Signer
from gateway.errors import ChannelNotConfigured
from gateway.seam.context import ChannelContext, Keys
from gateway.security.crypto import SecretBox
from gateway.settings import Settings
from gateway.vocabulary import ChannelName


class _Nothing:
    """Any door a channel calls outside `gateway serve`: each call says what is missing."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        def refuse(*_args: Any, **_kwargs: Any) -> NoReturn:
            raise ChannelNotConfigured(
                f"{self._name}.{attribute} needs the running gateway (`gateway serve`)"
            )

        return refuse


class OfflineKeys(Signer):
    """Keys from GATEWAY_SECRET_KEY (checked when first used); no request links."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings

    def subkey(self, purpose: str) -> bytes:
        return SecretBox.from_settings(self.settings).subkey(purpose)

    def link(self, rid: str, email: str | None = None) -> str | None:
        return None

    def link_email(self, rid: str, token: str) -> str:
        raise ChannelNotConfigured("request links need the running gateway (`gateway serve`)")


def offline_context(settings: Settings, name: ChannelName) -> ChannelContext:
    keys: Keys = OfflineKeys(settings)
    return ChannelContext(
        name=name,
        answers=_Nothing("answers"),
        records=_Nothing("records"),
        keys=keys,
        supervise=lambda connection, session, singleton=True: detached_supervisor(
            settings, connection, session, singleton=singleton
        ),
        console=_Nothing("console"),
    )
