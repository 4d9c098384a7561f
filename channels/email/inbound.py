"""One pipeline for every reply, whether IMAP fetched it or an MTA posted it.

In order: ignore automatic mail; find the request (the reply address's token, then the
thread's Message-IDs, each with a MAC); check the sender (one clean From address that the
request was sent to, DMARC when required); read the intent; decide (first wins). A person
who wrote gets one threaded answer: a confirmation, or why nothing changed.

"approve for 1h" approves and gives a standing grant (`Verb.GRANT`). Where the request
offers no grant (a quorum, a rule's `grants = false`) or not that one, the core refuses it
and nothing is decided: the person is told why, so nobody believes a grant exists.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email import policy
from email.message import EmailMessage
from email.parser import BytesParser
from typing import Any

from channels.email import compose, reading, tokens
from channels.email.settings import EmailSettings
from gateway.lifecycle import Status
from gateway.seam import (
    BY_LIST,
    AnsweredIn,
    Answers,
    ChannelName,
    Records,
    Refusal,
    Refused,
    RequestView,
    Responder,
    Target,
    Verb,
    already_decided,
    describe,
    responders_through,
)
from gateway.seam.grants import GrantChoice
from gateway.seam.replies import grant_hint

log = logging.getLogger(__name__)

HOW_TO_ANSWER = compose.HOW_TO_ANSWER
MAX_TOKENS = 8  # a reply names one request; more tokens than this are not looked up
Send = Callable[[EmailMessage, list[str]], Awaitable[None]]
Key = Callable[[], bytes]  # the key of reply tokens, derived from GATEWAY_SECRET_KEY


@dataclass(frozen=True)
class Handled:
    """What the pipeline did with one message (also the audit trail's wording)."""

    result: str  # decided | unclear | refused | ignored | duplicate
    reason: str
    rid: str | None = None


def parse(raw: bytes) -> EmailMessage:
    message = BytesParser(policy=policy.default).parsebytes(raw)
    assert isinstance(message, EmailMessage)
    return message


def message_key(message: EmailMessage, raw: bytes) -> str:
    """The Message-ID, or a digest of the bytes when a client left it out."""
    found = compose.one_line(str(message.get("Message-ID", "") or ""))[:255]
    return found or "sha256:" + hashlib.sha256(raw).hexdigest()


class Inbox:
    def __init__(
        self, answers: Answers, records: Records, settings: EmailSettings, key: Key, send: Send
    ) -> None:
        self.answers = answers
        self.records = records
        self.settings = settings
        self.key = key
        self.send = send
        self._answers: set[asyncio.Task[None]] = set()

    async def receive(self, raw: bytes) -> Handled:
        """Handle one raw message; returns once any decision it made has committed."""
        message = parse(raw)
        key = message_key(message, raw)
        earlier = await self.records.handled(key)
        if earlier is not None:
            return Handled("duplicate", f"already handled: {earlier}")
        outcome = await self._handle(message, key)
        await self.records.remember(key, outcome.rid, outcome.result, outcome.reason)
        log.info("email %s: %s (%s)", key, outcome.result, outcome.reason)
        return outcome

    async def _handle(self, message: EmailMessage, key: str) -> Handled:
        automatic = reading.is_automatic(message)
        if automatic:
            return Handled("ignored", f"automatic mail ({automatic})")
        sender = reading.sender(message)
        found = await self._find(message, sender)
        if found is None:
            return Handled("ignored", "no valid reply token or thread id")
        request, made_for = found
        if sender is None:
            return Handled("ignored", "the From header is not one clean address", request.rid)
        dmarc = self.settings.email_require_dmarc
        if dmarc and not reading.dmarc_passed(
            message, self.settings.email_trusted_authserv_id or ""
        ):
            return Handled(
                "ignored", f"no dmarc=pass for {sender} from a trusted server", request.rid
            )
        voter = _voter(request, sender, made_for, trusted=dmarc)
        if voter is None:
            why = (
                f"{sender} is not one of the people this copy was sent to; "
                "answer from your own copy of the request"
            )
            return await self._refuse(message, request, sender, why)
        return await self._answer(message, key, request, sender, voter)

    async def _find(
        self, message: EmailMessage, sender: str | None
    ) -> tuple[RequestView, str | None] | None:
        """The request a reply names, and the recipient its token was made for (None: a
        token from before tokens were made per recipient); None when no token verifies."""
        key = self.key()
        found = tokens.tokens_in_headers(message, self.settings.reply_base)
        found += tokens.tokens_in_thread(message)
        requests: dict[str, RequestView | None] = {}
        for token in found[:MAX_TOKENS]:
            if token.rid not in requests:
                requests[token.rid] = await self.answers.view(token.rid)
            request = requests[token.rid]
            if request is None:
                continue
            for address in dict.fromkeys([*([sender] if sender else []), *_addresses(request)]):
                if token.made_for(key, address):
                    return request, address.lower()
            if token.made_for(key, None):
                return request, None
        return None

    async def _answer(
        self, message: EmailMessage, key: str, request: RequestView, sender: str, voter: str
    ) -> Handled:
        address = _recipient(request, voter)
        if address is None:  # a reply address is for the people the request went to
            why = f"{voter} is not one of the people this request was sent to"
            return await self._refuse(message, request, sender, why)
        if request.status != Status.PENDING:
            return await self._late(message, key, request, sender)
        signer = reading.display_name(message)
        intent = reading.intent_of(message, kind=request.kind, options=request.options)
        if intent.verdict == "unreadable":
            why = f"I could not read an answer. {HOW_TO_ANSWER}"
            return await self._refuse(message, request, sender, why)
        extra = {"message_id": key}  # so a second copy of this message knows it decided
        if voter != sender:
            extra["by"] = BY_LIST
        who = Responder(AnsweredIn.EMAIL, address, signer or sender, email=address, extra=extra)
        verb = Verb.GRANT if intent.grant else _VERBS[intent.verdict]
        outcome = await self.answers.answer(
            request.rid,
            verb,
            who,
            text=intent.comment,
            choice=intent.option_name,
            grant=intent.grant.value if intent.grant else None,
        )
        if isinstance(outcome, Refused):
            if outcome.why == Refusal.DECIDED:
                return await self._late(message, key, await self._reload(request), sender)
            if outcome.why == Refusal.UNCLEAR:  # pending still; the reply is in the audit trail
                await self._tell(message, sender, request.rid, outcome.message)
                return Handled("unclear", outcome.message, request.rid)
            grant = intent.grant and _no_grant(request, intent.grant, outcome)
            why = grant or f"{outcome.message}. {HOW_TO_ANSWER}"
            return await self._refuse(message, request, sender, why)
        await self._tell(message, sender, request.rid, _recorded(outcome.request, intent))
        return Handled("decided", outcome.request.status, request.rid)

    async def _late(
        self, message: EmailMessage, key: str, request: RequestView, sender: str
    ) -> Handled:
        if (request.user_info or {}).get("message_id") == key:  # this very message decided it
            return Handled("duplicate", "this message already decided the request", request.rid)
        return await self._refuse(message, request, sender, already_decided(request))

    async def _refuse(
        self, message: EmailMessage, request: RequestView, sender: str, why: str
    ) -> Handled:
        await self._tell(message, sender, request.rid, f"Nothing was changed: {why}")
        return Handled("refused", why, request.rid)

    async def _tell(self, original: EmailMessage, to: str, rid: str, text: str) -> None:
        """One threaded answer, sent in the background: the decision is stored already, and
        the agent's long-poll should not wait on an SMTP round trip (best effort)."""
        answer = compose.reply_to(original, to, text, self.settings, self.key(), rid)
        task = asyncio.create_task(self._send_answer(answer, to), name="email-answer")
        self._answers.add(task)
        task.add_done_callback(self._answers.discard)

    async def _send_answer(self, answer: EmailMessage, to: str) -> None:
        try:
            await self.send(answer, [to])
        except Exception as error:
            log.warning("email: could not answer %s: %s", to, error)

    async def settled(self) -> None:
        """Until the answers on their way are sent (each is bounded by the SMTP timeout)."""
        while self._answers:
            await asyncio.gather(*self._answers, return_exceptions=True)

    async def _reload(self, request: RequestView) -> RequestView:
        return await self.answers.view(request.rid) or request


def _voter(request: RequestView, sender: str, made_for: str | None, *, trusted: bool) -> str | None:
    """Who a reply answers as: its From when a trusted server vouched for it (DMARC), or
    when the copy it answers was made for that address; a member of a team's list who
    answers the list's copy answers as the list (one voter however many members reply).
    Anyone else (a forward, a forged From) answers as nobody."""
    if trusted or made_for == sender:
        return sender
    for target in request.route:
        if target["channel"] != ChannelName.EMAIL:
            continue
        sent_to = _sent_to(request, target)
        if made_for not in sent_to[:1]:
            continue
        # The list's members: who may answer there without having been sent a copy.
        members = {str(r).lower() for r in target.get("responders") or []}
        if sender in members - set(sent_to):
            return made_for
    return None


def _sent_to(request: RequestView, target: dict[str, Any]) -> list[str]:
    """The addresses an email target's copies went to (one each): its address first."""
    routed = Target.model_validate(target)
    people = compose.recipients(routed, compose.email_options(request, routed))
    return [address.lower() for address in people.everyone]


def _addresses(request: RequestView) -> list[str]:
    """Every address the request's emails went to (each copy's token was made for one)."""
    emailed = [t for t in request.route if t["channel"] == ChannelName.EMAIL]
    found = [a for target in emailed for a in _sent_to(request, target)]
    return list(dict.fromkeys(found))


def _recipient(request: RequestView, sender: str) -> str | None:
    """The request's recipient this sender is (addresses compare without case)."""
    allowed = responders_through(request.route, ChannelName.EMAIL) or set()
    return next((a for a in allowed if a.lower() == sender), None)


_VERBS = {
    "approve": Verb.APPROVE,
    "reject": Verb.REJECT,
    "unclear": Verb.REPLY,  # the answer path reads it again, keeps it and asks again
    "option": Verb.OPTION,
    "response": Verb.ANSWER,
}


def _no_grant(request: RequestView, asked: GrantChoice, refused: Refused) -> str | None:
    """Why the grant a reply asked for was refused, and what to reply instead; None when
    the refusal is not about the grant."""
    hint = grant_hint(request.grant_choices, str(request.spec.get("fn") or "this function"))
    if hint is None and refused.why == Refusal.NOT_ALLOWED:  # a quorum, `grants = false`
        return (
            f"{refused.message}. Reply APPROVE to approve it without a standing grant, "
            "or REJECT followed by your reason."
        )
    if hint is not None and refused.why == Refusal.INVALID:  # not that duration
        return f"a standing grant {asked.duration} is not offered on this request. {hint}"
    return None


def _read_as(intent: reading.Intent) -> str:
    """How the reply was read, first, so a person who meant something else finds out at once."""
    if intent.reading is not None:
        return intent.reading.sentence + "\n"
    if intent.verdict == "option":
        return f'We read your reply as the option "{intent.option_name}".\n'
    return ""


def _recorded(row: RequestView, intent: reading.Intent) -> str:
    if row.status == Status.PENDING:  # a vote under an approval policy; more are needed
        standing = f" {describe(row)}." if row.progress is not None else ""
        return _read_as(intent) + f"Recorded: your approval.{standing}"
    when = row.responded_at.strftime("%Y-%m-%d %H:%M UTC") if row.responded_at else "now"
    what: dict[str, str] = {
        Status.APPROVED: "approved",
        Status.REJECTED: "rejected",
        Status.RESPONDED: "answered",
    }
    line = _read_as(intent) + f"Recorded: {what.get(row.status, row.status)} by you at {when}"
    line += _granted(row, intent) + "."
    if row.comment and row.status == Status.REJECTED:
        line += f"\nReason: {row.comment}"
    if row.response:
        line += f"\nAnswer: {row.response}"
    return line


def _granted(row: RequestView, intent: reading.Intent) -> str:
    """ ", and allowed read_file in this run, for 1 hour": the grant this approval gave (the
    core gives the one asked for, or refuses the answer)."""
    if intent.grant is None or row.status != Status.APPROVED:
        return ""
    fn = str(row.spec.get("fn") or "this function")
    return (
        f", and allowed {intent.grant.sentence(fn)}.\n"
        "Calls it covers are approved at once, without asking you"
    )
