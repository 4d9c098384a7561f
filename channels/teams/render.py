"""Requests as Adaptive Cards (adaptivecards.io, schema 1.5) with Universal Actions: pure
functions, no network.

Agent text is data. Everything an agent or a person wrote (run id, function, arguments,
question, option titles, names) goes into `TextRun`s of a `RichTextBlock`, which Adaptive
Cards render without markdown, or into button titles and input values, which are plain
text; no mention entity is ever made from it. So `**bold**`, `[link](…)`, `<at>General</at>`
or `@channel` in a request show as typed and ping nobody. The gateway's own words are
`TextBlock`s; the one place a person's name enters a `TextBlock` (a reminder's `<at>` mention)
goes through `escape`. Teams keeps a message under ~28 KB: texts are cut with a link to the
request, never dropped.

Buttons are `Action.Execute` whose verb is the shared callback id (`gw:<verb>:<rid>`), so a
click on a card posted by an earlier process still lands. Forms (a reason, an answer, edited
arguments, a grant's scope) are `Action.ShowCard`s holding the inputs and their own
`Action.Execute`; Teams sends the inputs' values in the action's `data`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gateway.lifecycle import Kind, Status
from gateway.seam import (
    CUT,
    RequestView,
    Verb,
    describe,
    encode,
    origin_line,
    reminder_text,
    shorten,
)
from gateway.seam.edits import MAX_FIELD_CHARS, edit_fields, fits_form
from gateway.seam.grants import SCOPE_WORDS, by_scope

ADAPTIVE = "application/vnd.microsoft.card.adaptive"
VERSION = "1.5"  # Teams renders 1.5 for bots; Action.Execute needs 1.4
TEXT_LIMIT = 2000  # one text run
KWARGS_BUDGET = 16_000  # characters of arguments in one card (Teams: ~28 KB a message)
MAX_EDIT_FIELDS = 10
OPTIONS_PER_ROW = 5
REASON, ANSWER, GRANT, COMMENT = "reason", "answer", "grant", "comment"  # input ids
WHY = "Why? The agent reads this."
WIDE = {"width": "Full"}  # a request's card takes the message's whole width
_AAD_OBJECT_ID = re.compile(r"^[0-9a-fA-F]{8}(-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}$")
_MARKDOWN = re.compile(r"([\\`*_{}\[\]()#+\-.!|~])")  # `<` and `>` are replaced
_EMOJI = {Status.APPROVED: "✅", Status.REJECTED: "❌", Status.RESPONDED: "💬"}

Card = dict[str, Any]
Element = dict[str, Any]


def escape(text: str) -> str:
    """Plain text for a `TextBlock` (Teams' markdown subset): markdown characters escaped,
    and `<`/`>` made harmless, so `<at>…</at>` cannot become a mention."""
    text = _MARKDOWN.sub(r"\\\1", text)
    return text.replace("<", "\u2039").replace(">", "\u203a")  # single angle quotes


def is_aad_object_id(value: str) -> bool:
    return bool(_AAD_OBJECT_ID.match(value))


def run(text: str, **style: Any) -> Element:
    """A run of text shown exactly as given (TextRuns take no markdown)."""
    return {"type": "TextRun", "text": text, **style}


def rich(*runs: Element, **props: Any) -> Element:
    return {"type": "RichTextBlock", "inlines": list(runs), **props}


def words(text: str, **props: Any) -> Element:
    """The gateway's own words (no agent text), wrapped."""
    return {"type": "TextBlock", "text": text, "wrap": True, **props}


def card(body: list[Element], actions: list[Element] | None = None, **extra: Any) -> Card:
    made: Card = {"type": "AdaptiveCard", "version": VERSION, "body": body, **extra}
    if actions:
        made["actions"] = actions
    return made


def _fit(text: str, request: RequestView, limit: int = TEXT_LIMIT) -> list[Element]:
    """`text` as a run, cut to `limit` with a link to the full request (or a plain mark)."""
    if len(text) <= limit:
        return [run(text)]
    if request.link is None:
        return [run(shorten(text, limit, more=CUT))]
    return [run(shorten(text, limit, more="… ")), *_full_request(request)]


def _full_request(request: RequestView) -> list[Element]:
    """A run that opens the request's page, where there is one."""
    if request.link is None:
        return []
    link = {"type": "Action.OpenUrl", "url": request.link}
    return [run("see the full request", selectAction=link)]


def _execute(title: str, verb: str, **extra: Any) -> Element:
    return {"type": "Action.Execute", "title": title[:80], "verb": verb, **extra}


def _show(title: str, body: list[Element], actions: list[Element]) -> Element:
    """A form that opens under the button (its card takes the outer card's version)."""
    form = {"type": "AdaptiveCard", "body": body, "actions": actions}
    return {"type": "Action.ShowCard", "title": title[:80], "card": form}


def _text_input(ident: str, label: str, value: str | None = None, **more: Any) -> Element:
    element = {
        "type": "Input.Text",
        "id": ident,
        "label": label,
        "isMultiline": True,
        "maxLength": MAX_FIELD_CHARS,
        **more,
    }
    if value:
        element["value"] = value[:MAX_FIELD_CHARS]
    return element


def _reason_form(title: str, verb: str, ident: str, prefill: str | None) -> Element:
    """A reason, required, then the button that rejects with it."""
    field = _text_input(ident, WHY, prefill, isRequired=True, errorMessage="Give a reason")
    return _show(title, [field], [_execute(title.rstrip("…"), verb, style="destructive")])


def _headline(request: RequestView) -> Element:
    run_id = run(request.run_id, weight="bolder")
    if request.kind == Kind.FUNCTION_CALL:
        fn = run(str(request.spec.get("fn", "")), weight="bolder", fontType="monospace")
        return rich(run("Agent "), run_id, run(" wants to call "), fn)
    return rich(run("Agent "), run_id, run(" asks:"))


def _kwarg(name: str, value: Any, request: RequestView, room: int) -> list[Element]:
    if isinstance(value, str) and "\n" not in value and len(value) <= 200:
        return [rich(run(name, weight="bolder"), run(": "), run(value))]
    text = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
    block = rich(*_fit(text, request, min(TEXT_LIMIT, room)), fontType="monospace")
    return [rich(run(name, weight="bolder")), {**block, "spacing": "none"}]


def _kwargs(request: RequestView) -> list[Element]:
    kwargs: dict[str, Any] = request.spec.get("kwargs") or {}
    elements: list[Element] = []
    budget = KWARGS_BUDGET
    for index, (name, value) in enumerate(kwargs.items()):
        if budget < 200:
            more = f"…and {len(kwargs) - index} more arguments"
            said = run(more + (": " if request.link else ""))
            elements.append(rich(said, *_full_request(request)))
            break
        shown = _kwarg(shorten(name, 200), value, request, budget)
        budget -= len(json.dumps(shown))
        elements += shown
    return elements


def _context(request: RequestView) -> list[Element]:
    when = request.requested_at.strftime("%Y-%m-%d %H:%M UTC")
    line = rich(run(f"call {request.call_id} · requested {when}", isSubtle=True, size="small"))
    origin = origin_line(request)
    if origin is None:
        return [line]
    return [rich(*_fit(origin, request), isSubtle=True, size="small"), line]


def _option_rows(request: RequestView) -> list[Element]:
    """One button per option (an interactive reject option opens its prefilled reason),
    in rows of five under the card's text."""
    buttons = []
    for index, option in enumerate(request.options):
        title = str(option.get("title") or option["name"])
        verb = encode(Verb.OPTION, request.rid, index)
        interactive = request.kind == Kind.FUNCTION_CALL and option.get("interactive")
        if interactive:
            prefill = option.get("prompt_fill")
            buttons.append(_reason_form(f"{title}…", verb, f"{REASON}_{index}", prefill))
        else:
            buttons.append(_execute(title, verb))
    return [
        {"type": "ActionSet", "actions": buttons[at : at + OPTIONS_PER_ROW]}
        for at in range(0, len(buttons), OPTIONS_PER_ROW)
    ]


def _grant_form(request: RequestView) -> list[Element]:
    """ "Approve and allow…": the scopes and durations the request offers."""
    if not request.grant_choices:
        return []
    choices = [
        {"title": f"{SCOPE_WORDS[scope].capitalize()}, {c.duration}", "value": c.value}
        for scope, listed in by_scope(request.grant_choices).items()
        for c in listed
    ]
    select: Element = {"type": "Input.ChoiceSet", "id": GRANT, "label": "Allow"}
    select |= {"choices": choices, "isRequired": True, "errorMessage": "Choose what to allow"}
    verb = encode(Verb.GRANT, request.rid)
    return [_show("Approve and allow…", [select], [_execute("Approve and allow", verb)])]


def editable(request: RequestView) -> bool:
    kwargs = request.spec.get("kwargs") or {}
    return request.editable and bool(kwargs) and fits_form(kwargs, MAX_EDIT_FIELDS)


def edit_input(index: int) -> str:
    """The input of the call's `index`-th argument (named by place, not by the agent)."""
    return f"arg_{index}"


def _edit_form(request: RequestView) -> list[Element]:
    if not editable(request):
        return []
    fields = edit_fields(request.spec.get("kwargs") or {})
    inputs = [
        _text_input(edit_input(i), f.name or "(no name)", f.text, isMultiline=f.as_json)
        for i, f in enumerate(fields)
    ]
    inputs.append(_text_input(COMMENT, "Comment for the agent (optional)"))
    verb = encode(Verb.EDIT, request.rid)
    return [_show("Edit and approve…", inputs, [_execute("Approve as edited", verb)])]


def _open(request: RequestView) -> list[Element]:
    if request.link is None:
        return []
    return [{"type": "Action.OpenUrl", "title": "Open in the console", "url": request.link}]


def posted_card(request: RequestView) -> Card:
    """The card `send` posts: an approval for a function call, else a question."""
    body = [_headline(request), *_body(request), *_context(request), *_option_rows(request)]
    if request.kind == Kind.FUNCTION_CALL:
        actions = [
            _execute("Approve", encode(Verb.APPROVE, request.rid), style="positive"),
            *_grant_form(request),
            *_edit_form(request),
            _reason_form("Reject…", encode(Verb.REJECT, request.rid), REASON, None),
        ]
    else:
        field = _text_input(ANSWER, "Your answer", isRequired=True, errorMessage="Type an answer")
        send = _execute("Send", encode(Verb.ANSWER, request.rid), style="positive")
        actions = [_show("Answer…", [field], [send])]
    return card(body, [*actions, *_open(request)], msteams=WIDE)


def _body(request: RequestView) -> list[Element]:
    if request.kind == Kind.FUNCTION_CALL:
        return _kwargs(request)
    return [rich(*_fit(str(request.spec.get("msg", "")), request, limit=8000))]


def outcome_line(request: RequestView) -> str:
    """The core's sentence, with an emoji: names and reasons stay plain (they go in a run)."""
    return f"{_EMOJI.get(request.status, '⌛')} {describe(request)}"


def as_it_stands(request: RequestView) -> Card:
    """The card as the request now stands: its buttons while pending, with a policy's
    progress once someone counted; the outcome without them once decided."""
    posted = posted_card(request)
    if request.status == Status.PENDING:
        if request.progress is None:  # nothing counted yet: the card as it was sent
            return posted
        line = rich(*_fit(outcome_line(request), request), weight="bolder")
        rows = [e for e in posted["body"] if e["type"] == "ActionSet"]
        kept = [e for e in posted["body"] if e["type"] != "ActionSet"]
        return posted | {"body": [*kept, line, *rows]}
    kept = [e for e in posted["body"] if e["type"] != "ActionSet"]
    line = rich(*_fit(outcome_line(request), request), weight="bolder")
    return card([*kept, line], _open(request), msteams=WIDE)


def summary(request: RequestView) -> str:
    """The plain notification text of the card's message."""
    if request.kind == Kind.FUNCTION_CALL:
        said = f"Agent {request.run_id} wants to call {request.spec.get('fn', '')}"
    else:
        said = f"Agent {request.run_id} asks: {request.spec.get('msg', '')}"
    return shorten(" ".join(said.split()), 200)


def note_card(text: str) -> Card:
    """A note under a post (a standing grant's uses, how a reply was read), as plain text."""
    return card([rich(run(shorten(text, TEXT_LIMIT, more=CUT)))])


def reminder_card(request: RequestView, people: list[tuple[str, str]]) -> Card:
    """The core's reminder, mentioning `people` ((AAD object id, name)): only ids that are
    AAD object ids become mentions, so nothing else (a channel, a team) can be pinged."""
    named = [(ident, escape(name or "approver")) for ident, name in people]
    named = [(ident, name) for ident, name in named if is_aad_object_id(ident)]
    body = [rich(run(reminder_text(request)))]
    if not named:
        return card(body)
    line = words(" ".join(f"<at>{name}</at>" for _, name in named))
    entities = [
        {"type": "mention", "text": f"<at>{name}</at>", "mentioned": {"id": ident, "name": name}}
        for ident, name in named
    ]
    return card([line, *body], msteams={"entities": entities})
