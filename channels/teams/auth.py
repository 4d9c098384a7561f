"""Who may post to /teams/messages: the Bot Connector service, proven by the JWT in the
`Authorization` header (learn.microsoft.com/azure/bot-service/rest-api/
bot-framework-rest-connector-authentication).

The token is checked here rather than by the Agents SDK's `JwtTokenValidator`, which takes its
keys from hard-coded Microsoft URLs (not the configured OpenID metadata), checks no issuer and
no `serviceUrl` claim, and is wired in as middleware over the whole app. The rules kept:

- signed with RS256 by a key of the metadata's `jwks_uri` (keys refetched when an unknown key
  id appears, at most once per `REFETCH_SECONDS`, and once a day);
- issued by the metadata's issuer (api.botframework.com) or by the configured tenant;
- for this app (`aud` = the app id), within its lifetime, with 5 minutes of clock skew;
- the key is endorsed for the activity's channel (`msteams`), and the token's `serviceurl`
  claim is the activity's `serviceUrl`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
import jwt

from channels.teams.settings import TeamsSettings
from gateway.errors import Unauthorized

log = logging.getLogger(__name__)

CLOCK_SKEW_SECONDS = 300  # the Bot Framework's own allowance
KEYS_LIFETIME_SECONDS = 24 * 3600
REFETCH_SECONDS = 300  # an unknown key id fetches the keys again, at most this often
TIMEOUT_SECONDS = 5


class KeysUnavailable(Exception):
    """The OpenID metadata or its keys could not be read: nothing can be checked now."""


@dataclass(frozen=True)
class SigningKey:
    jwk: jwt.PyJWK
    endorsements: frozenset[str]  # the channels the key may sign for (empty: any)


@dataclass
class _KeySet:
    issuer: str = ""
    keys: dict[str, SigningKey] = field(default_factory=dict)
    fetched_at: float = float("-inf")  # time.monotonic()


class BotFrameworkAuth:
    def __init__(self, settings: TeamsSettings) -> None:
        self.settings = settings
        self._keys = _KeySet()
        self._lock = asyncio.Lock()
        self._http: httpx.AsyncClient | None = None

    async def verify(self, authorization: str | None) -> tuple[dict[str, Any], SigningKey]:
        """The claims of the request's token and the key that signed it; raises Unauthorized
        (or KeysUnavailable when the keys cannot be read)."""
        token = _bearer(authorization)
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError as error:
            raise Unauthorized(f"malformed token: {error}") from None
        if header.get("alg") != "RS256":
            raise Unauthorized(f"unexpected signing algorithm {header.get('alg')!r}")
        key = await self._key(str(header.get("kid") or ""))
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.jwk.key,
                algorithms=["RS256"],
                audience=self.settings.app_id,
                issuer=self._issuers(),
                leeway=CLOCK_SKEW_SECONDS,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.InvalidTokenError as error:
            raise Unauthorized(f"token refused: {error}") from None
        return claims, key

    def check_activity(self, claims: dict[str, Any], key: SigningKey, activity: Any) -> None:
        """The token must be for this activity: its channel and its service URL."""
        channel = str(activity.channel_id or "")
        if key.endorsements and channel not in key.endorsements:
            raise Unauthorized(f"the signing key is not endorsed for channel {channel!r}")
        claimed = claims.get("serviceurl") or claims.get("serviceUrl")
        if not claimed or claimed != activity.service_url:
            raise Unauthorized("the token's serviceurl is not the activity's serviceUrl")

    def _issuers(self) -> list[str]:
        tenant = self.settings.tenant_id
        issuers = [
            f"https://sts.windows.net/{tenant}/",
            f"https://login.microsoftonline.com/{tenant}/v2.0",
        ]
        return [self._keys.issuer, *issuers] if self._keys.issuer else issuers

    async def _key(self, kid: str) -> SigningKey:
        stale = time.monotonic() - self._keys.fetched_at > KEYS_LIFETIME_SECONDS
        if stale or (kid not in self._keys.keys and self._may_refetch()):
            await self.refresh()
        found = self._keys.keys.get(kid)
        if found is None:
            raise Unauthorized("token signed with an unknown key")
        return found

    def _may_refetch(self) -> bool:
        return time.monotonic() - self._keys.fetched_at > REFETCH_SECONDS

    async def refresh(self) -> int:
        """Read the OpenID metadata and its keys again; returns how many keys there are."""
        before = self._keys
        async with self._lock:
            if self._keys is before:  # nobody refreshed them while this call waited
                self._keys = await self._fetch()
            return len(self._keys.keys)

    async def _fetch(self) -> _KeySet:
        if self._http is None:
            self._http = httpx.AsyncClient(timeout=TIMEOUT_SECONDS)
        try:
            metadata = await self._get_json(self.settings.openid_metadata_url)
            jwks = await self._get_json(str(metadata["jwks_uri"]))
        except (httpx.HTTPError, ValueError, KeyError, TypeError) as error:
            raise KeysUnavailable(f"teams signing keys unavailable: {error!r}") from None
        keys = {}
        for raw in jwks.get("keys") or []:
            try:
                key = jwt.PyJWK(raw)
            except jwt.PyJWTError as error:  # a key of a type we do not use
                log.debug("teams: skipping signing key %s: %s", raw.get("kid"), error)
                continue
            endorsed = frozenset(str(e) for e in raw.get("endorsements") or [])
            keys[str(raw.get("kid"))] = SigningKey(key, endorsed)
        return _KeySet(str(metadata.get("issuer") or ""), keys, time.monotonic())

    async def _get_json(self, url: str) -> dict[str, Any]:
        assert self._http is not None
        response = await self._http.get(url)
        response.raise_for_status()
        body = response.json()
        if not isinstance(body, dict):
            raise ValueError(f"{url} did not answer a JSON object")
        return body

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None


def _bearer(authorization: str | None) -> str:
    scheme, _, token = (authorization or "").partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("no bearer token")
    return token.strip()
