"""A reply's own words (`gateway.seam.replies`): what a mail client or chat added is cut only
where it really is.

- An Outlook header block ("From: / Sent: / To: / Subject:"), or an "Original Message" or
  forwarded marker right above one, ends the reply: below is the old message.
- A quote under a real attribution line ("On <date with a year or time, or an address>
  ... wrote:" then `>` lines) is skipped; the person's words may continue below it.
- A known client's footer line ("Sent from my iPhone") and a separator line are skipped.
- A signature (after "-- ", or starting at the sender's own name, or a closing such as
  "Thanks,\\nBob") is cut when every line of it looks like one: names, titles, companies,
  phone numbers, addresses. "use the replica, not prod" under a name is text.
- Anything else is the person's: "sent from the beach, do not run…", "see what Bob wrote:",
  and `>` lines without a real attribution, which are someone else's words (`quoting`).
"""

from __future__ import annotations

import re

from gateway.seam.reply_words import HOLD, NO, cover, tokens

_ORIGINAL = re.compile(
    r"-{3,}\s*(?:original message|forwarded message|ursprüngliche nachricht"
    r"|message d'origine|mensaje original|messaggio originale|oorspronkelijk bericht)\s*-{3,}"
    r"|begin forwarded message:|anfang der weitergeleiteten nachricht:",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"_{8,}|-{8,}|={8,}")
_DELIMITER = "--"  # RFC 3676's "-- ", stripped
_DEVICE = (
    r"(?:my |mein(?:em)? |mon |mi |mijn |il mio |dal mio |do meu |meu )?"
    r"(?:iphone|ipad|ipod|android(?: phone| device)?|galaxy(?: \w+)?|samsung(?: \w+){0,3}"
    r"|blackberry®?(?: \w+){0,2}|huawei(?: \w+){0,2}|pixel(?: \w+){0,2}|mobile(?: device)?"
    r"|phone|smartphone|tablet|handy|portable|m[oó]vil|telefoon|cellulare|celular)"
)
_FOOTER = re.compile(
    rf"(?:sent|envoy[ée]|enviado|verstuurd|verzonden|inviato|gesendet|отправлено)"
    rf" (?:from|with|via|von|de|depuis|desde|do|vanaf|van|da|dal|с) {_DEVICE}"
    r"|sent from (?:mail for windows(?: \d+)?|outlook(?: for \w+)?|yahoo mail(?: (?:on|for) \w+)?"
    r"|proton ?mail|gmail mobile|aol mobile mail|samsung mail)"
    r"|sent with (?:proton ?mail secure email|spark)|sent via superhuman"
    r"|get outlook for \w+|outlook für \w+ beziehen|obtener outlook para \w+"
    r"|télécharger outlook pour \w+"
    rf"|von {_DEVICE} gesendet|iphoneから送信|从我的iphone发送|發自我的iphone",
    re.IGNORECASE,
)
_ATTRIBUTION_VERB = (
    r"(?:wrote|schrieb|a écrit|escribió|schreef|ha scritto|escreveu|skrev|napisał|napisała"
    r"|написал|написала|написал\(а\))"
)
_ATTRIBUTION = re.compile(
    rf"(?:(?:on|am|le|el|op|il|em|den|w dniu|в)\s.{{0,250}}\b{_ATTRIBUTION_VERB}\b.{{0,120}}"
    rf"|.{{0,150}}<[^<>\s@]+@[^<>\s]+>\)?\s*{_ATTRIBUTION_VERB})\s?:",
    re.IGNORECASE,
)
_WRAPPING = re.compile(r"(?:on|am|le|el|op|il|em|den|w dniu|в)\s", re.IGNORECASE)
# What a client's attribution names and a person's "On 2nd thought, Bob wrote:" does not:
# a year, a time of day, a numeric date or an address.
_DATED = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}:\d\d\b|\b\d{1,2}[./]\d{1,2}[./]\d{2,4}\b|@")
_HEADER = re.compile(
    r"\**(from|von|de|van|da|от|sent|date|gesendet|datum|envoyé|enviado|verzonden|inviato"
    r"|to|an|à|para|aan|a|кому|cc|subject|betreff|objet|asunto|onderwerp|oggetto|тема)\s?:\**\s",
    re.IGNORECASE,
)
_FROM = {"from", "von", "de", "van", "da", "от"}
SIGNATURE_LINES = 12  # a signature block is looked for among the last lines only
_WHEN = {"sent", "date", "gesendet", "datum", "envoyé", "enviado", "verzonden", "inviato"}


