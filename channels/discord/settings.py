"""Discord settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

from pydantic import SecretStr, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DISCORD_API_URL = "https://discord.com/api/v10"
DISCORD_GATEWAY_URL = "wss://gateway.discord.gg"


class DiscordSettings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_prefix="DISCORD_", extra="ignore")

    bot_token: SecretStr | None = None
    # Both point at Discord itself unless a test or a private deployment overrides them.
    api_url: str = DISCORD_API_URL
    gateway_url: str = DISCORD_GATEWAY_URL
    # Only for `gateway discord invite-url`; read from Discord with the token when unset.
    application_id: str | None = None

    @field_validator("bot_token", "application_id", mode="before")
    @classmethod
    def _empty_is_unset(cls, value: object) -> object:
        return None if value == "" else value

    @field_validator("api_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")
