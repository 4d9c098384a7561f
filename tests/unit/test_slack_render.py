"""Golden tests for the Slack Block Kit renderers (pure: no network, no event loop)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from channels.slack.render import (
    TEXT_LIMIT,
    approval_message,
    contact_message,
    decided_message,
    escape,
)
from gateway.seam.views import RequestView
from tests.unit.views import REQUESTED, request_view

INJECTIONS = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U123>",
    "<!subteam^S1>",
    "<https://evil.example|Approve>",
    "*APPROVED*",
    "a & b",
]


def view(**changes: Any) -> RequestView:
    return request_view(**changes)


def all_text(message: dict[str, Any]) -> str:
    return json.dumps(message)


def test_approval_golden() -> None:
    message = approval_message(view(), ["U0ALICE", "U0BOB"])
    assert message == {
        "text": "Agent deploy-bot wants to call drop_table",
        "blocks": [
            {
                "type": "section",
                "text": {"type": "mrkdwn", "text": "Agent *deploy-bot* wants to call `drop_table`"},
            },
            {"type": "section", "text": {"type": "mrkdwn", "text": "*name*: users"}},
            {
                "type": "context",
                "elements": [
                    {
                        "type": "mrkdwn",
                        "text": (
                            "call `call-1` · requested "
                            "<!date^1795316400^{date_short_pretty} {time}|"
                            "2026-11-22T03:00:00+00:00> · may respond: <@U0ALICE>, <@U0BOB>"
                        ),
                    }
                ],
            },
            {
                "type": "actions",
                "block_id": "gw_decision",
                "elements": [
                    {
                        "type": "button",
                        "action_id": "gw:approve:RID123",
                        "value": "gw:approve:RID123",
                        "text": {"type": "plain_text", "text": "Approve", "emoji": True},
                        "style": "primary",
                    },
                    {
                        "type": "button",
                        "action_id": "gw:reject:RID123",
                        "value": "gw:reject:RID123",
                        "text": {"type": "plain_text", "text": "Reject", "emoji": True},
                        "style": "danger",
                    },
                ],
            },
        ],
    }


def test_reject_options_get_their_own_buttons() -> None:
    spec = {
        "fn": "f",
        "kwargs": {},
        "reject_options": [{"name": "spam", "title": "Mark as spam"}, {"name": "later"}],
    }
    [actions] = [b for b in approval_message(view(spec=spec))["blocks"] if b["type"] == "actions"]
    labels = [(e["action_id"], e["value"], e["text"]["text"]) for e in actions["elements"]]
    rid = view(spec=spec).rid
    assert labels == [
        (f"gw:approve:{rid}", f"gw:approve:{rid}", "Approve"),
        (f"gw:reject:{rid}", f"gw:reject:{rid}", "Reject"),
        (f"gw:option:0:{rid}", f"gw:option:0:{rid}", "Mark as spam"),
        (f"gw:option:1:{rid}", f"gw:option:1:{rid}", "later"),
    ]


def test_structured_and_long_values_go_in_code_blocks() -> None:
    spec = {"fn": "f", "kwargs": {"body": "line one\nline two", "to": ["a@b.c", "d@e.f"]}}
    texts = [b["text"]["text"] for b in approval_message(view(spec=spec))["blocks"][1:3]]
    assert texts == ["*body*\n```line one\nline two```", '*to*\n```[\n  "a@b.c",\n  "d@e.f"\n]```']


@pytest.mark.parametrize("evil", INJECTIONS)
def test_agent_text_renders_literally(evil: str) -> None:
    spec = {"fn": evil, "kwargs": {evil: evil, "nested": {"x": evil}}}
    message = approval_message(view(spec=spec, run_id=evil, call_id=evil), [evil])
    rendered = all_text(message)
    for token in ("<!channel>", "<!here>", "<!everyone>", "<@U123>", "<!subteam", "<https://evil"):
        assert token not in rendered
    assert escape(evil) in rendered


def test_ten_thousand_characters_are_truncated_with_a_link() -> None:
    spec = {"fn": "f", "kwargs": {"doc": "x" * 10_000}}
    message = approval_message(view(spec=spec))
    texts = [b["text"]["text"] for b in message["blocks"] if b["type"] == "section"]
    assert all(len(t) <= TEXT_LIMIT for t in texts)
    assert texts[1].endswith("… <https://gw.example/r/RID123|see the full request>")
    assert texts[1].count("x") > 2900  # cut, not dropped


def test_many_kwargs_stay_within_fifty_blocks() -> None:
    spec = {"fn": "f", "kwargs": {f"k{i}": i for i in range(80)}}
    blocks = approval_message(view(spec=spec))["blocks"]
    assert len(blocks) <= 50
    assert any("and 41 more arguments" in b.get("text", {}).get("text", "") for b in blocks)


def test_contact_golden() -> None:
    spec = {"msg": "Which region? <!here>", "response_options": [{"name": "eu", "title": "EU"}]}
    message = contact_message(view(kind="human_contact", spec=spec))
    assert message["blocks"][1]["text"]["text"] == "Which region? &lt;!here&gt;"
    actions = [b for b in message["blocks"] if b["type"] == "actions"]
    rid = view(kind="human_contact", spec=spec).rid
    assert actions[0]["elements"][0]["action_id"] == f"gw:option:0:{rid}"
    assert message["blocks"][-1]["elements"][0]["text"] == "Reply in this thread to answer."


@pytest.mark.parametrize(
    ("status", "user_info", "extra", "expected"),
    [
        (
            "approved",
            {"channel": "slack", "user_id": "U0ALICE"},
            {},
            ":white_check_mark: Approved by <@U0ALICE> at ",
        ),
        (
            "rejected",
            {"channel": "api", "name": "<!channel> bot"},
            {"comment": "no <@U1>"},
            ":x: Rejected by &lt;!channel&gt; bot in the API at ",
        ),
    ],
)
def test_decided_message_replaces_buttons(
    status: str, user_info: dict[str, Any], extra: dict[str, Any], expected: str
) -> None:
    decided = view(status=status, user_info=user_info, responded_at=REQUESTED, **extra)
    message = decided_message(decided)
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert message["text"].startswith(expected)
    if "comment" in extra:
        assert message["text"].endswith(": no &lt;@U1&gt;")


def test_expired_request_loses_its_buttons_too() -> None:
    message = decided_message(view(status="expired"))
    assert "no longer be answered" in message["text"]
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
