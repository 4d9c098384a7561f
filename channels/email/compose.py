"""Emails the gateway sends, built as `EmailMessage`s: pure functions, no network.

A request email is multipart/alternative (text + HTML from `templates/email/`), with its
own Message-ID, a per-request Reply-To (`local+<token>@domain`) and `Auto-Submitted` so
vacation responders stay quiet. A request's own `email.template` (where its project allows
agent templates) is rendered by `agent_template` and handed in as `html`. Where a standing
grant is offered, a line under the instructions says how to ask for one by reply.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from email import policy
from email.headerregistry import BaseHeader, HeaderRegistry, MessageIDHeader
from email.message import EmailMessage
from email.utils import formatdate
from html import escape
from pathlib import Path
from typing import Any, cast

import jinja2

from channels.email import tokens
from channels.email.settings import EmailSettings
from gateway.lifecycle import Kind
from gateway.seam import RequestView, Target, origin_line, shorten
from gateway.seam.replies import grant_hint

TEMPLATES = Path(__file__).resolve().parents[2] / "templates" / "email"
AGENTS_OWN = "spec.channel"  # the `via` of the targets a request's own spec.channel named
VALUE_LIMIT = 10_000  # characters of one argument before it is cut with a link
HOW_TO_ANSWER = "Reply APPROVE, or REJECT followed by your reason."  # as the templates say
_files = jinja2.Environment(
    loader=jinja2.FileSystemLoader(TEMPLATES),
    autoescape=jinja2.select_autoescape(["html.j2"]),
    undefined=jinja2.StrictUndefined,
    keep_trailing_newline=True,
)
# The email package writes an id longer than a line (ours run ~80 characters) in In-Reply-To
# and References as an RFC 2047 encoded word, which no client threads on; parsed as one
# msg-id they go out as they are. Only for messages whose two headers each hold one id.
_one_id = HeaderRegistry()
for _name in ("in-reply-to", "references"):  # typeshed has the mixin apart from BaseHeader
    _one_id.map_to_type(_name, cast("type[BaseHeader]", MessageIDHeader))
_thread_policy = policy.default.clone(header_factory=_one_id)


@dataclass(frozen=True)
class Recipients:
    to: list[str]
    cc: list[str] = field(default_factory=list)
    bcc: list[str] = field(default_factory=list)

    @property
    def everyone(self) -> list[str]:
        return list(dict.fromkeys(self.to + self.cc + self.bcc))


def one_line(text: str) -> str:
    """Header text with no line breaks: nothing a request says can start a new header."""
    return " ".join(text.split())


def email_options(request: RequestView, target: Target) -> dict[str, Any]:
    """The request's `spec.channel.email` when this target is the agent's own email target,
    else nothing: its template, subject and recipients never touch a configured target."""
    email = (request.spec.get("channel") or {}).get("email") or {}
    own = target.via == AGENTS_OWN and email.get("address") == target.address.get("address")
    return email if own else {}


def recipients(target: Target, options: dict[str, Any]) -> Recipients:
    extra = target.address.get("additional_recipients") or options.get("additional_recipients")
    lists: dict[str, list[str]] = {"to": [str(target.address["address"])], "cc": [], "bcc": []}
    for recipient in extra or []:
        lists[recipient.get("field") or "to"].append(str(recipient["address"]))
    return Recipients(lists["to"], lists["cc"], lists["bcc"])


def subject(request: RequestView, options: dict[str, Any]) -> str:
    given = options.get("subject") or options.get("experimental_subject_line")
    if given:
        return one_line(str(given))
    if request.kind == Kind.FUNCTION_CALL:
        return one_line(f"Approval needed: {request.run_id} wants to call {request.spec['fn']}")
    asked = str(request.spec.get("subject") or request.spec.get("msg") or "")
    return one_line(f"Question from {request.run_id}: {asked}")[:150]


def _value(value: Any, link: str | None) -> str:
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return shorten(text, VALUE_LIMIT, more=f"… (cut; see {link or 'the request'})")


def _context(request: RequestView, escalation: str | None) -> dict[str, Any]:
    key = "reject_options" if request.kind == Kind.FUNCTION_CALL else "response_options"
    kwargs = request.spec.get("kwargs") or {}
    return {
        "kind": request.kind,
        "run_id": request.run_id,
        "call_id": request.call_id,
        "fn": request.spec.get("fn", ""),
        "kwargs": [(name, _value(value, request.link)) for name, value in kwargs.items()],
        "msg": request.spec.get("msg", ""),
        "options": request.spec.get(key) or [],
        "link": request.link,
        "escalation": escalation,
        "origin": origin_line(request),  # the MCP client's own name: autoescaped in HTML
    }


def template_context(request: RequestView) -> dict[str, Any]:
    """HumanLayer's context for an agent's own template (`agent_template.render`)."""
    spec = {k: v for k, v in request.spec.items() if k != "channel"}
    return {
        "event": {"run_id": request.run_id, "call_id": request.call_id, "spec": spec},
        # HumanLayer templates append "?approve=true" to it: the plain page URL, no token.
        "urls": {"base_url": (request.link or "").split("?", 1)[0]},
        "type": request.kind,
    }


def request_message(
    request: RequestView,
    target: Target,
    settings: EmailSettings,
    key: bytes,
    *,
    to: str,
    escalation: str | None = None,
    thread: list[str] | None = None,
    html: str | None = None,
) -> EmailMessage:
    """The copy of one target's email for one of its recipients, `to`: its reply address and
    Message-ID carry a token made for `to`. Its To and Cc show who else got it (Bcc never)."""
    options = email_options(request, target)
    people = recipients(target, options)
    context = _context(request, escalation)
    message = EmailMessage()
    message["From"] = settings.sender
    message["To"] = ", ".join(people.to if to in people.to + people.cc else [to])
    if people.cc and to in people.to + people.cc:
        message["Cc"] = ", ".join(people.cc)
    message["Reply-To"] = tokens.reply_address(settings.reply_base, request.rid, key, to)
    title = subject(request, options)
    message["Subject"] = f"Re: {title}" if escalation else title
    message["Date"] = formatdate(localtime=False)
    stable = f"request\n{to}\n{escalation or ''}"  # a retried delivery: the same Message-ID
    message["Message-ID"] = tokens.message_id(
        request.rid, key, settings.domain, to=to, stable=stable
    )
    _thread_headers(message, options, _own(thread, key, to))
    message["Auto-Submitted"] = "auto-generated"
    message["X-Auto-Response-Suppress"] = "All"  # Outlook's out-of-office replies
    hint = _grant_hint(request)
    message.set_content(_text_with(hint, _files.get_template("request.txt.j2").render(context)))
    ours = _files.get_template("request.html.j2").render(context)
    message.add_alternative(html or _html_with(hint, ours), subtype="html")
    return message


def _grant_hint(request: RequestView) -> str | None:
    """How to ask for a standing grant by reply, where the request offers one."""
    if request.kind != Kind.FUNCTION_CALL:
        return None
    return grant_hint(request.grant_choices, str(request.spec.get("fn") or "this function"))


def _text_with(hint: str | None, text: str) -> str:
    """The text with `hint` on the line under the instructions (the last line that is
    them: an argument's lines are indented, an option's start with "*")."""
    before, found, after = text.rpartition(f"\n{HOW_TO_ANSWER}\n")
    return f"{before}{found}{hint}\n{after}" if hint and found else text


def _html_with(hint: str | None, html: str) -> str:
    """Our HTML with `hint` under the instructions (what agents wrote is escaped, so only
    the template has this paragraph)."""
    before, found, after = html.rpartition(f"<p><strong>{HOW_TO_ANSWER}</strong></p>")
    return f"{before}{found}\n<p>{escape(hint)}</p>{after}" if hint and found else html


def _own(thread: list[str] | None, key: bytes, to: str) -> list[str] | None:
    """The Message-IDs of the thread that were made for `to`: each carries its recipient's
    reply token, so an escalation threads a copy only under that person's own messages."""
    if not thread:
        return thread
    mine = [i for i in thread if (t := tokens.token_in_message_id(i)) and t.made_for(key, to)]
    return mine or None


