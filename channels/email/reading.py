"""Reading an email reply: its new text, the intent in it, who sent it, whether a person did.

Pure functions over messages parsed with `email.policy.default`; no network. The new text is
cut by `gateway.seam.new_text` (quotes under an attribution, signatures, "Sent from my ...",
quoted header blocks), so the quoted request ("reply APPROVE or REJECT") is never read. An
approval is read by `gateway.seam.read_reply`, the rule every text channel shares: a plain
yes approves, a plain no rejects with the text as the comment, and anything else is
unclear: it decides nothing and the person is asked again. An approval may ask for a
standing grant ("approve for 1h", `Intent.grant`): email can give one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from email.errors import HeaderParseError
from email.header import decode_header, make_header
from email.headerregistry import Address
from email.message import EmailMessage, Message
from email.utils import parseaddr
from typing import Any, Literal

from channels.email.html import html_to_text
from gateway.lifecycle import Kind
from gateway.seam import Reading, first_line, new_text, read_reply
from gateway.seam import Verdict as ReplyVerdict
from gateway.seam.grants import GrantChoice

MAX_BODY_CHARS = 20_000
MAX_LINE_CHARS = 1_000
TRUNCATED = "[the rest of this reply is too long to read]"
REJECT_WORDS = ("rejected", "reject", "denied", "deny", "no")
AUTOMATIC_LOCAL_PARTS = frozenset({"mailer-daemon", "postmaster"})
BULK_PRECEDENCE = frozenset({"bulk", "junk", "list", "auto_reply"})

Verdict = Literal["approve", "reject", "unclear", "option", "response", "unreadable"]

# A keyword ends at the line's end or at punctuation; "Reject not now" or "No problem" keep
# their whole text as the comment instead of losing the first word.
_SEPARATOR = re.compile(r"\s*(?:$|[:,;.!]+\s*|[-\u2013\u2014]+(?:\s+|$))")
_CLEAN_ADDRESS = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~.-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+")
_LOOKS_LIKE_ADDRESS = re.compile(r"[^\s<>()\[\],;:\"']+@[^\s<>()\[\],;:\"']+")


# --- the new text of a reply ------------------------------------------------------------


def _decode(part: Message) -> str:
    payload = part.get_payload(decode=True)
    if not isinstance(payload, bytes):
        return ""
    try:
        return payload.decode(part.get_content_charset() or "us-ascii")
    except (LookupError, UnicodeDecodeError):  # unknown charset name, or mislabelled bytes
        return payload.decode("utf-8", errors="replace")


def _unflow(text: str, *, delsp: bool) -> str:
    """Join format=flowed soft line breaks (RFC 3676 §4.1-4.4)."""
    lines: list[str] = []
    pending = ""
    for raw in text.splitlines():
        line = raw[1:] if raw.startswith(" ") else raw  # undo space-stuffing
        if line.endswith(" ") and line != "-- ":
            pending += line[:-1] if delsp else line
        else:
            lines.append(pending + line)
            pending = ""
    return "\n".join([*lines, pending] if pending else lines)


def _body(message: EmailMessage, subtype: str) -> str:
    part = message.get_body(preferencelist=(subtype,))
    if part is None:
        return ""
    text = _decode(part)
    if subtype == "html":
        return html_to_text(text)
    if str(part.get_param("format", "")).lower() == "flowed":
        return _unflow(text, delsp=str(part.get_param("delsp", "")).lower() == "yes")
    return text


def _bounded(body: str) -> str:
    """At most MAX_BODY_CHARS, in lines of at most MAX_LINE_CHARS (broken at a space).

    A reply is read line by line, and an attribution may wrap over three lines: bounded
    lines keep each step small however hostile the body.
    """
    lines: list[str] = []
    for line in body[:MAX_BODY_CHARS].splitlines():
        while len(line) > MAX_LINE_CHARS:
            cut = line.rfind(" ", 1, MAX_LINE_CHARS) + 1 or MAX_LINE_CHARS
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return "\n".join(lines)


def reply_text(message: EmailMessage) -> str:
    """The new text of a reply: quotes, attribution lines, signatures and sign-offs removed.

    The text/plain part is preferred; an HTML-only (or empty plain) reply is converted.
    A reply that is only a quote gives "". Only the first MAX_BODY_CHARS are read: a longer
    one ends with TRUNCATED, so that what was not read can never make a plain yes.
    """
    plain = _body(message, "plain")
    return _new_text(plain if plain.strip() else _body(message, "html"), display_name(message))


def _new_text(body: str, signer: str | None) -> str:
    # The shared reader's cut, not a mail parser's: those also cut a quote with no
    # attribution above it, or the words under a quote, and a yes above them then approved.
    text = new_text(_bounded(body), signer=signer)[:MAX_BODY_CHARS]
    return f"{text}\n{TRUNCATED}" if len(body.strip()) > MAX_BODY_CHARS else text


def intent_of(message: EmailMessage, *, kind: Kind, options: list[dict[str, Any]]) -> Intent:
    """The intent of a reply. A plain-text approval approves only if the HTML part of the
    same mail, as a person sees it, approves too (a struck-through or hidden yes there
    does not): otherwise it is unclear, with the HTML's text."""
    signer = display_name(message)
    plain, html = _body(message, "plain"), _body(message, "html")
    text = _new_text(plain if plain.strip() else html, signer)  # as reply_text reads it
    intent = read_intent(text, kind=kind, options=options, signer=signer)
    if intent.verdict != "approve" or not plain.strip() or not html.strip():
        return intent
    seen = _new_text(html, signer)
    second = read_intent(seen, kind=kind, options=options, signer=signer)
    if second.verdict == "approve" and second.grant == intent.grant:
        return intent
    return Intent("unclear", seen, reading=second.reading)


