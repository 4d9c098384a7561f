"""Sign-offs, signatures and greetings of a reply (`gateway.seam.reply_text`): cut only what is
positively one, by an allow-list, never by guessing what an instruction looks like.

A signature line is one of:
- the sender's own name (their display name, or its first word), alone;
- contact details alone: a phone number, an email address, a link;
- a job title made only of title words ("VP Engineering", "Director of Platform");
- a company: capitalised words and a legal suffix ("Acme Corp", "Contoso Ltd.");
- a street or city line: capitalised words and numbers, with a street word or a postcode.
Parts may be joined by "|", "," or "·" ("VP Engineering | Acme Corp"). "Pending Review",
"NOT ON PROD", "Alice says wait" or a link to a runbook under a name are none of these, so they
stay the person's words.
"""

from __future__ import annotations

import re

from gateway.seam.reply_words import HOLD, NO, cover, tokens

SIGNATURE_LINES = 12  # a signature block is looked for among the last lines only

_CLOSING = re.compile(
    r"(?:thanks|thank you|many thanks|thx|cheers|best|best regards|kind regards|regards"
    r"|warm regards|br|sincerely|viele grüße|liebe grüße|beste grüße|vg|lg|gruß|grüße"
    r"|mit freundlichen grüßen|cordialement|bien à vous|merci|saludos|un saludo|atentamente"
    r"|met vriendelijke groet|groeten|mvg|cordiali saluti|saluti|atenciosamente|abraços"
    r"|с уважением|спасибо)\s*[,.!]?",
    re.IGNORECASE,
)
_LABEL = r"(?:(?:t|m|p|f|e|w|tel|phone|mobile|cell|fax|email|e-mail|web)(?:\s?[.:]\s*|\s+))?"
_CONTACT = re.compile(
    rf"{_LABEL}(?:\+?\(?\d[\d\s().-]{{6,}}\d|[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
    r"|https?://[\w.-]+/?|www\.[\w.-]+/?)",
    re.IGNORECASE,
)  # a link to a site, not to a page: a runbook's or an incident's URL says something
_TITLE_WORDS_TEXT = """
    vp svp evp avp eng mgr sr jr teamleitung director head lead manager engineer engineering
    senior staff principal
    platform infrastructure security operations devops sre cto ceo cio ciso coo cfo cpo
    founder co-founder team product data software developer architect consultant analyst
    administrator admin it database dba site reliability cloud network systems chief officer
    president vice of and & the for at leiterin leiter plattform ingenieur ingénieur
    datenbanken plateforme rechenzentrum abteilung
    directeur directrice responsable jefe jefa director directora ingeniero ingeniera oncall
    on-call she/her he/him they/them
"""
_TITLE_WORDS = frozenset(_TITLE_WORDS_TEXT.split())
_COMPANY_SUFFIX = re.compile(
    r"(?:corp|corporation|inc|ltd|llc|gmbh|ag|sa|s\.a|bv|b\.v|se|co|plc|pty|srl|sas|oy|ab)\.?",
    re.IGNORECASE,
)
_STREET = re.compile(
    r".*(?:stra(?:ß|ss)e|str\.|street|st\.|road|rd\.|avenue|ave\.|weg|platz|gasse|rue|calle)"
    r"\s+\d+\w?",
    re.IGNORECASE,
)
_POSTCODE_CITY = re.compile(r"(?:[A-Z]{1,2}-)?\d{4,5}\s+[A-ZÀ-Ý][\w-]+(?:\s+[A-ZÀ-Ý][\w-]+)?")
_CAPITALISED = re.compile(r"[A-ZÀ-ÝА-Я][a-zà-ÿа-я'’-]+")
_ON_CALL = re.compile(r"\bon call\b", re.IGNORECASE)
_PARTS = re.compile(r"\s*[|,·•]\s*|\s+[-–—]\s+")


def without_sign_off(lines: list[str], signer: str | None) -> list[str]:
    """`lines` up to the sender's signature block, or a closing and the name under it
    (blank and quoted lines are not judged; quoted ones below it are kept)."""
    filled = [i for i, line in enumerate(lines) if line.strip() and not quoted(line)]
    kept = _signed_from([lines[i].strip() for i in filled], signer)
    if kept == len(filled):
        return lines
    cut = filled[kept]
    return lines[:cut] + [line for line in lines[cut:] if quoted(line)]


