"""What the client raises."""

from __future__ import annotations

from typing import Any


class GatewayError(Exception):
    """Anything the client raises."""


class ApiError(GatewayError):
    """The gateway refused the request (a 4xx, or a 5xx after the retries): `message` is the
    gateway's own explanation, `detail` its body's `detail` as sent."""

    def __init__(self, status_code: int, message: str, detail: Any = None) -> None:
        super().__init__(f"{status_code}: {message}")
        self.status_code = status_code
        self.message = message
        self.detail = detail


class Unavailable(GatewayError):
    """The gateway could not be reached, or stayed busy (503), through every retry."""


class WaitTimeout(GatewayError):
    """`wait` reached its deadline and the request is still pending."""

    def __init__(self, call_id: str, seconds: float) -> None:
        super().__init__(f"{call_id} still pending after {seconds:g} s")
        self.call_id = call_id
        self.seconds = seconds


def message_of(detail: Any) -> str:
    """The gateway's `detail` as one line: text as is, a 422's problems joined."""
    if isinstance(detail, list):
        parts = []
        for problem in detail:
            where = ".".join(str(step) for step in problem.get("loc", ()) if step != "body")
            parts.append(f"{where}: {problem.get('msg')}" if where else str(problem.get("msg")))
        return "; ".join(parts)
    return str(detail)
