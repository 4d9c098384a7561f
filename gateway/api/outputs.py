"""What the function-call routes answer, for the OpenAPI document only: the answer itself is
`gateway.wire.output`'s JSON, unchanged. The models name the fields a client reads to act on
a decision and allow every other field (HumanLayer's and the gateway's extensions)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

OPEN = ConfigDict(extra="allow")


class FunctionCallStatus(BaseModel):
    """The decision on a function call: `approved` is null while nobody has decided."""

    model_config = OPEN

    approved: bool | None = None
    comment: str | None = None
    reject_option_name: str | None = None
    user_info: dict[str, Any] | None = Field(default=None, description="Who decided, and where")
    requested_at: str | None = None
    responded_at: str | None = None
    updated_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description=(
            "An extension, present only when the approver edited the call: the arguments the "
            "approver approved instead of the agent's (run the call with these). The HumanLayer "
            "SDK ignores it."
        ),
    )


class FunctionCall(BaseModel):
    model_config = OPEN

    run_id: str
    call_id: str
    spec: dict[str, Any]
    status: FunctionCallStatus
    gateway_status: str = Field(
        description="An extension: pending, approved, rejected, cancelled (the lifecycle)"
    )
    receipt: str | None = Field(
        default=None,
        description=(
            "An extension, present once decided: the decision's signed receipt, a compact JWS "
            "(EdDSA) to verify against /.well-known/jwks.json (README 'Signed decision "
            "receipts')"
        ),
    )


class FunctionCallPage(BaseModel):
    model_config = OPEN

    items: list[FunctionCall]
    total: int
    limit: int
    offset: int
    has_more: bool


def answering(
    model: type[BaseModel], errors: dict[int | str, dict[str, Any]]
) -> dict[int | str, dict[str, Any]]:
    """`responses=` for a route whose 200 is `model`, besides these error statuses."""
    return {200: {"model": model, "description": "Successful Response"}} | errors