def _thread_headers(
    message: EmailMessage, options: dict[str, Any], thread: list[str] | None
) -> None:
    """HumanLayer's in_reply_to / references ids, or the thread an escalation continues."""
    in_reply_to = options.get("in_reply_to_message_id") or options.get(
        "experimental_in_reply_to_message_id"
    )
    references = options.get("references_message_id") or options.get(
        "experimental_references_message_id"
    )
    if thread:
        in_reply_to, references = thread[-1], " ".join(thread)
    if in_reply_to:
        message["In-Reply-To"] = one_line(str(in_reply_to))
    if references:
        message["References"] = one_line(str(references))


def reply_to(
    original: EmailMessage, to: str, text: str, settings: EmailSettings, key: bytes, rid: str
) -> EmailMessage:
    """A short threaded answer to someone's reply (a confirmation, or why nothing changed)."""
    message = EmailMessage()
    message["From"] = settings.sender
    message["To"] = to
    message["Reply-To"] = tokens.reply_address(settings.reply_base, rid, key, to)
    title = one_line(str(original.get("Subject", "") or "your reply"))
    message["Subject"] = title if title.lower().startswith("re:") else f"Re: {title}"
    message["Date"] = formatdate(localtime=False)
    message["Message-ID"] = tokens.message_id(rid, key, settings.domain, to=to)
    original_id = one_line(str(original.get("Message-ID", "") or ""))
    if original_id:
        message["In-Reply-To"] = original_id
        earlier = one_line(str(original.get("References", "") or ""))
        message["References"] = f"{earlier} {original_id}".strip()
    message["Auto-Submitted"] = "auto-replied"
    message.set_content(text + "\n")
    return message


