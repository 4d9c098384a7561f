"""`gateway audit verify` walks each project's audit chain and names the first broken link
(exit 1), and `gateway audit export` writes the events with their hashes (JSON lines or CSV),
so that anyone can recompute them (README "Audit trail you can prove")."""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

from gateway.cli.database import run_on_database
from gateway.errors import InvalidInput, NotFound
from gateway.settings import Settings
from gateway.store import Database
from gateway.store import audit_check as check
from gateway.store.audit import timestamp
from gateway.store.rows import EventRow

EXPORT_COLUMNS = (
    *("project", "project_id", "seq", "event_id", "rid", "type", "at", "detail"),
    *("redacted_at", "digest", "prev_hash", "hash"),
)
Command = Callable[[Database, argparse.Namespace], Awaitable[int]]
_LINK = re.compile(r"[0-9a-fA-F]{64}")  # a link as logged or sent: 64 hex digits


def add_commands(commands: Any) -> None:
    """`gateway audit …` under the command line's subcommands."""
    audit = commands.add_parser("audit", help="the tamper-evident audit trail")
    actions = audit.add_subparsers(dest="action", required=True)
    p = actions.add_parser("verify", help="walk the audit chains; exit 1 at a broken link")
    p.add_argument("--project", help="only this project (default: every project)")
    p.add_argument(
        "--checkpoint",
        action="append",
        default=[],
        type=_checkpoint,
        metavar="SEQ:HASH",
        help="a checkpoint kept outside (logged or sent by webhook); needs --project",
    )
    p.set_defaults(run=_with_database(verify))
    p = actions.add_parser("export", help="write the events with their hashes")
    p.add_argument("--since", type=_moment, help="events at or after (ISO 8601, UTC if no zone)")
    p.add_argument("--until", type=_moment, help="events before")
    p.add_argument("--format", choices=("jsonl", "csv"), default="jsonl")
    p.add_argument("--project", help="only this project (default: every project)")
    p.add_argument("--output", type=Path, help="a file to write (default: standard output)")
    p.set_defaults(run=_with_database(export))


def _with_database(command: Command) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, args: argparse.Namespace) -> int:
        return run_on_database(settings, lambda db: command(db, args), migrate=False)

    return run


async def verify(db: Database, args: argparse.Namespace) -> int:
    if args.checkpoint and args.project is None:
        raise InvalidInput("--checkpoint needs --project: a checkpoint is of one project's chain")
    intact = True
    for project_id, name in await _projects(db, args.project):
        verdict = await db.scan(check.verify, project_id, name, outside=args.checkpoint)
        print(_said(verdict))
        intact = intact and verdict.broken is None
    return 0 if intact else 1


def _said(verdict: check.Verdict) -> str:
    project = f"project {verdict.project!r} (id {verdict.project_id})"
    broken = verdict.broken
    if broken is None:
        head = verdict.head
        return f"{project}: intact: {verdict.events} events, head seq {head.seq} hash {head.hash}"
    where = "outside the chain" if broken.seq is None else f"at seq {broken.seq}"
    lines = [f"{project}: BROKEN {where}: {broken.kind}: {broken.what}"]
    if broken.kind == "rewritten" and broken.intact is None:
        lines.append(f"  the events up to seq {broken.seq} were changed, and the links recomputed")
    elif broken.intact is None:
        lines.append("  nothing before it is intact: the chain is broken from its start")
    else:
        lines.append(f"  intact up to seq {broken.intact.seq} ({timestamp(broken.intact.at)})")
    if broken.checkpoint is not None:
        cp = broken.checkpoint
        published = "kept outside" if cp.at is None else f"published {timestamp(cp.at)}"
        lines.append(f"  the last checkpoint it still matches: seq {cp.seq} ({published})")
    return "\n".join(lines)


async def export(db: Database, args: argparse.Namespace) -> int:
    project_id = None
    if args.project is not None:
        [(project_id, _name)] = await _projects(db, args.project)
    with _opened(args.output) as out:
        writer = csv.writer(out) if args.format == "csv" else None
        if writer is not None:
            writer.writerow(EXPORT_COLUMNS)
        after = (0, 0)
        while page := await db.scan(
            check.export_page,
            project_id=project_id,
            since=args.since,
            until=args.until,
            after=after,
        ):
            for name, event in page:
                if writer is None:
                    out.write(json.dumps(_exported(name, event, parsed=True)) + "\n")
                else:
                    writer.writerow(_exported(name, event, parsed=False).values())
            last = page[-1][1]
            after = (int(last.project_id or 0), int(last.seq or 0))
    return 0


def _exported(name: str, event: EventRow, *, parsed: bool) -> dict[str, Any]:
    """One event as exported: its detail as stored (JSON lines: as an object)."""
    return {
        "project": name,
        "project_id": event.project_id,
        "seq": event.seq,
        "event_id": event.id,
        "rid": event.rid,
        "type": event.type,
        "at": timestamp(event.at),
        "detail": json.loads(event.detail_json) if parsed else event.detail_json,
        "redacted_at": None if event.redacted_at is None else timestamp(event.redacted_at),
        "digest": event.digest,
        "prev_hash": event.prev_hash,
        "hash": event.hash,
    }


async def _projects(db: Database, name: str | None) -> list[tuple[int, str]]:
    found = await db.read(check.projects, name)
    if name is not None and not found:
        raise NotFound(f"no project named {name!r}")
    return found


@contextmanager
def _opened(path: Path | None) -> Iterator[TextIO]:
    if path is None:
        yield sys.stdout
        return
    with path.open("w", newline="", encoding="utf-8") as out:
        yield out


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _checkpoint(text: str) -> check.Checkpoint:
    seq, _, hash_ = text.partition(":")
    if not seq.isdigit() or not _LINK.fullmatch(hash_):
        raise argparse.ArgumentTypeError(f"not SEQ:HASH (a number, a 64-hex link): {text!r}")
    return check.Checkpoint(int(seq), hash_.lower())
