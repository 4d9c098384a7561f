"""HumanLayer-compatible wire models (what agents send and get back).

Field names follow the humanlayer 0.7.9 SDK; the Python SDK sends every unset field as
an explicit null, so every optional field accepts None. The TypeScript SDK (0.7.5) leaves
undefined fields out instead: `kwargs` of a zero-argument function, `channel`, `state`.
"""

from __future__ import annotations

import copy
import re
import unicodedata
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    SerializerFunctionWrapHandler,
    StrictBool,
    StringConstraints,
    ValidationInfo,
    model_serializer,
    model_validator,
)

_NO_CONTROL_CHARS = r"^[^\x00-\x1f\x7f]+$"

# Ids are stored in indexed columns, so they are short and printable.
Id = Annotated[str, StringConstraints(min_length=1, max_length=255, pattern=_NO_CONTROL_CHARS)]

# What a person reads to judge a request (run_id, fn, option names and titles) must look like
# what it is: control characters and bidi controls could hide or reorder text, e.g. U+202E
# makes "deploy\u202egnp.exe" read "deployexe.png" (CVE-2021-42574, "Trojan Source").
_SPOOFING_CHARS = "\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
_SPOOFING = re.compile(f"[{_SPOOFING_CHARS}]")


def spoofing_character(value: str) -> str | None:
    """A description of the first control or bidi character in `value`, or None."""
    found = _SPOOFING.search(value)
    if found is None:
        return None
    char = found.group()
    name = unicodedata.name(char, "") or "a control character"
    return f"U+{ord(char):04X} ({name}) at position {found.start()}"


def _no_spoofing(value: str, info: ValidationInfo) -> str:
    problem = spoofing_character(value)
    if problem is not None:
        field = info.field_name or "this field"
        raise ValueError(
            f"{field} contains {problem}; control characters and bidirectional overrides "
            "are not allowed, as they can change what a person reads"
        )
    return value


# An Id that a person reads: no C0/C1 controls and no bidi controls.
# The pattern only documents the rule (OpenAPI): the validator refuses with a clearer message.
Label = Annotated[
    str,
    StringConstraints(min_length=1, max_length=255),
    AfterValidator(_no_spoofing),
    Field(json_schema_extra={"pattern": f"^[^{_SPOOFING_CHARS}]+$"}),
]

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


CallId = Annotated[
    str,
    StringConstraints(max_length=255),
    AfterValidator(_call_id),
    AfterValidator(_no_spoofing),
    Field(
        json_schema_extra={
            "minLength": 1,
            "pattern": f"^[^{_SPOOFING_CHARS}/\\\\?#%]+$",
            "not": {"enum": [".", ".."]},
        }
    ),
]


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (\\u0000) characters")
    return value


# Free text kept in plain columns: anything but NUL, which PostgreSQL text cannot hold.
Text = Annotated[
    str,
    StringConstraints(max_length=100_000),
    AfterValidator(_no_nul),
    Field(json_schema_extra={"pattern": "^[^\\x00]*$"}),
]

# Limits on agent-supplied JSON (kwargs, state, and every request body as a whole), with a
# wide margin under the first thing that breaks: pydantic's serializer refuses nesting past
# 255 levels (a listing wraps kwargs 5 levels deeper: a 252-deep kwargs broke every list of
# its project), pydantic's own JSON parser past 200, Python's json module raises
# RecursionError near 1,000 minus the stack in use. SQLite and PostgreSQL only see text.
MAX_JSON_DEPTH = 64  # levels of arrays and objects; the outermost value is level 1
MAX_OBJECT_KEYS = 10_000  # keys in any one object
MAX_JSON_ITEMS = 250_000  # object members plus array elements in all (HumanLayer's own
# "large context" example puts 100,000 integers in state)


_SCALARS = frozenset({str, int, float, bool, type(None)})


