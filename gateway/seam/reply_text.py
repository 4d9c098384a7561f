"""A reply's own words (`gateway.seam.replies`): what a mail client or chat added is cut only
where it really is.

- An Outlook header block ("From: / Sent: / To: / Subject:"), or an "Original Message" or
  forwarded marker right above one, ends the reply: below is the old message.
- A quote under a mail client's attribution line ("On <date with a year, and a time or an
  address> <Name> wrote:" then `>` lines) is skipped; the person's words may continue below.
- A known client's footer line ("Sent from my iPhone") and a separator line are skipped.
- A signature (after "-- ", at the sender's own name, or a closing above it) is cut when
  every line of it is one (`gateway.seam.reply_signature`): "use the replica, not prod"
  under a name is text.
- Anything else is the person's: "sent from the beach, do not run…", "see what Bob wrote:",
  and `>` lines without a real attribution, which are someone else's words (`quoting`).
"""

from __future__ import annotations

import re

from gateway.seam.reply_signature import (
    SIGNATURE_LINES,
    name_word,
    quoted,
    signature,
    without_sign_off,
)
from gateway.seam.reply_words import EMAIL_ADDRESS

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
    rf"|von {_DEVICE} gesendet|iphoneから送信|从我的iphone发送|發自我的iphone"
    r"|(?:ios|android) 版 outlook を入手",
    re.IGNORECASE,
)
_ATTRIBUTION_VERB = (
    r"(?:wrote|schrieb|a écrit|escribió|schreef|ha scritto|escreveu|skrev|napisał\(a\)"
    r"|napisał|napisała|написал|написала|написал\(а\)|пишет)"
)
# A client's attribution: "On <date and time>, <Name> <address> wrote:", in this order or with
# the verb before the name ("Am 23.11.26 um 11:00 schrieb Approvals:"). Every word is a date
# word, a number, or one of at most five capitalised name words, with a year, and a time or
# an address: "On 2nd thought, as Dana wrote at 9:30:" or "... wrote -- only after X:" is
# the person's own text.
_ATTRIBUTION = re.compile(rf"(.*?)\b{_ATTRIBUTION_VERB}(?![\w])(.*?)\s?:")  # as clients write
_ADDRESS = re.compile(rf"\(?<[^<>\s@]+@[^<>\s]+>\)?|\[mailto:[^\]]*\]|{EMAIL_ADDRESS}")
_DATE_WORDS_TEXT = """
    on op at am pm utc gmt cet cest um uhr à a las alle om de del el le il in в w dniu em den o
    kl
    mon tue wed thu fri sat sun monday tuesday wednesday thursday friday saturday sunday
    jan feb mar apr may jun jul aug sep sept oct nov dec january february march april june
    july august september october november december mo di mi do fr sa so montag dienstag
    mittwoch donnerstag freitag samstag sonntag januar februar märz mai juni juli oktober
    dezember lun mer jeu ven sam dim lundi mardi mercredi jeudi vendredi samedi dimanche
    janv févr mars avr juil août déc janvier février avril juillet septembre octobre
    novembre décembre lu ju vi sá dom lunes martes miércoles jueves viernes sábado domingo
    ene abr ago dic enero febrero marzo abril mayo junio julio agosto septiembre octubre
    noviembre diciembre ma wo vr za zo maandag dinsdag woensdag donderdag vrijdag zaterdag
    zondag mrt mei okt gio lunedì martedì mercoledì giovedì venerdì sabato domenica gen giu
    lug set ott
"""
_DATE_WORDS = frozenset(_DATE_WORDS_TEXT.split())
_YEAR = re.compile(r"\b(?:19|20)\d\d\b|\b\d{1,2}[./]\d{1,2}[./]\d\d\b")
_TIME_OR_ADDRESS = re.compile(r"\b\d{1,2}[:.h]\d\d\b|@")
_HEADER = re.compile(
    r"\**(from|von|de|van|da|от|sent|date|gesendet|datum|envoyé|enviado|verzonden|inviato"
    r"|to|an|à|para|aan|a|кому|cc|subject|betreff|objet|asunto|onderwerp|oggetto|тема)\s?:\**\s",
    re.IGNORECASE,
)
_FROM = {"from", "von", "de", "van", "da", "от"}
_WHEN = {"sent", "date", "gesendet", "datum", "envoyé", "enviado", "verzonden", "inviato"}


