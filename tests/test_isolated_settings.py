"""A developer's own settings (their shell, a `.env` that `make run` wrote) never reach a test."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.app import build_core
from tests.conftest import SETTING_PREFIXES
from tests.services.inprocess import test_settings

REPO_ROOT = Path(__file__).resolve().parent.parent
LOCAL_SETTINGS = "SLACK_BOT_TOKEN=xoxb-local-dev\nDISCORD_BOT_TOKEN=local.dev.token\n"


@pytest.fixture
def local_env_file() -> Iterator[Path]:
    """A `.env` in the repository root, as `make run` leaves one (an existing one is kept)."""
    path = REPO_ROOT / ".env"
    if path.exists():
        yield path
        return
    path.write_text(LOCAL_SETTINGS)
    try:
        yield path
    finally:
        path.unlink()


def test_no_channel_is_configured_by_the_repository_env_file(
    local_env_file: Path, tmp_path: Path
) -> None:
    assert Path.cwd() != REPO_ROOT
    assert not [name for name in os.environ if name.startswith(SETTING_PREFIXES)]
    core = build_core(test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db"))
    for name in ("slack", "discord", "email"):
        assert core.channels[name].missing_settings(), f"{name} was configured from outside"


def test_tests_pass_with_platform_tokens_in_the_shell_and_env_file(local_env_file: Path) -> None:
    env = os.environ | {"SLACK_BOT_TOKEN": "xoxb-from-shell", "DISCORD_BOT_TOKEN": "from.shell"}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "sqlite",
            "tests/test_routing_api.py",
        ],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=110,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert " passed" in result.stdout
