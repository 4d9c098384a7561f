"""What a channel is given when it is built: one `ChannelContext` with the doors of the core
it may use. A channel keeps it; it never reaches the core any other way."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gateway.seam.answers import Answered, Form, Refused
from gateway.seam.callbacks import Verb
from gateway.seam.connections import Connection, Session
from gateway.seam.console import Console
from gateway.seam.people import Responder
from gateway.seam.records import Records
from gateway.seam.views import RequestView
from gateway.vocabulary import ChannelName


class Answers(Protocol):
    """The one answer path: a channel turns a platform event into one `answer(...)` and
    renders what comes back."""

    async def answer(
        self,
        rid: str,
        verb: Verb,
        responder: Responder,
        *,
        text: str | None = None,
        choice: int | str | None = None,
        grant: str | None = None,
        edited: dict[str, Any] | None = None,
    ) -> Answered | Refused:
        """Apply one person's answer: the request as it left it, or the refusal to tell them.
        `grant` (with Verb.GRANT) is the chosen `GrantChoice.value`; `edited` (with
        Verb.EDIT) the arguments as the person edited them (`gateway.seam.edits`)."""
        ...

    async def refusal(self, rid: str, responder: Responder) -> Refused | None:
        """Why this person cannot answer the request now, or None when they can (asked
        before opening a form, so nobody types a reason for nothing)."""
        ...

    async def option_form(self, rid: str, responder: Responder, index: int | None) -> Form | None:
        """The form an interactive reject option opens, prefilled with its prompt_fill; None
        when the click answers at once (or is refused: `answer` then says why)."""
        ...

    async def view(self, rid: str) -> RequestView | None:
        """The request as it stands, or None when there is no such request."""
        ...

    async def find(self, reply_key: str) -> str | None:
        """The rid of the request whose post through this channel a reply names (the
        `Sent.reply_key` of that post), or None."""
        ...


class Keys(Protocol):
    """Keys derived from GATEWAY_SECRET_KEY, one per purpose, and the request links."""

    def subkey(self, purpose: str) -> bytes: ...
    def sign(self, purpose: str, claims: dict[str, Any], ttl_seconds: float) -> str:
        """A signed, expiring token carrying `claims` (readable, unforgeable)."""
        ...

    def verify(self, purpose: str, token: str) -> dict[str, Any]:
        """The claims of a genuine, unexpired token; raises BadToken otherwise."""
        ...

    def tag(self, purpose: str, value: str) -> str:
        """A short MAC of one value (a session's CSRF token)."""
        ...

    def link(self, rid: str, email: str | None = None) -> str | None:
        """The request's page (None without GATEWAY_PUBLIC_URL); with `email`, carrying a
        token that lets that recipient decide there without signing in."""
        ...

    def link_email(self, rid: str, token: str) -> str:
        """The recipient a request link's token was issued to; raises BadToken otherwise."""
        ...


class Supervise(Protocol):
    def __call__(self, name: str, session: Session, /, *, singleton: bool = True) -> Connection:
        """`session` supervised; `singleton`: with several replicas, run by one of them (a
        connection the platform allows once per bot), else by every replica (a token)."""
        ...


@dataclass(frozen=True)
class ChannelContext:
    """Built once per channel by the composition root and handed to its factory."""

    name: ChannelName
    answers: Answers
    records: Records
    keys: Keys
    # A supervised connection for a session: started with the channel, connected in the
    # background with the gateway's timeouts and backoff, its waiting deliveries sent on
    # each (re)connect; with several replicas, run by the one that owns it.
    supervise: Supervise
    console: Console  # only the web console uses it
