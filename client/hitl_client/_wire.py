"""What each client method sends, built once for the sync and the async client alike."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from pydantic import BaseModel

from hitl_client.models import FunctionCall, GatewayStatus, HumanContact, UserInfo

DEFAULT_BASE = "http://127.0.0.1:8080/humanlayer/v1"  # `make run`'s gateway
API_PATH = "/humanlayer/v1"  # where the gateway serves the API, below its root
JWKS_PATH = "/.well-known/jwks.json"  # at the gateway's root, not under the API's base
LONG_POLL_SLICE = 60.0  # the longest `?wait=` the gateway holds a GET

Decidable = TypeVar("Decidable", FunctionCall, HumanContact)


@dataclass(frozen=True)
class Call:
    method: str
    path: str
    json: dict[str, Any] | None = None
    params: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    hold: float = 0.0  # seconds the gateway may hold the answer (a long-poll)
    from_origin: bool = False  # `path` is from the gateway's root, not the API's base


@dataclass(frozen=True)
class Settings:
    base_url: str
    api_key: str
    run_id: str
    # Receipts: the signing keys and the key's project, when pinned (never asked for then).
    jwks: Mapping[str, Any] | None = None
    project: str | None = None

    def url(self, call: Call) -> str:
        if not call.from_origin:
            return self.base_url + call.path
        # The gateway's root: the base without the API's own path (a proxy may add a prefix).
        root = self.base_url.removesuffix(API_PATH)
        if root == self.base_url:  # not the usual base: its scheme and host
            parts = urlsplit(self.base_url)
            root = f"{parts.scheme}://{parts.netloc}"
        return root + call.path

    def headers(self, call: Call) -> dict[str, str]:
        """The key goes to the API only: the gateway's root may serve others' paths too."""
        if call.from_origin:
            return dict(call.headers)
        return {"Authorization": f"Bearer {self.api_key}", **call.headers}


def settings(
    base_url: str | None,
    api_key: str | None,
    run_id: str | None,
    jwks: Mapping[str, Any] | None = None,
    project: str | None = None,
) -> Settings:
    """Arguments first, then the environment the HumanLayer SDK reads."""
    key = api_key or os.environ.get("HUMANLAYER_API_KEY")
    if not key:
        raise ValueError("no API key: pass api_key= or set HUMANLAYER_API_KEY")
    base = base_url or os.environ.get("HUMANLAYER_API_BASE") or DEFAULT_BASE
    run = run_id or os.environ.get("HUMANLAYER_RUN_ID") or "agent"
    return Settings(base.rstrip("/"), key, run, jwks, project)


def new_call_id() -> str:
    return uuid.uuid4().hex


def path_of(kind: type[FunctionCall] | type[HumanContact]) -> str:
    return "/function_calls" if kind is FunctionCall else "/human_contacts"


def _spec(**fields: Any) -> dict[str, Any]:
    """Only what was given: the gateway fills in the rest."""
    spec: dict[str, Any] = {}
    for name, value in fields.items():
        if isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, list):
            value = [_plain(item) for item in value]
        if value is not None:
            spec[name] = value
    return spec


def _plain(item: Any) -> Any:
    return item.model_dump(exclude_none=True) if isinstance(item, BaseModel) else item


def create_function_call(
    run_id: str, call_id: str, fn: str, kwargs: dict[str, Any], **optional: Any
) -> Call:
    body = {"run_id": run_id, "call_id": call_id, "spec": _spec(fn=fn, kwargs=kwargs, **optional)}
    return Call("POST", "/function_calls", json=body)


def create_human_contact(run_id: str, call_id: str, msg: str, **optional: Any) -> Call:
    body = {"run_id": run_id, "call_id": call_id, "spec": _spec(msg=msg, **optional)}
    return Call("POST", "/human_contacts", json=body)


def get(kind: type[FunctionCall] | type[HumanContact], call_id: str, wait: float | None) -> Call:
    if wait is None:
        return Call("GET", f"{path_of(kind)}/{call_id}")
    wait = min(max(wait, 0.001), LONG_POLL_SLICE)
    return Call("GET", f"{path_of(kind)}/{call_id}", params={"wait": round(wait, 3)}, hold=wait)


def listing(
    kind: type[FunctionCall] | type[HumanContact],
    run_id: str | None,
    status: GatewayStatus | None,
    limit: int,
    offset: int,
) -> Call:
    params = {"run_id": run_id, "status": status, "limit": limit, "offset": offset}
    return Call("GET", path_of(kind), params={k: v for k, v in params.items() if v is not None})


def respond(
    kind: type[FunctionCall] | type[HumanContact],
    call_id: str,
    answer: dict[str, Any],
    idempotency_key: str | None,
) -> Call:
    """A decision, sent with one Idempotency-Key through all its retries."""
    body = {name: value for name, value in answer.items() if value is not None}
    key = idempotency_key or uuid.uuid4().hex
    path = f"/agent{path_of(kind)}/{call_id}/respond"
    return Call("POST", path, json=body, headers={"Idempotency-Key": key})


def jwks() -> Call:
    return Call("GET", JWKS_PATH, from_origin=True)


def project() -> Call:
    """The key's project (HumanLayer's GET /project): its `name` is what receipts sign."""
    return Call("GET", "/project")


def user_info(value: UserInfo | dict[str, Any] | None) -> dict[str, Any] | None:
    return value.model_dump(exclude_none=True) if isinstance(value, UserInfo) else value


def time_left(deadline: float | None) -> float | None:
    """One deadline for several waits (a `time.monotonic()` value): what is left of it."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


def scoped_call_id(tool_call_id: str | None, scope: str | None) -> str | None:
    """A framework's tool-call id as the gateway's call_id, so that asking again finds the
    same request. Models whose ids repeat across runs (a scripted one) need a `scope`."""
    if tool_call_id is None:
        return None  # the client makes a fresh one
    return f"{scope}:{tool_call_id}" if scope else tool_call_id
