"""A throwaway Dovecot (IMAP + LMTP) from the machine's own binaries.

A test-owned config in a temp dir, listening only on 127.0.0.1 free ports, plaintext auth,
users in passwd-files, Maildir under the temp dir. Mail is delivered over LMTP, as an MTA
would, and read over IMAP. Written for Dovecot 2.3 (Debian bookworm's dovecot-imapd and
dovecot-lmtpd).

As root, Dovecot runs its usual privilege separation (dovecot/dovenull) and stores mail as
Debian's `mail` user, because it refuses to access mail as uid 0. As anyone else it runs
"rootless": every process and all mail belong to the user running the tests.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import shutil
import signal
import smtplib
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.services.net import free_port

DOMAIN = "example.test"
ROOT_MAIL_USER = "mail"  # Debian's own uid 8: mail is never stored as root


def find_dovecot() -> Path | None:
    """The dovecot binary, if Dovecot with its LMTP server is installed."""
    found = shutil.which("dovecot") or shutil.which("dovecot", path="/usr/sbin:/usr/local/sbin")
    if found is None or not Path("/usr/lib/dovecot/lmtp").exists():
        return None
    return Path(found)


class ThrowawayDovecot:
    def __init__(
        self,
        binary: Path,
        users: dict[str, str] | None = None,
        domain: str = DOMAIN,
    ) -> None:
        self.binary = binary
        self.domain = domain
        self.users = dict(users or {"approvals": "approvals-secret"})
        self.host = "127.0.0.1"
        self.imap_port = free_port()
        self.lmtp_port = free_port()
        self.root = Path(tempfile.mkdtemp(prefix="gw-dovecot-"))
        self.config = self.root / "dovecot.conf"
        self.log = self.root / "dovecot.log"
        self._process: subprocess.Popen[bytes] | None = None
        if os.geteuid() == 0:
            account = pwd.getpwnam(ROOT_MAIL_USER)
            self._mail_uid, self._mail_gid = account.pw_uid, account.pw_gid
        else:
            self._mail_uid, self._mail_gid = os.getuid(), os.getgid()

    # The first user is "the" test user.
    @property
    def user(self) -> str:
        return next(iter(self.users))

    @property
    def password(self) -> str:
        return self.users[self.user]

    @property
    def address(self) -> str:
        return self.address_of(self.user)

    def address_of(self, user: str, detail: str | None = None) -> str:
        """`user@domain`, or the plus-address `user+detail@domain` delivered to the same INBOX."""
        local = f"{user}+{detail}" if detail else user
        return f"{local}@{self.domain}"

    def add_user(self, user: str, password: str) -> None:
        """A new mailbox owner, usable at once (no restart)."""
        self.users[user] = password
        self._write_user(user)

    def _write_user(self, user: str) -> None:
        # One passwd-file per user: Dovecot opens a new file on the first lookup, while it
        # re-reads a changed file at most once a second.
        if not user.isalnum() or user != user.lower():
            raise ValueError(f"test user names are lower-case letters and digits: {user!r}")
        home = self.root / "mail" / user
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, self._mail_uid, self._mail_gid)
        entry = self.root / "users" / user
        entry.parent.mkdir(mode=0o755, exist_ok=True)
        password = self.users[user]
        entry.write_text(
            f"{user}:{{PLAIN}}{password}:{self._mail_uid}:{self._mail_gid}::{home}::\n"
        )
        entry.chmod(0o644)  # read by the auth process (user dovecot when we are root)

    def _write_config(self) -> None:
        rootless = ""
        if os.geteuid() != 0:
            me, group = pwd.getpwuid(os.getuid()).pw_name, grp.getgrgid(os.getgid()).gr_name
            rootless = (
                f"default_internal_user = {me}\n"
                f"default_internal_group = {group}\n"
                f"default_login_user = {me}\n"
            )
        self.config.write_text(
            f"""\