def display_name(message: EmailMessage) -> str | None:
    """The From header's display name ("Alice Smith"), if it has one."""
    try:
        addresses: tuple[Any, ...] = getattr(message.get("From"), "addresses", ())
    except Exception:  # the stdlib address parser raises assorted errors on hostile input
        return None
    name = addresses[0].display_name if len(addresses) == 1 else ""
    return str(name) or None


# --- the intent in it -------------------------------------------------------------------


@dataclass(frozen=True)
class Intent:
    verdict: Verdict
    comment: str | None = None
    option_name: str | None = None
    # How an approve/reject reply was read, to tell the person; not part of the decision.
    reading: Reading | None = field(default=None, compare=False)
    grant: GrantChoice | None = None  # the standing grant an approval asks for ("for 1h")


def _after(line: str, word: str) -> str | None:
    """What follows `word` at the start of `line` (case-insensitive), or None if absent."""
    if not word or line[: len(word)].casefold() != word.casefold():
        return None
    separator = _SEPARATOR.match(line, len(word))
    return line[separator.end() :] if separator else None


def _rest(after: str, text: str) -> str | None:
    """The rest of the first line plus the lines after it, or None when empty."""
    following = text.strip().split("\n", 1)[1:]
    return "\n".join([after, *following]).strip() or None


def _option(text: str, options: list[dict[str, Any]]) -> Intent | None:
    line = first_line(text)
    labels = [(str(o.get(k) or ""), o) for o in options for k in ("name", "title")]
    for label, option in sorted(labels, key=lambda pair: -len(pair[0])):  # longest first
        after = _after(line, label)
        if after is not None:
            comment = _rest(after, text) or option.get("prompt_fill") or None
            return Intent("option", comment, str(option["name"]))
    return None


def _reject(text: str, reading: Reading) -> Intent:
    line = first_line(text)
    for word in REJECT_WORDS:
        after = _after(line, word)
        if after is not None:
            return Intent("reject", _rest(after, text), reading=reading)
    return Intent("reject", text.strip(), reading=reading)


def read_intent(
    text: str, *, kind: Kind, options: list[dict[str, Any]], signer: str | None = None
) -> Intent:
    """The decision in a reply's new text: an option named on its first line, else the
    answer (a question) or how `read_reply` reads it (an approval).

    Args:
        text: the reply's new text (`reply_text`).
        kind: "function_call" (approve/reject) or "human_contact" (a response).
        options: the spec's `reject_options` or `response_options` (dicts with `name`).
        signer: the sender's display name (their signature block is not read).
    """
    if not text.strip():
        return Intent("unreadable")
    option = _option(text, options)
    if option is not None:
        return option
    if kind == Kind.HUMAN_CONTACT:
        return Intent("response", text.strip())
    reading = read_reply(text, signer=signer, grants=True)
    if reading.verdict is ReplyVerdict.APPROVE:
        return Intent("approve", reading=reading, grant=reading.grant)
    if reading.verdict is ReplyVerdict.REJECT:
        return _reject(text, reading)
    return Intent("unclear", text.strip(), reading=reading)


