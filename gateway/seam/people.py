"""Who answered a request, and the sentences that name them (one place for every channel)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from gateway.lifecycle import noun
from gateway.vocabulary import AnsweredIn

_PLACES: dict[str, str] = {
    AnsweredIn.API: "the API",
    AnsweredIn.CLI: "the CLI",
    AnsweredIn.WEB: "the web console",
    AnsweredIn.GATEWAY: "the gateway",
    AnsweredIn.GRANT: "a standing grant",
}


# `user_info["by"]` of a console answer made through an emailed link, not a sign-in: it
# answers as the address the link was made for, and only where that address is listed.
BY_LINK = "link"
# `user_info["by"]` of an email reply to a shared list's copy: the list answers, and which of
# its members wrote is unproven, so it decides where one answer does and is no policy vote.
BY_LIST = "list"


@dataclass(frozen=True)
class Responder:
    """Who answered, and through what: recorded as the request's `status.user_info`."""

    via: AnsweredIn
    id: str  # the platform's user id, an email address, an API key's prefix, "operator"
    name: str
    email: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)  # team_id, guild_id, message_id…
    # The post they answered (its `Sent.reply_key`): their answer counts for that copy's
    # target. Not recorded in user_info.
    copy: str | None = None

    @property
    def place(self) -> str:
        """Where they answered, in words: "Slack", "the web console"."""
        return _PLACES.get(self.via, self.via.capitalize())

    def user_info(self) -> dict[str, Any]:
        info: dict[str, Any] = {"channel": self.via, "user_id": self.id, "name": self.name}
        if self.email:
            info["email"] = self.email
        return info | dict(self.extra)

    @staticmethod
    def of(info: Mapping[str, Any] | None) -> Responder | None:
        """The responder a stored `user_info` records (None before any answer)."""
        if not info:
            return None
        via = str(info.get("channel") or AnsweredIn.API)
        ident = str(info.get("user_id") or info.get("email") or "")
        name = str(info.get("name") or info.get("email") or ident or "someone")
        known = AnsweredIn(via) if via in AnsweredIn._value2member_map_ else AnsweredIn.API
        return Responder(known, ident, name, info.get("email"))


def plain_when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def plain_who(responder: Responder) -> str:
    if responder.via == AnsweredIn.GRANT:
        return f"{responder.name}'s standing grant"
    return f"{responder.name} in {responder.place}"


def default_rejection(who: Responder | Mapping[str, Any]) -> str:
    """The SDK raises on a rejection without a comment, so the gateway writes one."""
    responder = who if isinstance(who, Responder) else Responder.of(who)
    if responder is None:
        return "Rejected"
    return f"Rejected in {responder.place} by {responder.name}"


class Decided(Protocol):
    """What `already_decided` reads: a RequestView, or the core's stored row."""

    @property
    def kind(self) -> str: ...
    @property
    def call_id(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def user_info(self) -> Mapping[str, Any] | None: ...
    @property
    def responded_at(self) -> datetime | None: ...


def already_decided(request: Decided) -> str:
    """The refusal a late answer gets: who decided, where and when."""
    responder = Responder.of(request.user_info)
    by = plain_who(responder) if responder else "someone"
    at = request.responded_at
    when = at.isoformat() if at else "an earlier time"
    return (
        f"{noun(request.kind)} {request.call_id!r} was already {request.status} by {by} at {when}"
    )
