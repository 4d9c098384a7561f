"""Who is using the console: sessions, CSRF tokens, same-origin checks, passwords and
sign-in links.

People with an email and a `password_hash` in the routing config sign in with a password.
With none configured, `gateway console link` prints a one-time sign-in URL for the operator.
A session is a row in `console_session`; the cookie carries its id, signed with a key derived
from GATEWAY_SECRET_KEY, so rotating that key ends every session, and a sign-out ends one
server-side. The CSRF token is a MAC of the session id.
"""

from __future__ import annotations

import hashlib
import secrets
import urllib.parse
from dataclasses import dataclass, field
from datetime import timedelta

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError
from fastapi import Request
from fastapi.responses import Response

from gateway.errors import BadToken
from gateway.seam import AnsweredIn, ChannelContext, ConsolePerson

COOKIE = "gw_session"
SESSION_SECONDS = 12 * 3600
LINK_TTL = timedelta(minutes=30)
_hasher = PasswordHasher()
_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class Viewer:
    """A signed-in person; `projects=None` is the operator, who sees every project."""

    name: str
    email: str | None
    projects: tuple[str, ...] | None
    sid: str
    # The session's one-time notice, read with the session: (page path, text).
    flash: tuple[str, str] | None = field(default=None, compare=False, repr=False)

    def sees(self, project: str) -> bool:
        return self.projects is None or project in self.projects

    @property
    def user_info(self) -> dict[str, str]:
        info = {"channel": AnsweredIn.WEB, "name": self.name}
        return info | ({"email": self.email} if self.email else {})

    @property
    def actor_id(self) -> str:
        return self.email or "operator"

    @property
    def by_link(self) -> bool:
        """Holding an emailed request link, not signed in (`/r/<rid>?t=`)."""
        return self.sid.startswith(LINK_SID)


LINK_SID = "link:"  # the sid of a link holder's viewer (`pages._link_viewer`)
SESSION_KEY = "console-session"  # purposes of the keys derived from GATEWAY_SECRET_KEY
CSRF_KEY = "console-csrf"


def _sid_hash(sid: str) -> str:
    return hashlib.sha256(sid.encode()).hexdigest()


def csrf_token(context: ChannelContext, sid: str) -> str:
    return context.keys.tag(CSRF_KEY, sid)


def csrf_ok(context: ChannelContext, sid: str, given: str | None) -> bool:
    return bool(given) and secrets.compare_digest(str(given), csrf_token(context, sid))


async def load_viewer(context: ChannelContext, request: Request) -> None:
    """Read the session once per request (one read by primary key), so that `viewer_of`
    answers without I/O (the console router's dependency)."""
    request.state.viewer = await _live_viewer(context, request.cookies.get(COOKIE))


def viewer_of(request: Request) -> Viewer | None:
    """Who sent this request: a live session's person, or None (fails closed)."""
    viewer = getattr(request.state, "viewer", None)
    return viewer if isinstance(viewer, Viewer) else None


async def _live_viewer(context: ChannelContext, cookie: str | None) -> Viewer | None:
    if not cookie:
        return None
    try:
        sid = context.keys.verify(SESSION_KEY, cookie).get("s")
    except BadToken:
        return None
    if not isinstance(sid, str) or not sid:
        return None
    session = await context.console.live_session(_sid_hash(sid))
    if session is None:
        return None  # signed out, signed out everywhere, or expired
    flash = (session.flash_path, session.flash) if session.flash and session.flash_path else None
    return Viewer(session.name, session.email, session.projects, sid, flash=flash)


async def start_session(context: ChannelContext, response: Response, person: Viewer) -> None:
    await context.console.start_session(
        _sid_hash(person.sid),
        email=person.email,
        name=person.name,
        projects=person.projects,
        ttl=timedelta(seconds=SESSION_SECONDS),
    )
    response.set_cookie(
        COOKIE,
        context.keys.sign(SESSION_KEY, {"s": person.sid}, SESSION_SECONDS),
        max_age=SESSION_SECONDS,
        httponly=True,
        samesite="lax",
        secure=(context.console.public_url or "").startswith("https://"),
        path="/",
    )


