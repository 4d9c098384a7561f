"""What the core opens to channels: each channel's `ChannelContext` (`gateway.seam.context`),
built by the composition root from the core's doors."""

from __future__ import annotations

from gateway.core import Core
from gateway.doors.answers import AnswerDoor
from gateway.doors.connections import supervisor
from gateway.doors.console import ConsoleDoor
from gateway.doors.keys import KeysDoor
from gateway.doors.offline import offline_context
from gateway.doors.records import RecordsDoor
from gateway.seam.connections import Connection, Session
from gateway.seam.context import ChannelContext
from gateway.vocabulary import ChannelName

__all__ = ["channel_context", "offline_context"]


def channel_context(core: Core, name: ChannelName) -> ChannelContext:
    def supervise(connection: str, session: Session, *, singleton: bool = True) -> Connection:
        return supervisor(core, connection, session, singleton=singleton)

    return ChannelContext(
        name=name,
        answers=AnswerDoor(core, name),
        records=RecordsDoor(core.db, name),
        keys=KeysDoor(core),
        supervise=supervise,
        console=ConsoleDoor(core),
    )
