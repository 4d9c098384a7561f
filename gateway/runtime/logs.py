"""Logging: the format (`GATEWAY_LOG_FORMAT`: text or one JSON object per line), request ids,
and access-log hygiene.

Request targets whose tokens can decide or sign in are redacted before any handler writes
them. uvicorn's access line holds the path and query string, and some of ours carry secrets:
the request-link token (`/r/<rid>?t=…`, 14 days, decides as the recipient), the one-time
sign-in link (`/console/link/<token>`), Slack's OAuth `code` and `state`
(`/slack/oauth_redirect`). Whoever reads the log must not be able to use them. The filter sits
on the logger, so it runs before any formatter: text and JSON lines are redacted alike.
"""

from __future__ import annotations

import json
import logging
import re
import secrets
import urllib.parse
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

ACCESS_LOGGER = "uvicorn.access"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REQUEST_ID_HEADER = "x-request-id"
# A client's (or proxy's) own X-Request-ID is kept when it looks like an id, not prose.
_GOOD_REQUEST_ID = re.compile(r"[\w.:/+=@-]{1,128}", re.ASCII)
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
REDACTED = "[redacted]"
# Query parameters that carry a credential, compared case-insensitively.
SECRET_PARAMS = frozenset({"t", "token", "code", "state", "key", "api_key", "access_token"})
# A path segment that is itself a credential: the one-time sign-in link's token.
_SECRET_SEGMENT = re.compile(r"(/console/link/)[^/?#]+")


def redact_target(target: str) -> str:
    """A request target (path and query) with every token replaced by `[redacted]`."""
    path, mark, query = target.partition("?")
    path = _SECRET_SEGMENT.sub(r"\1" + REDACTED, path)
    if not mark:
        return path
    return f"{path}?{'&'.join(_redact_field(field) for field in query.split('&'))}"


def _redact_field(field: str) -> str:
    name, equals, value = field.partition("=")
    if urllib.parse.unquote_plus(name).strip().lower() in SECRET_PARAMS:
        return f"{name}={REDACTED}" if equals else name
    # A value that is itself a target (the sign-in page's `next=/r/<rid>?t=…`).
    inner = urllib.parse.unquote_plus(value)
    cleaned = redact_target(inner) if "?" in inner or "/console/link/" in inner else inner
    return field if cleaned == inner else f"{name}={urllib.parse.quote(cleaned, safe='/')}"


class RedactTokens(logging.Filter):
    """Rewrites an access record's arguments (uvicorn passes the target as one of them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                redact_target(arg) if isinstance(arg, str) else arg for arg in record.args
            )
        return True


def install_access_log_filter() -> None:
    """Put `RedactTokens` on uvicorn's access logger, once.

    A logger's filters outlive `logging.config.dictConfig` (which uvicorn runs at start and
    which replaces only handlers), so installing before or after uvicorn configures works.
    """
    logger = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(existing, RedactTokens) for existing in logger.filters):
        logger.addFilter(RedactTokens())


# --- request ids


class RequestId:
    """Gives each HTTP request an id, answered in `X-Request-ID` and carried by every log
    line written while serving it (the access line too). A well-formed `X-Request-ID` from
    the client or a reverse proxy is kept, so one id follows the request through both."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = _incoming_id(scope) or secrets.token_hex(8)
        # Not reset afterwards: uvicorn runs each request in a task of its own, and the
        # 500 answer and its access line are written outside this middleware, after it.
        REQUEST_ID.set(request_id)

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), request_id.encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_id)


def _incoming_id(scope: Scope) -> str | None:
    for name, value in scope.get("headers", []):
        if name == REQUEST_ID_HEADER.encode():
            text = value.decode("latin-1")
            return text if _GOOD_REQUEST_ID.fullmatch(text) else None
    return None


# --- formats


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request_id (while serving a
    request), exception (its traceback); an access line adds client, method, path, status."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = getattr(record, "request_id", None) or REQUEST_ID.get()
        if request_id:
            entry["request_id"] = request_id
        if record.name == ACCESS_LOGGER and isinstance(record.args, tuple):
            entry |= _access_fields(record.args)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, default=str)


def _iso(created: float) -> str:
    moment = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    return moment.replace("+00:00", "Z")


def _access_fields(args: tuple[Any, ...]) -> dict[str, Any]:
    """uvicorn's access arguments: client, method, target (redacted by now), version, status."""
    if len(args) != 5:
        return {}
    client, method, target, _version, status = args
    return {"client": client, "method": method, "path": target, "status": status}


def configure_logging(*, level: str, log_format: str) -> None:
    """The root logger: `text` (as before) or `json`, on standard error."""
    if log_format == "json":
        handler = logging.StreamHandler()
        handler.setFormatter(JsonFormatter())
        logging.basicConfig(level=level.upper(), handlers=[handler])
    else:
        logging.basicConfig(level=level.upper(), format=TEXT_FORMAT)


def uvicorn_log_config(log_format: str) -> dict[str, Any]:
    """uvicorn's `log_config`: its own (text) one, or, for JSON, its loggers handing every
    record to the root logger's JSON handler."""
    from uvicorn.config import LOGGING_CONFIG

    if log_format != "json":
        return LOGGING_CONFIG
    loggers = ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi")
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "loggers": {name: {"handlers": [], "propagate": True} for name in loggers},
    }
