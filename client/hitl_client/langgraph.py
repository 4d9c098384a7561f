"""LangGraph: a node asks the gateway and pauses its thread with `interrupt()`; a resumer
hands the person's decision back with `Command(resume=...)`.

    def deploy(state):
        call = request_approval(client, "deploy", {"env": state["env"]})
        if not call.approved:
            return {"refused": call.reason}
        ...  # runs once, with call.arguments (the approver's edit, if any)

    graph.invoke({"env": "prod"}, config)   # stops at the interrupt; the checkpointer keeps it
    Resumer(graph, client).resume(config)   # long-polls the gateway, then resumes the thread

On resume LangGraph runs the node again from its start, so the request's call_id is derived
from the thread, the task's checkpoint namespace, the function and its arguments: the node's
second run finds the request it made the first time instead of making another. The request's
`state` names the thread (`{"langgraph": {"thread_id": ..., "checkpoint_ns": ...}}`), which is
how `Resumer.resume_run` and `WebhookHandler` find the thread to resume after a restart.

Run one resumer per thread: two that resume the same thread at once would both run its node.
For a tool that may simply block until a person decides, `Client.require_approval()` is the
simpler form and needs no interrupt.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import weakref
from collections.abc import Awaitable, Callable, Iterable, Mapping, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt, interrupt

from hitl_client.aio import AsyncClient
from hitl_client.errors import ApiError
from hitl_client.models import FunctionCall, HumanContact, ResponseOption
from hitl_client.sync import Client

FUNCTION_CALL = "function_call"
HUMAN_CONTACT = "human_contact"
CALL_ID_KEY = "gateway_call_id"  # marks an interrupt as the gateway's, and names its request
Graph = Pregel[Any, Any, Any, Any]


# --- inside a node


@dataclass(frozen=True)
class _Asked:
    """One request a node makes: what the gateway is sent, and what the interrupt carries."""

    call_id: str
    state: dict[str, Any]
    value: dict[str, Any]


def _asked(kind: str, what: dict[str, Any], key: str | None) -> _Asked:
    configurable = get_config().get("configurable", {})
    thread_id = configurable.get("thread_id")
    if thread_id is None:
        raise RuntimeError("the gateway's LangGraph helpers need a checkpointer and a thread_id")
    where = {"thread_id": str(thread_id), "checkpoint_ns": configurable.get("checkpoint_ns", "")}
    identity = json.dumps([where, kind, what, key], sort_keys=True, default=str)
    call_id = "lg-" + hashlib.sha256(identity.encode()).hexdigest()[:40]
    return _Asked(call_id, {"langgraph": where}, {CALL_ID_KEY: call_id, "kind": kind, **what})


def _already_made(error: ApiError) -> bool:
    """409 on create: this node's first run made the request with a body that differed in
    something outside the call_id (an `expires_at` computed from the clock); it stands."""
    return error.status_code == 409


def request_approval(
    client: Client,
    fn: str,
    kwargs: dict[str, Any] | None = None,
    *,
    channel: dict[str, Any] | None = None,
    reject_options: list[ResponseOption] | None = None,
    expires_at: datetime | None = None,
    key: str | None = None,
) -> FunctionCall:
    """In a node: ask for approval of `fn(**kwargs)` and pause the thread until a person
    decides; returns the decided request (`.approved`, `.arguments`, `.reason`). `key` tells
    apart two identical requests in one node."""
    kwargs = kwargs or {}
    asked = _asked(FUNCTION_CALL, {"fn": fn, "kwargs": kwargs}, key)
    try:
        client.create_function_call(
            fn,
            kwargs,
            call_id=asked.call_id,
            channel=channel,
            reject_options=reject_options,
            state=asked.state,
            expires_at=expires_at,
        )
    except ApiError as error:
        if not _already_made(error):
            raise
    return FunctionCall.model_validate(interrupt(asked.value))


def ask_human(
    client: Client,
    msg: str,
    *,
    subject: str | None = None,
    channel: dict[str, Any] | None = None,
    response_options: list[ResponseOption] | None = None,
    expires_at: datetime | None = None,
    key: str | None = None,
) -> HumanContact:
    """In a node: ask a person and pause the thread until they answer (`.answer`)."""
    asked = _asked(HUMAN_CONTACT, {"msg": msg}, key)
    try:
        client.create_human_contact(
            msg,
            subject=subject,
            call_id=asked.call_id,
            channel=channel,
            response_options=response_options,
            state=asked.state,
            expires_at=expires_at,
        )
    except ApiError as error:
        if not _already_made(error):
            raise
    return HumanContact.model_validate(interrupt(asked.value))


async def arequest_approval(
    client: AsyncClient,
    fn: str,
    kwargs: dict[str, Any] | None = None,
    *,
    channel: dict[str, Any] | None = None,
    reject_options: list[ResponseOption] | None = None,
    expires_at: datetime | None = None,
    key: str | None = None,
) -> FunctionCall:
    """`request_approval` for an async node."""
    kwargs = kwargs or {}
    asked = _asked(FUNCTION_CALL, {"fn": fn, "kwargs": kwargs}, key)
    try:
        await client.create_function_call(
            fn,
            kwargs,
            call_id=asked.call_id,
            channel=channel,
            reject_options=reject_options,
            state=asked.state,
            expires_at=expires_at,
        )
    except ApiError as error:
        if not _already_made(error):
            raise
    return FunctionCall.model_validate(interrupt(asked.value))


async def aask_human(
    client: AsyncClient,
    msg: str,
    *,
    subject: str | None = None,
    channel: dict[str, Any] | None = None,
    response_options: list[ResponseOption] | None = None,
    expires_at: datetime | None = None,
    key: str | None = None,
) -> HumanContact:
    """`ask_human` for an async node."""
    asked = _asked(HUMAN_CONTACT, {"msg": msg}, key)
    try:
        await client.create_human_contact(
            msg,
            subject=subject,
            call_id=asked.call_id,
            channel=channel,
            response_options=response_options,
            state=asked.state,
            expires_at=expires_at,
        )
    except ApiError as error:
        if not _already_made(error):
            raise
    return HumanContact.model_validate(interrupt(asked.value))


# --- resuming


def gateway_interrupts(interrupts: Iterable[Interrupt]) -> list[Interrupt]:
    """The interrupts these helpers raised (a graph may have others of its own)."""
    return [i for i in interrupts if isinstance(i.value, dict) and CALL_ID_KEY in i.value]


def _is_question(item: Interrupt) -> bool:
    return bool(item.value.get("kind") == HUMAN_CONTACT)


def _thread_config(base: RunnableConfig | None, thread_id: str) -> RunnableConfig:
    base = base or {}
    return {**base, "configurable": {**base.get("configurable", {}), "thread_id": thread_id}}


def _threads(requests: Iterable[FunctionCall | HumanContact]) -> list[str]:
    """The LangGraph threads named by these requests' `state`, each once, in order."""
    found: dict[str, None] = {}
    for request in requests:
        where = (request.spec.state or {}).get("langgraph")
        if isinstance(where, dict) and isinstance(where.get("thread_id"), str):
            found[where["thread_id"]] = None
    return list(found)


