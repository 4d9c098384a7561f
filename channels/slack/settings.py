"""Slack settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

from pydantic import SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from gateway.seam import EnvSettings

SLACK_API_URL = "https://slack.com/api/"


class SlackSettings(EnvSettings):
    model_config = SettingsConfigDict(env_prefix="SLACK_")

    bot_token: SecretStr | None = None
    signing_secret: SecretStr | None = None
    app_token: SecretStr | None = None
    client_id: str | None = None
    client_secret: SecretStr | None = None
    # Every Slack client of the gateway uses this base URL (tests point it at a fake).
    api_url: str = SLACK_API_URL

    @field_validator("api_url")
    @classmethod
    def _trailing_slash(cls, value: str) -> str:
        return value if value.endswith("/") else value + "/"
