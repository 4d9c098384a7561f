"""Only the Bot Connector decides through /teams/messages: each forgery below is the click that
would approve, and gets 401 with nothing changed (no decision, no edit, nothing kept)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import jwt
import pytest

from channels.teams.settings import TeamsSettings
from tests.channels.teams.helpers import OPS, TO_OPS, invoke, only_post, post, status
from tests.factories import RequestFactory
from tests.fakes.teams import SIGNING, STRANGER, FakeTeams, private_key
from tests.helpers import eventually, outbox_idle
from tests.services.inprocess import RunningGateway

Activity = dict[str, Any]
EVIL = "https://smba.trafficmanager.net.evil.test/teams/"


def _alg_none(fake: FakeTeams, activity: Activity) -> tuple[Activity, str | None]:
    claims = jwt.decode(fake.token_for(activity), options={"verify_signature": False})
    return activity, jwt.encode(claims, key="", algorithm="none")


def _signed_by_another_key(fake: FakeTeams, activity: Activity) -> tuple[Activity, str | None]:
    """The served key's id, another key's signature."""
    claims = jwt.decode(fake.token_for(activity), options={"verify_signature": False})
    token = jwt.encode(claims, private_key(STRANGER), algorithm="RS256", headers={"kid": SIGNING})
    return activity, token


def _retargeted(**change: Any) -> Callable[[FakeTeams, Activity], tuple[Activity, str | None]]:
    """A genuine token for the genuine activity, then the activity changed."""

    def forge(fake: FakeTeams, activity: Activity) -> tuple[Activity, str | None]:
        token = fake.token_for(activity)
        return activity | change, token

    return forge


def _another_tenant(fake: FakeTeams, activity: Activity) -> tuple[Activity, str | None]:
    other = "0b0b0b0b-0000-4000-8000-000000000000"
    changed = activity | {
        "conversation": activity["conversation"] | {"tenantId": other},
        "channelData": {"tenant": {"id": other}},
    }
    return changed, fake.token_for(changed)


def _evil_service_url(fake: FakeTeams, activity: Activity) -> tuple[Activity, str | None]:
    """Properly signed (a genuine Bot Connector token), for a service URL not allowed."""
    changed = activity | {"serviceUrl": EVIL}
    return changed, fake.token_for(changed)


FORGERIES: dict[str, Callable[[FakeTeams, Activity], tuple[Activity, str | None]]] = {
    "no token": lambda fake, activity: (activity, None),
    "not a JWT": lambda fake, activity: (activity, "not-a-jwt"),
    "alg none": _alg_none,
    "bad signature": _signed_by_another_key,
    "unknown key": lambda fake, activity: (activity, fake.token_for(activity, key=STRANGER)),
    "wrong audience": lambda fake, activity: (
        activity,
        fake.token_for(activity, audience="11111111-2222-4333-8444-555555555555"),
    ),
    "expired": lambda fake, activity: (activity, fake.token_for(activity, expires_in=-600)),
    "wrong issuer": lambda fake, activity: (
        activity,
        fake.token_for(activity, issuer="https://evil.example/"),
    ),
    "token for another service URL": _retargeted(serviceUrl="http://127.0.0.1:9/teams/"),
    "service URL not allowed": _evil_service_url,
    "another tenant": _another_tenant,
    "another channel": _retargeted(channelId="slack"),
}


@pytest.mark.parametrize("forgery", list(FORGERIES))
async def test_a_forged_click_is_refused_and_changes_nothing(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory, forgery: str
) -> None:
    await request_factory(gateway, "forged", channel=TO_OPS, settle=True)
    card = only_post(fake)
    activity, token = FORGERIES[forgery](fake, invoke(fake, card, "Approve"))
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    async with httpx.AsyncClient(base_url=gateway.base_url, timeout=10) as client:
        response = await client.post("/teams/messages", json=activity, headers=headers)
    assert response.status_code == 401, response.text
    assert (await status(gateway, "forged"))["gateway_status"] == "pending"
    await eventually(lambda: outbox_idle(gateway))
    assert card.edits == []


async def test_the_genuine_click_still_decides(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    """The forgeries above fail on what they forged: the same click, signed, decides."""
    await request_factory(gateway, "genuine", channel=TO_OPS, settle=True)
    response = await post(gateway, fake, invoke(fake, only_post(fake), "Approve"))
    assert response.status_code == 200
    assert (await status(gateway, "genuine"))["gateway_status"] == "approved"


async def test_a_service_url_outside_the_allow_list_never_gets_the_token(
    gateway: RunningGateway, fake: FakeTeams, request_factory: RequestFactory
) -> None:
    """A genuinely signed activity naming another service URL is refused before the gateway
    keeps anything from it: later posts still go to the allowed one."""
    await request_factory(gateway, "first", channel=TO_OPS, settle=True)
    activity, token = _evil_service_url(fake, invoke(fake, only_post(fake), "Approve"))
    assert (await post(gateway, fake, activity, token)).status_code == 401
    await request_factory(gateway, "second", channel=TO_OPS, settle=True)
    assert len(fake.posts_in(OPS)) == 2  # to the fake, the allowed service URL, as before


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("https://smba.trafficmanager.net/amer/", True),
        ("https://smba.trafficmanager.net/teams/", True),
        ("https://SMBA.trafficmanager.net/emea/", True),
        ("https://smba.trafficmanager.net.evil.test/amer/", False),
        ("https://smba.trafficmanager.net@evil.test/amer/", False),
        ("http://smba.trafficmanager.net/amer/", False),
        ("https://smba.trafficmanager.net:8443/amer/", False),
        ("https://evil.test/smba.trafficmanager.net/", False),
        ("https://smba.trafficmanager.net:bad/", False),
    ],
)
def test_the_service_url_allow_list_matches_origin_and_path(url: str, allowed: bool) -> None:
    assert TeamsSettings(_env_file=None).allows(url) is allowed