def json_shape_problem(
    value: Any,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_keys: int = MAX_OBJECT_KEYS,
    max_items: int = MAX_JSON_ITEMS,
) -> tuple[str, tuple[str | int, ...]] | None:
    """What makes `value` too deep or too big, and where; None when it is within the limits.

    Iterative, so a value nested far deeper than the limit cannot exhaust the stack."""
    stack: list[tuple[Any, int, tuple[str | int, ...]]] = [(value, 1, ())]
    items = 0
    while stack:
        node, depth, path = stack.pop()
        if depth > max_depth:
            return f"JSON nested more than {max_depth} levels deep", path
        if isinstance(node, dict):
            if len(node) > max_keys:
                return f"an object has {len(node)} keys; at most {max_keys} are allowed", path
            values: Any = node.values()
            pairs: Any = node.items()
        elif isinstance(node, list):
            values, pairs = node, enumerate(node)
        else:
            continue
        items += len(node)
        if items > max_items:
            return f"more than {max_items} values in all (object members and array items)", ()
        if _SCALARS.issuperset(map(type, values)):  # in C: 100,000 numbers cost ~2 ms
            continue
        for key, item in pairs:
            if isinstance(item, dict | list):
                stack.append((item, depth + 1, (*path, key)))
    return None


def describe_path(path: tuple[str | int, ...], *, keep: int = 8) -> str:
    """`kwargs.items[0].name`, cut after `keep` steps."""
    text = ""
    for step in path[:keep]:
        text += f"[{step}]" if isinstance(step, int) else f".{step}"
    return text.lstrip(".") + ("…" if len(path) > keep else "")


