"""A request as channels see it, for renderer tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from gateway.seam.views import RequestView

REQUESTED = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)


def request_view(**changes: Any) -> RequestView:
    values: dict[str, Any] = {
        "rid": "RID123",
        "project": "default",
        "kind": "function_call",
        "call_id": "call-1",
        "run_id": "deploy-bot",
        "spec": {"fn": "drop_table", "kwargs": {"name": "users"}},
        "status": "pending",
        "requested_at": REQUESTED,
        "link": "https://gw.example/r/RID123",
    }
    return RequestView(**(values | changes))
