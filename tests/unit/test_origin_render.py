"""Every channel shows where a request came from (issue 14, "Decisions carry their context"):
an MCP client's name and version and the tool, escaped for the channel's markup, because
the client names itself. A request without an origin renders exactly as before."""

from __future__ import annotations

import json
from dataclasses import replace
from email.message import EmailMessage
from typing import Any

import markupsafe
import pytest

from channels.discord import render as discord_render
from channels.email import compose
from channels.email.settings import EmailSettings
from channels.slack import render as slack_render
from channels.web import render as web_render
from gateway.lifecycle import Kind, Status
from gateway.seam.sentences import origin_line
from gateway.seam.targets import Target
from gateway.seam.views import RequestView
from gateway.wire.models import Origin
from tests.unit.views import request_view

HOSTILE = "<!here> @everyone **bold** [Approve](https://evil.example) <script>alert(1)</script>"
LINE = f"Requested through an MCP client: {HOSTILE} 1.0.3, tool request_approval"
QUESTION: dict[str, Any] = {"kind": Kind.HUMAN_CONTACT, "spec": {"msg": "Which region?"}}
KINDS = pytest.mark.parametrize("kind", [Kind.FUNCTION_CALL, Kind.HUMAN_CONTACT])


def origin(**fields: Any) -> dict[str, Any]:
    """`spec.origin` as the MCP front door stores it: validated, unset fields left out."""
    given = {"via": "mcp", "client": HOSTILE, "client_version": "1.0.3", "tool": "request_approval"}
    return Origin.model_validate(given | fields).model_dump(mode="json", exclude_none=True)


def pair(kind: Kind = Kind.FUNCTION_CALL) -> tuple[RequestView, RequestView]:
    """The same request with and without an origin."""
    plain = request_view(**(QUESTION if kind == Kind.HUMAN_CONTACT else {}))
    return replace(plain, spec=plain.spec | {"origin": origin()}), plain


def test_the_line_names_the_client_its_version_and_the_tool() -> None:
    with_origin, plain = pair()
    assert origin_line(with_origin) == LINE
    assert origin_line(plain) is None
    hook = replace(plain, spec=plain.spec | {"origin": {"via": "claude-code-hook", "tool": "Bash"}})
    assert origin_line(hook) == "Requested through a Claude Code hook: tool Bash"
    why = {"via": "mcp", "tool": "request_approval", "reason": "the table is unused"}
    assert origin_line(plain.spec | {"origin": why}) == (
        "Requested through an MCP client: tool request_approval. Reason: the table is unused"
    )


# --- Slack


def _slack(request: RequestView) -> dict[str, Any]:
    return slack_render.posted_message(request, ["U0ALICE"])


@KINDS
def test_slack_shows_the_origin_as_an_escaped_context_block(kind: Kind) -> None:
    with_origin, plain = pair(kind)
    message = _slack(with_origin)
    at = 1 if kind == Kind.FUNCTION_CALL else 2  # under the headline; under the question
    escaped = slack_render.escape(LINE)
    assert message["blocks"][at] == {
        "type": "context",
        "elements": [{"type": "mrkdwn", "text": escaped}],
    }
    assert "&lt;!here&gt;" in escaped and "&lt;script&gt;" in escaped
    assert "<!here>" not in json.dumps(message) and "<script>" not in json.dumps(message)
    blocks = message["blocks"]
    assert message | {"blocks": blocks[:at] + blocks[at + 1 :]} == _slack(plain)


@KINDS
def test_slack_keeps_the_origin_after_a_decision(kind: Kind) -> None:
    with_origin, _plain = pair(kind)
    decided = replace(with_origin, status=Status.APPROVED, user_info={"name": "Alice"})
    if kind == Kind.HUMAN_CONTACT:
        decided = replace(decided, status=Status.RESPONDED, response="eu-west")
    blocks = slack_render.decided_message(decided)["blocks"]
    assert _slack(with_origin)["blocks"][1 if kind == Kind.FUNCTION_CALL else 2] in blocks


# --- Discord


