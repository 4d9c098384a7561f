"""`gateway` (also `python -m gateway`): serve, keys, grants, webhooks, decisions, checks."""

from __future__ import annotations

import argparse
import asyncio
import gc
import getpass
import json
import socket
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from channels.discord.channel import DiscordChannel
from channels.registry import REGISTRY
from channels.slack.manifest import manifest
from channels.teams.manifest import write_package
from channels.teams.settings import TeamsSettings
from channels.web.auth import console_people, create_sign_in_link, hash_password
from gateway.answers import decisions, respond
from gateway.app import Server, build_core, serving_app
from gateway.cli import audit, bootstrap, claude_hook, receipts, retention, rules, workers
from gateway.cli.checks import run_checks
from gateway.cli.database import ready
from gateway.cli.webhook_ping import send_test_event
from gateway.core import Core
from gateway.doors import channel_context, offline_context
from gateway.errors import GatewayError, NotFound
from gateway.lifecycle import Event, Kind, Status
from gateway.outbox.webhooks import add_endpoint
from gateway.policies import grants
from gateway.runtime.logs import configure_logging, install_access_log_filter, uvicorn_log_config
from gateway.seam.grants import GrantView
from gateway.seam.people import Responder
from gateway.seam.sentences import progress_line
from gateway.seam.views import load_progress
from gateway.settings import Settings
from gateway.store import outbox as outbox_store
from gateway.store import projects as project_store
from gateway.store import requests as request_store
from gateway.store.rows import ProjectRow, RequestRow
from gateway.vocabulary import AnsweredIn, ChannelName, JobStatus, KeyScope
from gateway.wire.models import FunctionCallStatusIn, HumanContactStatusIn

# Long-polls and console streams end as the shutdown begins; a request still open after this
# long is cut, leaving the rest of the 10 s for the lifespan's end (outbox, locks, channels).
SHUTDOWN_GRACE_SECONDS = 3
Command = Callable[[Core, argparse.Namespace], Awaitable[int]]


def _with_core(command: Command) -> Callable[[Settings, argparse.Namespace], int]:
    def run(settings: Settings, args: argparse.Namespace) -> int:
        async def main() -> int:
            core = build_core(settings)
            async with ready(core.db, migrate=True):
                return await command(core, args)

        return asyncio.run(main())

    return run


def serve(settings: Settings, args: argparse.Namespace) -> int:
    host = args.host or settings.host
    port = args.port if args.port is not None else settings.port
    if args.listen_fd is not None:  # one of `--workers N`: the parent did the rest
        return _run_server(settings, host, port, workers.inherited_socket(args.listen_fd))
    count = args.workers or settings.workers
    if (why := workers.refusal(settings, count)) is not None:
        print(f"error: {why}", file=sys.stderr)
        return 2
    _with_core(_first_start)(settings, args)  # its own event loop, before uvicorn's
    if count > 1:
        sock = workers.listen(host, port)
        print(f"hitl-gateway listening on http://{host}:{port} ({count} workers)", flush=True)
        return workers.Workers(sock, count, host, port).run()
    print(f"hitl-gateway listening on http://{host}:{port}", flush=True)
    return _run_server(settings, host, port)


def _run_server(settings: Settings, host: str, port: int, sock: socket.socket | None = None) -> int:
    import uvicorn
    from uvicorn.config import STARTUP_FAILURE

    install_access_log_filter()  # tokens in request targets never reach the access log
    core = build_core(settings)
    config = uvicorn.Config(
        serving_app(core),
        host=host,
        port=port,
        log_level=settings.log_level.lower(),
        log_config=uvicorn_log_config(settings.log_format),
        timeout_graceful_shutdown=SHUTDOWN_GRACE_SECONDS,
    )
    server = Server(config, core)
    server.run(sockets=None if sock is None else [sock])
    return 0 if server.started else STARTUP_FAILURE  # as uvicorn.run ends


