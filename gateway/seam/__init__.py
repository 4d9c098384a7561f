"""The seam: the one page a channel is written against.

A channel imports from `gateway` only this package (and `gateway.errors`,
`gateway.vocabulary`, `gateway.lifecycle`): the protocols it implements, the context it is
built with (the answer path, its records, keys, supervised connections, the console's door),
the request views it renders, the callback ids its buttons carry, the sentences every channel
shows, the reply reader, and the per-delivery platform reference (`Sent.reply_key`) that the
core stores without knowing what it means. `tests/unit/test_layers.py` holds channels to it.
"""

from gateway.seam.answers import Answered, Form, Refusal, Refused
from gateway.seam.callbacks import BUTTON_PATTERN, CallbackId, Verb, decode, encode
from gateway.seam.channel import Channel, Checkable, Connected, Noted, Remindable, Routed
from gateway.seam.connections import (
    ChannelState,
    Connection,
    Health,
    Link,
    Session,
    State,
    explain,
    health_after,
    require_up,
)
from gateway.seam.console import (
    Console,
    ConsolePerson,
    DeliveryView,
    EndpointView,
    EventView,
    Filters,
    LiveSession,
    LoginUse,
    PolicyNode,
    RuleView,
    Sees,
    Standing,
    TimerView,
    WebhookJobView,
)
from gateway.seam.context import Answers, ChannelContext, Keys, Supervise
from gateway.seam.people import (
    BY_LINK,
    BY_LIST,
    Responder,
    already_decided,
    default_rejection,
    plain_when,
    plain_who,
)
from gateway.seam.records import Records, ResumePoint
from gateway.seam.replies import Reading, Verdict, first_line, new_text, read_reply
from gateway.seam.routes import responses
from gateway.seam.sentences import (
    CUT,
    describe,
    grant_note,
    origin_line,
    progress_line,
    reminder_text,
    shorten,
    spoken,
)
from gateway.seam.settings import EnvSettings
from gateway.seam.targets import Target, responders_through
from gateway.seam.views import Progress, RequestView, Sent
from gateway.vocabulary import AnsweredIn, ChannelName

__all__ = [
    "BUTTON_PATTERN",
    "BY_LINK",
    "BY_LIST",
    "CUT",
    "Answered",
    "AnsweredIn",
    "Answers",
    "CallbackId",
    "Channel",
    "ChannelContext",
    "ChannelName",
    "ChannelState",
    "Checkable",
    "Connected",
    "Connection",
    "Console",
    "ConsolePerson",
    "DeliveryView",
    "EndpointView",
    "EnvSettings",
    "EventView",
    "Filters",
    "Form",
    "Health",
    "Keys",
    "Link",
    "LiveSession",
    "LoginUse",
    "Noted",
    "PolicyNode",
    "Progress",
    "Reading",
    "Records",
    "Refusal",
    "Refused",
    "Remindable",
    "RequestView",
    "Responder",
    "ResumePoint",
    "Routed",
    "RuleView",
    "Sees",
    "Sent",
    "Session",
    "Standing",
    "State",
    "Supervise",
    "Target",
    "TimerView",
    "Verb",
    "Verdict",
    "WebhookJobView",
    "already_decided",
    "decode",
    "default_rejection",
    "describe",
    "encode",
    "explain",
    "first_line",
    "grant_note",
    "health_after",
    "new_text",
    "origin_line",
    "plain_when",
    "plain_who",
    "progress_line",
    "read_reply",
    "reminder_text",
    "require_up",
    "responders_through",
    "responses",
    "shorten",
    "spoken",
]
