"""Requests as Slack Block Kit messages: pure functions, no network.

Agent-supplied text is data: `&`, `<` and `>` are escaped so `<!channel>`, `<@U1>` or
`<https://x|Approve>` render literally (api.slack.com/reference/surfaces/formatting), and
text objects stay within Slack's 3,000 characters, truncated with a link, never dropped.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from channels.slack.edit_form import offers_edit
from gateway.lifecycle import Kind, Status
from gateway.seam import (
    CUT,
    RequestView,
    Responder,
    Verb,
    describe,
    encode,
    origin_line,
    plain_who,
    reminder_text,
    shorten,
)
from gateway.seam.grants import SCOPE_WORDS, by_scope
from gateway.vocabulary import AnsweredIn

TEXT_LIMIT = 3000  # Block Kit text object limit
MAX_KWARG_BLOCKS = 40  # messages hold 50 blocks; keep room for header, context, actions
_SLACK_USER = re.compile(r"^[UW][A-Z0-9]{2,20}$")

Block = dict[str, Any]


def escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def fit(text: str, link: str | None, limit: int = TEXT_LIMIT) -> str:
    """`text` (already escaped) within `limit`, pointing at the full request if cut."""
    return shorten(text, limit, more=f"… <{link}|see the full request>" if link else CUT)


def mention(user_id: str) -> str:
    """A mention only for real Slack user ids; anything else renders as escaped text."""
    return f"<@{user_id}>" if _SLACK_USER.match(user_id) else escape(user_id)


def _mrkdwn(text: str) -> Block:
    return {"type": "mrkdwn", "text": text}


def _section(text: str) -> Block:
    return {"type": "section", "text": _mrkdwn(text)}


def _button(text: str, callback: str, style: str | None = None) -> Block:
    """`callback` (the shared callback id) is both the action_id and the value."""
    button: Block = {
        "type": "button",
        "action_id": callback,
        "value": callback,
        "text": {"type": "plain_text", "text": text[:75], "emoji": True},
    }
    if style:
        button["style"] = style
    return button


def _plain(text: str) -> Block:
    return {"type": "plain_text", "text": text[:75]}  # an option's text and a group's label


def _grant_select(request: RequestView) -> Block:
    """ "Approve and allow…": the durations offered, grouped by scope."""
    groups = [
        {
            "label": _plain(SCOPE_WORDS[scope].capitalize()),
            "options": [{"text": _plain(c.duration), "value": c.value} for c in choices],
        }
        for scope, choices in by_scope(request.grant_choices).items()
    ]
    return {
        "type": "static_select",
        "action_id": encode(Verb.GRANT, request.rid),
        "placeholder": _plain("Approve and allow…"),
        "option_groups": groups,
    }


def _approve_elements(request: RequestView) -> list[Block]:
    """Approve, and the ways of approving the request offers besides."""
    elements = [_button("Approve", encode(Verb.APPROVE, request.rid), "primary")]
    if request.grant_choices:
        elements.append(_grant_select(request))
    if offers_edit(request):
        elements.append(_button("Edit and approve", encode(Verb.EDIT, request.rid)))
    return elements


def _kwarg_text(name: str, value: Any) -> str:
    if isinstance(value, str) and "\n" not in value and len(value) <= 200:
        return f"*{escape(name)}*: {escape(value)}"
    rendered = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    return f"*{escape(name)}*\n```{escape(rendered)}```"


def _kwarg_blocks(kwargs: dict[str, Any], link: str | None) -> list[Block]:
    blocks = [_section(fit(_kwarg_text(k, v), link)) for k, v in kwargs.items()]
    if len(blocks) > MAX_KWARG_BLOCKS:
        hidden = len(blocks) - MAX_KWARG_BLOCKS + 1
        more = f"…and {hidden} more arguments" + (
            f": <{link}|see the full request>" if link else ""
        )
        blocks = [*blocks[: MAX_KWARG_BLOCKS - 1], _section(more)]
    return blocks


def _context(request: RequestView, responders: list[str] | None) -> Block:
    parts = [f"call `{escape(request.call_id)}`", f"requested {_date(request.requested_at)}"]
    if responders:
        parts.append("may respond: " + ", ".join(mention(r) for r in responders))
    return {"type": "context", "elements": [_mrkdwn(" · ".join(parts))]}


def _origin(request: RequestView) -> list[Block]:
    """Where the request came from, as a context block; none for a plain API request. The
    MCP client names itself in its initialize handshake, so its name is escaped too."""
    line = origin_line(request)
    if line is None:
        return []
    return [{"type": "context", "elements": [_mrkdwn(fit(escape(line), request.link))]}]


def _option_buttons(request: RequestView, key: str, style: str | None) -> list[Block]:
    options = request.spec.get(key) or []
    return [
        _button(
            option.get("title") or option["name"], encode(Verb.OPTION, request.rid, index), style
        )
        for index, option in enumerate(options)
    ]


def approval_message(request: RequestView, responders: list[str] | None = None) -> dict[str, Any]:
    """`text` and `blocks` for chat.postMessage: who asks, what, and the decision buttons."""
    run_id, fn = escape(request.run_id), escape(str(request.spec.get("fn", "")))
    headline = f"Agent *{run_id}* wants to call `{fn}`"
    buttons = [
        *_approve_elements(request),
        _button("Reject", encode(Verb.REJECT, request.rid), "danger"),
        *_option_buttons(request, "reject_options", "danger"),
    ]
    blocks = [
        _section(fit(headline, request.link)),
        *_origin(request),
        *_kwarg_blocks(request.spec.get("kwargs") or {}, request.link),
        _context(request, responders),
        {"type": "actions", "block_id": "gw_decision", "elements": buttons[:25]},
    ]
    return {"text": f"Agent {run_id} wants to call {fn}", "blocks": blocks}


def contact_message(request: RequestView, responders: list[str] | None = None) -> dict[str, Any]:
    """A question: the message, one button per response option, answers in the thread."""
    run_id = escape(request.run_id)
    question = fit(escape(str(request.spec.get("msg", ""))), request.link)
    blocks: list[Block] = [
        _section(fit(f"Agent *{run_id}* asks:", request.link)),
        _section(question),
        *_origin(request),
        _context(request, responders),
    ]
    buttons = _option_buttons(request, "response_options", None)
    if buttons:
        blocks.append({"type": "actions", "block_id": "gw_answer", "elements": buttons[:25]})
    blocks.append({"type": "context", "elements": [_mrkdwn("Reply in this thread to answer.")]})
    return {"text": f"Agent {run_id} asks: {question[:150]}", "blocks": blocks}


def who(responder: Responder) -> str:
    """A person as Slack shows them: a mention for a Slack user, else their name."""
    if responder.via == AnsweredIn.SLACK and responder.id:
        return mention(responder.id)
    return escape(plain_who(responder))


_EMOJI = {
    Status.APPROVED: ":white_check_mark:",
    Status.REJECTED: ":x:",
    Status.RESPONDED: ":speech_balloon:",
}


def outcome_line(request: RequestView) -> str:
    """The core's outcome sentence, with Slack's mentions, dates and an emoji."""
    sentence = describe(request, who=who, when=_date, text=escape)
    return fit(f"{_EMOJI.get(request.status, ':hourglass:')} {sentence}", request.link)


def _date(moment: datetime) -> str:
    """Slack shows this in each reader's own time zone."""
    return f"<!date^{int(moment.timestamp())}^{{date_short_pretty}} {{time}}|{moment.isoformat()}>"


