"""Access-log hygiene: request targets whose tokens can decide or sign in are redacted before
any handler writes them.

uvicorn's access line holds the path and query string, and some of ours carry secrets: the
request-link token (`/r/<rid>?t=…`, 14 days, decides as the recipient), the one-time sign-in
link (`/console/link/<token>`), Slack's OAuth `code` and `state` (`/slack/oauth_redirect`).
Whoever reads the log must not be able to use them.
"""

from __future__ import annotations

import logging
import re
import urllib.parse

ACCESS_LOGGER = "uvicorn.access"
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
