"""HumanLayer-compatible wire models (what agents send and get back).

Field names follow the humanlayer 0.7.9 SDK; the Python SDK sends every unset field as
an explicit null, so every optional field accepts None.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StrictBool,
    StringConstraints,
    model_validator,
)

_NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]+$"

# Ids are stored in indexed columns, so they are short and printable.
Id = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=_NO_CONTROL_CHARS)]

# A call_id travels in URL paths (the SDK formats it in unescaped), so it must stay one segment.
_CALL_ID = re.compile(r"(?!\.{1,2}$)[^\x00-\x1f\x7f/\\?#%]{1,255}")


def is_call_id(value: str) -> bool:
    return _CALL_ID.fullmatch(value) is not None


def _call_id(value: str) -> str:
    if not is_call_id(value):
        raise ValueError(
            "call_id must be 1-255 characters without control characters, '/', '\\', '?', "
            "'#' or '%', and not '.' or '..' (it is part of URLs)"
        )
    return value


CallId = Annotated[str, StringConstraints(max_length=255), AfterValidator(_call_id)]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


# Free text kept in plain columns: anything but NUL, which PostgreSQL text cannot hold.
Text = Annotated[str, StringConstraints(max_length=100_000), AfterValidator(_no_nul)]


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ResponseOption(WireModel):
    name: Id
    title: str | None = None
    description: str | None = None
    prompt_fill: str | None = None
    interactive: bool = False


Options = Annotated[list[ResponseOption], Field(max_length=25)]


def _unique_names(options: list[ResponseOption] | None) -> list[ResponseOption] | None:
    if options is not None:
        names = [option.name for option in options]
        if len(set(names)) != len(names):
            raise ValueError("option names must be unique")
    return options


class SlackChannel(WireModel):
    channel_or_user_id: str = Field(max_length=255)
    context_about_channel_or_user: str | None = None
    bot_token: SecretStr | None = None  # write-only: stored encrypted, never echoed
    allowed_responder_ids: list[Id] | None = Field(default=None, min_length=1)
    experimental_slack_blocks: bool | None = None
    thread_ts: str | None = Field(default=None, max_length=64)
    team_id: str | None = Field(default=None, max_length=64)


class EmailRecipient(WireModel):
    address: str = Field(min_length=3, max_length=320, pattern=_NO_CONTROL_CHARS)
    context_about_user: str | None = None
    field: Literal["to", "cc", "bcc"] | None = None


_EMAIL_ALIASES = (
    ("subject", "experimental_subject_line"),
    ("references_message_id", "experimental_references_message_id"),
    ("in_reply_to_message_id", "experimental_in_reply_to_message_id"),
)


class EmailChannel(WireModel):
    address: str = Field(min_length=3, max_length=320, pattern=_NO_CONTROL_CHARS)
    context_about_user: str | None = None
    additional_recipients: list[EmailRecipient] | None = None
    subject: str | None = None
    references_message_id: str | None = None
    in_reply_to_message_id: str | None = None
    experimental_subject_line: str | None = None
    experimental_references_message_id: str | None = None
    experimental_in_reply_to_message_id: str | None = None
    template: str | None = Field(default=None, max_length=200_000)

    @model_validator(mode="after")
    def _mirror_aliases(self) -> EmailChannel:
        # SDKs send either spelling (TS and Go only the experimental one): keep both equal.
        for plain, experimental in _EMAIL_ALIASES:
            value = getattr(self, plain) or getattr(self, experimental)
            setattr(self, plain, value)
            setattr(self, experimental, value)
        return self


class DiscordChannel(WireModel):
    channel_id: str | None = Field(default=None, pattern=r"^\d{1,25}$")
    user_id: str | None = Field(default=None, pattern=r"^\d{1,25}$")
    allowed_responder_ids: list[Id] | None = Field(default=None, min_length=1)
    context_about_channel_or_user: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> DiscordChannel:
        if (self.channel_id is None) == (self.user_id is None):
            raise ValueError("give exactly one of channel_id or user_id")
        return self


class PhoneChannel(WireModel):
    phone_number: str = Field(max_length=32)
    context_about_user: str | None = None


class ContactChannel(WireModel):
    slack: SlackChannel | None = None
    sms: PhoneChannel | None = None
    whatsapp: PhoneChannel | None = None
    email: EmailChannel | None = None
    discord: DiscordChannel | None = None
    team: Id | None = None
    person: Id | None = None


# The pydantic mypy plugin calls its generated __init__'s catch-all **kwargs too.
class FunctionCallSpec(WireModel):  # type: ignore[no-redef]
    fn: Id
    kwargs: dict[str, Any]
    channel: ContactChannel | None = None
    reject_options: Annotated[Options | None, AfterValidator(_unique_names)] = None
    state: dict[str, Any] | None = None


class HumanContactSpec(WireModel):
    msg: Annotated[str, StringConstraints(min_length=1)]
    subject: str | None = None
    channel: ContactChannel | None = None
    response_options: Annotated[Options | None, AfterValidator(_unique_names)] = None
    state: dict[str, Any] | None = None


class FunctionCallIn(WireModel):
    run_id: Id
    call_id: CallId
    spec: FunctionCallSpec


class HumanContactIn(WireModel):
    run_id: Id
    call_id: CallId
    spec: HumanContactSpec


class UserInfo(WireModel):
    model_config = ConfigDict(extra="allow")

    channel: str | None = None
    user_id: str | None = None
    name: str | None = None
    email: str | None = None


class FunctionCallStatusIn(WireModel):
    approved: StrictBool | None = None  # "yes" or "1" must not approve anything
    comment: Text | None = None
    reject_option_name: Id | None = None
    user_info: UserInfo | None = None


class HumanContactStatusIn(WireModel):
    response: Text | None = None
    response_option_name: Id | None = None
    user_info: UserInfo | None = None


class Escalation(WireModel):
    escalation_msg: Annotated[str, StringConstraints(min_length=1, max_length=100_000)]
    additional_recipients: list[EmailRecipient] | None = None
    channel: ContactChannel | None = None


class Page(BaseModel):
    items: list[dict[str, Any]]
    total: int
    limit: int
    offset: int
    has_more: bool