def posted_message(request: RequestView, responders: list[str] | None = None) -> dict[str, Any]:
    """The message `send` posts: an approval for a function call, else a question."""
    render = approval_message if request.kind == Kind.FUNCTION_CALL else contact_message
    return render(request, responders)


def progress_message(request: RequestView, responders: list[str] | None = None) -> dict[str, Any]:
    """A pending request's post as first sent, buttons kept, plus where its approval policy
    stands ("1 of 2 approvals: Alice (Slack)") above the buttons (chat.update)."""
    posted = posted_message(request, responders)
    if request.progress is None:  # nothing counted yet: the post as it was sent
        return posted
    blocks = posted["blocks"]
    at = next((i for i, b in enumerate(blocks) if b["type"] == "actions"), len(blocks))
    line = {"type": "context", "elements": [_mrkdwn(outcome_line(request))]}
    return posted | {"blocks": [*blocks[:at], line, *blocks[at:]]}


def reminder_line(request: RequestView, mentions: list[str]) -> str:
    """`<@U1> <@U2> Reminder: …`: the people still awaited, then the core's reminder."""
    return " ".join([*(mention(m) for m in mentions), escape(reminder_text(request))])


def decided_message(request: RequestView) -> dict[str, Any]:
    """The original message with its buttons replaced by the outcome (chat.update)."""
    posted = posted_message(request)
    kept = [block for block in posted["blocks"] if block["type"] != "actions"]
    if request.kind == Kind.HUMAN_CONTACT:
        kept = kept[:-1]  # "Reply in this thread" no longer applies
    line = outcome_line(request)
    return {"text": line, "blocks": [*kept, {"type": "context", "elements": [_mrkdwn(line)]}]}
