"""Sign-offs, signatures and greetings of a reply (`gateway.seam.reply_text`): cut only what is
positively one, by an allow-list, never by guessing what an instruction looks like.

A signature line is one of:
- the sender's own name (their display name, or its first word), alone;
- contact details alone: a phone number, an email address, a link;
- a job title made only of title words ("VP Engineering", "Director of Platform");
- a company: one or two capitalised words no table knows, and a legal suffix ("Acme Corp").
An address is not one (a street line is too much like "take a snapshot first. 10m"): a
signature with one makes the reply unclear, which costs one more reply.
Parts may be joined by "|", "," or "·" ("VP Engineering | Acme Corp"). "Pending Review",
"NOT ON PROD", "Alice says wait" or a link to a runbook under a name are none of these, so they
stay the person's words.
"""

from __future__ import annotations

import re

from gateway.seam.reply_words import EMAIL_ADDRESS, HOLD, KNOWN_WORDS, NO, cover, tokens

SIGNATURE_LINES = 12  # a signature block is looked for among the last lines only

_CLOSING = re.compile(
    r"(?:thanks|thank you|many thanks|thx|cheers|best|best regards|kind regards|regards"
    r"|warm regards|br|sincerely|viele grüße|liebe grüße|beste grüße|vg|lg|gruß|grüße"
    r"|mit freundlichen grüßen|cordialement|bien à vous|merci|saludos|un saludo|atentamente"
    r"|met vriendelijke groet|groeten|mvg|cordiali saluti|saluti|atenciosamente|abraços"
    r"|с уважением|спасибо|bonne journée|abs|pozdrawiam|mvh|hilsen|med vänliga hälsningar)"
    r"\s*[,.!]?",
    re.IGNORECASE,
)
_LABEL = r"(?:(?:t|m|p|f|tel|phone|mobile|cell|fax)(?:\s?[.:]\s*|\s+))"
# A phone number starts with "+" or has a label ("T: 555 0100"): a bare "22.00 - 06.00" or
# "1.000.000" is a time or an amount. A link is to a site, not to a page (a runbook's or an
# incident's URL says something), and its name must say nothing either.
_CONTACT = re.compile(
    rf"(?:{_LABEL}?\+|{_LABEL}\(?)\d[\d\s()-]{{6,}}\d"
    rf"|(?:(?:e|email|e-mail)\s?[.:]\s*)?{EMAIL_ADDRESS}"
    r"|(?:(?:w|web)\s?[.:]\s*)?(?:https?://|www\.)([\w.-]+)/?",
    re.IGNORECASE,
)
_TITLE_WORDS_TEXT = """
    vp svp evp avp eng mgr sr jr teamleitung director head lead manager engineer engineering
    senior staff principal
    platform infrastructure security operations devops sre cto ceo cio ciso coo cfo cpo
    founder co-founder team product data software developer architect consultant analyst
    administrator admin database dba site reliability cloud network systems chief officer
    president vice of and & the for at leiterin leiter plattform ingenieur ingénieur
    datenbanken plateforme plataforma rechenzentrum abteilung de
    directeur directrice responsable jefe jefa director directora ingeniero ingeniera oncall
    on-call she/her he/him they/them phd msc mba
"""
_TITLE_WORDS = frozenset(_TITLE_WORDS_TEXT.split())
_CONNECTORS = frozenset({"of", "and", "&", "the", "for", "at", "de"})  # never first
_COMPANY_SUFFIX = re.compile(
    r"(?:corp|corporation|inc|ltd|llc|gmbh|ag|sa|s\.a|bv|b\.v|se|co|plc|pty|srl|sas|oy|ab)\.?",
    re.IGNORECASE,
)
_CAPITALISED = re.compile(r"[A-ZÀ-ÝА-Я][a-zà-ÿа-я'’-]+")
_MAILBOX = re.compile(EMAIL_ADDRESS)  # its name may say something: "not-until-monday@"
_ON_CALL = re.compile(r"\bon call\b", re.IGNORECASE)
_PARTS = re.compile(r"\s*[|,·•()]\s*|\s+[-–—]\s+")


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
            return j - 1 if j > 1 and _CLOSING.fullmatch(lines[j - 1]) else j
    for j in range(max(1, len(lines) - SIGNATURE_LINES), len(lines)):
        below = lines[j + 1 :]
        if _CLOSING.fullmatch(lines[j]) and (not below or signature(below, signer)):
            return j
    return len(lines)


def signature(lines: list[str], signer: str | None) -> bool:
    """Whether these lines (under a closing or "-- ") are a signature: its first line the
    sender's name (or, not knowing it, one name word), the rest signature lines."""
    if not lines or len(lines) > SIGNATURE_LINES:
        return False
    named = _is_signer(lines[0], signer) if signer else _unknown_name(lines[0])
    return named and all(map(signature_line, lines[1:]))


def _is_signer(line: str, signer: str | None) -> bool:
    """The line is the sender's name or first name (a dash or tilde before it at most),
    alone or with signature parts after it: "Alice Smith | VP Engineering"."""
    name, *rest = _PARTS.split(line.lstrip("-–—~ "))
    words = _names_of(signer or "")
    initialled = f"{words[0][:1]}. {' '.join(words[1:])}" if len(words) > 1 else ""
    given = " ".join(name.casefold().split())
    named = bool(words) and given in (" ".join(words), words[0], initialled)
    return named and all(map(_signature_part, filter(str.strip, rest)))


def _names_of(signer: str) -> list[str]:
    """The display name's words, first name first: "Müller, Jürgen" is Jürgen Müller."""
    last, comma, first = signer.partition(",")
    return f"{first} {last}".casefold().split() if comma else signer.casefold().split()


def _unknown_name(line: str) -> bool:
    """Not knowing the sender's name: one name word ("Bob"), as people sign in chat."""
    words = line.lstrip("-–—~ ").split()
    return len(words) == 1 and name_word(words[0])


def name_word(word: str) -> bool:
    """A capitalised word no phrase table knows ("Acme", "Smith"; not "Not", "Tonight")."""
    known = word.casefold() in KNOWN_WORDS or _holds_back(word)
    return bool(_CAPITALISED.fullmatch(word)) and not known and len(word) <= 20


def signature_line(line: str) -> bool:
    """Contact details, a job title or a company (see the module's doc)."""
    line = _ON_CALL.sub("on-call", line)
    mailboxes = [address.partition("@")[0] for address in _MAILBOX.findall(line)]
    named = _CONTACT.findall(line) + mailboxes  # a site's or a mailbox's name
    if any(name and _holds_back(re.sub(r"[-._]", " ", name)) for name in named):
        return False
    rest = _CONTACT.sub(" ", line)
    parts = [part for part in _PARTS.split(rest) if part.strip()]
    return (bool(parts) or rest != line) and all(map(_signature_part, parts))


def _signature_part(part: str) -> bool:
    words = part.split()
    if words[0].casefold() not in _CONNECTORS and all(w.casefold() in _TITLE_WORDS for w in words):
        return True  # a job title
    return (
        _COMPANY_SUFFIX.fullmatch(words[-1]) is not None
        and 1 < len(words) <= 3
        and all(map(name_word, words[:-1]))
    )  # a company


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
