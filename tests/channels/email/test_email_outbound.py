"""Outbound email against an SMTP sink that requires STARTTLS and AUTH (aiosmtpd)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import pytest

from channels.email import tokens
from channels.email.channel import KEY_PURPOSE
from gateway.errors import Conflict
from gateway.escalation import escalate
from gateway.store import requests as request_store
from gateway.wire.models import Escalation
from tests.channels.email.helpers import (
    ALICE,
    BOB,
    email_gateway,
    email_settings,
    sent_for,
    status,
    to_alice,
)
from tests.factories import RequestFactory
from tests.helpers import events, eventually, outbox_idle
from tests.services.inprocess import write_config
from tests.services.smtp_sink import SmtpSink


async def test_a_request_email_has_threading_headers_both_parts_and_a_reply_token(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    email = {
        "subject": "Drop the users table?",
        "in_reply_to_message_id": "<thread-1@example.org>",
        "references_message_id": "<thread-0@example.org> <thread-1@example.org>",
        "additional_recipients": [
            {"address": BOB, "field": "cc"},
            {"address": "audit@example.org", "field": "bcc"},
        ],
    }
    settings = email_settings(smtp_sink)
    async with email_gateway(tmp_path, settings, public_url="https://gw.example.test") as gw:
        rid = (await request_factory(gw, "mail-1", channel=to_alice(**email), settle=True)).rid
        copies = {sunk.rcpt_tos[0]: sunk for sunk in sent_for(smtp_sink, "mail-1")}
        key = gw.core.box.subkey(KEY_PURPOSE)
        event_types = [e["type"] for e in (await events(gw, "mail-1"))["events"]]
    # One message per recipient, each its own envelope: nobody's copy is anyone else's.
    assert sorted(copies) == sorted([ALICE, BOB, "audit@example.org"])
    assert all(len(copy.rcpt_tos) == 1 for copy in copies.values())
    for address, copy in copies.items():
        reply_to = str(copy.message["Reply-To"])
        assert tokens.rid_from_address(reply_to, "approvals@example.test", key, address) == rid
        other = BOB if address == ALICE else ALICE
        assert tokens.rid_from_address(reply_to, "approvals@example.test", key, other) is None
        assert f"/r/{rid}?t=" in copy.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    bcc = copies["audit@example.org"].message
    assert bcc["To"] == "audit@example.org" and bcc["Cc"] is None  # a Bcc names nobody else
    message = copies[ALICE].message
    assert message["Subject"] == "Drop the users table?"
    assert message["In-Reply-To"] == "<thread-1@example.org>"
    assert message["References"] == "<thread-0@example.org> <thread-1@example.org>"
    assert message["Auto-Submitted"] == "auto-generated"
    assert message["To"] == ALICE and message["Cc"] == BOB
    assert "Bcc" not in message and "audit@example.org" not in str(message)
    assert re.fullmatch(r"<[0-9a-f]+\.[a-z0-9]+\.[a-z0-9]+@example\.test>", message["Message-ID"])
    assert message.get_content_type() == "multipart/alternative"
    text = message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    html = message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "Reply APPROVE, or REJECT followed by your reason." in text
    assert "drop_table" in text and "users" in text
    assert f"https://gw.example.test/r/{rid}" in text and f"https://gw.example.test/r/{rid}" in html
    assert "delivered" in event_types


def allowing_templates(tmp_path: Path) -> Path:
    """A routing config whose default project lets its agents' templates render."""
    return write_config(
        tmp_path / "routing.toml", "[projects.default]\nallow_agent_templates = true\n"
    )


