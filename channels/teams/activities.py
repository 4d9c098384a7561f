"""What Teams sends the gateway, read into the core's words: pure functions over the Agents
SDK's `Activity` model (learn.microsoft.com/microsoftteams/platform/task-modules-and-cards/
cards/universal-actions-for-adaptive-cards/work-with-universal-actions-for-adaptive-cards).

- a click: an `invoke` named `adaptiveCard/action` whose `value.action` is the card's
  `Action.Execute` (its verb the callback id, its data the inputs' values);
- a person who installed the app or wrote to the bot in a 1:1 chat: the conversation
  reference a proactive message to them needs;
- a reply to a request's post in a channel thread (the bot is @mentioned in it).
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any

from microsoft_agents.activity import Activity, AdaptiveCardInvokeValue, ConversationReference

from gateway.seam import AnsweredIn, CallbackId, Responder, decode

ACTION_INVOKE = "adaptiveCard/action"
THREAD = ";messageid="  # a channel thread's conversation id: "<channel id>;messageid=<root>"
_MENTION = re.compile(r"<at[^>]*>.*?</at>", re.IGNORECASE | re.DOTALL)
_TAG = re.compile(r"<[^>]+>")


@dataclass(frozen=True)
class Click:
    callback: CallbackId
    inputs: dict[str, Any]  # the card's inputs, by id, as Teams sent them


def parse(payload: Any) -> Activity:
    """The activity in a request's JSON body (raises pydantic's ValidationError)."""
    return Activity.model_validate(payload)


def post_key(conversation_id: str, activity_id: str) -> str:
    """How the gateway names one post (`Sent.reply_key`): in a channel, exactly the
    conversation id of the post's thread."""
    return f"{conversation_id.split(THREAD)[0]}{THREAD}{activity_id}"


def clicked(activity: Activity) -> Click | None:
    """The card button an invoke activity is; None for any other activity or button."""
    if activity.type != "invoke" or activity.name != ACTION_INVOKE:
        return None
    value = AdaptiveCardInvokeValue.model_validate(activity.value or {})
    action = value.action
    if action is None or action.type != "Action.Execute":
        return None
    callback = decode(str(action.verb or ""))
    if callback is None:
        return None
    return Click(callback, dict(action.data or {}))


def tenant_of(activity: Activity) -> str | None:
    """The Entra tenant the activity comes from."""
    conversation = activity.conversation
    if conversation is not None and conversation.tenant_id:
        return str(conversation.tenant_id)
    data = activity.channel_data if isinstance(activity.channel_data, dict) else {}
    tenant = (data.get("tenant") or {}).get("id")
    return str(tenant) if tenant else None


def copy_of(activity: Activity) -> str | None:
    """The post a click or a reply came from (its `post_key`)."""
    conversation_id = str(activity.conversation.id)
    if activity.type == "invoke" and activity.reply_to_id:
        return post_key(conversation_id, str(activity.reply_to_id))
    return conversation_id if THREAD in conversation_id else None


def responder(activity: Activity) -> Responder | None:
    """Who acted: their Entra (AAD) object id, which the routing config names people by;
    None without one (a guest of another directory, a bot)."""
    person = activity.from_property
    if person is None or not person.aad_object_id:
        return None
    extra = {"teams_user_id": str(person.id)} if person.id else {}
    tenant = tenant_of(activity)
    if tenant:
        extra["tenant_id"] = tenant
    name = str(person.name or person.aad_object_id)
    ident = str(person.aad_object_id)
    return Responder(AnsweredIn.TEAMS, ident, name, extra=extra, copy=copy_of(activity))


def personal_reference(activity: Activity) -> tuple[str, ConversationReference] | None:
    """(their AAD object id, the reference) when a person installed the app, or wrote to the
    bot, in a 1:1 chat: what a proactive message to them needs."""
    conversation = activity.conversation
    person = activity.from_property
    if conversation is None or conversation.conversation_type != "personal":
        return None
    if person is None or not person.aad_object_id:
        return None
    if activity.type not in ("conversationUpdate", "installationUpdate", "message", "invoke"):
        return None
    reference = activity.get_conversation_reference()
    reference.activity_id = None  # a new message, not a reply to this one
    return str(person.aad_object_id), reference


def thread_reply(activity: Activity) -> tuple[str, str] | None:
    """(the post's key, the text) of a person's message in a thread of a channel."""
    conversation_id = str(activity.conversation.id)
    if activity.type != "message" or THREAD not in conversation_id:
        return None
    return conversation_id, reply_text(str(activity.text or ""))


def reply_text(text: str) -> str:
    """A message's words: the `<at>` mentions (of the bot) and the markup Teams adds gone."""
    return html.unescape(_TAG.sub("", _MENTION.sub("", text))).strip()
