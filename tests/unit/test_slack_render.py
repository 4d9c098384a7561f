"""Golden tests for the Slack Block Kit renderers (pure: no network, no event loop)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from channels.slack.edit_form import (
    EDIT_MODAL,
    block_of,
    edit_modal,
    typed_arguments,
    typed_comment,
)
from channels.slack.render import (
    TEXT_LIMIT,
    approval_message,
    contact_message,
    decided_message,
    escape,
)
from gateway.seam.edits import EditProblem, read_edits
from gateway.seam.grants import offered
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


EIGHT_HOURS = offered(8 * 3600, until_revoked=False)


def actions_of(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_approve_and_allow_is_a_select_of_durations_grouped_by_scope() -> None:
    elements = actions_of(approval_message(view(grant_choices=EIGHT_HOURS)))
    assert [e["type"] for e in elements] == ["button", "static_select", "button"]
    select = elements[1]
    assert select["action_id"] == "gw:grant:RID123"
    assert select["placeholder"] == {"type": "plain_text", "text": "Approve and allow…"}
    groups = [(g["label"]["text"], g["options"]) for g in select["option_groups"]]
    assert [label for label, _ in groups] == [
        "These exact arguments",
        "This function in this run",
        "This function for this agent",
    ]
    durations = ["for 15 minutes", "for 1 hour", "for 4 hours", "for 8 hours"]
    run_options = groups[1][1]
    assert [o["text"]["text"] for o in run_options] == durations
    assert [o["value"] for o in run_options] == ["run:900", "run:3600", "run:14400", "run:28800"]
    texts = [o["text"]["text"] for _, options in groups for o in options]
    assert max(map(len, texts + [label for label, _ in groups])) <= 75
    assert max(len(o["value"]) for _, options in groups for o in options) <= 150


def test_no_select_where_no_grant_is_offered() -> None:
    assert [e["type"] for e in actions_of(approval_message(view()))] == ["button", "button"]


def test_edit_and_approve_is_offered_where_the_arguments_fit_a_modal() -> None:
    elements = actions_of(approval_message(view(editable=True, grant_choices=EIGHT_HOURS)))
    labels = [(e.get("text") or e["placeholder"])["text"] for e in elements]
    assert labels == ["Approve", "Approve and allow…", "Edit and approve", "Reject"]
    assert elements[2]["action_id"] == elements[2]["value"] == "gw:edit:RID123"
    too_many = {"fn": "f", "kwargs": {f"k{i}": i for i in range(41)}}
    too_long = {"fn": "f", "kwargs": {"doc": "x" * 3001}}
    nothing = {"fn": "f", "kwargs": {}}
    for spec in (too_many, too_long, nothing):
        buttons = actions_of(approval_message(view(editable=True, spec=spec)))
        assert "gw:edit:RID123" not in [e["action_id"] for e in buttons]
    assert len(actions_of(approval_message(view(spec=too_many)))) == 2  # not editable


def test_many_reject_options_keep_every_way_of_approving_within_25_elements() -> None:
    spec = {"fn": "f", "kwargs": {"a": 1}, "reject_options": [{"name": f"o{i}"} for i in range(30)]}
    elements = actions_of(
        approval_message(view(spec=spec, editable=True, grant_choices=EIGHT_HOURS))
    )
    assert len(elements) == 25
    assert [e["action_id"].split(":")[1] for e in elements[:4]] == [
        "approve",
        "grant",
        "edit",
        "reject",
    ]


def test_the_decided_message_says_what_was_allowed_and_edited_and_offers_nothing() -> None:
    approved = view(
        status="approved",
        user_info={
            "channel": "slack",
            "user_id": "U0ALICE",
            "allowed": "drop_table in this run, for 1 hour",
        },
        responded_at=REQUESTED,
        updated_kwargs={"name": "users_copy"},
        editable=True,
        grant_choices=EIGHT_HOURS,
    )
    message = decided_message(approved)
    assert message["text"].startswith(":white_check_mark: Approved by <@U0ALICE> at ")
    assert message["text"].endswith(
        ", with edited arguments (name), and allowed drop_table in this run, for 1 hour"
    )
    assert not [b for b in message["blocks"] if b["type"] == "actions"]
    assert "static_select" not in all_text(message) and "gw:edit:" not in all_text(message)


def test_the_edit_modal_has_one_input_per_argument() -> None:
    kwargs = {"path": "/etc/passwd", "lines": 10, "follow": False, "opts": {"mode": "r"}}
    modal = edit_modal(view(spec={"fn": "read_file", "kwargs": kwargs}, editable=True), "C1:1.1")
    assert modal["callback_id"] == EDIT_MODAL
    assert json.loads(modal["private_metadata"]) == {"rid": "RID123", "copy": "C1:1.1"}
    inputs = [b for b in modal["blocks"] if b["type"] == "input"]
    assert [(b["block_id"], b["label"]["text"]) for b in inputs] == [
        ("gw_arg_0", "path"),
        ("gw_arg_1", "lines"),
        ("gw_arg_2", "follow"),
        ("gw_arg_3", "opts"),
        ("gw_comment", "Comment for the agent"),
    ]
    fields = [b["element"] for b in inputs[:4]]
    assert [f.get("initial_value") for f in fields] == [
        "/etc/passwd",
        "10",
        "false",
        '{\n  "mode": "r"\n}',
    ]
    assert [f["multiline"] for f in fields] == [False, False, False, True]
    assert [b.get("hint", {}).get("text") for b in inputs[:4]] == [
        None,
        "A whole number",
        "true or false",
        "JSON",
    ]
    assert len(modal["blocks"]) <= 100 and len(modal["title"]["text"]) <= 24


def test_what_was_typed_in_the_modal_reads_back_as_the_arguments() -> None:
    kwargs = {"path": "/etc/passwd", "opts": {"mode": "r"}}

    def state(**texts: str | None) -> dict[str, Any]:
        values = {
            block: {"text": {"type": "plain_text_input", "value": text}}
            for block, text in texts.items()
        }
        return {"state": {"values": values}}

    typed = typed_arguments(state(gw_arg_0="/tmp/safe", gw_arg_1='{"mode": "w"}'), kwargs)
    assert read_edits(kwargs, typed) == {"path": "/tmp/safe", "opts": {"mode": "w"}}
    emptied = typed_arguments(state(gw_arg_0=None), kwargs)  # Slack sends null for empty
    assert read_edits(kwargs, emptied) == {"path": "", "opts": {"mode": "r"}}
    problem = read_edits(kwargs, typed_arguments(state(gw_arg_1="{mode"), kwargs))
    assert isinstance(problem, EditProblem) and block_of(kwargs, problem.field) == "gw_arg_1"
    assert typed_comment(state(gw_comment="  safer path ")) == "safer path"