def own_lines(text: str) -> tuple[list[str], bool]:
    """The reply's own lines, and whether it has `>` lines without a real attribution above
    them (kept: someone else's words, which a yes may be agreeing to)."""
    lines = text.splitlines()
    kept: list[str] = []
    quoting = False
    i = 0
    while i < len(lines) and not _original_starts(lines, i):
        line = lines[i].strip()
        span = _attribution(lines, i)
        if span:  # a real attribution and the quote under it; own words may follow
            i = _past_quote(lines, i + span)
        elif _FOOTER.fullmatch(line.rstrip(".")) or _SEPARATOR.fullmatch(line):
            i += 1
        elif line == _DELIMITER:
            end = _block_end(lines, i + 1)
            block = [later.strip() for later in lines[i + 1 : end] if later.strip()]
            i = end if all(map(signature_line, block)) else i + 1
        else:
            quoting = quoting or quoted(lines[i])
            kept.append(lines[i])
            i += 1
    return kept, quoting


def new_text(text: str, *, signer: str | None = None) -> str:
    """A reply's own words, as one text, without its sign-off (`signer`: the sender's
    display name, whose signature block is cut too)."""
    return "\n".join(without_sign_off(own_lines(text)[0], signer)).strip()


def quoted(line: str) -> bool:
    return line.lstrip().startswith(">")


def _past_quote(lines: list[str], i: int) -> int:
    while i < len(lines) and (quoted(lines[i]) or not lines[i].strip()):
        i += 1
    return i


def _block_end(lines: list[str], i: int) -> int:
    """Where a signature block that starts at lines[i] ends: a quote, an attribution, the
    old message, or the end."""
    while i < len(lines) and not (
        quoted(lines[i])
        or _attribution(lines, i)
        or _original_starts(lines, i)
        or _FOOTER.fullmatch(lines[i].strip().rstrip("."))
    ):
        i += 1
    return i


def _original_starts(lines: list[str], i: int) -> bool:
    """The old message starts at lines[i]: a header block, or a marker right above one."""
    following = [line.strip() for line in lines[i : i + 8] if line.strip()]
    if not following:
        return False
    if _ORIGINAL.fullmatch(following[0]):  # a marker, then at least From: and Date:
        return _header_block(following[1:7], least=2)
    if _SEPARATOR.fullmatch(following[0]):
        return _header_block(following[1:7])
    return _header_block(following[:6])


def _header_block(lines: list[str], *, least: int = 3) -> bool:
    """An Outlook-style "From: / Sent: / To: / Subject:" block starts at lines[0]."""
    names = [m[1].lower() for line in lines if (m := _HEADER.match(line))]
    return (
        bool(lines)
        and _HEADER.match(lines[0]) is not None
        and names[0] in _FROM
        and bool(_WHEN & set(names))
        and len(names) >= least
    )


def _attribution(lines: list[str], i: int) -> int:
    """How many lines a real attribution at lines[i] spans ("On ... wrote:" may wrap), if
    a quote (or nothing) follows it; else 0."""
    for span in (1, 2, 3):
        joined = " ".join(line.strip() for line in lines[i : i + span])
        if len(joined) > 400 or not all(line.strip() for line in lines[i : i + span]):
            return 0
        if span > 1 and not _WRAPPING.match(lines[i].strip()):
            return 0
        if _ATTRIBUTION.fullmatch(joined) and _DATED.search(joined):
            rest = [line for line in lines[i + span :] if line.strip()]
            return span if not rest or quoted(rest[0]) else 0
    return 0


# --- sign-offs and greetings ---------------------------------------------------------------

_CLOSING = re.compile(
    r"(?:thanks|thank you|many thanks|thx|cheers|best|best regards|kind regards|regards"
    r"|warm regards|br|sincerely|viele grüße|liebe grüße|beste grüße|vg|lg|gruß|grüße"
    r"|mit freundlichen grüßen|cordialement|bien à vous|merci|saludos|un saludo|atentamente"
    r"|met vriendelijke groet|groeten|mvg|cordiali saluti|saluti|atenciosamente|abraços"
    r"|с уважением|спасибо)\s*[,.!]?",
    re.IGNORECASE,
)
_CAPITALISED = r"(?:[A-ZÀ-ÝА-Я][\w'.-]*|[A-Z]\.)"
_NAME = re.compile(rf"[-–—~]?\s*{_CAPITALISED}(?:\s+{_CAPITALISED}){{0,2}}")
# What a signature line may hold besides capitalised words: a phone number, an address, a
# link, and the small words and titles people write in lower case.
_CONTACT = re.compile(r"\+?\d[\d\s().-]{5,}\d|\S+@\S+|https?://\S+|www\.\S+")
_SMALL_WORDS = """
    of and the for at in on to de la le du des van von der die das den und y e et da do
    team lead manager engineer engineering director head officer developer architect
    platform operations security infrastructure product support office inc ltd llc gmbh
    corp call duty she her he him they them
"""
_SMALL = frozenset(_SMALL_WORDS.split())


