"""`gateway receipts rotate` makes a new key sign decision receipts from now on; the old
keys stay in the JWKS, so the receipts they signed still verify. `gateway receipts keys`
lists them (README "Signed decision receipts")."""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.database import run_on_database
from gateway.policies import receipts
from gateway.security.crypto import SecretBox
from gateway.settings import Settings
from gateway.store import Database
from gateway.store import receipts as receipt_store
from gateway.wire.output import iso


def add_commands(commands: Any) -> None:
    """`gateway receipts …` under the command line's subcommands."""
    parser = commands.add_parser("receipts", help="the keys that sign decision receipts")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("rotate", help="sign with a new key; old keys stay public").set_defaults(
        run=rotate
    )
    actions.add_parser("keys", help="list the signing keys (public parts)").set_defaults(run=keys)


def rotate(settings: Settings, args: argparse.Namespace) -> int:
    box = SecretBox.from_settings(settings)

    async def main(db: Database) -> str:
        key = await db.write(receipts.rotate, box)
        return key.kid

    kid = run_on_database(settings, main, migrate=True)  # it writes: migrates as serve does
    print(f"receipts are now signed by key {kid}; older keys stay in the JWKS")
    return 0


def keys(settings: Settings, args: argparse.Namespace) -> int:
    async def main(db: Database) -> list[receipt_store.KeyRow]:
        return await db.read(receipt_store.list_keys)

    for key in run_on_database(settings, main, migrate=True):
        state = "signing" if key.retired_at is None else f"retired {iso(key.retired_at)}"
        print(f"{key.kid}  created {iso(key.created_at)}  {state}")
    return 0
