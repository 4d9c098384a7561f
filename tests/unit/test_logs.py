"""The access-log filter: every token in a request target is redacted, nothing else changes."""

from __future__ import annotations

import logging
import logging.config

import pytest

from gateway.runtime.logs import (
    ACCESS_LOGGER,
    RedactTokens,
    install_access_log_filter,
    redact_target,
)
from tests.helpers import access_record

TOKEN = "eyJyIjoiYWJjIn0.c2lnbmF0dXJl"


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (f"/r/abc?t={TOKEN}", "/r/abc?t=[redacted]"),
        (f"/r/abc?t={TOKEN}&n=notice-ref", "/r/abc?t=[redacted]&n=notice-ref"),
        (f"/r/abc?T={TOKEN}", "/r/abc?T=[redacted]"),
        (f"/console/link/{TOKEN}", "/console/link/[redacted]"),
        (f"/console/link/{TOKEN}?x=1", "/console/link/[redacted]?x=1"),
        (
            "/slack/oauth_redirect?code=1234.5678&state=s-9",
            "/slack/oauth_redirect?code=[redacted]&state=[redacted]",
        ),
        (
            f"/x?token={TOKEN}&key=k1&api_key=k2",
            "/x?token=[redacted]&key=[redacted]&api_key=[redacted]",
        ),
        (f"/x?%74={TOKEN}", "/x?%74=[redacted]"),  # "t", percent-encoded
        ("/x?t", "/x?t"),  # a name alone has no value to hide
        ("/console?project=alpha&kind=function_call", "/console?project=alpha&kind=function_call"),
        ("/console/requests/abc", "/console/requests/abc"),
        ("/healthz", "/healthz"),
    ],
)
def test_redact_target(target: str, expected: str) -> None:
    assert redact_target(target) == expected


def test_a_target_inside_a_parameter_is_redacted_too() -> None:
    # The sign-in page's `next=` can carry a whole request link.
    redacted = redact_target(f"/console/login?next=%2Fr%2Fabc%3Ft%3D{TOKEN}")
    assert TOKEN not in redacted
    assert redacted.startswith("/console/login?next=/r/abc")
    assert TOKEN not in redact_target(f"/console/login?next=/console/link/{TOKEN}")


def test_the_filter_rewrites_uvicorns_access_record() -> None:
    record = access_record(f"/r/abc?t={TOKEN}")
    assert RedactTokens().filter(record) is True  # redacted, never dropped
    assert record.getMessage() == '127.0.0.1:5000 - "GET /r/abc?t=[redacted] HTTP/1.1" 200'


def test_the_filter_is_installed_once() -> None:
    logger = logging.getLogger(ACCESS_LOGGER)
    install_access_log_filter()
    install_access_log_filter()
    assert sum(isinstance(f, RedactTokens) for f in logger.filters) == 1
    # uvicorn's own logging setup (dictConfig, which replaces handlers) keeps it.
    handlers, level = list(logger.handlers), logger.level
    try:
        logging.config.dictConfig(
            {"version": 1, "disable_existing_loggers": False, "loggers": {ACCESS_LOGGER: {}}}
        )
        assert sum(isinstance(f, RedactTokens) for f in logger.filters) == 1
    finally:
        for handler in handlers:
            logger.addHandler(handler)
        logger.setLevel(level)
