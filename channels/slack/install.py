"""Workspaces installed through "Add to Slack" (OAuth v2), kept as the Slack channel's own
records in the gateway's database (`ChannelContext.records`): slack_sdk's installation and
OAuth state store interfaces, over the gateway's store and its migrations."""

from __future__ import annotations

import json
import logging
import secrets
from datetime import datetime
from typing import Any

from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store.async_installation_store import AsyncInstallationStore
from slack_sdk.oauth.installation_store.models.bot import Bot
from slack_sdk.oauth.installation_store.models.installation import Installation
from slack_sdk.oauth.state_store.async_state_store import AsyncOAuthStateStore

from channels.slack.manifest import BOT_SCOPES
from channels.slack.settings import SlackSettings
from gateway.seam import Records

log = logging.getLogger(__name__)

STATE_SECONDS = 600
INSTALLATION = "installation"  # records of this kind: one per workspace (or org), its latest
STATE = "oauth_state"  # a one-time OAuth state, spent by the redirect


def workspace(enterprise_id: str | None, team_id: str | None, enterprise_install: bool) -> str:
    """The key of a workspace's installation (an org-wide install: the org's)."""
    return f"{enterprise_id or '-'}:{'-' if enterprise_install else team_id or '-'}"


def _plain(value: Any) -> Any:
    return value.timestamp() if isinstance(value, datetime) else value


class InstallationRecords(AsyncInstallationStore):
    """What Bolt stores at the end of an install and reads to authorize each event."""

    def __init__(self, records: Records) -> None:
        self.records = records

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_save(self, installation: Installation) -> None:
        fields = {k: _plain(v) for k, v in installation.to_dict_for_copying().items()}
        key = workspace(
            installation.enterprise_id,
            installation.team_id,
            bool(installation.is_enterprise_install),
        )
        await self.records.put(INSTALLATION, key, json.dumps(fields, separators=(",", ":")))

    async def async_find_installation(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        user_id: str | None = None,
        is_enterprise_install: bool | None = False,
    ) -> Installation | None:
        key = workspace(enterprise_id, team_id, bool(is_enterprise_install))
        installation = await self.by_key(key)
        if installation is not None and user_id is not None and installation.user_id != user_id:
            return None  # only the installer's own is kept; the gateway needs the bot's
        return installation

    async def by_key(self, key: str) -> Installation | None:
        """The installation kept under a `workspace` key."""
        stored = await self.records.get(INSTALLATION, key)
        return None if stored is None else Installation(**json.loads(stored))

    async def async_find_bot(
        self,
        *,
        enterprise_id: str | None,
        team_id: str | None,
        is_enterprise_install: bool | None = False,
    ) -> Bot | None:
        installation = await self.async_find_installation(
            enterprise_id=enterprise_id,
            team_id=team_id,
            is_enterprise_install=is_enterprise_install,
        )
        return None if installation is None else installation.to_bot()

    async def async_delete_installation(
        self, *, enterprise_id: str | None, team_id: str | None, user_id: str | None = None
    ) -> None:
        await self.records.take(INSTALLATION, workspace(enterprise_id, team_id, False))

    async def async_delete_bot(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self.records.take(INSTALLATION, workspace(enterprise_id, team_id, False))

    async def async_delete_all(self, *, enterprise_id: str | None, team_id: str | None) -> None:
        await self.records.take(INSTALLATION, workspace(enterprise_id, team_id, False))


class StateRecords(AsyncOAuthStateStore):
    """One-time states: each redirect spends its own, once, within STATE_SECONDS."""

    def __init__(self, records: Records) -> None:
        self.records = records

    @property
    def logger(self) -> logging.Logger:
        return log

    async def async_issue(self, *args: Any, **kwargs: Any) -> str:
        state = secrets.token_urlsafe(24)
        await self.records.put(STATE, state, "issued", ttl=STATE_SECONDS)
        return state

    async def async_consume(self, state: str) -> bool:
        return await self.records.take(STATE, state) is not None


class Installations:
    def __init__(self, settings: SlackSettings, records: Records) -> None:
        assert settings.client_id is not None and settings.client_secret is not None
        self.settings = settings
        self.records = records
        self.store = InstallationRecords(records)
        self.states = StateRecords(records)

    def __repr__(self) -> str:
        return f"Installations(client_id={self.settings.client_id!r})"

    def oauth_settings(self) -> AsyncOAuthSettings:
        assert self.settings.client_secret is not None
        return AsyncOAuthSettings(
            client_id=self.settings.client_id,
            client_secret=self.settings.client_secret.get_secret_value(),
            scopes=BOT_SCOPES,
            installation_store=self.store,
            state_store=self.states,
            install_path="/slack/install",
            redirect_uri_path="/slack/oauth_redirect",
        )

    async def bot_token(self, team_id: str | None) -> str | None:
        """The workspace's bot token; without a team, the only installed workspace's."""
        if team_id:
            bot = await self.store.async_find_bot(enterprise_id=None, team_id=team_id)
            return None if bot is None else bot.bot_token
        keys = await self.records.keys(INSTALLATION, limit=2)
        if len(keys) != 1:
            return None  # none installed, or several: the request must name its team_id
        installation = await self.store.by_key(keys[0])
        return None if installation is None else installation.bot_token
