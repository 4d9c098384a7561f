"""Free-text answers to an approval (an email reply, a Slack thread reply): approve or not,
and why, in words the person can be shown.

Only a plain yes approves. First the reply's own words are cut from what follows them
(quotes, signatures, "Sent from my ..." lines, quoted header blocks). Then the reply is
normalised (case, emoji skin tones, Slack shortcodes, punctuation) and split into words:
- one word or phrase anywhere that negates, conditions or defers ("not", "but", "if",
  "until", "wait", "maybe", a question mark) vetoes;
- otherwise the intent line (the first, after a greeting) approves when it is made only of
  approving phrases ("yes", "LGTM", "go ahead", "+1", 👍) and politeness ("thanks", "please").
Everything else rejects, with the reply as the reason: that is how a person gives the agent
feedback. A false rejection only sends feedback; a false approval runs a dangerous function.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from gateway.seam.sentences import shorten

QUOTE_LIMIT = 80  # characters of the reply quoted back to the person

Phrase = tuple[str, ...]


def _phrases(table: str) -> frozenset[Phrase]:
    """Phrases separated by "|" (a line break is a space), each a tuple of words."""
    return frozenset(tuple(phrase.split()) for phrase in table.split("|") if phrase.strip())


def _words(table: str) -> frozenset[str]:
    return frozenset(table.split())


APPROVING = _phrases("""
    approve | approved | approving | i approve | approve it | approved it | approval granted |
    accept | accepted | confirm | confirmed | i confirm | agree | agreed | i agree | granted |
    yes | yeah | yea | yep | yup | aye | yes please | yes sir | affirmative | absolutely |
    definitely | certainly | sure | sure thing | for sure | of course | alright | all right |
    ok | okay | okey | okie | okayed | ok'd | o k | lgtm | looks good | looks good to me |
    looks great | looks fine | sounds good | sounds great | all good | good to go |
    fine by me | fine with me | that's fine | thats fine | works for me |
    go | go ahead | go for it | proceed | carry on | do it | run it | ship it | shipit |
    send it | let's go | lets go | let's do it | lets do it | make it so | green light |
    +1 | 👍 | ✅ | ✔ | ☑ | 👌 | 🆗 | 🚀 | 🚢 | 💯
""")
POLITE = _phrases("""
    thanks | thank you | thank u | thx | thnx | ty | tyvm | please | pls | plz | cheers |
    appreciated | great | awesome | perfect | nice | cool | excellent | good |
    hi | hello | hey | all | team | folks | from me | by me | with me | for me | from my side |
    🙏 | 🙂 | 😊 | 😀 | 😃 | 😄 | 🎉 | ❤ | 🙌