# --- who sent it, and whether a person did -----------------------------------------------


def _raw(message: Message, name: str) -> list[str]:
    return [str(v) for k, v in message.raw_items() if k.lower() == name.lower()]


def _one_address(message: EmailMessage) -> Address | None:
    if len(_raw(message, "From")) != 1:
        return None
    try:
        header = message["From"]
        groups, defects = header.groups, header.defects
    except Exception:  # the stdlib address parser raises assorted errors on hostile input
        return None
    if defects or len(groups) != 1 or groups[0].display_name is not None:
        return None
    addresses = groups[0].addresses
    return addresses[0] if len(addresses) == 1 else None


def sender(message: EmailMessage) -> str | None:
    """The one clean From address, lower-cased; None when anything about it is doubtful.

    Refused: no From or several, groups, 0 or 2+ addresses, parser defects, quoted or
    bracketed address parts, and any other address-like text in the header (display name
    or comment), the `"boss@corp.com" <attacker@evil.com>` trick.
    """
    address = _one_address(message)
    if address is None or not _CLEAN_ADDRESS.fullmatch(address.addr_spec):
        return None
    real = address.addr_spec.lower()
    raw = _raw(message, "From")[0]
    try:  # encoded words in comments are not decoded by the address parser
        decoded = str(make_header(decode_header(raw)))
    except (HeaderParseError, LookupError, UnicodeDecodeError):
        return None
    shown = _LOOKS_LIKE_ADDRESS.findall(f"{address.display_name} {raw} {decoded}")
    return real if all(found.lower() == real for found in shown) else None


def _first_token(value: str) -> str:
    return value.split(";", 1)[0].strip().lower()


_AUTOMATIC_HEADERS: dict[str, Callable[[str], bool]] = {
    "Auto-Submitted": lambda value: _first_token(value) not in ("", "no"),  # RFC 3834
    "Precedence": lambda value: _first_token(value) in BULK_PRECEDENCE,
    "X-Autoreply": lambda value: True,
    "X-Autorespond": lambda value: True,
    "List-Id": lambda value: True,  # RFC 2919
    "List-Unsubscribe": lambda value: True,  # RFC 2369
    "Return-Path": lambda value: value.strip() in ("<>", ""),  # bounces have a null sender
}


def is_automatic(message: Message) -> str | None:
    """Why the message was sent by a machine (auto-reply, bounce, list copy), or None.

    `X-Auto-Response-Suppress` is ignored: it asks *others* not to auto-reply and Outlook
    sets it on some person-written mail. List-Id / List-Unsubscribe count as automatic:
    a person's reply reaches the reply address directly, never through a list.
    """
    for name, automatic in _AUTOMATIC_HEADERS.items():
        for value in _raw(message, name):
            if automatic(value):
                return f"{name}: {' '.join(value.split())}"
    if message.get_content_type() == "multipart/report":
        return "a delivery or read report (multipart/report)"
    local = parseaddr(" ".join(_raw(message, "From")))[1].rpartition("@")[0].lower()
    return f"sent by {local}" if local in AUTOMATIC_LOCAL_PARTS else None


def _results(value: str) -> tuple[str, list[str]]:
    """(authserv-id, resinfo items) of an Authentication-Results value (RFC 8601)."""
    unquoted = re.sub(r'"(?:[^"\\]|\\.)*"', '""', value)
    while re.search(r"\([^()]*\)", unquoted):  # comments nest, and may hide a ";"
        unquoted = re.sub(r"\([^()]*\)", " ", unquoted)
    head, *items = unquoted.split(";")
    authserv = head.split()[0].lower() if head.split() else ""
    return authserv, [item.strip().lower() for item in items]


def dmarc_passed(message: Message, authserv_id: str) -> bool:
    """True when our own MTA (`authserv_id`) recorded dmarc=pass, and no dmarc failure.

    Authentication-Results from other authserv-ids are ignored: anyone can add those.
    """
    verdicts = []
    for value in _raw(message, "Authentication-Results"):
        authserv, items = _results(value)
        if authserv == authserv_id.lower():
            verdicts += [m[1] for i in items if (m := re.match(r"dmarc\s*=\s*(\w+)", i))]
    return bool(verdicts) and all(verdict == "pass" for verdict in verdicts)
