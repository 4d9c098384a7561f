"""The published humanlayer 0.7.9 SDK, unchanged, against a live `gateway serve`: the agent
holds the key first start printed (an agent key), and whoever answers holds a responder key."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from humanlayer import (
    ContactChannel,
    FunctionCallSpec,
    HumanContactSpec,
    HumanLayer,
    ResponseOption,
    SlackContactChannel,
)
from humanlayer.core.models import FunctionCallStatus, HumanContactStatus
from humanlayer.core.protocol import HumanLayerException

from tests.services.gateway_process import GatewayProcess


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    server = GatewayProcess(tmp_path_factory.mktemp("sdk")).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def responder_key(live: GatewayProcess) -> str:
    return live.new_key("responder", "--name", "answering front end")


def fast_sleep(_seconds: int) -> None:
    time.sleep(0.02)  # the SDK polls every 3 s; the test only needs it to poll again


def sdk(live: GatewayProcess, key: str | None = None, **kwargs: Any) -> HumanLayer:
    api_key = key or live.api_key
    return HumanLayer(api_key=api_key, api_base_url=live.api_base, sleep=fast_sleep, **kwargs)


def answer_when_pending(
    live: GatewayProcess, key: str, kind: str, body: dict[str, Any], fn: str = "send_email"
) -> threading.Thread:
    """A person answering from another thread, through a responder key, while the SDK polls.
    Only a request for `fn` is answered: other tests on this gateway leave theirs pending."""

    def respond() -> None:
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=live.api_base, headers=headers, timeout=10) as client:
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                listed = client.get(f"/agent/{kind}/pending").json()["items"]
                items = [i for i in listed if kind != "function_calls" or i["spec"]["fn"] == fn]
                if items:
                    reply = client.post(f"/agent/{kind}/{items[0]['call_id']}/respond", json=body)
                    assert reply.status_code == 200, reply.text
                    return
                time.sleep(0.02)  # a person glancing at the queue

    thread = threading.Thread(target=respond, daemon=True)
    thread.start()
    return thread


def test_function_call_round_trip(live: GatewayProcess, responder_key: str) -> None:
    hl = sdk(live, run_id="compat-run")
    spec = FunctionCallSpec(fn="send_email", kwargs={"to": "a@b.c"}, state={"thread": [1, 2]})
    created = hl.create_function_call(spec, call_id="compat-fc-1")
    assert created.call_id == "compat-fc-1" and created.run_id == "compat-run"

    pending = hl.get_function_call("compat-fc-1")
    assert pending.status is not None and pending.status.approved is None

    person = sdk(live, responder_key)
    person.respond_to_function_call("compat-fc-1", FunctionCallStatus(approved=True, comment="ok"))
    done = hl.get_function_call("compat-fc-1")
    assert done.status is not None and done.status.approved is True
    assert done.status.comment == "ok" and done.status.responded_at is not None
    assert done.spec.state == {"thread": [1, 2]}

    raw = httpx.get(
        f"{live.api_base}/function_calls/compat-fc-1",
        headers={"Authorization": f"Bearer {live.api_key}"},
    ).json()
    assert raw["status"]["user_info"]["channel"] == "api"
    assert raw["status"]["user_info"]["name"]


def test_the_agents_own_key_cannot_respond_through_the_sdk(live: GatewayProcess) -> None:
    agent = sdk(live)
    agent.create_function_call(FunctionCallSpec(fn="drop_db", kwargs={}), call_id="compat-self")
    with pytest.raises(HumanLayerException, match="403") as raised:
        agent.respond_to_function_call("compat-self", FunctionCallStatus(approved=True))
    assert "'responder'" in str(raised.value)
    assert agent.get_function_call("compat-self").status.approved is None  # type: ignore[union-attr]


def test_double_respond_is_409(live: GatewayProcess, responder_key: str) -> None:
    sdk(live).create_function_call(FunctionCallSpec(fn="drop_db", kwargs={}), call_id="compat-409")
    person = sdk(live, responder_key)
    person.respond_to_function_call("compat-409", FunctionCallStatus(approved=False, comment="no"))
    with pytest.raises(HumanLayerException, match="409") as raised:
        person.respond_to_function_call("compat-409", FunctionCallStatus(approved=True))
    assert "already rejected" in str(raised.value)


def decorated(hl: HumanLayer, calls: list[dict[str, Any]]) -> Callable[..., Any]:
    @hl.require_approval()
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        calls.append({"to": to, "body": body})
        return f"sent to {to}"

    return send_email


def test_require_approval_runs_on_approval(live: GatewayProcess, responder_key: str) -> None:
    calls: list[dict[str, Any]] = []
    send_email = decorated(sdk(live), calls)
    responder = answer_when_pending(live, responder_key, "function_calls", {"approved": True})
    assert send_email(to="ceo@corp.com", body="hi") == "sent to ceo@corp.com"
    responder.join(5)
    assert calls == [{"to": "ceo@corp.com", "body": "hi"}]


def test_require_approval_reports_rejection(live: GatewayProcess, responder_key: str) -> None:
    calls: list[dict[str, Any]] = []
    send_email = decorated(sdk(live), calls)
    responder = answer_when_pending(
        live, responder_key, "function_calls", {"approved": False, "comment": "not to the CEO"}
    )
    result = send_email(to="ceo@corp.com", body="hi")
    responder.join(5)
    assert result == "User denied send_email with message: not to the CEO"
    assert calls == []


def test_rejection_without_comment_still_satisfies_the_sdk(
    live: GatewayProcess, responder_key: str
) -> None:
    send_email = decorated(sdk(live), [])
    responder = answer_when_pending(live, responder_key, "function_calls", {"approved": False})
    result = send_email(to="x@y.z", body="b")
    responder.join(5)
    assert result.startswith("User denied send_email with message: Rejected in the API by ")


def test_human_contact_round_trip(live: GatewayProcess, responder_key: str) -> None:
    hl = sdk(live, run_id="compat-hc")
    spec = HumanContactSpec(
        msg="Which region?",
        state={"step": 3},
        response_options=[ResponseOption(name="eu", title="Europe")],
    )
    hl.create_human_contact(spec, call_id="compat-hc-1")
    assert hl.get_human_contact("compat-hc-1").status.response is None  # type: ignore[union-attr]
    person = sdk(live, responder_key)
    person.respond_to_human_contact("compat-hc-1", HumanContactStatus(response="eu-west-1"))
    done = hl.get_human_contact("compat-hc-1")
    assert done.status is not None and done.status.response == "eu-west-1"
    assert done.spec.state == {"step": 3}
    with pytest.raises(HumanLayerException, match="409"):
        person.respond_to_human_contact("compat-hc-1", HumanContactStatus(response="again"))


def test_human_as_tool_returns_the_answer(live: GatewayProcess, responder_key: str) -> None:
    ask = sdk(live).human_as_tool()
    responder = answer_when_pending(live, responder_key, "human_contacts", {"response": "ship it"})
    assert ask("May I deploy?") == "ship it"
    responder.join(5)


def test_slack_bot_token_is_never_echoed(live: GatewayProcess) -> None:
    hl = sdk(live)
    channel = ContactChannel(
        slack=SlackContactChannel(channel_or_user_id="C1", bot_token="xoxb-s3cret")
    )
    created = hl.create_function_call(
        FunctionCallSpec(fn="f", kwargs={}, channel=channel), call_id="compat-token"
    )
    assert created.spec.channel is not None and created.spec.channel.slack is not None
    assert created.spec.channel.slack.bot_token is None
    raw = httpx.get(
        f"{live.api_base}/function_calls/compat-token",
        headers={"Authorization": f"Bearer {live.api_key}"},
    )
    assert "xoxb-s3cret" not in raw.text


def test_bad_key_is_a_clear_error(live: GatewayProcess) -> None:
    hl = HumanLayer(api_key="hlgw_wrong", api_base_url=live.api_base, sleep=fast_sleep)
    with pytest.raises(HumanLayerException, match="401") as raised:
        hl.create_function_call(FunctionCallSpec(fn="f", kwargs={}))
    assert "invalid or revoked API key" in str(raised.value)


def test_env_configuration_works_unchanged(
    live: GatewayProcess, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("HUMANLAYER_API_KEY", live.api_key or "")
    monkeypatch.setenv("HUMANLAYER_API_BASE", live.api_base)
    hl = HumanLayer(sleep=fast_sleep)
    call = hl.create_function_call(FunctionCallSpec(fn="env_fn", kwargs={"a": 1}))
    assert call.call_id.startswith("call-")
    assert hl.get_function_call(call.call_id).spec.kwargs == {"a": 1}