def _in_thread(
    ref: dict[str, Any],
    to: list[str],
    settings: EmailSettings,
    key: bytes,
    rid: str,
    *,
    cc: list[str] | None = None,
    stable: str | None = None,
) -> EmailMessage:
    """The headers of a message in a request's thread: under the email `send` made (`ref`)."""
    message = EmailMessage(policy=_thread_policy)
    message["From"] = settings.sender
    message["To"] = ", ".join(to)
    if cc:
        message["Cc"] = ", ".join(cc)
    message["Subject"] = f"Re: {ref['subject']}"
    message["Date"] = formatdate(localtime=False)
    one = to[0] if len(to) == 1 and not cc else None  # a token only for a message to one person
    message["Message-ID"] = tokens.message_id(rid, key, settings.domain, to=one, stable=stable)
    # Under the copy this person got (each recipient got their own).
    parent = (ref.get("message_ids") or {}).get(one or "", ref["message_id"])
    message["In-Reply-To"] = parent
    message["References"] = parent
    message["Auto-Submitted"] = "auto-generated"
    return message


def notice(
    ref: dict[str, Any], text: str, settings: EmailSettings, key: bytes, rid: str
) -> EmailMessage:
    """A note in a request's thread to everyone it went to (decided elsewhere, expired)."""
    # The same note sent again (a retried update) keeps its Message-ID: one note in the thread.
    stable = f"notice\n{ref['message_id']}\n{text}"
    message = _in_thread(ref, ref["to"], settings, key, rid, cc=ref.get("cc"), stable=stable)
    message.set_content(text + "\n")
    return message


def reminder(
    request: RequestView,
    ref: dict[str, Any],
    to: list[str],
    text: str,
    settings: EmailSettings,
    key: bytes,
    number: int = 1,
) -> EmailMessage:
    """A reminder in the request's thread to `to`, answerable like the request itself: the
    same Reply-To token, and the same instructions under the reminder sentence `text`. Its
    Message-ID depends on the reminder's `number` only, so a retry sends the same message."""
    stable = f"reminder\n{ref['message_id']}\n{number}\n{to}"
    message = _in_thread(ref, to, settings, key, request.rid, stable=stable)
    one = to[0] if len(to) == 1 else None
    message["Reply-To"] = tokens.reply_address(settings.reply_base, request.rid, key, one)
    context = _context(request, None) | {"reminder": text}
    body = _files.get_template("reminder.txt.j2").render(context)
    message.set_content(_text_with(_grant_hint(request), body))
    return message