async def _first_start(core: Core, args: argparse.Namespace) -> int:
    started = await bootstrap.first_start(core)
    if started.raced:
        print(
            "First start: another gateway process on this database created the first API key "
            "and printed it; `gateway keys create` makes more.",
            flush=True,
        )
    if (created := started.key) is not None:
        host = args.host or core.settings.host
        port = args.port if args.port is not None else core.settings.port
        print("First start: created project 'default' and an API key (shown only once).")
        print("Give your agent these two lines:\n")
        print(f"  export HUMANLAYER_API_BASE=http://{host}:{port}/humanlayer/v1")
        print(f"  export HUMANLAYER_API_KEY={created.key}\n", flush=True)
        console = channel_context(core, ChannelName.WEB)
        if not console_people(console):
            link = await create_sign_in_link(
                console, base_url=core.settings.public_url or f"http://{host}:{port}"
            )
            print("Open the web console (a one-time link; `gateway console link` makes more):\n")
            print(f"  {link}\n", flush=True)
    return 0


async def console_link(core: Core, args: argparse.Namespace) -> int:
    console = channel_context(core, ChannelName.WEB)
    if args.email is not None and console.console.person_with_email(args.email) is None:
        raise NotFound(f"no person with email {args.email!r} in the routing config")
    print("A one-time sign-in link, valid for 30 minutes:")
    print(await create_sign_in_link(console, args.email))
    return 0


def console_hash_password(_settings: Settings, _args: argparse.Namespace) -> int:
    """Reads the password from standard input (so it is not in the shell's history)."""
    if sys.stdin.isatty():
        password = getpass.getpass("Password: ")
    else:
        password = sys.stdin.readline().rstrip("\n")
    if len(password) < 8:
        print("error: use at least 8 characters", file=sys.stderr)
        return 2
    print(hash_password(password))
    return 0


async def keys_create(core: Core, args: argparse.Namespace) -> int:
    new = await bootstrap.create_key(
        core,
        project=args.project,
        name=args.name,
        target=args.target,
        scope=KeyScope(args.scope),
        person=args.person,
    )
    print(f"created key {new.id} for project {new.project!r}, scope {args.scope}; shown once:")
    print(new.key)
    return 0


async def keys_list(core: Core, _args: argparse.Namespace) -> int:
    for key, project in await core.db.read(project_store.list_keys):
        state = "revoked" if key.revoked_at else "active"
        shown = (key.id, f"{key.prefix}…", project, key.name, key.scope, key.person or "-")
        print("\t".join(map(str, shown)) + f"\t{key.target or '-'}\t{state}")
    return 0


async def keys_revoke(core: Core, args: argparse.Namespace) -> int:
    count = await core.db.write(project_store.revoke_key, args.key)
    print(f"revoked {count} key(s)")
    return 0 if count else 1


def _cli_name() -> str:
    """Who revoked, in the audit trail: the operator at this shell."""
    return f"cli:{getpass.getuser()}"


def _moment(value: datetime | None, otherwise: str = "-") -> str:
    return otherwise if value is None else value.isoformat(timespec="seconds")


def _expiry(grant: GrantView) -> str:
    if grant.revoked_at is not None:
        return f"revoked {_moment(grant.revoked_at)} by {grant.revoked_by or '?'}"
    if not grant.live:
        return f"expired {_moment(grant.expires_at)}"
    return _moment(grant.expires_at, "until revoked")


def _granted_by(grant: GrantView) -> str:
    who = Responder.of(grant.granted_by)
    return "-" if who is None else f"{who.name} ({who.via})"


GRANT_COLUMNS = ("id", "project", "key", "what", "granted by", "expires", "uses", "last used")


def _grant_line(grant: GrantView) -> str:
    shown = (
        grant.id,
        grant.project,
        grant.key,
        grant.what,
        _granted_by(grant),
        _expiry(grant),
        grant.uses,
        _moment(grant.last_used_at),
    )
    return "\t".join(map(str, shown))


async def grants_list(core: Core, args: argparse.Namespace) -> int:
    project_id = None if args.project is None else await _project_id(core, args.project)
    found = await grants.listing(core, project_id=project_id, live_only=not args.all)
    if not found:
        print("no grants" if args.all else "no live grants")
        return 0
    print("\t".join(GRANT_COLUMNS))
    for grant in found:
        print(_grant_line(grant))
    return 0