async def end_session(context: ChannelContext, response: Response, viewer: Viewer | None) -> None:
    """Sign out this browser: the session ends server-side, so a copy of the cookie ends too."""
    if viewer is not None and not viewer.sid.startswith("link:"):
        await context.console.end_session(_sid_hash(viewer.sid))
    response.delete_cookie(COOKIE, path="/")


async def end_every_session(context: ChannelContext, response: Response, viewer: Viewer) -> int:
    """Sign out every browser of this person (the operator: every operator session)."""
    ended = await context.console.end_sessions_of(viewer.email)
    response.delete_cookie(COOKIE, path="/")
    return ended


async def flash(context: ChannelContext, viewer: Viewer, path: str, text: str) -> None:
    """A notice the server composed, shown once on `path` in this session."""
    await context.console.set_flash(_sid_hash(viewer.sid), path, text)


async def take_flash(context: ChannelContext, viewer: Viewer, path: str) -> str | None:
    """This session's notice for `path`, if any; it is shown once (a second tab gets None)."""
    if viewer.flash is None or viewer.flash[0] != path:
        return None
    taken = await context.console.take_flash(_sid_hash(viewer.sid), path, viewer.flash[1])
    return viewer.flash[1] if taken else None


def new_sid() -> str:
    return secrets.token_urlsafe(24)


# --- same-origin POSTs (login CSRF)


def expected_origin(context: ChannelContext, request: Request) -> str:
    """The console's own origin: GATEWAY_PUBLIC_URL's, else this request's scheme and host."""
    public = context.console.public_url
    own = origin_of(public) if public else None
    return own or origin_of(f"{request.url.scheme}://{request.url.netloc}") or ""


def origin_ok(context: ChannelContext, request: Request) -> bool:
    """The POST came from a page of this site: its Origin (or, without one, its Referer) is
    the console's origin. Neither header, or `Origin: null`, is refused: browsers send Origin
    on every form POST (OWASP CSRF cheat sheet, "Verifying origin with standard headers")."""
    sent = request.headers.get("origin") or request.headers.get("referer")
    found = origin_of(sent) if sent else None
    return found is not None and secrets.compare_digest(found, expected_origin(context, request))


def origin_of(url: str) -> str | None:
    """`scheme://host[:port]` in the form browsers send in Origin (default port left out)."""
    try:
        parts = urllib.parse.urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    host = parts.hostname
    if parts.scheme not in _DEFAULT_PORTS or not host:
        return None
    host = f"[{host}]" if ":" in host else host
    keep_port = port is not None and port != _DEFAULT_PORTS[parts.scheme]
    return f"{parts.scheme}://{host}" + (f":{port}" if keep_port else "")


# --- people from the routing config


def console_people(context: ChannelContext) -> dict[str, ConsolePerson]:
    """People who may sign in with a password, by lower-case email."""
    return {person.email.lower(): person for person in context.console.people()}


def viewer_for(person: ConsolePerson) -> Viewer:
    return Viewer(person.name, person.email, person.projects, new_sid())


def check_password(context: ChannelContext, email: str, password: str) -> Viewer | None:
    person = console_people(context).get(email.strip().lower())
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
    context: ChannelContext, email: str | None = None, *, base_url: str | None = None
) -> str:
    """A one-time URL (30 minutes): the operator's, or a configured person's."""
    token = secrets.token_urlsafe(24)
    await context.console.create_login(_link_hash(token), email, LINK_TTL)
    base = base_url or context.console.public_url or context.console.local_url
    return f"{base.rstrip('/')}/console/link/{token}"


async def spend_sign_in_link(context: ChannelContext, token: str) -> Viewer | str:
    """The person the link signs in, or why it cannot."""
    used = await context.console.use_login(_link_hash(token))
    if not used.ok:
        return used.reason
    if used.email is None:
        return Viewer("operator", None, None, new_sid())
    person = context.console.person_with_email(used.email)
    if person is None:
        return f"{used.email} is no longer a console user"
    return viewer_for(person)