def quoted(line: str) -> bool:
    return line.lstrip().startswith(">")


def _signed_from(lines: list[str], signer: str | None) -> int:
    """Where the sign-off starts among non-blank `lines` (their count when there is none)."""
    for j in range(max(1, len(lines) - SIGNATURE_LINES), len(lines)):
        below = lines[j + 1 :]
        if _is_signer(lines[j], signer) and all(map(signature_line, below)):
            return _signed_from(lines[:j], None)  # a closing above the name goes too
    for j in range(max(1, len(lines) - SIGNATURE_LINES), len(lines)):
        below = lines[j + 1 :]
        if _CLOSING.fullmatch(lines[j]) and (not below or signature(below, signer)):
            return j
    return len(lines)


def signature(lines: list[str], signer: str | None) -> bool:
    """Whether these lines (under a closing or "-- ") are a signature: its first line the
    sender's name (or, not knowing it, a first and last name), the rest signature lines."""
    if not lines or len(lines) > SIGNATURE_LINES:
        return False
    below = lines[1:]
    named = _is_signer(lines[0], signer) if signer else _unknown_name(lines[0], below)
    return named and all(map(signature_line, below))


def _is_signer(line: str, signer: str | None) -> bool:
    """The line is the sender's name or first name (a dash or tilde before it at most),
    alone or with signature parts after it: "Alice Smith | VP Engineering"."""
    name, *rest = _PARTS.split(line.lstrip("-–—~ "))
    words = _names_of(signer or "")
    initialled = f"{words[0][:1]}. {' '.join(words[1:])}" if len(words) > 1 else ""
    given = name.casefold().split()
    surnamed = len(words) == 1 and given[:1] == words and len(given) <= 3  # "Alice" signs
    named = bool(words) and (" ".join(given) in (" ".join(words), words[0], initialled))
    named = named or (surnamed and all(map(name_word, name.split())))
    return named and all(map(_signature_part, filter(str.strip, rest)))


def _names_of(signer: str) -> list[str]:
    """The display name's words, first name first: "Müller, Jürgen" is Jürgen Müller."""
    last, comma, first = signer.partition(",")
    return f"{first} {last}".casefold().split() if comma else signer.casefold().split()


def _unknown_name(line: str, below: list[str]) -> bool:
    """Not knowing the sender's name: one name word ("Bob"), or a full name with a title,
    company or contact line under it ("Bob Smith" / "VP Engineering")."""
    words = line.lstrip("-–—~ ").split()
    return (len(words) == 1 or (len(words) <= 3 and bool(below))) and all(map(name_word, words))


def name_word(word: str) -> bool:
    return bool(_CAPITALISED.fullmatch(word)) and not _holds_back(word) and len(word) <= 20


def signature_line(line: str) -> bool:
    """Contact details, a job title, a company, or an address (see the module's doc)."""
    rest = _CONTACT.sub(" ", _ON_CALL.sub("on-call", line))
    parts = [part for part in _PARTS.split(rest) if part.strip()]
    return (bool(parts) or rest != line) and all(map(_signature_part, parts))


def _signature_part(part: str) -> bool:
    words = part.split()
    if all(word.casefold() in _TITLE_WORDS for word in words):
        return True  # a job title
    if _COMPANY_SUFFIX.fullmatch(words[-1]) and 1 < len(words) <= 4:
        return all(map(name_word, words[:-1]))  # a company
    return bool(_STREET.fullmatch(part) or _POSTCODE_CITY.fullmatch(part))


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
    own, or before a comma on the first line. It greets one name or everyone, so "Hey Hang
    On!" or "Hey not yet," is read."""
    if not lines or not (found := _GREETING.match(lines[0])):
        return lines
    whom, mark, rest = _WHOM.fullmatch(lines[0][found.end() :]).groups()  # type: ignore[union-attr]
    names = whom.split()
    greets = len(names) <= 1 and all(w.casefold() in _EVERYONE or name_word(w) for w in names)
    if not greets:
        return lines
    if not rest.strip() and len(lines) > 1:
        return lines[1:]
    if mark == "," or (not names and mark in "!:"):
        return [rest.strip(), *lines[1:]]
    return lines
