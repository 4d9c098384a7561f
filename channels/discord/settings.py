"""Discord settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

from pydantic import SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from gateway.seam import EnvSettings

DISCORD_API_URL = "https://discord.com/api/v10"
DISCORD_GATEWAY_URL = "wss://gateway.discord.gg"


class DiscordSettings(EnvSettings):
    model_config = SettingsConfigDict(env_prefix="DISCORD_")

    bot_token: SecretStr | None = None
    # Both point at Discord itself unless a test or a private deployment overrides them.
    api_url: str = DISCORD_API_URL
    gateway_url: str = DISCORD_GATEWAY_URL
    # Only for `gateway discord invite-url`; read from Discord with the token when unset.
    application_id: str | None = None

    @field_validator("api_url")
    @classmethod
    def _no_trailing_slash(cls, value: str) -> str:
        return value.rstrip("/")