# Written by tests/services/dovecot.py for one test session.
base_dir = {self.root}/run
state_dir = {self.root}/state
log_path = {self.log}
{rootless}
protocols = imap lmtp
listen = {self.host}
ssl = no
disable_plaintext_auth = no
auth_mechanisms = plain login
# Log in as `approvals` or `approvals@example.test`: both are the user `approvals`.
auth_username_format = %Ln
first_valid_uid = {self._mail_uid}
last_valid_uid = 0
mail_location = maildir:~/Maildir
mail_fsync = never
# Backstop for IDLE should inotify be unavailable (default 30 s).
mailbox_idle_check_interval = 1 secs
shutdown_clients = yes

# approvals+TOKEN@example.test goes to approvals' INBOX; Delivered-To keeps the full address.
recipient_delimiter = +
lmtp_save_to_detail_mailbox = no

passdb {{
  driver = passwd-file
  args = scheme=PLAIN {self.root}/users/%n
}}
userdb {{
  driver = passwd-file
  args = {self.root}/users/%n
}}

# No chroot for the login and anvil processes: rootless Dovecot cannot chroot.
service anvil {{
  chroot =
}}
service imap-login {{
  chroot =
  inet_listener imap {{
    address = {self.host}
    port = {self.imap_port}
  }}
  inet_listener imaps {{
    port = 0
  }}
}}
service lmtp {{
  inet_listener lmtp {{
    address = {self.host}
    port = {self.lmtp_port}
  }}
}}
"""
        )

    def start(self) -> ThrowawayDovecot:
        if self._process is None:
            self.root.chmod(0o755)  # Dovecot's unprivileged processes must reach their files
            for user in self.users:
                self._write_user(user)
            self._write_config()
            self._spawn()
        return self

    def _spawn(self) -> None:
        with open(self.root / "stderr.log", "ab") as stderr:
            self._process = subprocess.Popen(
                [str(self.binary), "-F", "-c", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=stderr,
                stderr=stderr,
                start_new_session=True,  # its own process group, so stop() can end all of it
            )
        try:
            _wait_for_greeting(self.host, self.imap_port, b"* OK", self._process)
            _wait_for_greeting(self.host, self.lmtp_port, b"220 ", self._process)
        except Exception:
            self._terminate()
            raise RuntimeError(f"dovecot did not start:\n{self.diagnostics()}") from None

    def diagnostics(self) -> str:
        parts = [path.read_text(errors="replace") for path in (self.root / "stderr.log", self.log)]
        return "\n".join(part for part in parts if part)[-4000:]

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        # SIGTERM to its whole process group: the master and its imap/lmtp/auth children at
        # once. (The master alone takes ~1 s to shut down and leaves its log process behind.)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)
        _wait_until_free(self.host, self.imap_port, self.lmtp_port)

    def stop(self) -> None:
        """Stops the server; it can be started again on the same ports and mail store."""
        self._terminate()

    def restart(self) -> None:
        """Stop and start: connected IMAP clients are disconnected, the mail stays."""
        self._terminate()
        self._spawn()

    def close(self) -> None:
        try:
            self._terminate()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def deliver(self, raw: bytes, recipient: str, sender: str = "sender@example.org") -> None:
        """Delivers one message over LMTP, as an MTA would; raises on rejection."""
        with smtplib.LMTP(self.host, self.lmtp_port, timeout=10) as lmtp:
            lmtp.sendmail(sender, [recipient], raw)


def _wait_for_greeting(
    host: str, port: int, greeting: bytes, process: subprocess.Popen[bytes]
) -> None:
    deadline = time.monotonic() + 15
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"dovecot exited with {process.returncode}")
        try:
            with socket.create_connection((host, port), timeout=5) as sock:
                if sock.recv(512).startswith(greeting):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {greeting!r} greeting on {host}:{port}")
        time.sleep(0.02)


def _wait_until_free(host: str, *ports: int) -> None:
    """Until nothing listens on the ports any more (a straggling login process would)."""
    deadline = time.monotonic() + 15
    for port in ports:
        while True:
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                try:
                    sock.bind((host, port))
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
            time.sleep(0.02)
