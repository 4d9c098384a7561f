"""`gateway retention run [--project P] [--dry-run]`: redact the decided requests past their
project's `retention.decided_after` now, rather than at the daily run (README "Retention"),
printing how many each project redacted (or would, with --dry-run)."""

from __future__ import annotations

import argparse
from typing import Any

from gateway.cli.database import run_on_database
from gateway.errors import NotFound
from gateway.policies import retention
from gateway.routing import load_config
from gateway.settings import Settings
from gateway.store import Database


def add_commands(commands: Any) -> None:
    """`gateway retention …` under the command line's subcommands."""
    actions = commands.add_parser("retention", help="redact old decided requests")
    actions = actions.add_subparsers(dest="action", required=True)
    p = actions.add_parser("run", help="redact what each project's retention says is due")
    p.add_argument("--project", help="only this project (default: every project with one)")
    p.add_argument("--dry-run", action="store_true", help="count, change nothing")
    p.set_defaults(run=run)


def run(settings: Settings, args: argparse.Namespace) -> int:
    config = load_config(settings.config)
    if args.project is not None:
        configured = config.projects.get(args.project)
        if configured is None or configured.retention is None:
            raise NotFound(f"project {args.project!r} has no retention in the routing config")

    async def redact(db: Database) -> dict[str, int]:
        return await retention.run(db, config, project=args.project, dry_run=args.dry_run)

    counts = run_on_database(settings, redact, migrate=True)  # it writes, as serve does
    verb = "would redact" if args.dry_run else "redacted"
    for name, count in counts.items():
        print(f"project {name!r}: {verb} {count} requests")
    if not counts:
        print("no project has a retention in the routing config")
    return 0