def without_sign_off(lines: list[str], signer: str | None) -> list[str]:
    """`lines` up to the sender's signature block, or a closing and the name under it
    (blank and quoted lines are kept where they are, and never judged)."""
    filled = [i for i, line in enumerate(lines) if line.strip() and not quoted(line)]
    kept = _signed_from([lines[i].strip() for i in filled], signer)
    return lines[: filled[kept]] if kept < len(filled) else lines


def _signed_from(lines: list[str], signer: str | None) -> int:
    """Where the sign-off starts among non-blank `lines` (their count when there is none)."""
    for j in range(max(1, len(lines) - SIGNATURE_LINES), len(lines)):
        below = lines[j + 1 :]
        if signer and _names_signer(lines[j], signer) and all(map(signature_line, below)):
            return _signed_from(lines[:j], None)
    for j in range(max(1, len(lines) - 5), len(lines)):
        below = lines[j + 1 :]  # a name, then a title, a company, a phone number...
        named = not below or _NAME.fullmatch(below[0]) is not None
        if _CLOSING.fullmatch(lines[j]) and named and all(map(signature_line, below)):
            return j
    return len(lines)


def _names_signer(line: str, signer: str) -> bool:
    """The line is the sender's name (or first name, and a surname), alone or with a short
    title: "Alice Smith | Platform lead", "- Alice"."""
    full = " ".join(signer.split())
    if not full:
        return False
    names = "|".join(re.escape(name) for name in (full, full.split()[0]))
    name = rf"[-–—~]?\s*(?i:{names})(?:\s+{_CAPITALISED}){{0,2}}"
    found = re.fullmatch(rf"{name}\s*(?:[|,–—-]\s*([^:;!?()]{{1,60}}))?", line)
    return found is not None and (found[1] is None or _title(found[1]))


def _title(text: str) -> bool:
    words = text.split()
    return len(words) <= 5 and not _holds_back(text)


def signature_line(line: str) -> bool:
    """A line a signature block may hold: contact details, or capitalised words (a name, a
    title, a company) with the small words they need; never a question, a condition, a
    refusal or a postscript."""
    if _holds_back(line) or line.casefold().startswith(("ps", "p.s")):
        return False
    words = re.findall(r"[^\W\d_][\w'’.-]*", _CONTACT.sub(" ", line))
    return all(w[0].isupper() or w.casefold().rstrip(".") in _SMALL for w in words if len(w) > 2)


def _holds_back(text: str) -> bool:
    words = tokens(text)
    return "?" in words or bool(HOLD & set(words)) or any(k == NO for k, _ in cover(words))


_GREETING = (
    r"(?i:hi|hello|hey|hiya|dear|morning|good (?:morning|afternoon|evening)|hallo|moin"
    r"|servus|bonjour|salut|hola|buenos días|buongiorno|ciao|olá|oi|goedemorgen|hoi|привет"
    r"|здравствуйте|こんにちは|你好|مرحبا)"
)
# Whom a greeting names: capitalised names, or everyone ("Hi team", "Hello all").
_WHOM = rf"(?:\s+(?:{_CAPITALISED}|(?i:team|all|folks|everyone|there|guys)))"
_GREETING_LINE = re.compile(_GREETING + _WHOM + r"{0,2}\s*[,!:.]?")
_GREETING_PREFIX = re.compile(_GREETING + _WHOM + r"{0,2}\s*[,!:]\s*")


def without_greeting(lines: list[str]) -> list[str]:
    if len(lines) > 1 and _GREETING_LINE.fullmatch(lines[0]):
        return lines[1:]
    greeting = _GREETING_PREFIX.match(lines[0]) if lines else None
    return [lines[0][greeting.end() :], *lines[1:]] if greeting else lines