PAGE = 1000  # the gateway's largest page


class Resumer:
    """Resumes a graph's threads once the gateway has their decisions, long-polling for them.

    `config` is the base of the configs `resume_thread` and `resume_run` build (a thread_id is
    added); `timeout` bounds each wait on one request (WaitTimeout past it)."""

    def __init__(
        self,
        graph: Graph,
        client: Client,
        *,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> None:
        self.graph = graph
        self.client = client
        self.config = config
        self.timeout = timeout

    def waiting(self, config: RunnableConfig) -> list[Interrupt]:
        """The thread's interrupts that wait on the gateway."""
        return gateway_interrupts(self.graph.get_state(config).interrupts)

    def resume(self, config: RunnableConfig, *, wait: bool = True) -> Any:
        """Resume the thread with each decision as it comes, until it no longer waits on the
        gateway; the graph's last output, or None when it waited on nothing (so a second run
        resumes nothing). With wait=False, only decisions already made are handed over."""
        output = None
        while answers := self._answers(self.waiting(config), wait):
            output = self.graph.invoke(Command(resume=answers), config)
        return output

    def resume_thread(self, thread_id: str, *, wait: bool = True) -> Any:
        return self.resume(_thread_config(self.config, thread_id), wait=wait)

    def resume_run(self, run_id: str, *, wait: bool = True) -> dict[str, Any]:
        """After a restart: resume every thread that still waits on a request of `run_id`,
        side by side; their outputs by thread_id."""
        threads = _threads(self._requests(run_id))
        if not threads:
            return {}
        with ThreadPoolExecutor(max_workers=min(len(threads), 32)) as pool:
            outputs = list(pool.map(lambda t: (t, self.resume_thread(t, wait=wait)), threads))
        return {thread: output for thread, output in outputs if output is not None}

    def _answers(self, waiting: list[Interrupt], wait: bool) -> dict[str, Any]:
        """Each decided request's JSON by interrupt id; when none is decided yet (and `wait`),
        the first decision on the oldest one."""
        requests = {item.id: self._get(item) for item in waiting}
        decided = {key: request for key, request in requests.items() if request.decided}
        if not decided and wait and waiting:
            first = waiting[0].id
            decided = {first: self._wait(requests[first])}
        return {key: request.model_dump(mode="json") for key, request in decided.items()}

    def _get(self, item: Interrupt) -> FunctionCall | HumanContact:
        if _is_question(item):
            return self.client.get_human_contact(item.value[CALL_ID_KEY])
        return self.client.get_function_call(item.value[CALL_ID_KEY])

    def _wait(self, request: FunctionCall | HumanContact) -> FunctionCall | HumanContact:
        if isinstance(request, HumanContact):  # one call per kind: `wait` is typed per kind
            return self.client.wait(request, timeout=self.timeout)
        return self.client.wait(request, timeout=self.timeout)

    def _requests(self, run_id: str) -> list[FunctionCall | HumanContact]:
        found: list[FunctionCall | HumanContact] = []
        for listing in (self.client.list_function_calls, self.client.list_human_contacts):
            offset, more = 0, True
            while more:
                page = listing(run_id=run_id, limit=PAGE, offset=offset)
                found += page.items
                offset += len(page.items)
                more = bool(page.items) and page.has_more
        return found


class AsyncResumer:
    """`Resumer` for asyncio (graph.ainvoke, an async checkpointer such as AsyncSqliteSaver)."""

    def __init__(
        self,
        graph: Graph,
        client: AsyncClient,
        *,
        config: RunnableConfig | None = None,
        timeout: float | None = None,
    ) -> None:
        self.graph = graph
        self.client = client
        self.config = config
        self.timeout = timeout

    async def waiting(self, config: RunnableConfig) -> list[Interrupt]:
        return gateway_interrupts((await self.graph.aget_state(config)).interrupts)

    async def resume(self, config: RunnableConfig, *, wait: bool = True) -> Any:
        """As `Resumer.resume`."""
        output = None
        while answers := await self._answers(await self.waiting(config), wait):
            output = await self.graph.ainvoke(Command(resume=answers), config)
        return output

    async def resume_thread(self, thread_id: str, *, wait: bool = True) -> Any:
        return await self.resume(_thread_config(self.config, thread_id), wait=wait)

    async def resume_run(self, run_id: str, *, wait: bool = True) -> dict[str, Any]:
        """As `Resumer.resume_run`."""
        threads = _threads(await self._requests(run_id))
        outputs = await asyncio.gather(*(self.resume_thread(t, wait=wait) for t in threads))
        return {t: output for t, output in zip(threads, outputs, strict=True) if output is not None}

    async def _answers(self, waiting: list[Interrupt], wait: bool) -> dict[str, Any]:
        requests = {item.id: await self._get(item) for item in waiting}
        decided = {key: request for key, request in requests.items() if request.decided}
        if not decided and wait and waiting:
            first = waiting[0].id
            decided = {first: await self._wait(requests[first])}
        return {key: request.model_dump(mode="json") for key, request in decided.items()}

    async def _get(self, item: Interrupt) -> FunctionCall | HumanContact:
        if _is_question(item):
            return await self.client.get_human_contact(item.value[CALL_ID_KEY])
        return await self.client.get_function_call(item.value[CALL_ID_KEY])

    async def _wait(self, request: FunctionCall | HumanContact) -> FunctionCall | HumanContact:
        if isinstance(request, HumanContact):  # one call per kind: `wait` is typed per kind
            return await self.client.wait(request, timeout=self.timeout)
        return await self.client.wait(request, timeout=self.timeout)

    async def _requests(self, run_id: str) -> list[FunctionCall | HumanContact]:
        found: list[FunctionCall | HumanContact] = []
        for listing in (self.client.list_function_calls, self.client.list_human_contacts):
            offset, more = 0, True
            while more:
                page = await listing(run_id=run_id, limit=PAGE, offset=offset)
                found += page.items
                offset += len(page.items)
                more = bool(page.items) and page.has_more
        return found


# --- the webhook: the gateway says a request was decided; resume its thread

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MAX_WEBHOOK_BYTES = 4 * 1024 * 1024


class InvalidSignature(Exception):
    """The webhook is not the gateway's: unsigned, signed with another secret, or stale."""


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance: float = 300.0,
    now: float | None = None,
) -> None:
    """Check a Standard Webhooks signature (HMAC-SHA256 over `id.timestamp.body`, the
    `whsec_` secret the gateway gave the endpoint); raises InvalidSignature."""
    lowered = {name.lower(): value for name, value in headers.items()}
    msg_id = lowered.get("webhook-id") or lowered.get("svix-id")
    stamp = lowered.get("webhook-timestamp") or lowered.get("svix-timestamp")
    signatures = lowered.get("webhook-signature") or lowered.get("svix-signature")
    if not (msg_id and stamp and signatures):
        raise InvalidSignature("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        timestamp = int(stamp)
    except ValueError:
        raise InvalidSignature("webhook-timestamp is not a number") from None
    if abs((time.time() if now is None else now) - timestamp) > tolerance:
        raise InvalidSignature("webhook-timestamp is too old or too far ahead")  # a replay
    signed = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(_secret_key(secret), signed, hashlib.sha256).digest()
    expected = base64.b64encode(digest).decode()
    for signature in signatures.split():
        version, _, value = signature.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return
    raise InvalidSignature("no signature matches")


def _secret_key(secret: str) -> bytes:
    return base64.b64decode(secret.removeprefix("whsec_"), validate=True)


def thread_of(payload: Any) -> str | None:
    """The LangGraph thread a webhook's request was made from, if any."""
    event = payload.get("event") if isinstance(payload, dict) else None
    where = ((event or {}).get("spec") or {}).get("state") if isinstance(event, dict) else None
    thread = where.get("langgraph") if isinstance(where, dict) else None
    found = thread.get("thread_id") if isinstance(thread, dict) else None
    return found if isinstance(found, str) else None


class WebhookHandler:
    """An ASGI app to mount anywhere (`app.mount("/hooks/langgraph", handler)`, or serve it
    alone): POSTed the gateway's signed webhook, it resumes the thread that made the request
    with the decisions already made, and answers once the graph has run (so a failure is a
    5xx the gateway retries). A bad or stale signature is a 401."""

    def __init__(
        self, resumer: Resumer | AsyncResumer, secret: str, *, tolerance: float = 300.0
    ) -> None:
        _secret_key(secret)  # a mistyped secret fails here, not at the first delivery
        self.resumer = resumer
        self.secret = secret
        self.tolerance = tolerance
        # One resume per thread at a time: the gateway's retry of a slow delivery waits, then
        # finds nothing left to resume.
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
        elif scope["type"] == "http":
            status, answer = await self._handle(scope, receive)
            await _respond(send, status, answer)

    async def _handle(self, scope: Scope, receive: Receive) -> tuple[int, dict[str, Any]]:
        if scope["method"] != "POST":
            return 405, {"detail": "POST the gateway's webhook here"}
        body = await _body(receive)
        if body is None:
            return 413, {"detail": f"body over {MAX_WEBHOOK_BYTES} bytes"}
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            verify_webhook(self.secret, headers, body, tolerance=self.tolerance)
            payload = json.loads(body)
        except InvalidSignature as error:
            return 401, {"detail": f"invalid webhook signature: {error}"}
        except ValueError:
            return 400, {"detail": "the body is not JSON"}
        thread_id = thread_of(payload)
        if thread_id is not None:  # else not a request made from a LangGraph node
            await self._resume(thread_id)
        return 200, {"thread_id": thread_id}

    async def _resume(self, thread_id: str) -> None:
        lock = self._locks.setdefault(thread_id, asyncio.Lock())
        async with lock:
            if isinstance(self.resumer, AsyncResumer):
                await self.resumer.resume_thread(thread_id, wait=False)
            else:
                await asyncio.to_thread(self.resumer.resume_thread, thread_id, wait=False)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _body(receive: Receive) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_WEBHOOK_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _respond(send: Send, status: int, answer: dict[str, Any]) -> None:
    body = json.dumps(answer).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
