"""`gateway check` signs in to the SMTP server and the IMAP server, as an operator runs it."""

from __future__ import annotations

from tests.channels.email.helpers import email_env, new_mailbox
from tests.services.cli import Cli
from tests.services.dovecot import ThrowawayDovecot
from tests.services.smtp_sink import SmtpSink


def env_for(sink: SmtpSink, dovecot: ThrowawayDovecot, **overrides: str) -> dict[str, str]:
    return email_env(sink, dovecot, *new_mailbox(dovecot)) | overrides


async def test_check_signs_in_to_smtp_and_imap(
    cli: Cli,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
) -> None:
    assert (await cli("db", "upgrade")).returncode == 0
    env = env_for(smtp_sink, dovecot)

    checked = await cli("check", **env)

    assert checked.returncode == 0, checked
    line = next(x for x in checked.stdout.splitlines() if "channel email" in x)
    assert line.startswith("ok"), checked
    assert f"SMTP signed in to {smtp_sink.host}:{smtp_sink.port}" in line
    assert "IMAP" in line


async def test_check_names_the_server_that_refused_and_hides_the_password(
    cli: Cli,
    smtp_sink: SmtpSink,
    dovecot: ThrowawayDovecot,
) -> None:
    assert (await cli("db", "upgrade")).returncode == 0
    bad_smtp = env_for(smtp_sink, dovecot, SMTP_PASSWORD="wrong-smtp-pass")
    bad_imap = env_for(smtp_sink, dovecot, IMAP_PASSWORD="wrong-imap-pass")

    smtp_refused = await cli("check", **bad_smtp)
    imap_refused = await cli("check", **bad_imap)

    assert smtp_refused.returncode == 1, smtp_refused
    assert "535" in smtp_refused.stdout, smtp_refused
    assert imap_refused.returncode == 1, imap_refused
    assert "imap:" in imap_refused.stdout, imap_refused
    for result, secret in ((smtp_refused, "wrong-smtp-pass"), (imap_refused, "wrong-imap-pass")):
        assert secret not in result.stdout + result.stderr