async def grants_revoke(core: Core, args: argparse.Namespace) -> int:
    if (args.id is None) == (args.key is None):
        print("error: give either a grant's id or --key NAME", file=sys.stderr)
        return 2
    if args.key is not None:
        return await _revoke_key_grants(core, args.project or bootstrap.DEFAULT_PROJECT, args.key)
    project_id = None if args.project is None else await _project_id(core, args.project)
    revoked = await grants.revoke_ids(core, [args.id], _cli_name(), project_id=project_id)
    if not revoked:
        where = "" if args.project is None else f" in project {args.project!r}"
        print(f"error: no grant with id {args.id!r}{where}", file=sys.stderr)
        return 1
    [grant] = revoked
    print(f"revoked grant {grant.id}: {grant.what} ({_expiry(grant)})")
    return 0


async def _revoke_key_grants(core: Core, project: str, key_name: str) -> int:
    project_id = await _project_id(core, project)
    try:
        revoked = await grants.revoke_key(core, project_id, key_name, _cli_name())
    except NotFound:
        print(f"error: no API key named {key_name!r} in project {project!r}", file=sys.stderr)
        return 1
    for grant in revoked:
        print(f"revoked grant {grant.id}: {grant.what}")
    print(f"revoked {len(revoked)} grant(s) of key {key_name!r} in project {project!r}")
    return 0


async def _project_id(core: Core, name: str, *, create: bool = False) -> int:
    project: ProjectRow | None
    if create:
        project = await core.db.write(project_store.ensure_project, name)
    else:
        project = await core.db.read(project_store.get_project, name)
    if project is None or project.id is None:
        raise NotFound(f"no project named {name!r}")
    return project.id


async def webhooks_add(core: Core, args: argparse.Namespace) -> int:
    project_id = await _project_id(core, args.project, create=True)
    events = [e.strip() for e in args.events.split(",")] if args.events else None
    endpoint_id, secret = await add_endpoint(
        core, project_id=project_id, url=args.url, events=events
    )
    print(f"webhook {endpoint_id} → {args.url}; its signing secret (shown only once):")
    print(secret)
    return 0


async def webhooks_list(core: Core, _args: argparse.Namespace) -> int:
    for hook in await core.db.read(project_store.list_webhooks):
        state = "enabled" if hook.enabled else f"disabled ({hook.disabled_reason})"
        events = ",".join(json.loads(hook.events_json)) or "all"
        print(f"{hook.id}\t{hook.url}\t{events}\t{hook.source}\t{state}")
    return 0


async def webhooks_test(core: Core, args: argparse.Namespace) -> int:
    results = await send_test_event(core, endpoint_id=args.id)
    for line in results:
        print(line)
    return 0 if results and all("→ 2" in line for line in results) else 1


async def _request(core: Core, args: argparse.Namespace) -> RequestRow:
    project_id = await _project_id(core, args.project)
    row = await core.db.read(request_store.get_by_call_id, project_id, args.call_id)
    if row is None:
        raise NotFound(f"no request with call_id {args.call_id!r} in project {args.project!r}")
    return row


def _cli_user() -> dict[str, Any]:
    return {"channel": AnsweredIn.CLI, "name": getpass.getuser()}


async def answer_command(core: Core, args: argparse.Namespace) -> int:
    row = await _request(core, args)
    if args.verb == "respond":
        if row.kind != Kind.HUMAN_CONTACT:
            raise GatewayError(f"{args.call_id!r} is a function call: use approve or reject")
        body = HumanContactStatusIn(response=args.text)
        decision = respond.human_contact_decision(row, body, _cli_user())
    else:
        if row.kind != Kind.FUNCTION_CALL:
            raise GatewayError(f"{args.call_id!r} is a human contact: use respond")
        approved = args.verb == "approve"
        status = FunctionCallStatusIn(
            approved=approved,
            comment=args.comment,
            reject_option_name=getattr(args, "option", None),
        )
        decision = respond.function_call_decision(row, status, _cli_user())
    updated = await decisions.submit(core, row, decision)
    if updated.status == Status.PENDING:  # a vote under an approval policy
        progress = load_progress(updated.progress_json)
        standing = f" ({progress_line(progress)})" if progress else ""
        print(f"{updated.call_id}: vote recorded, still pending{standing}")
        return 0
    verb = {Event.APPROVE: "approved", Event.REJECT: "rejected", Event.RESPOND: "answered"}
    print(f"{updated.call_id}: {verb.get(decision.event, updated.status)}")
    return 0


