"""A fake Microsoft Teams on 127.0.0.1 (aiohttp): the Bot Connector's REST API, the Entra ID
token endpoint and the Bot Framework's OpenID metadata with its signing keys. The gateway's
real code talks to it: the Agents SDK's `ConnectorClient` for the REST calls, httpx for the
token and the keys; and the fake signs the JWTs the Bot Connector puts on every activity it
posts to the gateway's /teams/messages (`token_for`).

Point TeamsSettings at it: `openid_metadata_url`, `token_url`, `service_url` and
`allowed_service_urls` (see `settings()`).

- Metadata (`/botframework/v1/.well-known/openidconfiguration`) names the issuer
  `https://api.botframework.com` and the keys URL; the keys (`…/keys`) hold one RSA key,
  `fake-key-1`, endorsed for `msteams`. `token_for(..., key=STRANGER)` signs with a key the
  fake never serves.
- Token endpoint (`/login/<tenant>/oauth2/v2.0/token`): the client credentials grant for
  `APP_ID` with `APP_PASSWORD`, or a client assertion signed by a certificate given to
  `trust_certificate()`. Anything else answers 401 `invalid_client`, as Entra ID does.
- Connector (under `/teams/`): `POST v3/conversations` opens a 1:1 chat with a person whose
  AAD object id is in `installed` (else 403, as when the app is not installed for them);
  `POST v3/conversations/{id}/activities` posts, `POST …/activities/{id}` replies under a
  post, `PUT …/activities/{id}` replaces one. Each needs a token the endpoint issued (else
  401). Every call is recorded in `calls`; `fail_next()` makes the next matching calls fail
  (429 with `Retry-After`, 500...) without taking effect.
"""

from __future__ import annotations

import base64
import datetime
import functools
import hashlib
import itertools
import re
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import jwt
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from tests.fakes.server import FakeServer

APP_ID = "4f0c6f2e-8d3a-4c1b-9a57-1f2e3d4c5b6a"
APP_PASSWORD = "fake-client-secret"
TENANT = "72f988bf-86f1-41af-91ab-2d7cd011db47"
ISSUER = "https://api.botframework.com"
SCOPE = "https://api.botframework.com/.default"
SIGNING, STRANGER = "fake-key-1", "stranger-key"
BOT_ID = f"28:{APP_ID}"


@functools.cache
def private_key(kid: str) -> rsa.RSAPrivateKey:
    """One RSA key per id, made once per test process (2048 bits, as Microsoft's)."""
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(kid: str) -> dict[str, Any]:
    numbers = private_key(kid).public_key().public_numbers()

    def b64(number: int) -> str:
        raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    return {"kty": "RSA", "use": "sig", "kid": kid, "n": b64(numbers.n), "e": b64(numbers.e)}


@dataclass
class Call:
    method: str
    path: str  # under /teams/, e.g. v3/conversations/19:x/activities
    body: Any
    authorized: bool
    status: int


@dataclass
class Message:
    conversation_id: str
    activity_id: str
    activity: dict[str, Any]
    reply_to: str | None = None
    edits: list[dict[str, Any]] = field(default_factory=list)

    posted: dict[str, Any] = field(default_factory=dict)  # the activity as first posted

    def __post_init__(self) -> None:
        self.posted = self.posted or self.activity

    @property
    def card(self) -> dict[str, Any]:
        """The message's Adaptive Card as everyone sees it now."""
        content: dict[str, Any] = self.activity["attachments"][0]["content"]
        return content

    @property
    def first_card(self) -> dict[str, Any]:
        """The card as posted (a person may click a copy not yet refreshed)."""
        content: dict[str, Any] = self.posted["attachments"][0]["content"]
        return content


@dataclass
class _Fault:
    method: str
    path: re.Pattern[str]
    status: int
    count: int
    retry_after: int | None


