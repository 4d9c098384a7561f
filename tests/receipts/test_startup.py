"""A signing key that no longer opens (GATEWAY_SECRET_KEY changed, the earlier one not
listed) would fail every decision, and every expiry with it: `gateway serve` refuses to
start instead, and `gateway check` says so, naming the settings and never a key."""

from __future__ import annotations

import pytest

from gateway.cli.checks import run_checks
from gateway.policies import receipts
from gateway.security.crypto import SecretBox
from gateway.store import Database, migrate
from tests.services.cli import Cli
from tests.services.inprocess import test_settings

SEALED_UNDER = "test-secret-key"  # the `cli` fixture's GATEWAY_SECRET_KEY
CHANGED = "a-changed-secret-key"


async def sealed_signing_key(cli: Cli) -> str:
    """The first signing key, sealed under SEALED_UNDER (as a running gateway makes it)."""
    db = Database(cli.database_url)
    try:
        await migrate.upgrade(db)
        key = await db.write(receipts.rotate, SecretBox(SEALED_UNDER))
    finally:
        await db.aclose()
    return key.kid


async def test_serve_and_check_refuse_a_signing_key_the_secret_key_cannot_open(
    cli: Cli, capsys: pytest.CaptureFixture[str]
) -> None:
    kid = await sealed_signing_key(cli)

    served = await cli.serve_until_it_exits(GATEWAY_SECRET_KEY=CHANGED)
    assert served.returncode != 0, served
    said = f"the receipt signing key {kid} does not open with GATEWAY_SECRET_KEY"
    assert said in served.stderr, served
    assert "GATEWAY_PREVIOUS_SECRET_KEYS" in served.stderr
    assert await run_checks(test_settings(cli.database_url, secret_key=CHANGED), {}) == 1
    checked = capsys.readouterr().out
    assert f"FAIL {said}" in checked, checked
    for output in (served.stdout, served.stderr, checked):
        assert SEALED_UNDER not in output and CHANGED not in output

    listed = test_settings(cli.database_url, secret_key=CHANGED, previous_secret_keys=SEALED_UNDER)
    assert await run_checks(listed, {}) == 0
    assert "signing key" not in capsys.readouterr().out
