"""Settings from the environment (and `.env`); every one is listed in `.env.example`."""

from __future__ import annotations

from functools import cached_property
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator
from pydantic_settings import SettingsConfigDict

from gateway.seam.settings import EnvSettings

DEFAULT_WEBHOOK_SCHEDULE = "0,5,300,1800,7200,18000,36000,36000"


class Settings(EnvSettings):
    model_config = SettingsConfigDict(env_prefix="GATEWAY_")

    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    # Processes serving the port (`gateway serve --workers N`); more than 1 needs PostgreSQL.
    workers: int = Field(default=1, ge=1, le=64)
    database_url: str = "sqlite+aiosqlite:///./data/gateway.db"
    config: Path | None = None
    secret_key: SecretStr | None = None
    public_url: str | None = None
    webhook_allow_private: bool = False
    # escalate_email may mail configured people, and addresses at these domains
    # (comma-separated, e.g. "example.com,ops.example.com"); nobody else.
    email_allowed_domains: str = ""
    max_body_bytes: int = Field(default=2 * 1024 * 1024, ge=1024)
    # Limits (README "Limits"); each is refused with a 422 or 429 that names its setting.
    # Targets one request may contact, after routing (a team or person counts per channel).
    max_targets: int = Field(default=50, ge=1, le=10_000)
    # Channels in one request's spec.channel: the channel itself and each any_of/all_of branch.
    max_policy_nodes: int = Field(default=100, ge=1, le=10_000)
    # Creates per API key (a token bucket in each process): this many a second on average,
    # and this many at once; 0 a second: no limit.
    creates_per_second: float = Field(default=50.0, ge=0)
    create_burst: int = Field(default=1000, ge=1)
    # MCP sessions one API key may hold open in a process, and how long an idle one lives.
    mcp_sessions_per_key: int = Field(default=100, ge=1)
    mcp_session_idle_seconds: float = Field(default=300.0, gt=0)
    log_level: str = "info"
    # `json`: one JSON object per line (time, level, logger, message, request_id, exception).
    log_format: Literal["text", "json"] = "text"
    # GET /metrics (Prometheus) answers 404 unless enabled; with a token, only to that Bearer.
    metrics_enabled: bool = False
    metrics_token: SecretStr | None = None
    # Seconds before each webhook attempt (Svix's schedule); tests shorten it.
    webhook_retry_schedule: str = DEFAULT_WEBHOOK_SCHEDULE
    webhook_timeout_seconds: float = Field(default=15.0, gt=0)
    # First retry delay of a failed channel delivery; doubles per attempt, up to 5 minutes.
    channel_retry_base_seconds: float = Field(default=2.0, gt=0)
    outbox_poll_seconds: float = Field(default=1.0, gt=0)
    # How often each project's audit chain head is published (a log line, `audit.checkpoint`
    # webhooks), when it grew since the last time.
    audit_checkpoint_seconds: float = Field(default=3600.0, gt=0)
    # A platform connection (Discord, Slack Socket Mode, IMAP) that is not up within this
    # many seconds is retried with backoff, up to the cap; the API never waits on it.
    channel_connect_timeout_seconds: float = Field(default=10.0, gt=0)
    channel_retry_cap_seconds: float = Field(default=60.0, gt=0)
    # Earlier values of GATEWAY_SECRET_KEY, comma-separated: stored secrets sealed with them
    # still open after a rotation, while sessions and links signed with them end.
    previous_secret_keys: SecretStr | None = None

    @field_validator("webhook_retry_schedule")
    @classmethod
    def _schedule_is_numbers(cls, value: str) -> str:
        try:
            delays = [float(part) for part in value.split(",")]
        except ValueError:
            raise ValueError("must be comma-separated seconds, e.g. 0,5,300") from None
        if not delays or any(d < 0 for d in delays):
            raise ValueError("must list at least one non-negative delay")
        return value

    @field_validator("log_format", mode="before")
    @classmethod
    def _format_any_case(cls, value: object) -> object:
        return value.strip().lower() if isinstance(value, str) else value

    @cached_property
    def webhook_delays(self) -> tuple[float, ...]:
        return tuple(float(part) for part in self.webhook_retry_schedule.split(","))

    @cached_property
    def allowed_domains(self) -> frozenset[str]:
        return frozenset(
            d.strip().lower() for d in self.email_allowed_domains.split(",") if d.strip()
        )

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    def secret_key_value(self) -> str:
        if self.secret_key is None or not self.secret_key.get_secret_value():
            raise RuntimeError(
                "GATEWAY_SECRET_KEY is not set: it encrypts webhook secrets and signs reply "
                "tokens. Generate one with: "
                'python -c "import secrets; print(secrets.token_urlsafe(32))"'
            )
        return self.secret_key.get_secret_value()


def load_settings(**overrides: object) -> Settings:
    return Settings(**overrides)  # type: ignore[arg-type]
