"""The gateway's answers as typed objects: HumanLayer's FunctionCall and HumanContact, plus
the gateway's extensions (lifecycle status, policy progress, edited arguments, deadline).

Unknown fields are kept (`extra="allow"`), so a newer gateway never breaks an older client."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

GatewayStatus = Literal["pending", "approved", "rejected", "responded", "expired", "cancelled"]


class Model(BaseModel):
    model_config = ConfigDict(extra="allow")


class UserInfo(Model):
    """Who answered, as the gateway recorded them (`channel` says where: slack, web, grant…)."""

    channel: str | None = None
    user_id: str | None = None
    name: str | None = None
    email: str | None = None


class ResponseOption(Model):
    name: str
    title: str | None = None
    description: str | None = None
    prompt_fill: str | None = None
    interactive: bool = False


# The pydantic mypy plugin sees its generated __init__'s **kwargs as a second `kwargs`.
class FunctionCallSpec(Model):  # type: ignore[no-redef]
    fn: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    channel: dict[str, Any] | None = None
    reject_options: list[ResponseOption] | None = None
    state: dict[str, Any] | None = None
    expires_at: datetime | None = None


class HumanContactSpec(Model):
    msg: str
    subject: str | None = None
    channel: dict[str, Any] | None = None
    response_options: list[ResponseOption] | None = None
    state: dict[str, Any] | None = None
    expires_at: datetime | None = None


class FunctionCallStatus(Model):
    requested_at: datetime | None = None
    responded_at: datetime | None = None
    approved: bool | None = None
    comment: str | None = None
    reject_option_name: str | None = None
    user_info: UserInfo | None = None
    updated_kwargs: dict[str, Any] | None = None  # the arguments as the approver edited them


class HumanContactStatus(Model):
    requested_at: datetime | None = None
    responded_at: datetime | None = None
    response: str | None = None
    response_option_name: str | None = None
    user_info: UserInfo | None = None


class PolicyProgress(Model):
    """Where a quorum or any_of/all_of policy stands: approvals so far out of those needed."""

    approvals: int
    needed: int
    approvers: list[dict[str, Any]] = Field(default_factory=list)
    tree: dict[str, Any] | None = None


class Request(Model):
    run_id: str
    call_id: str
    route: list[dict[str, Any]] = Field(default_factory=list)
    gateway_status: GatewayStatus = "pending"
    policy: dict[str, Any] | None = None
    policy_progress: PolicyProgress | None = None
    expires_at: datetime | None = None
    receipt: str | None = None  # the decision's signed receipt (hitl_client.receipts)

    @property
    def decided(self) -> bool:
        """True once nothing more will change: answered, expired or cancelled."""
        return self.gateway_status != "pending"


class FunctionCall(Request):
    spec: FunctionCallSpec
    status: FunctionCallStatus | None = None

    @property
    def approved(self) -> bool:
        return self.gateway_status == "approved"

    @property
    def arguments(self) -> dict[str, Any]:
        """The arguments to run with: the approver's edit when there is one."""
        edited = self.status.updated_kwargs if self.status else None
        return dict(self.spec.kwargs if edited is None else edited)

    @property
    def reason(self) -> str:
        """Why it was not approved, in words an agent (or a model) can act on."""
        status = self.status or FunctionCallStatus()
        if self.gateway_status == "expired":
            return status.comment or "nobody answered before the deadline"
        if self.gateway_status == "cancelled":
            return status.comment or "the request was cancelled"
        option = f" ({status.reject_option_name})" if status.reject_option_name else ""
        return (status.comment or "rejected without a comment") + option


class HumanContact(Request):
    spec: HumanContactSpec
    status: HumanContactStatus | None = None

    @property
    def answer(self) -> str | None:
        """The person's answer: their text, else the option they chose."""
        status = self.status or HumanContactStatus()
        return status.response if status.response is not None else status.response_option_name


class Page(Model):
    total: int
    limit: int
    offset: int
    has_more: bool


class FunctionCallPage(Page):
    items: list[FunctionCall]


class HumanContactPage(Page):
    items: list[HumanContact]
