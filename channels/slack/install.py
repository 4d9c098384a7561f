"""Workspaces installed through "Add to Slack" (OAuth v2), kept in the gateway's own database
by slack_sdk's async SQLAlchemy installation and state stores (their tables, their schema)."""

from __future__ import annotations

import sqlalchemy as sa
from slack_bolt.oauth.async_oauth_settings import AsyncOAuthSettings
from slack_sdk.oauth.installation_store.sqlalchemy import AsyncSQLAlchemyInstallationStore
from slack_sdk.oauth.state_store.sqlalchemy import AsyncSQLAlchemyOAuthStateStore
from sqlalchemy.ext.asyncio import AsyncEngine

from channels.slack.manifest import BOT_SCOPES
from channels.slack.settings import SlackSettings

STATE_SECONDS = 600


class Installations:
    def __init__(self, settings: SlackSettings, engine: AsyncEngine) -> None:
        assert settings.client_id is not None and settings.client_secret is not None
        self.settings = settings
        self.engine = engine
        self.store = AsyncSQLAlchemyInstallationStore(client_id=settings.client_id, engine=engine)
        self.states = AsyncSQLAlchemyOAuthStateStore(
            expiration_seconds=STATE_SECONDS, engine=engine
        )

    def __repr__(self) -> str:
        return f"Installations(client_id={self.settings.client_id!r})"

    async def create_tables(self) -> None:
        """slack_bots, slack_installations, slack_oauth_states (if missing)."""
        await self.store.create_tables()  # type: ignore[no-untyped-call]
        await self.states.create_tables()  # type: ignore[no-untyped-call]

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
        bots = self.store.bots
        query = sa.select(bots.c.team_id).distinct().limit(2)
        async with self.engine.connect() as conn:
            teams = (await conn.execute(query)).scalars().all()
        if len(teams) != 1:
            return None  # none installed, or several: the request must name its team_id
        return await self.bot_token(teams[0])
