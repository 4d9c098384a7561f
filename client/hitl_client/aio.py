"""The asyncio client: the same methods as `Client`, awaited."""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

import httpx

from hitl_client import _wire
from hitl_client._decorate import (
    answer_text,
    arguments,
    check_callable_by_name,
    denial,
    unverified,
)
from hitl_client._retry import RetryPolicy, result, retry_delay
from hitl_client._wire import Call, Decidable
from hitl_client.errors import Unavailable, WaitTimeout
from hitl_client.models import (
    FunctionCall,
    FunctionCallPage,
    GatewayStatus,
    HumanContact,
    HumanContactPage,
    ResponseOption,
    UserInfo,
)

T = TypeVar("T")


class AsyncClient:
    """`AsyncClient()` reads HUMANLAYER_API_BASE and HUMANLAYER_API_KEY, as the SDK does."""

    def __init__(
        self,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        run_id: str | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
        http: httpx.AsyncClient | None = None,
        jwks: Mapping[str, Any] | None = None,
        project: str | None = None,
    ) -> None:
        self.settings = _wire.settings(base_url, api_key, run_id, jwks, project)
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self._http = http or httpx.AsyncClient()
        self._owns_http = http is None
        self._project = project  # the key's project (receipts name it): pinned, or asked once

    def __repr__(self) -> str:  # never the key
        return f"AsyncClient({self.settings.base_url!r}, run_id={self.settings.run_id!r})"

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def create_function_call(
        self,
        fn: str,
        kwargs: dict[str, Any] | None = None,
        *,
        call_id: str | None = None,
        run_id: str | None = None,
        channel: dict[str, Any] | None = None,
        reject_options: list[ResponseOption] | None = None,
        state: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> FunctionCall:
        """Ask for approval of `fn(**kwargs)`. Sent again after a lost answer, the same
        call_id returns the request already made, so retries never make two."""
        call = _wire.create_function_call(
            run_id or self.settings.run_id,
            call_id or _wire.new_call_id(),
            fn,
            kwargs or {},
            channel=channel,
            reject_options=reject_options,
            state=state,
            expires_at=expires_at,
        )
        return FunctionCall.model_validate(await self._send(call))

    async def create_human_contact(
        self,
        msg: str,
        *,
        subject: str | None = None,
        call_id: str | None = None,
        run_id: str | None = None,
        channel: dict[str, Any] | None = None,
        response_options: list[ResponseOption] | None = None,
        state: dict[str, Any] | None = None,
        expires_at: datetime | None = None,
    ) -> HumanContact:
        """Ask a person a question."""
        call = _wire.create_human_contact(
            run_id or self.settings.run_id,
            call_id or _wire.new_call_id(),
            msg,
            subject=subject,
            channel=channel,
            response_options=response_options,
            state=state,
            expires_at=expires_at,
        )
        return HumanContact.model_validate(await self._send(call))

    async def get_function_call(self, call_id: str, *, wait: float | None = None) -> FunctionCall:
        return await self._get(FunctionCall, call_id, wait)

    async def get_human_contact(self, call_id: str, *, wait: float | None = None) -> HumanContact:
        return await self._get(HumanContact, call_id, wait)

    async def get(self, request: Decidable, *, wait: float | None = None) -> Decidable:
        """The request as it stands now (or once decided, within `wait` ≤ 60 seconds)."""
        return await self._get(type(request), request.call_id, wait)

    async def list_function_calls(
        self,
        *,
        run_id: str | None = None,
        status: GatewayStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> FunctionCallPage:
        """One page of this project's function calls, newest first."""
        call = _wire.listing(FunctionCall, run_id, status, limit, offset)
        return FunctionCallPage.model_validate(await self._send(call))

    async def list_human_contacts(
        self,
        *,
        run_id: str | None = None,
        status: GatewayStatus | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> HumanContactPage:
        """One page of this project's questions, newest first."""
        call = _wire.listing(HumanContact, run_id, status, limit, offset)
        return HumanContactPage.model_validate(await self._send(call))

    # `timeout` as in Client.wait: past it, WaitTimeout (asyncio.timeout would lose the request).
    async def wait(self, request: Decidable, *, timeout: float | None = None) -> Decidable:  # noqa: ASYNC109
        """Block until the request is decided, long-polling in 60-second slices; raises
        WaitTimeout after `timeout` seconds if given."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not request.decided:
            left = _wire.LONG_POLL_SLICE if deadline is None else deadline - time.monotonic()
            if left <= 0:
                raise WaitTimeout(request.call_id, timeout or 0.0)
            request = await self.get(request, wait=min(left, _wire.LONG_POLL_SLICE))
        return request

    async def respond_function_call(
        self,
        call_id: str,
        *,
        approved: bool,
        comment: str | None = None,
        reject_option_name: str | None = None,
        user_info: UserInfo | dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> FunctionCall:
        """Decide a function call (a responder's or admin's key; an agent's own key is
        refused). Retried with one Idempotency-Key, so a lost answer never votes twice."""
        answer = {
            "approved": approved,
            "comment": comment,
            "reject_option_name": reject_option_name,
            "user_info": _wire.user_info(user_info),
        }
        call = _wire.respond(FunctionCall, call_id, answer, idempotency_key)
        return FunctionCall.model_validate(await self._send(call))

    async def respond_human_contact(
        self,
        call_id: str,
        *,
        response: str | None = None,
        response_option_name: str | None = None,
        user_info: UserInfo | dict[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> HumanContact:
        answer = {
            "response": response,
            "response_option_name": response_option_name,
            "user_info": _wire.user_info(user_info),
        }
        call = _wire.respond(HumanContact, call_id, answer, idempotency_key)
        return HumanContact.model_validate(await self._send(call))

    async def jwks(self) -> dict[str, Any]:
        """The gateway's receipt-signing public keys (`/.well-known/jwks.json`), for
        `hitl_client.receipts.verify`."""
        if self.settings.jwks is not None:  # pinned: a forged answer cannot bring its own
            return dict(self.settings.jwks)
        keys: dict[str, Any] = await self._send(_wire.jwks())
        return keys

    def require_approval(
        self,
        *,
        channel: dict[str, Any] | None = None,
        timeout: float | None = None,
        verify_receipt: bool = False,
    ) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T | str]]]:
        """A decorator for coroutine functions: it runs only once a person approves the
        call, with the arguments as they approved them; otherwise it returns why.
        `verify_receipt`: as in Client.require_approval."""

        def decorate(func: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T | str]]:
            signature = check_callable_by_name(func)

            @functools.wraps(func)
            async def guarded(*args: Any, **kwargs: Any) -> T | str:
                named = arguments(signature, args, kwargs)
                call = await self.create_function_call(func.__name__, named, channel=channel)
                call = await self.wait(call, timeout=timeout)
                if not call.approved:
                    return denial(call)
                if verify_receipt and (refusal := await self._unverified(call)):
                    return refusal
                return await func(**call.arguments)

            return guarded

        return decorate

    async def ask_human(
        self,
        msg: str,
        *,
        channel: dict[str, Any] | None = None,
        response_options: list[ResponseOption] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (as in `wait`)
    ) -> str:
        """Ask and wait; the person's answer, or why there is none."""
        contact = await self.create_human_contact(
            msg, channel=channel, response_options=response_options
        )
        contact = await self.wait(contact, timeout=timeout)
        return answer_text(contact)

    async def _unverified(self, call: FunctionCall) -> str | None:
        """Why the approval's receipt does not prove it (`verify_receipt`), or None."""
        if self._project is None:
            self._project = str((await self._send(_wire.project()))["name"])
        return unverified(call, await self.jwks(), self._project)

    async def _get(self, kind: type[Decidable], call_id: str, wait: float | None) -> Decidable:
        return kind.model_validate(await self._send(_wire.get(kind, call_id, wait)))

    async def _send(self, call: Call) -> Any:
        url = self.settings.url(call)
        headers = self.settings.headers(call)
        for attempt in range(self.retry.attempts):
            try:
                response = await self._http.request(
                    call.method,
                    url,
                    json=call.json,
                    params=call.params,
                    headers=headers,
                    timeout=self.timeout + call.hold,
                )
            except httpx.TransportError as error:
                delay = self.retry.delay(attempt)
                if delay is None:
                    raise Unavailable(f"{call.method} {url}: {error!r}") from error
            else:
                delay = retry_delay(self.retry, attempt, response)
                if delay is None:
                    return result(response)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable: the last attempt returns or raises")