""")
# Phrases that contain a veto word but doubt nothing; removed before the veto looks.
BENIGN = _phrases("no problem | no worries | not a problem | no prob")
VETO = (
    # negation, or the opposite decision
    _words("no not never nope nah nay none nor cannot without -1 👎 ❌ ⛔ 🚫 🛑 ✋")
    | _words("reject rejected deny denied decline declined veto refuse stop cancel abort")
    # a condition
    | _words("but however though although except unless if only provided assuming once when")
    # a deferral
    | _words("wait hold pause later tomorrow tonight soon next after before until till til yet")
    | _words("first postpone defer delay hang sec moment ⏸ ⏳ ⌛")
    | _words("monday tuesday wednesday thursday friday saturday sunday weekend eod")
    # doubt
    | _words("maybe perhaps possibly probably might unsure hmm hm idk guess 🤔 🤷 ? \u00bf")
)
_LONGEST = max(len(phrase) for phrase in APPROVING | POLITE | BENIGN)


@dataclass(frozen=True)
class Reading:
    """How a reply was read: approved or not, the words judged, and why."""

    approved: bool
    said: str  # the words judged, on one line, cut to QUOTE_LIMIT
    why: str  # 'it says "but"', "it asks a question", "a plain yes", ...
    rest: str | None = None  # an approval's following lines (its comment)

    @property
    def explanation(self) -> str:
        """'read as an approval: "LGTM 👍"' or 'read as a rejection: it says "but"'."""
        if self.approved:
            return f'read as an approval: "{self.said}"'
        return f"read as a rejection: {self.why}"

    @property
    def sentence(self) -> str:
        """What to tell the person: 'We read your reply as an approval ("LGTM 👍").'"""
        if self.approved:
            return f'We read your reply as an approval ("{self.said}").'
        said = f' ("{self.said}")' if self.said else ""
        return f"We read your reply as a rejection{said}: {self.why}."


def read_reply(text: str) -> Reading:
    """Read a free-text answer to an approval (any channel's raw reply text)."""
    own = new_text(text)
    lines = [line.strip() for line in own.splitlines() if line.strip()]
    if not lines:
        return Reading(False, "", "it is empty")
    everything = _quote(" ".join(lines))
    veto = _veto(_without_benign(tokens(own)))
    if veto is not None:
        why = "it asks a question" if veto in ("?", "¿") else f'it says "{veto}"'
        return Reading(False, everything, why)
    index = _intent_index(lines)
    words = _without_benign(tokens(_without_greeting(lines[index])))
    if not any(phrase in APPROVING for phrase in _cover(words) or []):
        return Reading(False, everything, "it is not a plain yes")
    rest = "\n".join(own.splitlines()[_line_number(own, lines[index]) + 1 :]).strip()
    return Reading(True, _quote(lines[index]), "a plain yes", rest or None)


def first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")


# --- the reply's own words --------------------------------------------------------------

_ALONE = re.compile(
    r"--|_{8,}"  # RFC 3676 signature delimiter "-- "; Outlook's separator line
    r"|-{3,}\s*(?:original message|forwarded message)\s*-{3,}|begin forwarded message:"
    r"|(?:sent|gesendet|envoy\u00e9)\s+(?:from|with|via|von|depuis)\s.{0,60}"
    r"|get outlook for .{0,30}"
    r"|.{0,300}\b(?:wrote|schrieb|a \u00e9crit|escribi\u00f3):",
    re.IGNORECASE,
)
_ON = re.compile(r"on\s.{0,300}", re.IGNORECASE)  # "On <date>, <someone>" (wrote: may wrap)
_HEADER = re.compile(r"\**(from|von|sent|date|gesendet|datum|to|an|cc|subject|betreff):\**\s")


def new_text(text: str) -> str:
    """A reply's own words: everything from the first quote or signature marker on is
    removed, and so are `>` quoted lines."""
    lines = text.splitlines()
    end = next((i for i in range(len(lines)) if _starts_quote(lines, i)), len(lines))
    kept = [line for line in lines[:end] if not line.lstrip().startswith(">")]
    return "\n".join(kept).strip()


def _starts_quote(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if _ALONE.fullmatch(line):
        return True
    after = [later.strip() for later in lines[i : i + 3]]
    if _ON.fullmatch(line) and any(later.endswith("wrote:") for later in after):
        return True
    return _header_block([later.strip().lower() for later in lines[i : i + 6]])


def _header_block(lines: list[str]) -> bool:
    """An Outlook-style "From: / Sent: / To: / Subject:" block starts at lines[0]."""
    names = [m[1] for line in lines if (m := _HEADER.match(line))]
    return (
        _HEADER.match(lines[0]) is not None
        and names[0] in ("from", "von")
        and bool({"sent", "date", "gesendet", "datum"} & set(names))
        and bool({"to", "an", "cc", "subject", "betreff"} & set(names))
    )


# --- words ------------------------------------------------------------------------------

_SHORTCODES = {  # Slack sends emoji as :shortcodes:
    ":+1:": "👍",
    ":thumbsup:": "👍",
    ":-1:": "👎",
    ":thumbsdown:": "👎",
    ":white_check_mark:": "✅",
    ":heavy_check_mark:": "✔",
    ":ballot_box_with_check:": "☑",
    ":ok_hand:": "👌",
    ":ok:": "🆗",
    ":rocket:": "🚀",
    ":ship:": "🚢",
    ":100:": "💯",
    ":pray:": "🙏",
    ":slightly_smiling_face:": "🙂",
    ":smile:": "😄",
    ":tada:": "🎉",
    ":x:": "❌",
    ":no_entry:": "⛔",
    ":octagonal_sign:": "🛑",
    ":raised_hand:": "✋",
    ":thinking_face:": "🤔",
}
# Skin tones, variation selectors and joiners change no meaning: 👍🏽 is 👍.
_MODIFIERS = re.compile(r"[\U0001F3FB-\U0001F3FF\uFE0E\uFE0F\u200D]|:skin-tone-\d:")
_SHORTCODE = re.compile(r":[a-z0-9_+-]+:")
# A "?" in a link or a "no" in no-reply@ doubts nothing; matches start only at a word's start.
_LINKS = re.compile(r"(?:https?://|www\.|mailto:)\S+|(?<!\S)[^\s@]*@\S+")
_APOSTROPHES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'"})
_TOKEN = re.compile(r"(?<![\w+-])[+-]1(?!\d)|[^\W_]+(?:'[^\W_]+)*|[^\w\s]")
_GREETING = r"(?:hi|hello|hey|hiya|dear|morning|good (?:morning|afternoon|evening))\b"
_GREETING_LINE = re.compile(_GREETING + r"(?:\s+[^\s,!:.]+){0,2}\s*[,!:.]?", re.IGNORECASE)
_GREETING_PREFIX = re.compile(_GREETING + r"(?:\s+[^\s,!:.]+){0,2}\s*[,!:]\s*", re.IGNORECASE)


def tokens(text: str) -> list[str]:
    """Normalised words, emoji and question marks; other punctuation is dropped."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_APOSTROPHES)
    text = _MODIFIERS.sub("", _LINKS.sub(" ", text))
    text = _SHORTCODE.sub(lambda code: _SHORTCODES.get(code[0], code[0]), text)
    return [token for token in _TOKEN.findall(text) if not _punctuation(token)]


def _punctuation(token: str) -> bool:
    """One punctuation or math symbol ("," "-" ":" "="); never "?" nor an emoji."""
    if len(token) != 1 or token in "?¿":
        return False
    category = unicodedata.category(token)
    return category[0] == "P" or category in ("Sm", "Sk")


def _without_benign(words: list[str]) -> list[str]:
    kept: list[str] = []
    for word in words:
        kept.append(word)
        for phrase in BENIGN:
            if tuple(kept[-len(phrase) :]) == phrase:
                del kept[-len(phrase) :]
    return kept


def _veto(words: list[str]) -> str | None:
    # Any contraction with n't ("don't", "can't", "won't") negates.
    found = (w for w in words if w in VETO or w.endswith("n't") or w in ("dont", "cant", "wont"))
    return next(found, None)


def _cover(words: list[str]) -> list[Phrase] | None:
    """The words as approving and polite phrases, longest first; None if some are neither."""
    phrases: list[Phrase] = []
    i = 0
    while i < len(words):
        for size in range(min(_LONGEST, len(words) - i), 0, -1):
            phrase = tuple(words[i : i + size])
            if phrase in APPROVING or phrase in POLITE:
                phrases.append(phrase)
                i += size
                break
        else:
            return None
    return phrases


def _intent_index(lines: list[str]) -> int:
    """The line that carries the intent: the first, unless it is only a greeting."""
    greeting = len(lines) > 1 and _GREETING_LINE.fullmatch(lines[0]) is not None
    return 1 if greeting else 0


def _without_greeting(line: str) -> str:
    greeting = _GREETING_PREFIX.match(line)
    return line[greeting.end() :] if greeting else line


def _line_number(text: str, line: str) -> int:
    return next(i for i, raw in enumerate(text.splitlines()) if raw.strip() == line)


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return shorten(text, QUOTE_LIMIT)