async def test_an_agents_template_is_ignored_unless_its_project_allows_it(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    template = "<h1>Pay {{ event.spec.kwargs.name }} now: http://phish.example</h1>"
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(gw, "tpl-0", channel=to_alice(template=template), settle=True)
    (sunk,) = sent_for(smtp_sink, "tpl-0")
    html = sunk.message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "phish.example" not in html and "drop_table" in html


async def test_the_agents_own_template_renders_with_humanlayers_context(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    template = (
        "<h1>{{ event.spec.fn }} for {{ event.run_id }}</h1>{{ event.spec.kwargs.name }}"
        "<a href='{{ urls.base_url }}?approve=true'>yes</a> {{ type }}"
    )
    allowed = allowing_templates(tmp_path)
    async with email_gateway(
        tmp_path, email_settings(smtp_sink), public_url="https://gw", config=allowed
    ) as gw:
        made = await request_factory(
            gw,
            "tpl-1",
            channel=to_alice(template=template),
            run_id="agent-7",
            kwargs={"name": "<b>x</b>"},
            settle=True,
        )
    (sunk,) = sent_for(smtp_sink, "tpl-1")
    html = sunk.message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "<h1>drop_table for agent-7</h1>" in html
    assert "&lt;b&gt;x&lt;/b&gt;" in html  # autoescaped
    assert f"https://gw/r/{made.rid}?approve=true" in html and "function_call" in html


async def test_a_template_the_sandbox_refuses_falls_back_to_ours(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    allowed = allowing_templates(tmp_path)
    async with email_gateway(tmp_path, email_settings(smtp_sink), config=allowed) as gw:
        await request_factory(gw, "tpl-2", channel=to_alice(template=template), settle=True)
    (sunk,) = sent_for(smtp_sink, "tpl-2")
    html = sunk.message.get_body(("html",)).get_content()  # type: ignore[union-attr]
    assert "drop_table" in html and "subclasses" not in html and "<class" not in html


async def test_a_temporary_smtp_failure_is_retried(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    smtp_sink.fail_next(451)
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(gw, "retry-1", channel=to_alice(), settle=True)
        deliveries = (await events(gw, "retry-1"))["deliveries"]
    assert [d["status"] for d in deliveries] == ["sent"]
    assert len(sent_for(smtp_sink, "retry-1")) == 1


async def test_a_permanent_smtp_failure_is_a_failed_delivery(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    smtp_sink.fail_next(550, message="5.1.1 No such user")
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(gw, "fail-1", channel=to_alice(), settle=True)
        audit = await events(gw, "fail-1")
    (delivery,) = audit["deliveries"]
    assert delivery["status"] == "failed"
    assert "550" in delivery["error"] and "No such user" in delivery["error"]
    assert "delivery_failed" in [e["type"] for e in audit["events"]]
    assert sent_for(smtp_sink, "fail-1") == []


async def test_line_breaks_cannot_inject_headers(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    evil = "Hello\r\nBcc: victim@example.org\r\nX-Injected: yes"
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw:
        await request_factory(
            gw, "crlf-1", channel=to_alice(subject=evil), kwargs={"note": evil}, settle=True
        )
    (sunk,) = sent_for(smtp_sink, "crlf-1")
    assert "victim@example.org" not in sunk.rcpt_tos
    assert sunk.message["X-Injected"] is None and sunk.message["Bcc"] is None
    assert "\n" not in str(sunk.message["Subject"])
    header_block = sunk.raw.split(b"\r\n\r\n", 1)[0]
    assert b"\r\nX-Injected" not in header_block and b"\r\nBcc:" not in header_block


async def test_escalation_resends_in_the_thread_to_the_merged_recipients(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    email = {"additional_recipients": [{"address": BOB, "field": "cc"}]}
    escalation = {
        "escalation_msg": "Nobody answered in an hour: please decide.",
        "additional_recipients": [{"address": "ops@example.org", "field": "to"}],
        "channel": {
            "email": {
                "address": "lead@example.org",
                "additional_recipients": [{"address": "cto@example.org", "field": "cc"}],
            }
        },
    }
    allowed = {"email_allowed_domains": "example.org"}
    async with email_gateway(tmp_path, email_settings(smtp_sink), **allowed) as gw:
        await request_factory(gw, "esc-1", channel=to_alice(**email), settle=True)
        first = {sunk.rcpt_tos[0]: sunk for sunk in sent_for(smtp_sink, "esc-1")}
        assert sorted(first) == sorted([ALICE, BOB])
        async with gw.client() as client:
            path = "/agent/function_calls/esc-1/escalate_email"
            response = await client.post(path, json=escalation)
            assert response.status_code == 200, response.text
        await eventually(lambda: outbox_idle(gw))
    later = [s for s in sent_for(smtp_sink, "esc-1") if s not in first.values()]
    assert sorted(s.rcpt_tos[0] for s in later) == sorted(
        ["lead@example.org", BOB, "ops@example.org", "cto@example.org"]
    )
    assert all(len(s.rcpt_tos) == 1 for s in later)  # each their own copy and token
    # Each copy threads only under that person's own earlier copy: a Message-ID carries its
    # recipient's reply token, so nobody is sent another's. Lead had none: a thread of its own.
    bobs = next(s for s in later if s.rcpt_tos == [BOB])
    assert bobs.message["In-Reply-To"] == first[BOB].message["Message-ID"]
    assert first[ALICE].message["Message-ID"] not in str(bobs.message)
    second = next(s for s in later if s.rcpt_tos == ["lead@example.org"])
    assert second.message["In-Reply-To"] is None
    assert str(second.message["Subject"]).startswith("Re: ")
    text = second.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
    assert text.startswith("Nobody answered in an hour: please decide.")


async def test_escalating_a_request_without_an_email_address_is_a_clear_409(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink)) as gw, gw.client() as client:
        await request_factory(gw, "noemail")
        response = await client.post(
            "/agent/function_calls/noemail/escalate_email", json={"escalation_msg": "x"}
        )
    assert response.status_code == 409
    assert "give escalation.channel.email.address" in response.text


async def test_the_emails_link_lets_its_recipient_decide_from_the_page_only_by_post(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    async with email_gateway(tmp_path, email_settings(smtp_sink), public_url="http://gw") as gw:
        await request_factory(gw, "link-1", channel=to_alice(), settle=True)
        (sunk,) = sent_for(smtp_sink, "link-1")
        text = sunk.message.get_body(("plain",)).get_content()  # type: ignore[union-attr]
        found = re.search(r"http://gw(/r/[\w-]+\?t=[\w.-]+)", text)
        assert found is not None, text
        async with httpx.AsyncClient(base_url=gw.base_url) as recipient:
            page = await recipient.get(found.group(1))  # what a link scanner does
            still_pending = (await status(gw, "link-1"))["approved"]
            csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
            assert csrf is not None, page.text
            token = found.group(1).split("?t=", 1)[1]
            form = {"t": token, "csrf": csrf.group(1), "action": "approve"}
            decided = await recipient.post(found.group(1).split("?")[0], data=form)
        result = await status(gw, "link-1")
    assert page.status_code == 200 and still_pending is None
    assert decided.status_code == 303, decided.text
    assert result["approved"] is True
    assert result["user_info"] == {
        "channel": "web",
        "user_id": ALICE,
        "name": ALICE,
        "email": ALICE,
        "by": "link",  # through her email's link, not a console sign-in
    }


async def test_an_escalation_of_a_request_decided_meanwhile_changes_nothing(
    tmp_path: Path, smtp_sink: SmtpSink, request_factory: RequestFactory
) -> None:
    """The race: the escalation read the request pending, then a decision landed before it
    wrote. It is refused (409) inside its own transaction: no route, event or email."""
    allowed = {"email_allowed_domains": "example.org"}
    async with email_gateway(tmp_path, email_settings(smtp_sink), **allowed) as gw:
        made = await request_factory(gw, "raced", channel=to_alice(), settle=True)
        stale = await gw.core.db.read(request_store.get_by_rid, made.rid)
        assert stale is not None and stale.status == "pending"
        async with gw.client() as client:
            body = {"approved": False, "comment": "no"}
            assert (await client.post("/agent/function_calls/raced/respond", json=body)).is_success
        escalation = Escalation(escalation_msg="please", channel={"email": {"address": BOB}})
        with pytest.raises(Conflict, match="already rejected"):
            await escalate(gw.core, stale, escalation)
        after = await gw.core.db.read(request_store.get_by_rid, made.rid)
        trail = await events(gw, "raced")
        await eventually(lambda: outbox_idle(gw))
    assert after is not None and after.route_json == stale.route_json
    assert "escalated" not in [e["type"] for e in trail["events"]]
    assert not [m for m in smtp_sink.messages if BOB in m.rcpt_tos]  # the escalation's
