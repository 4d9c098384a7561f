"""Per-request and per-key limits on creates (README "Limits"): the API key's create rate
(a token bucket) and the size of a request's spec.channel, both checked before the body is
validated. The targets a request may contact are capped where they are built
(`gateway.policies.plans`), and MCP sessions per key by the MCP door."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Annotated, Any

from fastapi import Depends, Request
from starlette.datastructures import State

from gateway.api.auth import CallerDep
from gateway.api.body import StrictJSONRequest
from gateway.core import Caller
from gateway.errors import GatewayError, InvalidInput
from gateway.settings import Settings


class RateLimited(GatewayError):
    """Over the key's create rate: answered 429 with `Retry-After` (whole seconds, >= 1)."""

    status_code = 429

    def __init__(self, settings: Settings, wait: float) -> None:
        self.retry_after = max(1, math.ceil(wait))
        super().__init__(
            f"this API key is over its create rate ({settings.creates_per_second:g} a second, "
            f"{settings.create_burst} at once: GATEWAY_CREATES_PER_SECOND and "
            f"GATEWAY_CREATE_BURST); retry in {self.retry_after} s"
        )


class CreateRate:
    """A token bucket per API key: `burst` creates at once, then `rate` a second. O(1) per
    create; a key idle long enough to be full again is forgotten (a new bucket is full)."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self.full_after = burst / rate  # seconds in which even an empty bucket fills up
        # key id -> (tokens, when counted), least recently used first
        self.buckets: OrderedDict[int, tuple[float, float]] = OrderedDict()

    def wait(self, key: int) -> float:
        """0 when the key may create now (a token is taken), else seconds until it may."""
        now = self.clock()
        self._forget_full(now)
        tokens, at = self.buckets.pop(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - at) * self.rate)
        if tokens >= 1:
            self.buckets[key] = (tokens - 1, now)  # put back last: the most recently used
            return 0.0
        self.buckets[key] = (tokens, now)
        return (1 - tokens) / self.rate

    def _forget_full(self, now: float) -> None:
        # Least recently used first: once one is too recent to be full, so are the rest.
        while self.buckets:
            key, (_tokens, at) = next(iter(self.buckets.items()))
            if now - at < self.full_after:
                return
            del self.buckets[key]


def create_rate(state: State, settings: Settings) -> CreateRate | None:
    """The app's buckets, shared by the API and the MCP tools (None: no limit is set)."""
    if settings.creates_per_second == 0:
        return None
    rate: CreateRate | None = getattr(state, "create_rate", None)
    if rate is None:
        rate = CreateRate(settings.creates_per_second, settings.create_burst)
        state.create_rate = rate
    return rate


def take_create(state: State, caller: Caller) -> None:
    """Count one create against the caller's key; RateLimited when it has none left."""
    settings = caller.core.settings
    rate = create_rate(state, settings)
    if rate is None:
        return
    assert caller.key.id is not None  # a key read from the store
    wait = rate.wait(caller.key.id)
    if wait:
        raise RateLimited(settings, wait)


def channel_nodes(body: Any, limit: int) -> int:
    """The channels in a create body's spec.channel: the channel and each any_of/all_of
    branch at any depth, counted no further than limit + 1 (so at most that many steps,
    whatever the body's size). Shapes the validation will refuse count as nothing."""
    spec = body.get("spec") if isinstance(body, dict) else None
    channel = spec.get("channel") if isinstance(spec, dict) else None
    stack = [channel] if isinstance(channel, dict) else []
    seen = 0
    while stack and seen <= limit:
        node = stack.pop()
        seen += 1
        for mode in ("any_of", "all_of"):
            branches = node.get(mode)
            if isinstance(branches, list):
                inner = (_channel_of(branch) for branch in branches[: limit + 1])
                stack += [branch for branch in inner if isinstance(branch, dict)]
    return seen


def _channel_of(branch: Any) -> Any:
    """A delayed branch's channel ({"timeout", "channel"}), or the branch itself."""
    return branch.get("channel", branch) if isinstance(branch, dict) else branch


def check_channel_nodes(body: Any, limit: int) -> None:
    if channel_nodes(body, limit) > limit:
        raise InvalidInput(
            f"spec.channel has more than {limit} channels (the channel and each any_of/all_of "
            f"branch, at any depth); at most {limit} are allowed per request "
            "(GATEWAY_MAX_POLICY_NODES)"
        )


def admit_create(state: State, caller: Caller, parsed: Any) -> None:
    """A create within its key's rate and with a spec.channel small enough, counted in the
    parsed JSON before a model is built for each of its channels (both create paths)."""
    take_create(state, caller)
    check_channel_nodes(parsed, caller.core.settings.max_policy_nodes)


async def creator(request: Request, caller: CallerDep) -> Caller:
    """The caller of a create, admitted (`admit_create`)."""
    parsed = request.parsed() if isinstance(request, StrictJSONRequest) else None
    admit_create(request.app.state, caller, parsed)
    return caller


CreatorDep = Annotated[Caller, Depends(creator)]
