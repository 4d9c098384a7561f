"""What `require_approval` needs of the function it guards, for both clients."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from hitl_client.models import FunctionCall, HumanContact

_NOT_BY_NAME = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.VAR_POSITIONAL)


def check_callable_by_name(func: Callable[..., Any]) -> inspect.Signature:
    """The approver sees, and may edit, arguments by name: the function must take them so."""
    signature = inspect.signature(func)
    for parameter in signature.parameters.values():
        if parameter.kind in _NOT_BY_NAME:
            raise TypeError(
                f"{func.__name__} takes {parameter.name!r} positionally only; "
                "require_approval needs every argument to be passable by name"
            )
    return signature


def arguments(signature: inspect.Signature, args: Any, kwargs: Any) -> dict[str, Any]:
    """The call's arguments by name, defaults included: what the approver reads."""
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    named = dict(bound.arguments)
    for name, parameter in signature.parameters.items():
        if parameter.kind is inspect.Parameter.VAR_KEYWORD:
            named.update(named.pop(name, {}))
    return named


def denial(call: FunctionCall) -> str:
    """What the agent (and its model) reads instead of the result; HumanLayer's wording."""
    return f"User denied {call.spec.fn} with message: {call.reason}"


def unverified(call: FunctionCall, jwks: Any, project: str) -> str | None:
    """Why an approval's receipt does not prove it (unsigned, altered, other arguments,
    another project's), in words for the agent; None when it does."""
    from hitl_client.receipts import ReceiptError, verify

    try:
        verify(call.receipt, jwks, expected=call, decision="approved", project=project)
    except ReceiptError as error:
        return f"Not running {call.spec.fn}: its approval does not verify ({error.reason})"
    return None


def answer_text(contact: HumanContact) -> str:
    """The person's answer, or why there is none (expired, cancelled)."""
    return contact.answer if contact.answer is not None else f"No answer: {contact.gateway_status}"