async def pending(core: Core, args: argparse.Namespace) -> int:
    project_id = await _project_id(core, args.project)
    for kind in Kind:
        rows, _total = await core.db.read(
            request_store.list_requests,
            project_id,
            kind,
            status=Status.PENDING,
            run_id=None,
            limit=1000,
            offset=0,
        )
        for row in rows:
            what = row.fn or json.loads(row.spec_json).get("msg", "")[:60]
            print(f"{row.call_id}\t{kind.value}\t{row.run_id}\t{what}\t{row.requested_at}")
    return 0


async def jobs(core: Core, args: argparse.Namespace) -> int:
    status = None if args.status is None else JobStatus(args.status)
    for job in await core.db.read(outbox_store.list_jobs, project_id=None, status=status):
        print(
            f"{job.id}\t{job.kind}\t{job.status}\t{job.attempts}/{job.max_attempts}\t"
            f"{job.rid or '-'}\t{job.last_error or ''}"
        )
    return 0


async def db_upgrade(_core: Core, _args: argparse.Namespace) -> int:
    print("database is at the latest schema")
    return 0


def slack_manifest(_settings: Settings, args: argparse.Namespace) -> int:
    print(json.dumps(manifest(args.public_url), indent=2))
    return 0


def teams_manifest(_settings: Settings, args: argparse.Namespace) -> int:
    package = write_package(
        Path(args.output), TeamsSettings().app_id, args.public_url, name=args.name
    )
    print(package)
    return 0


def discord_invite_url(settings: Settings, _args: argparse.Namespace) -> int:
    async def main() -> str:
        channel = DiscordChannel(offline_context(settings, ChannelName.DISCORD))
        try:
            return await channel.invite_url()
        finally:
            await channel.aclose()

    print(asyncio.run(main()))
    return 0