def _bounded_json(value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
    problem = json_shape_problem(value)
    if problem is not None:
        message, path = problem
        where = f" at {info.field_name}.{describe_path(path)}" if path else ""
        raise ValueError(f"{message}{where}")
    return value


JSON_LIMITS = (
    f"Any JSON object, nested at most {MAX_JSON_DEPTH} levels deep (the object itself is "
    f"level 1), with at most {MAX_OBJECT_KEYS:,} keys in any one object and "
    f"{MAX_JSON_ITEMS:,} values in all (object members plus array items); the whole body "
    "is held to the same limits and to GATEWAY_MAX_BODY_BYTES."
)

# kwargs and state: any JSON object within the limits above, stored exactly as sent.
JSONObject = Annotated[
    dict[str, Any],
    AfterValidator(_bounded_json),
    Field(json_schema_extra={"maxProperties": MAX_OBJECT_KEYS, "description": JSON_LIMITS}),
]


class WireModel(BaseModel):
    model_config = ConfigDict(extra="ignore")


# An option title is a button's label: any length the body allows, but nothing that spoofs.
Title = Annotated[
    str,
    AfterValidator(_no_spoofing),
    Field(json_schema_extra={"pattern": f"^[^{_SPOOFING_CHARS}]*$"}),
]


class ResponseOption(WireModel):
    name: Label
    title: Title | None = None
    description: str | None = None
    prompt_fill: str | None = None
    interactive: bool = False


Options = Annotated[
    list[ResponseOption],
    Field(
        max_length=25,
        # JSON Schema can only say that no two options are the very same object.
        json_schema_extra={"uniqueItems": True, "description": "Each option's name is unique."},
    ),
]


def _unique_names(options: list[ResponseOption] | None) -> list[ResponseOption] | None:
    if options is not None:
        names = [option.name for option in options]
        if len(set(names)) != len(names):
            raise ValueError("option names must be unique")
    return options


class SlackContactChannel(WireModel):
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


class EmailContactChannel(WireModel):
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
    def _mirror_aliases(self) -> EmailContactChannel:
        # SDKs send either spelling (TS and Go only the experimental one): keep both equal.
        for plain, experimental in _EMAIL_ALIASES:
            value = getattr(self, plain) or getattr(self, experimental)
            setattr(self, plain, value)
            setattr(self, experimental, value)
        return self


def _present(name: str) -> dict[str, Any]:
    """A JSON Schema: `name` is present and not null (the SDK sends null for unset fields)."""
    return {"required": [name], "properties": {name: {"not": {"type": "null"}}}}


class DiscordContactChannel(WireModel):
    model_config = ConfigDict(
        json_schema_extra={"oneOf": [_present("channel_id"), _present("user_id")]}
    )

    channel_id: str | None = Field(default=None, pattern=r"^\d{1,25}$")
    user_id: str | None = Field(default=None, pattern=r"^\d{1,25}$")
    allowed_responder_ids: list[Id] | None = Field(default=None, min_length=1)
    context_about_channel_or_user: str | None = None

    @model_validator(mode="after")
    def _one_target(self) -> DiscordContactChannel:
        if (self.channel_id is None) == (self.user_id is None):
            raise ValueError("give exactly one of channel_id or user_id")
        return self


class PhoneContactChannel(WireModel):
    phone_number: str = Field(max_length=32)
    context_about_user: str | None = None


MAX_POLICY_DEPTH = 4  # any_of/all_of nesting; deeper trees are a mistake, not a policy
MAX_BRANCHES = 20
MAX_DELAY_SECONDS = 30 * 24 * 3600

# A channel whose own slack carries a bot token (JSON Schema).
_WITH_BOT_TOKEN = {
    "required": ["slack"],
    "properties": {
        "slack": {
            "type": "object",
            "required": ["bot_token"],
            "properties": {"bot_token": {"type": "string"}},
        }
    },
}
# Every branch, at any depth, is an item of some any_of/all_of: none may carry a bot token,
# in its own slack or, for a delayed branch, in its channel's.
_NO_BRANCH_TOKEN = {
    "not": {
        "anyOf": [
            _WITH_BOT_TOKEN,
            {
                "required": ["timeout", "channel"],
                "properties": {"channel": {"type": "object", **_WITH_BOT_TOKEN}},
            },
        ]
    }
}


def _branch_rules(schema: dict[str, Any]) -> None:
    schema["items"] |= copy.deepcopy(_NO_BRANCH_TOKEN)


Branches = Annotated[
    list["DelayedChannel | ContactChannel"],
    Field(min_length=1, max_length=MAX_BRANCHES, json_schema_extra=_branch_rules),
]
CHANNEL_RULES = (
    "Give any_of or all_of, not both; they nest at most "
    f"{MAX_POLICY_DEPTH} deep. A request's channel counts at most GATEWAY_MAX_POLICY_NODES "
    "channels (itself and every branch at any depth; default 100) and may reach at most "
    "GATEWAY_MAX_TARGETS targets (default 50). `team` and `person` name a team or person "
    "of the gateway's routing config that the API key's project may use. slack.bot_token "
    "is accepted in the top-level channel only."
)


class ContactChannel(WireModel):
    model_config = ConfigDict(
        json_schema_extra={
            "description": CHANNEL_RULES,
            "not": {
                "required": ["any_of", "all_of"],
                "properties": {"any_of": {"type": "array"}, "all_of": {"type": "array"}},
            },
        }
    )

    slack: SlackContactChannel | None = None
    sms: PhoneContactChannel | None = None
    whatsapp: PhoneContactChannel | None = None
    email: EmailContactChannel | None = None
    discord: DiscordContactChannel | None = None
    team: Id | None = None
    person: Id | None = None
    # Composite channels, HumanLayer's documented shape: any one branch (any_of) or every
    # branch (all_of) must approve; a branch may be {"timeout": seconds, "channel": {...}}.
    any_of: Branches | None = None
    all_of: Branches | None = None
    approvals_required: Annotated[int, Field(ge=1, le=100)] | None = None

    @model_serializer(mode="wrap")
    def _omit_unset_policy(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self), "any_of", "all_of", "approvals_required")

    @model_validator(mode="after")
    def _one_mode(self) -> ContactChannel:
        if self.any_of is not None and self.all_of is not None:
            raise ValueError("give any_of or all_of, not both (nest one inside the other)")
        if _policy_depth(self) > MAX_POLICY_DEPTH:
            raise ValueError(f"any_of/all_of may nest at most {MAX_POLICY_DEPTH} deep")
        if any(_has_bot_token(branch) for branch in _branches(self)):
            # Only the top-level one is sealed away from the stored spec.
            raise ValueError("slack.bot_token is only accepted in the top-level channel.slack")
        return self


class DelayedChannel(WireModel):
    """A composite branch contacted only `timeout` seconds after the request was made."""

    timeout: Annotated[float, Field(ge=0, le=MAX_DELAY_SECONDS)]
    channel: ContactChannel


ContactChannel.model_rebuild()


def _without_none(dumped: dict[str, Any], *names: str) -> dict[str, Any]:
    """Extensions appear in a stored spec only when given: a body without them keeps the
    very JSON (and idempotency fingerprint) it had before they existed."""
    return {k: v for k, v in dumped.items() if k not in names or v is not None}


def _branches(channel: ContactChannel) -> list[ContactChannel]:
    branches = channel.any_of or channel.all_of or []
    return [b.channel if isinstance(b, DelayedChannel) else b for b in branches]


def _policy_depth(channel: ContactChannel) -> int:
    inner = _branches(channel)
    return 1 + max((_policy_depth(c) for c in inner), default=0) if inner else 0


