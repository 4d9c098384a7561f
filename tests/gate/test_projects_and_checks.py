"""Teams and people belong to projects: an agent of one project cannot route its request to
another project's team or person. `gateway check` warns about a team channel nobody may
answer in, and about teams every project may name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.factories import request_body
from tests.services.cli import Cli
from tests.services.inprocess import RunningGateway, running_gateway, write_config
from tests.services.inprocess import test_settings as settings_for

CONFIG = """
[people.alice]
email = "alice@example.com"

[people.carol]
email = "carol@example.com"
projects = ["default", "billing"]

[teams.dba]
members = ["alice"]
projects = ["default"]

[teams.night]
members = ["alice"]
slack_channel = "CNIGHT"

[projects.default]
[projects.billing]
"""


@pytest.fixture
async def scoped(db_url: str, tmp_path: Path) -> AsyncIterator[RunningGateway]:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    async with running_gateway(settings_for(db_url, config=config)) as running:
        yield running


@pytest.mark.parametrize("channel", [{"team": "dba"}, {"person": "alice"}])
async def test_an_agent_cannot_route_to_another_projects_team_or_person(
    scoped: RunningGateway, channel: dict[str, str]
) -> None:
    billing = await scoped.new_key("billing", name="billing agent")
    async with scoped.client(billing) as client:
        refused = await client.post("/function_calls", json=request_body("x-1", channel=channel))
        assert refused.status_code == 422, refused.text
        assert "not available to project 'billing'" in refused.text
        assert (await client.get("/function_calls/x-1")).status_code == 404
    async with scoped.client() as default:  # the team's own project routes to it
        allowed = await default.post("/function_calls", json=request_body("x-1", channel=channel))
        assert allowed.status_code == 200, allowed.text


async def test_a_person_in_both_projects_may_be_named_by_either(scoped: RunningGateway) -> None:
    billing = await scoped.new_key("billing", name="billing agent")
    async with scoped.client(billing) as client:
        made = await client.post(
            "/function_calls", json=request_body("c-1", channel={"person": "carol"})
        )
    assert made.status_code == 200, made.text


async def test_check_warns_about_a_channel_nobody_may_answer_in_and_shared_teams(
    cli: Cli, tmp_path: Path
) -> None:
    config = write_config(tmp_path / "routing.toml", CONFIG)
    checked = await cli("check", GATEWAY_CONFIG=str(config))
    warnings = [line for line in checked.stdout.splitlines() if line.startswith("warn ")]
    assert any("team night: its Slack channel accepts nobody" in w for w in warnings), checked
    assert any("team night: every project's agents may name it" in w for w in warnings)
    assert not any("team dba" in w for w in warnings)
