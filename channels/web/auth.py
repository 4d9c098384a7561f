"""Who is using the console: session cookies, CSRF tokens, passwords and sign-in links.

People with an email and a `password_hash` in the routing config sign in with a password.
With none configured, `gateway console link` prints a one-time sign-in URL for the operator.
A session is a signed cookie (no server-side state); its CSRF token is a MAC of its id.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from fastapi import Request
from fastapi.responses import Response

from gateway import signed
from gateway.core import Core
from gateway.routing import Person
from gateway.store import console as console_store

COOKIE = "gw_session"
SESSION_SECONDS = 12 * 3600
LINK_TTL = timedelta(minutes=30)
_hasher = PasswordHasher()


@dataclass(frozen=True)
class Viewer:
    """A signed-in person; `projects=None` is the operator, who sees every project."""

    name: str
    email: str | None
    projects: tuple[str, ...] | None
    sid: str

    def sees(self, project: str) -> bool:
        return self.projects is None or project in self.projects

    @property
    def user_info(self) -> dict[str, str]:
        info = {"channel": "web", "name": self.name}
        return info | ({"email": self.email} if self.email else {})

    @property
    def actor_id(self) -> str:
        return self.email or "operator"


def _session_key(core: Core) -> bytes:
    return core.box.subkey("console-session")


def csrf_token(core: Core, sid: str) -> str:
    return signed.tag(core.box.subkey("console-csrf"), sid)


def csrf_ok(core: Core, sid: str, given: str | None) -> bool:
    return bool(given) and secrets.compare_digest(str(given), csrf_token(core, sid))


def viewer_of(core: Core, request: Request) -> Viewer | None:
    token = request.cookies.get(COOKIE)
    if not token:
        return None
    try:
        claims = signed.verify(_session_key(core), token)
    except signed.BadToken:
        return None
    projects = claims.get("p")
    return Viewer(
        name=str(claims.get("n") or "operator"),
        email=claims.get("e"),
        projects=None if projects is None else tuple(projects),
        sid=str(claims.get("s")),
    )


def start_session(core: Core, response: Response, person: Viewer) -> None:
    claims = {"n": person.name, "e": person.email, "p": person.projects, "s": person.sid}
    response.set_cookie(
        COOKIE,
        signed.sign(_session_key(core), claims, SESSION_SECONDS),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="lax",
        secure=(core.settings.public_url or "").startswith("https://"),
        path="/",
    )


def end_session(response: Response) -> None:
    response.delete_cookie(COOKIE, path="/")


def new_sid() -> str:
    return secrets.token_urlsafe(12)


# --- people from the routing config


def console_people(core: Core) -> dict[str, Person]:
    """People who may sign in with a password, by lower-case email."""
    return {
        person.email.lower(): person
        for person in core.config.people.values()
        if person.email and person.password_hash
    }


def person_with_email(core: Core, email: str) -> Person | None:
    wanted = email.strip().lower()
    return next((p for p in core.config.people.values() if (p.email or "").lower() == wanted), None)


def viewer_for(person: Person) -> Viewer:
    assert person.email is not None
    projects = None if "*" in person.projects else tuple(person.projects)
    return Viewer(person.name or person.email, person.email, projects, new_sid())


def check_password(core: Core, email: str, password: str) -> Viewer | None:
    person = console_people(core).get(email.strip().lower())
    if person is None or person.password_hash is None:
        _hasher.hash("a constant-time decoy")  # a missing user takes as long as a wrong password
        return None
    try:
        _hasher.verify(person.password_hash, password)
    except (VerificationError, InvalidHashError):
        return None
    return viewer_for(person)


def hash_password(password: str) -> str:
    return _hasher.hash(password)


# --- one-time sign-in links


def _link_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


async def create_sign_in_link(
    core: Core, email: str | None = None, *, base_url: str | None = None
) -> str:
    """A one-time URL (30 minutes): the operator's, or a configured person's."""
    token = secrets.token_urlsafe(24)
    async with core.db.write() as conn:
        await console_store.create_login(conn, _link_hash(token), email, LINK_TTL)
    settings = core.settings
    base = base_url or settings.public_url or f"http://{settings.host}:{settings.port}"
    return f"{base.rstrip('/')}/console/link/{token}"


async def spend_sign_in_link(core: Core, token: str) -> Viewer | str:
    """The person the link signs in, or why it cannot."""
    async with core.db.write() as conn:
        used = await console_store.use_login(conn, _link_hash(token))
    if not used.ok:
        return used.reason
    if used.email is None:
        return Viewer("operator", None, None, new_sid())
    person = person_with_email(core, used.email)
    if person is None:
        return f"{used.email} is no longer a console user"
    return viewer_for(person)