@KINDS
def test_discord_shows_the_origin_as_an_escaped_field(kind: Kind) -> None:
    with_origin, plain = pair(kind)
    render = discord_render.approval if kind == Kind.FUNCTION_CALL else discord_render.question
    embed, buttons = render(with_origin)
    field = embed.to_dict()["fields"][0]
    assert field == {"name": "Origin", "value": discord_render.escape(LINE), "inline": False}
    assert "@everyone" not in field["value"] and "@\u200beveryone" in field["value"]
    assert "**bold**" not in field["value"] and "\\*\\*bold\\*\\*" in field["value"]
    assert "\\[Approve]" in field["value"]  # an escaped bracket opens no masked link
    plain_embed, plain_buttons = render(plain)
    shown = embed.to_dict()
    shown["fields"] = shown["fields"][1:]
    if not shown["fields"]:
        del shown["fields"]
    assert (shown, buttons) == (plain_embed.to_dict(), plain_buttons)


def test_discord_keeps_embed_limits_with_the_longest_origin() -> None:
    # Every Label at its 255 characters, all of them markdown that escaping doubles.
    longest = origin(client="_" * 255, client_version="*" * 255, tool="~" * 255)
    question = request_view(**QUESTION)
    question = replace(question, spec={"msg": "m" * 5000, "origin": longest})
    kwargs = {f"arg{i}": "v" * 900 for i in range(30)}
    approval = request_view(spec={"fn": "f", "kwargs": kwargs, "origin": longest})
    for request in (question, approval):
        decided = replace(
            request, status=Status.REJECTED, comment="c" * 3000, user_info={"name": "Al"}
        )
        for embed in (discord_render.in_progress(request)[0], discord_render.decided(decided)):
            assert len(embed) <= discord_render.EMBED_TOTAL_LIMIT
            assert len(embed.fields) <= discord_render.MAX_FIELDS
            assert embed.fields[0].name == "Origin"
            assert all(len(f.value or "") <= discord_render.FIELD_VALUE_LIMIT for f in embed.fields)


# --- email


def _bodies(request: RequestView) -> tuple[str, str]:
    settings = EmailSettings(
        _env_file=None, smtp_host="localhost", email_from="Approvals <approvals@example.test>"
    )
    target = Target(channel="email", address={"address": "alice@example.org"}, via="test")
    message = compose.request_message(request, target, settings, b"k" * 32, to="alice@example.org")
    return _part(message, "plain"), _part(message, "html")


def _part(message: EmailMessage, subtype: str) -> str:
    body = message.get_body((subtype,))
    assert isinstance(body, EmailMessage)
    return str(body.get_content())


@KINDS
def test_email_shows_the_origin_in_both_bodies(kind: Kind) -> None:
    with_origin, plain = pair(kind)
    text, html = _bodies(with_origin)
    plain_text, plain_html = _bodies(plain)
    instructions = "Reply APPROVE" if kind == Kind.FUNCTION_CALL else "To answer, reply"
    assert f"\n\n{LINE}\n\n{instructions}" in text  # plain text is inert as it is
    assert text.replace(f"{LINE}\n\n", "", 1) == plain_text
    line = f'<p style="color: #656d76;">{markupsafe.escape(LINE)}</p>\n'
    assert line in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in line
    assert "<script>" not in html
    assert html.replace(line, "", 1) == plain_html


# --- the web console


def _console_view(request: RequestView) -> RequestView:
    """The request as the console door reads it back: routed to the console."""
    return replace(request, route=[{"channel": "web", "address": {}, "via": "test"}])


def _page(request: RequestView) -> tuple[dict[str, Any], str]:
    r = web_render.detail(_console_view(request), [], [])
    # The context the console's request_page passes (no viewer: no header forms).
    response = web_render.page(
        "request.html",
        r=r,
        viewer=None,
        csrf="c",
        action="/x",
        link_token=None,
        notice=None,
        edit_again=None,
    )
    return r, bytes(response.body).decode()


@KINDS
def test_the_console_page_shows_the_origin_under_the_crumbs(kind: Kind) -> None:
    with_origin, plain = pair(kind)
    r, html = _page(with_origin)
    plain_r, plain_html = _page(plain)
    assert r["origin"] == LINE and plain_r["origin"] is None
    line = f'  <p class="meta" data-origin>{markupsafe.escape(LINE)}</p>\n'
    assert f"ago</p>\n{line}  <h1>" in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in line and "<script>alert" not in html
    assert html.replace(line, "", 1) == plain_html
