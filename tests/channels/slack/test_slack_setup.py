"""Setting Slack up: the app manifest, and `gateway check` logging in with auth.test."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from channels.registry import REGISTRY
from gateway.cli.checks import run_checks
from gateway.cli.main import main
from gateway.store import Database, migrate
from tests.fakes.slack import FakeSlack
from tests.services.inprocess import test_settings


def test_manifest_points_slack_at_this_gateway(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["slack", "manifest", "--public-url", "https://gw.example.com/"])
    assert exited.value.code == 0
    printed = json.loads(capsys.readouterr().out)
    settings = printed["settings"]
    assert settings["event_subscriptions"]["request_url"] == "https://gw.example.com/slack/events"
    assert settings["interactivity"]["request_url"] == "https://gw.example.com/slack/interactions"
    assert printed["oauth_config"]["redirect_urls"] == [
        "https://gw.example.com/slack/oauth_redirect"
    ]
    assert {"chat:write", "channels:history", "im:history"} <= set(
        printed["oauth_config"]["scopes"]["bot"]
    )
    assert "message.channels" in settings["event_subscriptions"]["bot_events"]


@pytest.mark.parametrize(
    ("token", "code", "expected"),
    [
        ("xoxb-test", 0, "ok   channel slack: connected, signed in as"),
        ("xoxb-invalid", 1, "FAIL channel slack: failed: slack invalid_auth"),
    ],
)
async def test_check_logs_in_to_slack(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    token: str,
    code: int,
    expected: str,
) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/c.db"
    database = Database(url)
    await migrate.upgrade(database)
    await database.aclose()
    async with FakeSlack() as fake:
        monkeypatch.setenv("SLACK_BOT_TOKEN", token)
        monkeypatch.setenv("SLACK_API_URL", fake.base_url)
        result = await run_checks(test_settings(url), REGISTRY)
        [auth] = fake.calls_to("auth.test")
    assert result == code and auth.token == token
    assert expected in capsys.readouterr().out


async def test_check_names_a_schema_that_is_behind(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await run_checks(test_settings(f"sqlite+aiosqlite:///{tmp_path}/new.db"), REGISTRY) == 1
    assert "run `gateway db upgrade`" in capsys.readouterr().out
