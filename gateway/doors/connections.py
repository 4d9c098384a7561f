"""`ChannelContext.supervise`: a channel's session under the gateway's supervisor, with the
gateway's timeouts, and the deliveries that waited for it sent on each (re)connect."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from gateway.core import Core
from gateway.runtime.retry import RetryPolicy
from gateway.runtime.supervisor import Supervisor
from gateway.seam.connections import Session
from gateway.settings import Settings
from gateway.store import outbox as outbox_store

Resume = Callable[[], Coroutine[Any, Any, None]]


def supervisor(core: Core, name: str, session: Session, *, singleton: bool = True) -> Supervisor:
    async def resume() -> None:
        await core.db.write(outbox_store.resume_waiting, name)

    return detached_supervisor(
        core.settings, name, session, on_connected=resume, singleton=singleton
    )


def detached_supervisor(
    settings: Settings,
    name: str,
    session: Session,
    *,
    on_connected: Resume | None = None,
    singleton: bool = True,
) -> Supervisor:
    """A supervisor with the gateway's timeouts (`on_connected`: what to do on each connect)."""
    return Supervisor(
        name,
        session,
        connect_timeout=settings.channel_connect_timeout_seconds,
        policy=RetryPolicy(base=0.5, cap=settings.channel_retry_cap_seconds, jitter=0.2),
        on_connected=on_connected,
        singleton=singleton,
    )
