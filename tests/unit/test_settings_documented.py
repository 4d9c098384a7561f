"""Every setting the gateway reads is listed in .env.example and named in README.md."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic_settings import BaseSettings

from channels.discord.settings import DiscordSettings
from channels.email.settings import EmailSettings
from channels.slack.settings import SlackSettings
from channels.teams.settings import TeamsSettings
from channels.telegram.settings import TelegramSettings
from gateway.settings import Settings

REPO_ROOT = Path(__file__).resolve().parents[2]


def env_names(settings: type[BaseSettings]) -> list[str]:
    prefix = settings.model_config.get("env_prefix") or ""
    return [f"{prefix}{name}".upper() for name in settings.model_fields]


ALL_NAMES = [
    name
    for settings in (
        *(Settings, SlackSettings, DiscordSettings, EmailSettings),
        *(TeamsSettings, TelegramSettings),
    )
    for name in env_names(settings)
]


@pytest.mark.parametrize("name", ALL_NAMES)
def test_each_setting_is_documented(name: str) -> None:
    example = (REPO_ROOT / ".env.example").read_text()
    assert f"\n{name}=" in example, f"{name} is missing from .env.example"
    assert name in (REPO_ROOT / "README.md").read_text(), f"{name} is missing from README.md"
