"""Telegram settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

import hashlib
import re
from typing import Literal

from pydantic import SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from gateway.seam import EnvSettings

TELEGRAM_API_URL = "https://api.telegram.org"
WEBHOOK_PREFIX = "/telegram/"
# What Telegram accepts as a webhook's secret_token (core.telegram.org/bots/api#setwebhook).
SECRET_PATTERN = r"^[A-Za-z0-9_-]{16,256}$"


class TelegramSettings(EnvSettings):
    # A secret that fails validation must not be echoed in the error.
    model_config = SettingsConfigDict(env_prefix="TELEGRAM_", hide_input_in_errors=True)

    bot_token: SecretStr | None = None
    # polling: getUpdates from one replica (no public URL needed); webhook: Telegram posts
    # every update to /telegram/<secret path>, which every replica serves.
    mode: Literal["polling", "webhook"] = "polling"
    webhook_secret: SecretStr | None = None
    # The gateway's public base URL as Telegram reaches it; in webhook mode the gateway
    # registers <webhook_url>/telegram/<secret path> with setWebhook.
    webhook_url: str | None = None
    # The Bot API server: Telegram's, a self-hosted one, or a test's fake.
    api_url: str = TELEGRAM_API_URL

    @field_validator("api_url", "webhook_url")
    @classmethod
    def _no_trailing_slash(cls, value: str | None) -> str | None:
        return value.rstrip("/") if value else value

    @field_validator("webhook_secret")
    @classmethod
    def _telegram_accepts_it(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not re.match(SECRET_PATTERN, value.get_secret_value()):
            raise ValueError("use 16 to 256 characters of A-Z, a-z, 0-9, _ and -")
        return value

    @property
    def webhook_path(self) -> str | None:
        """/telegram/<secret path>: derived from the webhook secret, so it is as unguessable
        and every replica computes the same one."""
        if self.webhook_secret is None:
            return None
        seed = f"hitl-gateway telegram webhook:{self.webhook_secret.get_secret_value()}"
        return WEBHOOK_PREFIX + hashlib.sha256(seed.encode()).hexdigest()[:32]
