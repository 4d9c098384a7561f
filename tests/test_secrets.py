"""Secrets at rest: keys hashed, webhook secrets and bot tokens encrypted, none in the clear."""

from __future__ import annotations

from pathlib import Path

import pytest

from gateway.store import projects as project_store
from tests.helpers import add_webhook
from tests.services.inprocess import running_gateway, test_settings, write_config
from tests.services.receiver import WebhookReceiver


def database_bytes(folder: Path) -> bytes:
    """The SQLite file with its WAL: everything the gateway wrote to disk."""
    return b"".join(path.read_bytes() for path in folder.glob("gw.db*"))


async def test_no_secret_is_stored_in_the_clear(tmp_path: Path, receiver: WebhookReceiver) -> None:
    database = tmp_path / "gw.db"
    async with running_gateway(test_settings(f"sqlite+aiosqlite:///{database}")) as gateway:
        secret = await add_webhook(gateway, receiver.url)
        spec = {
            "fn": "f",
            "kwargs": {},
            "channel": {"slack": {"channel_or_user_id": "C1", "bot_token": "xoxb-private-42"}},
        }
        async with gateway.client() as client:
            created = await client.post(
                "/function_calls", json={"run_id": "r", "call_id": "c", "spec": spec}
            )
            assert created.status_code == 200 and "xoxb-private-42" not in created.text
        api_key = gateway.api_key
    stored = database_bytes(tmp_path)
    assert b"function_call" in stored  # the request is there, so the search can find things
    for plain in (api_key, secret, secret.removeprefix("whsec_"), "xoxb-private-42"):
        assert plain.encode() not in stored, plain


async def test_config_file_webhooks_are_registered(
    tmp_path: Path, receiver: WebhookReceiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_HOOK_SECRET", "whsec_" + "QUJD" * 8)
    config = write_config(
        tmp_path / "routing.toml",
        f'[[webhooks]]\nproject = "ops"\nurl = "{receiver.url}"\nsecret_env = "TEST_HOOK_SECRET"\n'
        'events = ["human_contact.completed"]\n'
        '[[webhooks]]\nurl = "http://127.0.0.1:9/x"\nsecret_env = "UNSET_SECRET_VAR"\n',
    )
    settings = test_settings(f"sqlite+aiosqlite:///{tmp_path}/gw.db", config=config)
    async with running_gateway(settings) as gateway:
        hooks = await gateway.core.db.read(project_store.list_webhooks)
        project = await gateway.core.db.read(project_store.get_project, "ops")
    assert project is not None
    [hook] = hooks  # the one whose secret variable is unset was skipped
    assert hook.url == receiver.url and hook.source == "config" and hook.project_id == project.id
    assert gateway.core.box.open(hook.sealed_secret) == "whsec_" + "QUJD" * 8