def _has_bot_token(channel: ContactChannel) -> bool:
    own = channel.slack is not None and channel.slack.bot_token is not None
    return own or any(_has_bot_token(branch) for branch in _branches(channel))


# What an agent may send but never reads back: HumanLayer's per-request Slack bot token. A
# spec (or an escalation) is stored and echoed without it (`model_dump(exclude=...)`); the
# value is stored sealed and reaches its channel as `RequestView.secrets`.
WRITE_ONLY: dict[str, Any] = {"channel": {"slack": {"bot_token"}}}


def write_only(channel: ContactChannel | None) -> dict[str, str]:
    """The write-only values of a request's channel, by the names channels read them."""
    token = channel.slack.bot_token if channel is not None and channel.slack else None
    return {} if token is None else {"slack_bot_token": token.get_secret_value()}


class Origin(WireModel):
    """Where a request came from, when not the HTTP API itself (an extension): the MCP front
    door records the client's name and version from its initialize handshake and the tool."""

    via: Literal["mcp", "claude-code-hook"]
    client: Label | None = None
    client_version: Label | None = None
    tool: Label | None = None
    reason: Annotated[str, StringConstraints(max_length=10_000)] | None = None  # the agent's why


# RFC 3339's date-time (JSON Schema's "date-time" format): pydantic alone would also take
# numbers and numeric strings as Unix times (`0` was 1970), dates without seconds, and more.
_RFC3339 = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})", re.ASCII
)
_DEADLINE_FORM = (
    "expires_at must be a date-time string with a time zone (RFC 3339), "
    "e.g. 2099-01-01T12:00:00Z; numbers are not accepted"
)


def _deadline_text(value: Any) -> Any:
    if isinstance(value, datetime):  # from Python callers (the CLI, MCP, tests)
        return value
    if not isinstance(value, str) or _RFC3339.fullmatch(value) is None:
        raise ValueError(_DEADLINE_FORM)
    return value


def _in_the_future(value: datetime) -> datetime:
    try:
        utc = value.astimezone(UTC)
    except OverflowError:  # before year 1 or after year 9999, once in UTC
        if value.year > 1:
            raise ValueError(
                f"expires_at {value.isoformat()} is after 9999-12-31T23:59:59Z"
            ) from None
        utc = datetime.min.replace(tzinfo=UTC)
    if utc <= datetime.now(UTC):
        raise ValueError(
            f"expires_at {value.isoformat()} is in the past; give a time in the future"
        )
    return value


# When an undecided request fails closed (rejected, or a question expired): a future moment.
Deadline = Annotated[
    AwareDatetime,
    BeforeValidator(_deadline_text),
    AfterValidator(_in_the_future),
    Field(examples=["2099-01-01T12:00:00Z"]),
]
DEADLINE_RULES = (
    "When the request, if still undecided, fails closed: a function call is rejected as "
    "expired, a question expires. An RFC 3339 date-time with a time zone (seconds 00-59), "
    "in the future when the request is made, and at most 9999-12-31T23:59:59Z; a past one "
    "is refused (422), and numbers are not accepted. The gateway's own deadline for the "
    "request (a rule's or policy's `expires_after`) wins when it is earlier."
)


# The pydantic mypy plugin calls its generated __init__'s catch-all **kwargs too.
class FunctionCallSpec(WireModel):  # type: ignore[no-redef]
    fn: Label
    # The TS SDK leaves kwargs out for a function called without arguments: that is {}.
    kwargs: JSONObject = Field(default_factory=dict)
    channel: ContactChannel | None = None
    reject_options: Annotated[Options | None, AfterValidator(_unique_names)] = None
    state: JSONObject | None = None
    # When an undecided call fails closed (rejected as expired); see gateway.policies.timers.
    expires_at: Deadline | None = Field(default=None, description=DEADLINE_RULES)
    origin: Origin | None = None

    @model_serializer(mode="wrap")
    def _omit_unset_deadline(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self), "expires_at", "origin")