def check(settings: Settings, _args: argparse.Namespace) -> int:
    return asyncio.run(run_checks(settings, REGISTRY))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gateway", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    p = commands.add_parser("serve", help="run the gateway (applies migrations first)")
    p.add_argument("--host")
    p.add_argument("--port", type=int)
    p.add_argument(
        "--workers", type=int, help="processes serving the port (GATEWAY_WORKERS; PostgreSQL)"
    )
    p.add_argument(workers.SOCKET_ARG, type=int, help=argparse.SUPPRESS)  # a worker's socket
    p.set_defaults(run=serve)

    keys = commands.add_parser("keys", help="API keys").add_subparsers(dest="action", required=True)
    p = keys.add_parser("create", help="create a key; prints it on the last line")
    p.add_argument("--project", default=bootstrap.DEFAULT_PROJECT)
    p.add_argument("--name", default="cli")
    p.add_argument("--target", help="default route for this key: team:NAME, person:NAME, web")
    p.add_argument(
        "--scope",
        choices=[scope.value for scope in KeyScope],
        default=KeyScope.AGENT.value,
        help="agent (default): create and read; responder: also respond; admin: also "
        "escalate and /gateway/v1",
    )
    p.add_argument("--person", help="a responder key's votes are this configured person's")
    p.set_defaults(run=_with_core(keys_create))
    keys.add_parser("list").set_defaults(run=_with_core(keys_list))
    p = keys.add_parser("revoke")
    p.add_argument("key", help="the key's id or prefix")
    p.set_defaults(run=_with_core(keys_revoke))

    standing = commands.add_parser(
        "grants", help="standing grants people gave with 'Approve and allow…'"
    ).add_subparsers(dest="action", required=True)
    p = standing.add_parser("list", help="live grants (id, project, key, what, who, expiry, uses)")
    p.add_argument("--project", help="only this project's (default: every project's)")
    p.add_argument("--all", action="store_true", help="also revoked and expired grants")
    p.set_defaults(run=_with_core(grants_list))
    p = standing.add_parser("revoke", help="revoke a grant by id, or every live grant of a key")
    p.add_argument("id", nargs="?", help="the grant's id (from grants list)")
    p.add_argument("--key", help="revoke every live grant of the agent key with this name")
    p.add_argument("--project", help=f"the project (--key: default {bootstrap.DEFAULT_PROJECT})")
    p.set_defaults(run=_with_core(grants_revoke))

    hooks = commands.add_parser("webhooks", help="webhook endpoints").add_subparsers(
        dest="action", required=True
    )
    p = hooks.add_parser("add", help="add an endpoint; prints its whsec_ secret last")
    p.add_argument("url")
    p.add_argument("--project", default=bootstrap.DEFAULT_PROJECT)
    p.add_argument("--events", help="comma-separated; default: all")
    p.set_defaults(run=_with_core(webhooks_add))
    hooks.add_parser("list").set_defaults(run=_with_core(webhooks_list))
    p = hooks.add_parser("test", help="send an is_test event to one or every endpoint")
    p.add_argument("id", nargs="?", type=int)
    p.set_defaults(run=_with_core(webhooks_test))

    for verb, help_ in (
        ("approve", "approve a function call"),
        ("reject", "reject a function call"),
        ("respond", "answer a human contact"),
    ):
        p = commands.add_parser(verb, help=help_)
        p.add_argument("call_id")
        if verb == "respond":
            p.add_argument("text")
        else:
            p.add_argument("--comment", required=verb == "reject")
        if verb == "reject":
            p.add_argument("--option", help="a reject option's name")
        p.add_argument("--project", default=bootstrap.DEFAULT_PROJECT)
        p.set_defaults(run=_with_core(answer_command), verb=verb)

    p = commands.add_parser("pending", help="list pending requests")
    p.add_argument("--project", default=bootstrap.DEFAULT_PROJECT)
    p.set_defaults(run=_with_core(pending))
    p = commands.add_parser("jobs", help="list outbox jobs (dead ones gave up)")
    p.add_argument("--status", choices=[status.value for status in JobStatus])
    p.set_defaults(run=_with_core(jobs))
    slack = commands.add_parser("slack", help="Slack app").add_subparsers(
        dest="action", required=True
    )
    p = slack.add_parser("manifest", help="print an app manifest for api.slack.com/apps")
    p.add_argument("--public-url", required=True, help="where Slack reaches this gateway")
    p.set_defaults(run=slack_manifest)
    discord = commands.add_parser("discord", help="Discord bot").add_subparsers(
        dest="action", required=True
    )
    p = discord.add_parser("invite-url", help="print the URL that adds the bot to a server")
    p.set_defaults(run=discord_invite_url)
    teams = commands.add_parser("teams", help="Microsoft Teams app").add_subparsers(
        dest="action", required=True
    )
    p = teams.add_parser("manifest", help="write the app package (a zip) to upload to Teams")
    p.add_argument("--public-url", required=True, help="this gateway's https URL")
    p.add_argument("--output", default="hitl-gateway-teams.zip", help="the zip to write")
    p.add_argument("--name", default="HITL Gateway", help="the app's name in Teams")
    p.set_defaults(run=teams_manifest)
    tests = commands.add_parser("rules", help="the routing config's rules").add_subparsers(
        dest="action", required=True
    )
    p = tests.add_parser("test", help="which rule a function call matches, and what happens")
    rules.add_arguments(p)
    p.set_defaults(run=rules.run)
    commands.add_parser("check", help="validate settings, config and connections").set_defaults(
        run=check
    )
    console = commands.add_parser("console", help="web console").add_subparsers(
        dest="action", required=True
    )
    p = console.add_parser("link", help="print a one-time sign-in URL (last line)")
    p.add_argument("--email", help="sign in as this person from the config (default: operator)")
    p.set_defaults(run=_with_core(console_link))
    p = console.add_parser("hash-password", help="argon2 hash for a person's password_hash")
    p.set_defaults(run=console_hash_password)
    db = commands.add_parser("db", help="database").add_subparsers(dest="action", required=True)
    db.add_parser("upgrade", help="apply migrations").set_defaults(run=_with_core(db_upgrade))
    audit.add_commands(commands)
    retention.add_commands(commands)
    receipts.add_commands(commands)
    hook = commands.add_parser("hook", help="coding-agent hooks decided through a gateway's API")
    p = hook.add_subparsers(dest="action", required=True).add_parser(
        "claude-code", help="Claude Code PreToolUse/PermissionRequest: JSON in, decision out"
    )
    claude_hook.add_arguments(p)
    p.set_defaults(client=claude_hook.run)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    if getattr(args, "run", None) is not serve:  # see gateway.entry
        gc.enable()
    if hasattr(args, "client"):  # a client of a gateway's HTTP API: no server settings
        sys.exit(args.client(args))
    try:
        settings = Settings()
        configure_logging(level=settings.log_level, log_format=settings.log_format)
        sys.exit(args.run(settings, args))
    except GatewayError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
    except (ValueError, RuntimeError) as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(2)