def own_lines(text: str, signer: str | None = None) -> tuple[list[str], bool]:
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
        elif quoted(lines[i]) and client_attribution(line.lstrip("> ")):  # Apple Mail's
            i = _past_quote(lines, i + 1)
        elif _FOOTER.fullmatch(line.rstrip(".")) or _SEPARATOR.fullmatch(line):
            i += 1
        elif line == _DELIMITER:
            end = _block_end(lines, i + 1)
            block = [later.strip() for later in lines[i + 1 : end] if later.strip()]
            i = end if end > i and signature(block, signer) else i + 1
        else:
            quoting = quoting or quoted(lines[i])
            kept.append(lines[i])
            i += 1
    return kept, quoting


def new_text(text: str, *, signer: str | None = None) -> str:
    """A reply's own words, as one text, without its sign-off (`signer`: the sender's
    display name, whose signature block is cut too)."""
    return "\n".join(without_sign_off(own_lines(text, signer)[0], signer)).strip()


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


def client_attribution(text: str) -> bool:
    """Whether `text` is a mail client's attribution line (see _ATTRIBUTION)."""
    text = re.sub(r"<\s+", "<", " ".join(text.split()))  # Gmail wraps inside <address>
    found = _ATTRIBUTION.fullmatch(text)
    if found is None or not (_YEAR.search(text) and _TIME_OR_ADDRESS.search(text)):
        return False
    said = f"{found[1]} {found[2]}"
    words = _ADDRESS.sub(" ", said).replace(",", " ").split()
    at = [i for i, word in enumerate(words) if not _dated_word(word)]
    names = [words[i] for i in at]
    together = not at or at[-1] - at[0] == len(at) - 1  # one name, not words among the date
    addressed = _ADDRESS.search(said) is not None
    named = (bool(names) or addressed) and len(names) <= 5
    return named and together and all(map(name_word, names))


def _dated_word(word: str) -> bool:
    return any(c.isdigit() for c in word) or word.casefold().strip(".") in _DATE_WORDS


def _header_block(lines: list[str], *, least: int = 3) -> bool:
    """An Outlook-style "From: / Sent: / To: / Subject:" block starts at lines[0]."""
    found = [(m[1].lower(), line[m.end() :]) for line in lines if (m := _HEADER.match(line))]
    names = [name for name, _ in found]
    dated = any(name in _WHEN and _YEAR.search(value) for name, value in found)
    return (
        bool(lines)
        and _HEADER.match(lines[0]) is not None
        and names[0] in _FROM
        and _sender(found[0][1])  # "From: 22:00 / To: 23:30" is a time window, not a header
        and dated
        and len(names) >= least
    )


def _sender(value: str) -> bool:
    """A header's sender: an address, or a name ("Approvals", "Alice Smith")."""
    words = _ADDRESS.sub(" ", value.replace("*", " ")).split()
    named = 0 < len(words) <= 5 and all(map(name_word, words))
    return named or _ADDRESS.search(value) is not None


def _attribution(lines: list[str], i: int) -> int:
    """How many lines a real attribution at lines[i] spans ("On ... wrote:" may wrap), if
    a quote follows it; else 0."""
    for span in (1, 2, 3):
        joined = " ".join(line.strip() for line in lines[i : i + span])
        if len(joined) > 400 or not all(line.strip() for line in lines[i : i + span]):
            return 0
        if client_attribution(joined):  # it may wrap over 3 lines
            following = next((line for line in lines[i + span :] if line.strip()), "")
            return span if quoted(following) else 0
    return 0
