""" "Add to Slack": the OAuth v2 flow against the fake's oauth.v2.access stores the
installation in the gateway's database, and that workspace's requests use its token."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from channels.slack.channel import SlackChannel
from channels.slack.pacing import Pacer
from channels.slack.settings import SlackSettings
from tests.channels.slack.helpers import SIGNING_SECRET, button_rid, click, send
from tests.fakes.slack import FakeSlack
from tests.helpers import eventually, outbox_idle
from tests.services.inprocess import RunningGateway, running_gateway, test_settings

# slack_sdk 3.47 builds aiohttp.BasicAuth for oauth.v2.access, which aiohttp now deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:BasicAuth is deprecated:DeprecationWarning")


@pytest.fixture
async def installable(tmp_path: Path) -> AsyncIterator[tuple[RunningGateway, FakeSlack]]:
    async with FakeSlack() as fake:
        settings = SlackSettings(
            _env_file=None,
            client_id="111.222",
            client_secret="oauth-secret",
            signing_secret=SIGNING_SECRET,
            api_url=fake.base_url,
        )
        gateway_settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/oauth.db")
        channels = {"slack": lambda context: SlackChannel(context, settings, pacer=Pacer(0))}
        async with running_gateway(gateway_settings, channels=channels) as gateway:
            yield gateway, fake


async def install(gateway: RunningGateway) -> httpx.Response:
    async with httpx.AsyncClient(base_url=gateway.base_url) as browser:
        page = await browser.get("/slack/install")
        assert page.status_code == 200
        [state] = re.findall(r"state=([\w-]+)", page.text)
        assert "oauth/v2/authorize" in page.text and "client_id=111.222" in page.text
        # Bolt's state cookie is Secure (installs run over https): hand it back explicitly.
        cookie = page.headers["set-cookie"].split(";", 1)[0]
        return await browser.get(
            "/slack/oauth_redirect",
            params={"code": "c0de", "state": state},
            headers={"cookie": cookie},
        )


async def test_install_then_post_with_the_workspace_token(
    installable: tuple[RunningGateway, FakeSlack],
) -> None:
    gateway, fake = installable
    finished = await install(gateway)
    assert finished.status_code == 200, finished.text
    [exchange] = fake.calls_to("oauth.v2.access")
    assert exchange.params["code"] == "c0de"

    spec = {
        "fn": "f",
        "kwargs": {},
        "channel": {"slack": {"channel_or_user_id": "C5", "team_id": "T2"}},
    }
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": "in-t2", "spec": spec}
        assert (await client.post("/function_calls", json=body)).status_code == 200
        await eventually(lambda: outbox_idle(gateway))
        [posted] = fake.calls_to("chat.postMessage")
        assert posted.token.startswith("xoxb-installed-")

        # The only installation also serves requests that name no workspace.
        spec["channel"] = {"slack": {"channel_or_user_id": "C6"}}
        body = {"run_id": "r", "call_id": "no-team", "spec": spec}
        assert (await client.post("/function_calls", json=body)).status_code == 200
        await eventually(lambda: outbox_idle(gateway))
        assert {c.token for c in fake.calls_to("chat.postMessage")} == {posted.token}

        # A click from the installed workspace is authorized through the stored installation.
        [button] = [
            e
            for b in posted.params["blocks"]
            for e in b.get("elements", [])
            if str(e.get("action_id")).startswith("gw:approve:")
        ]
        payload = click(fake, button_rid(button), "gw_approve")
        payload["team"] = {"id": "T2", "domain": "other"}
        assert (await send(gateway, payload)).status_code == 200
        answer = await client.get("/function_calls/in-t2", params={"wait": 10})
    assert answer.json()["status"]["approved"] is True


async def test_without_an_installation_the_delivery_says_what_to_do(
    installable: tuple[RunningGateway, FakeSlack],
) -> None:
    gateway, fake = installable
    spec = {"fn": "f", "kwargs": {}, "channel": {"slack": {"channel_or_user_id": "C5"}}}
    async with gateway.client() as client:
        body = {"run_id": "r", "call_id": "nobody", "spec": spec}
        assert (await client.post("/function_calls", json=body)).status_code == 200
        await eventually(lambda: outbox_idle(gateway))
        trail = (await client.get(f"{gateway.base_url}/gateway/v1/calls/nobody/events")).json()
    [delivery] = trail["deliveries"]
    assert delivery["status"] == "failed" and "/slack/install" in delivery["error"]
    assert fake.calls_to("chat.postMessage") == []