class FakeTeams(FakeServer):
    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Call] = []
        self.messages: list[Message] = []
        self.grants: list[dict[str, str]] = []  # token requests, granted or not
        self.installed: set[str] = set()  # AAD object ids with the app installed
        self._tokens: set[str] = set()
        self._faults: list[_Fault] = []
        self._ids = itertools.count(1_700_000_000_001)
        self._certificate: x509.Certificate | None = None

    # --- addresses

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def metadata_url(self) -> str:
        return f"{self.base_url}/botframework/v1/.well-known/openidconfiguration"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/login/{TENANT}/oauth2/v2.0/token"

    @property
    def service_url(self) -> str:
        return f"{self.base_url}/teams/"

    def add_routes(self, app: web.Application) -> None:
        app.router.add_get("/botframework/v1/.well-known/openidconfiguration", self._metadata)
        app.router.add_get("/botframework/v1/.well-known/keys", self._keys)
        app.router.add_post("/login/{tenant}/oauth2/v2.0/token", self._token)
        app.router.add_route("*", "/teams/{path:.*}", self._connector)

    # --- what Teams signs

    def token_for(
        self,
        activity: dict[str, Any],
        *,
        key: str = SIGNING,
        audience: str = APP_ID,
        issuer: str = ISSUER,
        expires_in: float = 3600,
        service_url: str | None = None,
    ) -> str:
        """The JWT the Bot Connector sends with `activity` (RS256, the key's id in `kid`)."""
        now = int(time.time())
        claims = {
            "iss": issuer,
            "aud": audience,
            "serviceurl": service_url or activity.get("serviceUrl"),
            "nbf": now - 60,
            "iat": now - 60,
            "exp": int(now + expires_in),
        }
        return jwt.encode(claims, private_key(key), algorithm="RS256", headers={"kid": key})

    def trust_certificate(self, certificate: x509.Certificate) -> None:
        """Accept client assertions signed by this certificate's key (its SHA-1 `x5t`)."""
        self._certificate = certificate

    def fail_next(
        self,
        method: str,
        path: str,
        status: int = 500,
        *,
        count: int = 1,
        retry_after: int | None = None,
    ) -> None:
        """The next `count` `method` calls whose path matches the regex `path` answer `status`
        and change nothing."""
        self._faults.append(_Fault(method, re.compile(path), status, count, retry_after))

    # --- what tests read

    def posts_in(self, conversation_id: str) -> list[Message]:
        """The messages posted in a conversation (not replies under them)."""
        return [m for m in self.messages if m.conversation_id == conversation_id and not m.reply_to]

    def replies_to(self, activity_id: str) -> list[Message]:
        return [m for m in self.messages if m.reply_to == activity_id]

    def message(self, activity_id: str) -> Message:
        [found] = [m for m in self.messages if m.activity_id == activity_id]
        return found

    def calls_to(self, method: str, path: str = "") -> list[Call]:
        return [c for c in self.calls if c.method == method and re.search(path, c.path)]

    @staticmethod
    def personal_conversation(aad: str) -> str:
        return "a:1" + hashlib.sha256(aad.encode()).hexdigest()[:40]

    # --- the endpoints

    async def _metadata(self, _request: web.Request) -> web.Response:
        return web.json_response(
            {
                "issuer": ISSUER,
                "authorization_endpoint": "https://invalid.botframework.com",
                "jwks_uri": f"{self.base_url}/botframework/v1/.well-known/keys",
                "id_token_signing_alg_values_supported": ["RS256"],
                "token_endpoint_auth_methods_supported": ["private_key_jwt"],
            }
        )

    async def _keys(self, _request: web.Request) -> web.Response:
        key = public_jwk(SIGNING) | {"endorsements": ["msteams"]}
        return web.json_response({"keys": [key]})

    async def _token(self, request: web.Request) -> web.Response:
        form = {k: str(v) for k, v in (await request.post()).items()}
        self.grants.append(form)
        if request.match_info["tenant"] != TENANT:
            return _oauth_error(400, "invalid_request", "AADSTS90002: Tenant not found.")
        if form.get("grant_type") != "client_credentials" or form.get("scope") != SCOPE:
            return _oauth_error(400, "invalid_request", "AADSTS900144: bad grant or scope.")
        if form.get("client_id") != APP_ID or not self._credentials_hold(form):
            return _oauth_error(401, "invalid_client", "AADSTS7000215: Invalid client secret.")
        token = f"fake-connector-token-{uuid.uuid4().hex}"
        self._tokens.add(token)
        body = {"token_type": "Bearer", "expires_in": 3599, "access_token": token}
        return web.json_response(body)

    def _credentials_hold(self, form: dict[str, str]) -> bool:
        if "client_secret" in form:
            return form["client_secret"] == APP_PASSWORD
        assertion = form.get("client_assertion")
        if assertion is None or self._certificate is None:
            return False
        der = self._certificate.public_bytes(serialization.Encoding.DER)
        thumbprint = base64.urlsafe_b64encode(hashlib.sha1(der).digest()).rstrip(b"=").decode()
        try:
            if jwt.get_unverified_header(assertion).get("x5t") != thumbprint:
                return False
            jwt.decode(
                assertion,
                self._certificate.public_key(),  # type: ignore[arg-type]
                algorithms=["RS256"],
                audience=self.token_url,
                issuer=APP_ID,
            )
        except jwt.InvalidTokenError:
            return False
        return True

    async def _connector(self, request: web.Request) -> web.Response:
        path = request.match_info["path"]
        body = await request.json() if request.can_read_body else None
        authorized = request.headers.get("Authorization", "").removeprefix("Bearer ") in (
            self._tokens
        )

        def answer(
            status: int, payload: Any, headers: dict[str, str] | None = None
        ) -> web.Response:
            self.calls.append(Call(request.method, path, body, authorized, status))
            return web.json_response(payload, status=status, headers=headers)

        if not authorized:
            return answer(401, {"message": "Authorization has been denied for this request."})
        for fault in self._faults:
            if fault.count and fault.method == request.method and fault.path.search(path):
                fault.count -= 1
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
                return answer(fault.status, {"error": {"code": "Fault"}}, headers)
        status, payload = self._act(request.method, path, body)
        return answer(status, payload)

    def _act(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        if method == "POST" and path == "v3/conversations":
            return self._open_conversation(body)
        match = re.fullmatch(r"v3/conversations/([^/]+)/activities(?:/([^/]+))?", path)
        if match is None:
            return 404, {"error": {"code": "NotFound"}}
        conversation_id, activity_id = match.groups()
        if method == "POST":
            posted = Message(conversation_id, str(next(self._ids)), body, reply_to=activity_id)
            self.messages.append(posted)
            return 201, {"id": posted.activity_id}
        if method == "PUT" and activity_id is not None:
            found = [m for m in self.messages if m.activity_id == activity_id]
            if not found:
                return 404, {"error": {"code": "ActivityNotFoundInConversation"}}
            found[0].edits.append(body)
            found[0].activity = body
            return 200, {"id": activity_id}
        return 405, {"error": {"code": "MethodNotAllowed"}}

    def _open_conversation(self, body: dict[str, Any]) -> tuple[int, Any]:
        members = body.get("members") or []
        aad = str(members[0].get("id")) if members else ""
        if aad not in self.installed or body.get("tenantId") != TENANT:
            return 403, {"error": {"code": "Forbidden", "message": "Bot is not installed"}}
        return 201, {"id": self.personal_conversation(aad)}


def _oauth_error(status: int, error: str, description: str) -> web.Response:
    return web.json_response({"error": error, "error_description": description}, status=status)


def self_signed_certificate() -> tuple[bytes, x509.Certificate]:
    """A PEM holding a new RSA key and a self-signed certificate for it, and the certificate
    (the app registration's uploaded certificate, in Entra ID's place)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hitl-gateway-test")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )
    pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ) + certificate.public_bytes(serialization.Encoding.PEM)
    return pem, certificate
