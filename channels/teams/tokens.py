"""The app's token for the Bot Connector: the OAuth 2.0 client credentials grant at the
tenant's token endpoint (learn.microsoft.com/entra/identity-platform/
v2-oauth2-client-creds-grant-flow), with the app's client secret or a certificate (a signed
client assertion).

MSAL (the Agents SDK's `microsoft-agents-authentication-msal`) is not used: it builds its
client with a blocking OpenID discovery on the event loop, without a timeout, and only from an
https authority, so a slow login.microsoftonline.com would freeze the gateway and a test
could not point it at a stand-in. This is the same grant in a few lines of httpx.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

from channels.teams.settings import TeamsSettings
from gateway.errors import ChannelNotConfigured, DeliveryError

SCOPE = "https://api.botframework.com/.default"
ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
RENEW_BEFORE_SECONDS = 300  # a token (Entra ID's last an hour) is renewed this long before
TIMEOUT_SECONDS = 10


@dataclass(frozen=True)
class Token:
    value: str
    expires_at: float  # time.monotonic()
    renew_at: float  # RENEW_BEFORE_SECONDS before it expires, or half-way for a short one

    @staticmethod
    def lasting(value: str, seconds: float) -> Token:
        now = time.monotonic()
        renew_after = max(seconds - RENEW_BEFORE_SECONDS, seconds / 2)
        return Token(value, now + seconds, now + renew_after)

    def fresh(self) -> bool:
        return time.monotonic() < self.renew_at

    def renew_in(self) -> float:
        """Seconds until it should be renewed."""
        return max(self.renew_at - time.monotonic(), 0.0)

    def valid_for(self) -> float:
        return max(self.expires_at - time.monotonic(), 0.0)


class ConnectorTokens:
    """One token at a time, shared by every call, renewed before it expires."""

    def __init__(self, settings: TeamsSettings) -> None:
        self.settings = settings
        self._token: Token | None = None
        self._lock = asyncio.Lock()
        self._http: httpx.AsyncClient | None = None

    async def token(self) -> str:
        token = self._token
        if token is None or not token.fresh():
            token = await self.renew()
        return token.value

    async def renew(self) -> Token:
        """A new token (callers waiting meanwhile share it)."""
        before = self._token
        async with self._lock:
            if self._token is not before and self._token is not None and self._token.fresh():
                return self._token
            self._token = await self._grant()
            return self._token

    async def _grant(self) -> Token:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=TIMEOUT_SECONDS)
        endpoint = self.settings.token_endpoint
        try:
            response = await self._http.post(endpoint, data=self._form(endpoint))
        except httpx.HTTPError as error:
            raise DeliveryError(
                f"teams token endpoint unreachable: {type(error).__name__}: {error}",
                retryable=True,
            ) from None
        body = _json(response)
        if response.status_code != 200 or "access_token" not in body:
            raise _refused(response.status_code, body)
        return Token.lasting(str(body["access_token"]), float(body.get("expires_in") or 3600))

    def _form(self, endpoint: str) -> dict[str, str]:
        settings = self.settings
        if not settings.app_id:
            raise ChannelNotConfigured("teams is not configured: set TEAMS_APP_ID")
        form = {"grant_type": "client_credentials", "client_id": settings.app_id, "scope": SCOPE}
        if settings.app_password is not None:
            return form | {"client_secret": settings.app_password.get_secret_value()}
        if settings.certificate_file:
            assertion = client_assertion(settings.app_id, endpoint, settings.certificate_file)
            return form | {"client_assertion_type": ASSERTION_TYPE, "client_assertion": assertion}
        raise ChannelNotConfigured(
            "teams has no credentials: set TEAMS_APP_PASSWORD or TEAMS_CERTIFICATE_FILE"
        )

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def client_assertion(app_id: str, endpoint: str, certificate_file: str) -> str:
    """A JWT signed with the certificate's key, naming the certificate by its SHA-1
    thumbprint (`x5t`), as Entra ID expects (certificate-credentials)."""
    key, certificate = load_certificate(Path(certificate_file))
    thumbprint = hashlib.sha1(certificate.public_bytes(serialization.Encoding.DER)).digest()
    now = int(time.time())
    claims = {
        "aud": endpoint,
        "iss": app_id,
        "sub": app_id,
        "jti": str(uuid.uuid4()),
        "nbf": now,
        "iat": now,
        "exp": now + 600,
    }
    x5t = base64.urlsafe_b64encode(thumbprint).rstrip(b"=").decode()
    return jwt.encode(claims, key, algorithm="RS256", headers={"x5t": x5t})


def load_certificate(path: Path) -> tuple[RSAPrivateKey, x509.Certificate]:
    """The RSA private key and the certificate from one PEM file."""
    try:
        pem = path.read_bytes()
        key = serialization.load_pem_private_key(pem, password=None)
        certificate = x509.load_pem_x509_certificate(pem)
    except (OSError, ValueError) as error:
        raise ChannelNotConfigured(f"TEAMS_CERTIFICATE_FILE {path}: {error}") from None
    if not isinstance(key, RSAPrivateKey):
        raise ChannelNotConfigured(f"TEAMS_CERTIFICATE_FILE {path}: the key must be RSA")
    return key, certificate


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _refused(status: int, body: dict[str, Any]) -> DeliveryError:
    """Refused credentials fail the same way again; a server error or a 429 may not."""
    code = body.get("error") or f"HTTP {status}"
    described = str(body.get("error_description") or "").splitlines()[0:1]
    detail = f": {described[0]}" if described else ""
    if status == 429 or status >= 500:
        return DeliveryError(f"teams token endpoint failed: {code}{detail}", retryable=True)
    return DeliveryError(
        f"teams token endpoint refused the app's credentials: {code}{detail}", retryable=False
    )
