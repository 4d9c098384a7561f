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

from gateway.seam.reply_words import HOLD, HOLDS, NO, cover, tokens

_ORIGINAL = re.compile(
    r"-{3,}\s*(?:original message|forwarded message|ursprüngliche nachricht"
    r"|message d'origine|mensaje original|messaggio originale|oorspronkelijk bericht)\s*-{3,}"
    r"|begin forwarded message:|anfang der weitergeleiteten nachricht:",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"_{8,}|-{8,}|={8,}")
_DELIMITER = "--"  # RFC 3676's "-- ", stripped
_DEVICE = (  # the device, and nothing after it
    r"(?:my |mein(?:em)? |mon |mi |mijn |il mio |dal mio |do meu |meu )?"
    r"(?:iphone|ipad|ipod|android(?: phone| device| tablet)?"
    r"|samsung(?: galaxy)?(?: s\d{1,2}(?: ultra| plus|\+)?)?(?: smartphone| phone| device| tablet)?"
    r"|galaxy(?: s\d{1,2}(?: ultra| plus|\+)?)?(?: smartphone)?"
    r"|blackberry®?(?: smartphone)?|huawei(?: phone)?|pixel(?: \d{1,2}(?: pro)?)?"
    r"|mobile(?: device| phone)?|phone|smartphone|tablet|handy|portable|m[oó]vil|telefoon"
    r"|cellulare|celular)"
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
    r"|написал|написала|написал\(а\)|пишет)"
)
_ATTRIBUTION = re.compile(
    rf"(?:(?:on|am|le|el|op|il|em|den|w dniu|в)\s.{{0,250}}\b{_ATTRIBUTION_VERB}\b.{{0,120}}"
    rf"|.{{0,150}}<[^<>\s@]+@[^<>\s]+>\)?\s*{_ATTRIBUTION_VERB}"
    rf"|\d{{1,2}}[./]\d{{1,2}}[./]\d{{2,4}}\b.{{0,200}}\b{_ATTRIBUTION_VERB})\s?:",
    re.IGNORECASE,
)
_WRAPPING = re.compile(r"(?:on|am|le|el|op|il|em|den|w dniu|в)\s", re.IGNORECASE)
# What a client's attribution names and a person's "On 2nd thought, Bob wrote at 9:30:" does
# not: a year, and a time of day or an address.
_YEAR = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}[./]\d{1,2}[./]\d\d\b")
_TIME_OR_ADDRESS = re.compile(r"\b\d{1,2}[:.h]\d\d\b|@")
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
            i = end if end > i and all(map(signature_line, block)) else i + 1
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
    old message, another delimiter, or the end; looked for over SIGNATURE_LINES lines only
    (a longer block is no signature, and the search stays linear)."""
    for j in range(i, min(len(lines), i + SIGNATURE_LINES + 1)):
        line = lines[j].strip()
        ends = quoted(lines[j]) or line == _DELIMITER or _FOOTER.fullmatch(line.rstrip("."))
        if ends or _attribution(lines, j) or _original_starts(lines, j):
            return j
    return len(lines) if len(lines) <= i + SIGNATURE_LINES else i


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


def _dated(attribution: str) -> bool:
    """A client's attribution: a year, a time or an address, and nothing that doubts,
    refuses or holds back ("On 23 Nov 2026, no, as Dana wrote:" is the person's)."""
    if not (_YEAR.search(attribution) and _TIME_OR_ADDRESS.search(attribution)):
        return False
    words = tokens(re.sub(r"<[^<>]*>|\([^()]*\)", " ", attribution))
    return "?" not in words and not any(k in (NO, HOLDS) for k, _ in cover(words))


def _header_block(lines: list[str], *, least: int = 3) -> bool:
    """An Outlook-style "From: / Sent: / To: / Subject:" block starts at lines[0]."""
    found = [(m[1].lower(), line[m.end() :]) for line in lines if (m := _HEADER.match(line))]
    names = [name for name, _ in found]
    dated = any(name in _WHEN and _YEAR.search(value) for name, value in found)
    return (
        bool(lines)
        and _HEADER.match(lines[0]) is not None
        and names[0] in _FROM
        and dated  # "From: 22:00 / To: 23:30 / Date: Sat" is a time window, not a header
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
        if _ATTRIBUTION.fullmatch(joined) and _dated(joined):
            rest = [line for line in lines[i + span :] if line.strip()]
            return span if not rest or quoted(rest[0]) else 0
    return 0


# --- sign-offs and greetings ---------------------------------------------------------------
#
# A signature is cut only when every line of it has a signature's shape: a name, a title or
# company in capitalised words, or contact details. Anything an instruction could be ("Use
# The Replica", "NOT ON PROD", "call me", "jk", an emoji) is not one, and is read.

_CLOSING = re.compile(
    r"(?:thanks|thank you|many thanks|thx|cheers|best|best regards|kind regards|regards"
    r"|warm regards|br|sincerely|viele grüße|liebe grüße|beste grüße|vg|lg|gruß|grüße"
    r"|mit freundlichen grüßen|cordialement|bien à vous|merci|saludos|un saludo|atentamente"
    r"|met vriendelijke groet|groeten|mvg|cordiali saluti|saluti|atenciosamente|abraços"
    r"|с уважением|спасибо)\s*[,.!]?",
    re.IGNORECASE,
)
# A name word: capitalised, lower case after ("Alice", "O'Neil", "Jean-Luc"), or an initial.
_NAME_WORD = re.compile(r"[^\W\d_](?:[^\W\d_]|['’-])+|[A-Z]\.?")
_ON_CALL = re.compile(r"\bon[- ]call\b", re.IGNORECASE)
_PRONOUNS = re.compile(r"\b(?:she/her|he/him|they/them)(?:/\w+)?\b", re.IGNORECASE)
_CONTACT = re.compile(
    r"(?:(?:t|m|p|f|e|w|tel|phone|mobile|cell|fax|email|e-mail|web)\s?[.:]\s*)?"
    r"(?:\+?\(?\d[\d\s().-]{6,}\d|[\w.+-]+@[\w-]+(?:\.[\w-]+)+|(?:https?://|www\.)\S+)",
    re.IGNORECASE,
)
_SMALL_WORDS = """
    of and the for at in on to de la le du des van von der die das den und y e et da do &
    team lead manager engineer engineering director head officer developer architect
    platform operations security infrastructure product support office she her he him they
    them
"""
_SMALL = frozenset(_SMALL_WORDS.split())
# Words of instructions, retractions and notes, which no signature line holds.
_NOT_SIGNATURE_WORDS = """
    not no never none nor don't dont without only just use run check ask call wait hold stop
    ignore cancel cancelled canceled revoked update edit kidding jk nvm dry prod production
    staging replica backup table drop delete please see fyi nb ps note warning careful first
    later tomorrow today before after until yet maybe unless if but keep make sure is are was
"""
_NOT_SIGNATURE = frozenset(_NOT_SIGNATURE_WORDS.split())
_ACRONYM = re.compile(r"[A-Z]{2,4}|[A-Z][a-z]+[A-Z][A-Za-z]*")  # VP, SRE, GmbH, DevOps
_ABBREVIATION = re.compile(r"(?:ltd|inc|co|corp|jr|sr|dr)\.", re.IGNORECASE)


def without_sign_off(lines: list[str], signer: str | None) -> list[str]:
    """`lines` up to the sender's signature block, or a closing and the name under it
    (blank and quoted lines are not judged; quoted ones below it are kept)."""
    filled = [i for i, line in enumerate(lines) if line.strip() and not quoted(line)]
    kept = _signed_from([lines[i].strip() for i in filled], signer)
    if kept == len(filled):
        return lines
    cut = filled[kept]
    return lines[:cut] + [line for line in lines[cut:] if quoted(line)]


def _signed_from(lines: list[str], signer: str | None) -> int:
    """Where the sign-off starts among non-blank `lines` (their count when there is none)."""
    for j in range(max(1, len(lines) - SIGNATURE_LINES), len(lines)):
        if signer and _names_signer(lines[j], signer) and _signature(lines[j + 1 :]):
            return _signed_from(lines[:j], None)
    for j in range(max(1, len(lines) - 5), len(lines)):
        below = lines[j + 1 :]  # a name, then a title, a company, a phone number...
        named = not below or _name(below[0], signer) or _name(below[0], None)
        if _CLOSING.fullmatch(lines[j]) and named and _signature(below[1:]):
            return j
    return len(lines)


def _name(line: str, signer: str | None) -> bool:
    """The sender's name, or (not knowing it) one to three name words."""
    if signer:
        return _names_signer(line, signer)
    words = line.lstrip("-–—~ ").split()
    return 0 < len(words) <= 3 and all(_title_word(w) and not _ACRONYM.fullmatch(w) for w in words)


def _names_signer(line: str, signer: str) -> bool:
    """The line is the sender's name (or first name, and a surname), alone or with a title:
    "Alice Smith | Platform Lead", "- Alice"."""
    full = " ".join(signer.split())
    if not full:
        return False
    names = "|".join(re.escape(name) for name in (full, full.split()[0]))
    surname = _NAME_WORD.pattern
    found = re.fullmatch(
        rf"[-–—~]?\s*(?i:{names})(?:\s+(?:{surname})){{0,2}}\s*(?:[|,–—-]\s*(.+))?", line
    )
    return found is not None and (found[1] is None or signature_line(found[1]))


def _signature(lines: list[str]) -> bool:
    return len(lines) <= SIGNATURE_LINES and all(map(signature_line, lines))


def signature_line(line: str) -> bool:
    """Contact details, or a title, a company or an address in capitalised words (parts
    separated by "|", ",", "·" or a dash)."""
    rest = _CONTACT.sub(" ", _PRONOUNS.sub(" ", _ON_CALL.sub("OnCall", line)))
    parts = [part for part in re.split(r"\s*[|,·•]\s*|\s+[-–—]\s+", rest) if part.strip()]
    return (bool(parts) or rest != line) and all(map(_title, parts))


def _title(part: str) -> bool:
    """ "VP Engineering", "Director of Platform", "Acme GmbH", "Musterstraße 1", "10115 Berlin"."""
    words = part.split()
    known = [w for w in words if not w.isdigit()]
    fits = all(w.casefold() in _SMALL or _title_word(w) for w in known)
    return bool(known) and len(words) <= 6 and fits


def _title_word(word: str) -> bool:
    capitalised = word[:1].isupper() and word[1:] == word[1:].lower()
    named = bool(_NAME_WORD.fullmatch(word)) and capitalised
    return _plain(word) and (
        named or bool(_ACRONYM.fullmatch(word) or _ABBREVIATION.fullmatch(word))
    )


def _plain(word: str) -> bool:
    return word.casefold().strip(".") not in _NOT_SIGNATURE and not _holds_back(word)


def _holds_back(text: str) -> bool:
    words = tokens(text)
    return "?" in words or bool(HOLD & set(words)) or any(k == NO for k, _ in cover(words))


_GREETING = re.compile(
    r"(?:hi|hello|hey|hiya|dear|morning|good (?:morning|afternoon|evening)|hallo|moin"
    r"|servus|bonjour|salut|hola|buenos días|buongiorno|ciao|olá|oi|goedemorgen|hoi|привет"
    r"|здравствуйте|こんにちは|你好|مرحبا)\b",
    re.IGNORECASE,
)
_WHOM = re.compile(r"([^,!:.]*)([,!:.]?)(.*)", re.DOTALL)  # always matches
_EVERYONE = frozenset({"team", "all", "folks", "everyone", "there", "guys", "y'all"})


def without_greeting(lines: list[str]) -> list[str]:
    """Without a greeting to the people asked ("Hi Bob,", "Hello team"): on a line of its
    own, or before a comma on the first line. Whom it greets must be a name or everyone, so
    "Hey Wait!" or "Hey not yet," is read."""
    if not lines or not (found := _GREETING.match(lines[0])):
        return lines
    first = lines[0]
    whom, mark, rest = _WHOM.fullmatch(first[found.end() :]).groups()  # type: ignore[union-attr]
    names = whom.split()
    greets = len(names) <= 2 and all(w.casefold() in _EVERYONE or _name(w, None) for w in names)
    if not greets:
        return lines
    if not rest.strip() and len(lines) > 1:
        return lines[1:]
    if mark == "," or (not names and mark in "!:"):
        return [rest.strip(), *lines[1:]]
    return lines