class HumanContactSpec(WireModel):
    msg: Annotated[str, StringConstraints(min_length=1)]
    subject: str | None = None
    channel: ContactChannel | None = None
    response_options: Annotated[Options | None, AfterValidator(_unique_names)] = None
    state: JSONObject | None = None
    expires_at: Deadline | None = Field(default=None, description=DEADLINE_RULES)
    origin: Origin | None = None

    @model_serializer(mode="wrap")
    def _omit_unset_deadline(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return _without_none(handler(self), "expires_at", "origin")


class FunctionCallIn(WireModel):
    run_id: Label
    call_id: CallId
    spec: FunctionCallSpec


class HumanContactIn(WireModel):
    run_id: Label
    call_id: CallId
    spec: HumanContactSpec


MAX_USER_INFO_FIELDS = 20
MAX_USER_INFO_KEY = 100
MAX_USER_INFO_TEXT = 1_000

# No NUL: PostgreSQL's JSON functions refuse a whole document holding one (even to read
# another field), and user_info is read that way (metrics, insights).
UserInfoText = Annotated[
    str, StringConstraints(max_length=MAX_USER_INFO_TEXT), AfterValidator(_no_nul)
]
UserInfoValue = UserInfoText | StrictBool | int | float | None


class UserInfo(WireModel):
    """Who decided, as an API caller describes them: a few flat fields of short text, shown
    in every channel and stored with the decision."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "maxProperties": MAX_USER_INFO_FIELDS,
            "propertyNames": {"maxLength": MAX_USER_INFO_KEY},
        },
    )
    __pydantic_extra__: dict[str, UserInfoValue] = Field(init=False)

    channel: UserInfoText | None = None
    user_id: UserInfoText | None = None
    name: UserInfoText | None = None
    email: UserInfoText | None = None

    @model_validator(mode="before")
    @classmethod
    def _few_short_flat_fields(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data  # pydantic says what type it wants
        if len(data) > MAX_USER_INFO_FIELDS:
            raise ValueError(
                f"user_info has {len(data)} fields; at most {MAX_USER_INFO_FIELDS} are allowed"
            )
        for key, value in data.items():
            if "\x00" in key:
                raise ValueError("user_info field names must not contain NUL (\\u0000)")
            if len(key) > MAX_USER_INFO_KEY:
                raise ValueError(
                    f"user_info field names may be {MAX_USER_INFO_KEY} characters at most; "
                    f"{key[:30]!r}… has {len(key)}"
                )
            if isinstance(value, dict | list):
                kind = "an object" if isinstance(value, dict) else "an array"
                raise ValueError(
                    f"user_info.{key} is {kind}; user_info holds one level of fields "
                    "(text, numbers, true/false or null)"
                )
            if isinstance(value, str) and len(value) > MAX_USER_INFO_TEXT:
                raise ValueError(
                    f"user_info.{key} has {len(value)} characters; "
                    f"at most {MAX_USER_INFO_TEXT} are allowed"
                )
        return data


class FunctionCallStatusIn(WireModel):
    """A decision on a function call. `approved` is true or false, never null or missing. A
    `reject_option_name` goes with `approved: false` only, and names one of the request's
    `reject_options` (else 422)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"approved": True, "comment": "go ahead"},
                {"approved": False, "comment": "not on a Friday"},
            ],
            "not": {
                "required": ["approved", "reject_option_name"],
                "properties": {
                    "approved": {"const": True},
                    "reject_option_name": {"type": "string"},
                },
            },
        }
    )

    approved: StrictBool  # "yes", "1" or null must not decide anything
    comment: Text | None = None
    reject_option_name: Id | None = None
    user_info: UserInfo | None = None

    @model_validator(mode="before")
    @classmethod
    def _approved_given(cls, data: Any) -> Any:
        # Null or missing: a clearer refusal than "field required" (other types: StrictBool's).
        if isinstance(data, dict) and data.get("approved") is None:
            raise ValueError("approved must be true or false")
        return data


# Python's blank characters (str.isspace): a response of only these is no response.
BLANK_CHARS = "\t\n\x0b\x0c\r\x1c-\x1f \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"


class HumanContactStatusIn(WireModel):
    """An answer to a question: a `response` that is not blank, or a `response_option_name`
    naming one of the request's `response_options` (else 422), or both (a response that is
    not blank is then the answer's text, else the option's)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"response": "eu-west-1"}],
            "anyOf": [
                {
                    "required": ["response"],
                    "properties": {"response": {"type": "string", "pattern": f"[^{BLANK_CHARS}]"}},
                },
                {
                    "required": ["response_option_name"],
                    "properties": {"response_option_name": {"type": "string"}},
                },
            ],
        }
    )

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
