"""The Slack renderers for a policy's progress and its reminders (pure: no network)."""

from __future__ import annotations

import json

from channels.slack.render import (
    approval_message,
    contact_message,
    progress_message,
    reminder_line,
)
from gateway.seam.views import Progress
from tests.unit.views import request_view

ALICE = {"channel": "slack", "user_id": "U0ALICE", "name": "Alice"}
EVIL = {"channel": "web", "user_id": "op", "name": "<!channel> & <@U123>"}


def test_progress_goes_just_above_the_buttons() -> None:
    view = request_view(progress=Progress(1, 2, (ALICE,)))
    blocks = progress_message(view, ["U0ALICE"])["blocks"]
    posted = approval_message(view, ["U0ALICE"])["blocks"]
    assert blocks == [
        *posted[:-1],
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": ":hourglass: 1 of 2 approvals: Alice (Slack)"}],
        },
        posted[-1],
    ]
    assert blocks[-1]["type"] == "actions"


def test_progress_keeps_the_posts_notification_text() -> None:
    view = request_view(progress=Progress(0, 3))
    message = progress_message(view)
    assert message["text"] == approval_message(view)["text"]
    assert ":hourglass: 0 of 3 approvals" in json.dumps(message["blocks"])


def test_without_progress_the_post_is_restored_as_sent() -> None:
    view = request_view()
    assert progress_message(view, ["U0BOB"]) == approval_message(view, ["U0BOB"])


def test_a_question_keeps_its_answer_buttons_and_thread_hint() -> None:
    view = request_view(
        kind="human_contact",
        spec={"msg": "Which region?", "response_options": [{"name": "eu"}]},
        progress=Progress(1, 2, (ALICE,)),
    )
    blocks = progress_message(view)["blocks"]
    posted = contact_message(view)["blocks"]
    assert [b for b in blocks if "approvals" not in json.dumps(b)] == posted
    assert [b["type"] for b in blocks[-3:]] == ["context", "actions", "context"]


def test_approver_names_render_literally() -> None:
    view = request_view(progress=Progress(1, 2, (EVIL,)))
    rendered = json.dumps(progress_message(view)["blocks"])
    assert "&lt;!channel&gt; &amp; &lt;@U123&gt; (the web console)" in rendered
    assert "<!channel>" not in rendered and "<@U123>" not in rendered


def test_reminder_mentions_slack_users_and_escapes_everything_else() -> None:
    view = request_view(progress=Progress(1, 2, (EVIL,)))
    line = reminder_line(view, ["U0BOB", "<!here>"])
    assert line.startswith("<@U0BOB> &lt;!here&gt; Reminder: this request is still waiting")
    assert line.endswith(
        "(1 of 2 approvals: &lt;!channel&gt; &amp; &lt;@U123&gt; (the web console))"
    )


def test_reminder_without_mentions_is_just_the_sentence() -> None:
    line = reminder_line(request_view(), [])
    assert line == "Reminder: this request is still waiting for a decision"
