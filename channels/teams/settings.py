"""Microsoft Teams settings, from the environment and `.env` (all listed in `.env.example`)."""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from gateway.seam import EnvSettings

# Where the Bot Connector service publishes the keys it signs its requests with
# (learn.microsoft.com/azure/bot-service/rest-api/bot-framework-rest-connector-authentication).
OPENID_METADATA_URL = "https://login.botframework.com/v1/.well-known/openidconfiguration"
# Proactive posts go here until Teams names a conversation's own service URL.
SERVICE_URL = "https://smba.trafficmanager.net/teams/"
ALLOWED_SERVICE_URLS = "https://smba.trafficmanager.net/"


class TeamsSettings(EnvSettings):
    model_config = SettingsConfigDict(env_prefix="TEAMS_")

    app_id: str | None = None  # the Azure Bot's Microsoft App ID (an Entra app registration)
    app_password: SecretStr | None = None  # its client secret...
    certificate_file: str | None = None  # ...or a PEM file with its private key and certificate
    tenant_id: str | None = None  # the Entra tenant the bot (single-tenant) belongs to
    service_url: str = SERVICE_URL
    # Comma-separated URL prefixes: the app's token is only ever sent to these.
    allowed_service_urls: str = ALLOWED_SERVICE_URLS
    openid_metadata_url: str = OPENID_METADATA_URL
    token_url: str | None = None  # default: the tenant's v2.0 token endpoint

    @property
    def token_endpoint(self) -> str:
        if self.token_url:
            return self.token_url
        return f"https://login.microsoftonline.com/{self.tenant_id}/oauth2/v2.0/token"

    @property
    def allowed_prefixes(self) -> list[str]:
        return [url.strip() for url in self.allowed_service_urls.split(",") if url.strip()]

    def allows(self, service_url: str) -> bool:
        """Whether `service_url` lies under an allowed prefix: the same scheme, host and port,
        and a path below the prefix's (so `smba.trafficmanager.net.evil.test` is refused)."""
        return any(_under(service_url, prefix) for prefix in self.allowed_prefixes)


def _under(url: str, prefix: str) -> bool:
    try:
        given, allowed = urlsplit(url), urlsplit(prefix)
        if _origin(given) != _origin(allowed):
            return False
    except ValueError:  # a port that is not a number
        return False
    return _folder(given.path).startswith(_folder(allowed.path))


def _origin(url: SplitResult) -> tuple[str, str | None, int | None]:
    return url.scheme.lower(), url.hostname, url.port


def _folder(path: str) -> str:
    return path if path.endswith("/") else path + "/"
