"""An SMTP submission sink on 127.0.0.1 (aiosmtpd) that records what it accepts.

Like a real submission server it requires STARTTLS (a self-signed certificate made for
the run) and AUTH (one username/password). `fail_next()` makes it answer the next DATA
or RCPT commands with an error, e.g. 451 (try again later) or 550 (permanent).

aiosmtpd's Controller runs the server on its own event loop in a thread; the test's loop
is woken through `call_soon_threadsafe` when a message is recorded or a connection ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import shutil
import ssl
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from email.message import EmailMessage
from email.parser import BytesParser
from email.policy import default as default_policy
from pathlib import Path
from typing import Any, Literal

from aiosmtpd.controller import Controller
from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.services.net import free_port

Stage = Literal["DATA", "RCPT"]
# aiosmtpd itself sets the deprecated Session.login_data on every AUTH and logs about it.
logging.getLogger("mail.log").addFilter(lambda record: "login_data" not in record.getMessage())
DEFAULT_REPLIES = {4: "4.3.0 Try again later (injected)", 5: "5.7.1 Rejected (injected)"}


@dataclass(frozen=True)
class SunkMessage:
    mail_from: str
    rcpt_tos: list[str]
    raw: bytes
    message: EmailMessage


class SmtpSink:
    def __init__(self, username: str = "gateway", password: str = "sink-secret") -> None:
        self.username = username
        self.password = password
        self.host = "127.0.0.1"
        self.port = free_port()  # aiosmtpd's Controller cannot use port 0
        self.messages: list[SunkMessage] = []
        self._dir = Path(tempfile.mkdtemp(prefix="gw-smtp-"))
        self.cert_path = self._dir / "cert.pem"
        self.key_path = self._dir / "key.pem"
        self._lock = threading.Lock()
        self._faults: list[tuple[Stage, str]] = []
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._connections: set[SMTP] = set()
        self._controller: Controller | None = None

    # -- lifecycle

    def start(self) -> SmtpSink:
        _write_self_signed(self.cert_path, self.key_path, self.host)
        server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        server_tls.load_cert_chain(self.cert_path, self.key_path)
        self._controller = _Controller(
            self,
            hostname=self.host,
            port=self.port,
            server_hostname="smtp-sink.test",  # else aiosmtpd asks DNS for the FQDN
            tls_context=server_tls,
            require_starttls=True,
            authenticator=self._authenticate,
            auth_required=True,
            auth_require_tls=True,
        )
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None
        shutil.rmtree(self._dir, ignore_errors=True)

    # -- for clients

    def tls_context(self) -> ssl.SSLContext:
        """A client context that trusts (only) the sink's certificate."""
        return ssl.create_default_context(cafile=str(self.cert_path))

    def client_options(self, *, verify: bool = True) -> dict[str, Any]:
        """Keyword arguments for `aiosmtplib.send`/`SMTP`: STARTTLS and AUTH.

        verify=False skips certificate checks (`validate_certs=False`) instead of
        trusting the sink's certificate.
        """
        tls: dict[str, Any] = (
            {"tls_context": self.tls_context()} if verify else {"validate_certs": False}
        )
        return {
            "hostname": self.host,
            "port": self.port,
            "start_tls": True,
            "username": self.username,
            "password": self.password,
            **tls,
        }

    # -- for tests

    def fail_next(
        self, code: int, count: int = 1, message: str | None = None, *, on: Stage = "DATA"
    ) -> None:
        """Answer the next `count` DATA (or RCPT) commands with `code`, e.g. 451 or 550."""
        reply = f"{code} {message or DEFAULT_REPLIES.get(code // 100, 'Injected failure')}"
        with self._lock:
            self._faults.extend([(on, reply)] * count)

    async def wait_for_messages(self, n: int, timeout: float = 10) -> list[SunkMessage]:  # noqa: ASYNC109
        """Until at least `n` messages were accepted (TimeoutError otherwise)."""
        await self._wait(lambda: len(self.messages) >= n, timeout)
        return list(self.messages)

    async def wait_until_disconnected(self, timeout: float = 10) -> None:  # noqa: ASYNC109
        """Until every client connection has ended on the server side.

        A client's TLS close needs a round trip with the server; a test whose loop closes
        before it completes leaks the client's socket (a ResourceWarning). The fixture
        awaits this before the test's loop ends.
        """
        await self._wait(lambda: not self._connections, timeout)

    async def _wait(self, condition: Callable[[], bool], within: float) -> None:
        loop = asyncio.get_running_loop()
        async with asyncio.timeout(within):
            while True:
                with self._lock:
                    if condition():
                        return
                    changed: asyncio.Future[None] = loop.create_future()
                    self._waiters.append((loop, changed))
                await changed

    def _notify(self) -> None:
        """Wake the waiting test loops; called with the lock held."""
        waiters, self._waiters = self._waiters, []
        for loop, changed in waiters:
            with contextlib.suppress(RuntimeError):  # that test's loop is closed already
                loop.call_soon_threadsafe(_resolve, changed)

    # -- aiosmtpd hooks (run on the Controller's thread)

    def _authenticate(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        mechanism: str,
        auth_data: Any,
    ) -> AuthResult:
        ok = isinstance(auth_data, LoginPassword) and (
            auth_data.login.decode() == self.username
            and auth_data.password.decode() == self.password
        )
        # handled=False: aiosmtpd sends the 535 itself (its default, True, means "already
        # answered", and the client would wait forever).
        return AuthResult(success=ok, handled=False)

    def _take_fault(self, stage: Stage) -> str | None:
        with self._lock:
            for index, (fault_stage, reply) in enumerate(self._faults):
                if fault_stage == stage:
                    del self._faults[index]
                    return reply
        return None

    async def handle_RCPT(
        self,
        server: SMTP,
        session: Session,
        envelope: Envelope,
        address: str,
        rcpt_options: list[str],
    ) -> str:
        fault = self._take_fault("RCPT")
        if fault:
            return fault
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        fault = self._take_fault("DATA")
        if fault:
            return fault
        raw = envelope.original_content or b""
        parsed = BytesParser(policy=default_policy).parsebytes(raw)
        assert isinstance(parsed, EmailMessage)
        sunk = SunkMessage(str(envelope.mail_from), list(envelope.rcpt_tos), raw, parsed)
        with self._lock:
            self.messages.append(sunk)
            self._notify()
        return "250 Message accepted"

    def _connected(self, server: SMTP, *, up: bool) -> None:
        with self._lock:
            if up:
                self._connections.add(server)
            else:
                self._connections.discard(server)
            self._notify()


class _TrackedSMTP(SMTP):
    """Tells the sink when a connection starts and ends (STARTTLS "starts" it twice)."""

    def __init__(self, sink: SmtpSink, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._sink = sink

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._sink._connected(self, up=True)

    def connection_lost(self, error: Exception | None) -> None:
        super().connection_lost(error)
        self._sink._connected(self, up=False)


class _Controller(Controller):
    def __init__(self, sink: SmtpSink, **kwargs: Any) -> None:
        super().__init__(sink, **kwargs)
        self._sink = sink

    def factory(self) -> SMTP:
        return _TrackedSMTP(self._sink, self.handler, **self.SMTP_kwargs)


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


def _write_self_signed(cert_path: Path, key_path: Path, host: str) -> None:
    """A self-signed certificate for `host` (an IP) and localhost, valid for a day.

    It is its own CA (basicConstraints CA:TRUE, key identifiers), so it can be the only
    trust anchor of a client context, also under Python 3.13's strict X.509 checks.
    """
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "smtp-sink.test")])
    now = datetime.datetime.now(datetime.UTC)
    public = key.public_key()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(public)
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address(host)), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(public), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
