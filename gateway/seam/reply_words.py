"""The words of a free-text reply (`gateway.seam.replies`): normalised tokens, and the phrase
tables that say which words approve, are polite, refuse, or hold a decision back.

Normalising never makes a word disappear that could change the meaning: only a fixed set of
harmless punctuation is dropped. Any other symbol (`~` of a strike-through, `¬`, an emoticon
like `:/`) stays a word of its own, which no table knows, so the reply cannot be a plain yes.
"""

from __future__ import annotations

import re
import unicodedata

Phrase = tuple[str, ...]
YES, POLITE, NO, HOLDS, OTHER = "yes", "polite", "no", "holds", "other"
BREAK = "."  # the end of a sentence, as a word


def tokens(text: str) -> list[str]:
    """Normalised words, emoji, question marks ("?") and unknown symbols."""
    text = text.translate(_BEFORE_NFKC)
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _SLACK_LINK.sub(lambda link: f" {link[1] or link[2]} ", text)  # <url|label>: label
    text = _REFERENCE.sub(" @ ", text)  # someone addressed, a link, an address: not a yes
    text = _MODIFIERS.sub("", text)
    text = _SHORTCODE.sub(lambda code: _SHORTCODES.get(code[0], code[0]), text)
    text = _EMOTICON.sub(lambda face: _FACES.get(face[1], " 😕 "), text)
    text = _STRUCK.sub(r" ~ \2 ~ ", _NOT.sub(" ¬ ", _OK.sub("ok", text)))  # -x-, !negated
    text = text.translate(_FOLD)
    return [word for token in _TOKEN.findall(text) if (word := _word(token))]


def _word(token: str) -> str:
    """The token as a word: "?" for any question mark, "." for the end of a sentence (no
    phrase reads across it: "No. Objection." is no "no objection"), "" for harmless
    punctuation."""
    if len(token) != 1 or token.isalnum():
        return token
    name = unicodedata.name(token, "")
    if "QUESTION" in name or "INTERROBANG" in name:
        return "?"
    if token in _SENTENCE_END:
        return BREAK
    return "" if token in _HARMLESS or unicodedata.category(token) == "Zs" else token


def cover(words: list[str]) -> list[tuple[str, Phrase]]:
    """The words as phrases of the tables, longest first; a word no phrase covers is OTHER on
    its own, and the end of a sentence is POLITE (it says nothing). A negation before a yes
    ("don't run it", "not approving") or after one ("definitely not") is a refusal, and the
    same yes twice ("yeah, yeah") is dismissive."""
    found: list[tuple[str, Phrase]] = []
    last: int | None = None  # where the last phrase that is not a sentence break is
    i = 0
    while i < len(words):
        known = _longest_at(words, i)
        doubt = known if known is not None and known[0] == HOLDS else None  # "not sure"
        kind, phrase = doubt or _negated_at(words, i) or known or (OTHER, (words[i],))
        after = words[i + len(phrase) :][:6]  # at most a few words: this stays linear
        if phrase == (BREAK,):
            kind = POLITE
        elif kind == YES and len(words) - i - len(phrase) <= 5 and _only_not(after):
            kind, phrase = NO, (*phrase, "not")  # "definitely not", "approve... NOT"
        if kind == YES and phrase in _ASKED and (_near(words, i, len(phrase)) & _PLEASE):
            kind = HOLDS  # "approve pls", "plz confirm": asking someone else to
        again = last is not None and found[last] == (YES, phrase) and phrase[0].isalpha()
        if kind == YES and again and last is not None:
            found[last] = (HOLDS, phrase * 2)  # "yeah, yeah", "ja ja": dismissive
            i += len(phrase)
            continue
        last = last if phrase == (BREAK,) else len(found)
        found.append((kind, phrase))
        i += len(phrase)
    return found


def _only_not(words: list[str]) -> bool:
    return [word for word in words if word != BREAK] == ["not"]


_ASKED = frozenset({("approve",), ("approved",), ("confirm",), ("accept",), ("review",)})
_PLEASE = frozenset({"please", "pls", "plz"})


def _near(words: list[str], i: int, size: int) -> set[str]:
    return set(words[max(i - 1, 0) : i]) | set(words[i + size : i + size + 1])


def _negated_at(words: list[str], i: int) -> tuple[str, Phrase] | None:
    """A negation and the yes it negates ("don't approve", "I can't approve this")."""
    for size in (3, 2, 1):
        negation = tuple(words[i : i + size])
        negated = _longest_at(words, i + size) if negation in NEGATORS else None
        if negated is not None and negated[0] == YES:
            return NO, negation + negated[1]
    return None


def _longest_at(words: list[str], i: int) -> tuple[str, Phrase] | None:
    for size in range(min(_LONGEST, len(words) - i), 0, -1):
        phrase = tuple(words[i : i + size])
        for kind, table in _TABLES:
            if phrase in table:
                return kind, phrase
    return None


def phrases(table: str) -> frozenset[Phrase]:
    """Phrases separated by "|" (a line break is a space), each a tuple of words."""
    return frozenset(tuple(tokens(p)) for p in table.split("|") if p.strip())


def _words(table: str) -> frozenset[str]:
    return frozenset(table.split())


# --- normalising --------------------------------------------------------------------------

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
    ":no_entry_sign:": "🚫",
    ":octagonal_sign:": "🛑",
    ":raised_hand:": "✋",
    ":thinking_face:": "🤔",
    ":question:": "?",
    ":grey_question:": "?",
}
# Skin tones, variation selectors, joiners, invisible spaces and gender signs change no
# meaning: 👍🏽 is 👍, and "w\u200bait" is "wait".
_MODIFIERS = re.compile(
    r"[\U0001F3FB-\U0001F3FF\uFE0E\uFE0F\u200B-\u200F\u2060-\u2064\uFEFF\u00AD\u2640\u2642]"
    r"|:skin-tone-\d:"
)
_SHORTCODE = re.compile(r":[a-z0-9_+-]+:")
_EMOTICON = re.compile(r"(?<![:;\d])([:;]'?-?[)(/\\|]|(?<!\S)[:;]-?[dsp]\b|(?<!\S)\)-?:)")
_FACES = {":)": " 🙂 ", ":-)": " 🙂 ", ":d": " 🙂 ", ":-d": " 🙂 "}  # a wink is not polite
# "!approved" (a logical not) and "-approved-" (Jira's strike-through) say the opposite.
_OK = re.compile(r"\bo\.\s?k\b\.?")  # "O.K." before full stops become sentence breaks
_NOT = re.compile(r"(?<![\w!])!(?=[\w(])")
_STRUCK = re.compile(r"(?<!\S)(--?|\+\+?)(?=[^\s+-])([^\n]*?[^\s+-])\1(?!\S)")  # -x-, +x+
# Someone addressed (a Slack mention, an @name), a link, an address: a reply that holds one
# is not a plain yes. A link's trailing "?" is the reply's, not the link's.
EMAIL_ADDRESS = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"
_SLACK_LINK = re.compile(r"<(?:https?://|mailto:)[^|>\s]*\|([^>]*)>|<!date\^[^|>]*\|([^>]*)>")
_REFERENCE = re.compile(
    r"<@[uw][a-z0-9]+(?:\|[^>]*)?>|<!(?:here|channel|everyone)(?:\|[^>]*)?>"
    r"|<!subteam\^[a-z0-9]+(?:\|[^>]*)?>|<(?:https?://|mailto:)[^>\s]*>"
    rf"|(?:https?://|www\.)\S*[^\s?.,!)]|{EMAIL_ADDRESS}|@(?=\w)"
)
_BEFORE_NFKC = str.maketrans({"\u037e": "?"})  # the Greek question mark; NFKC makes it ";"
_FOLD = str.maketrans(
    {"\u2019": "'", "\u2018": "'", "\u02bc": "'", "`": "'", "\u2212": "-", "¿": "?"}
)
_TOKEN = re.compile(r"(?<![\w+-])[+-]1(?!\d)|[^\W_]+(?:'[^\W_]+)*|[^\w\s]")
_SENTENCE_END = frozenset(".!…。！")  # ";" is a word: the Greek question mark looks like it
_HARMLESS = frozenset(
    ",:()-–—‐‑‒―·•*_/#&%¡+"  # ASCII and typographic punctuation; quotation marks are words
    "、，：；（）【】《》〈〉‘’"  # CJK punctuation
    "،؛۔"  # Arabic comma, semicolon, full stop
)


# --- the tables ---------------------------------------------------------------------------

APPROVING = """
    approve | approved | approving | i approve | approve it | approved it | approval granted |
    you have my approval | accept | accepted | confirm | confirmed | i confirm | agree |
    agreed | i agree | granted | yes | yeah | yea | yep | yup | aye | yes please | yes sir |
    affirmative | absolutely | definitely | certainly | sure | sure thing | for sure |
    of course | alright | all right | ok | okay | okey | okie | okayed | ok'd | o k | lgtm |
    looks good | looks good to me | looks great | looks fine | fine | totally fine |
    sounds good | sounds good to me | sounds great | all good | good to go | fine by me |
    fine with me | that's fine | thats fine | works for me | no objection | no objections |
    no concerns | go | go ahead | go for it | proceed | please proceed | carry on | do it |
    run it | ship it | shipit | send it | let's go | lets go | let's do it | lets do it |
    make it so | green light | validated |
    +1 | 👍 | ✅ | ✔ | ☑ | 👌 | 🆗 | 🚀 | 🚢 | 💯 |
    ja | jawohl | genehmigt | freigegeben | einverstanden | passt | geht klar | ja klar |
    klar | leg los | mach ruhig | mach | in ordnung | oui | d'accord | approuvé | validé |
    c'est validé | je valide | c'est bon | c'est bon pour moi | ok pour moi | vas-y |
    allez-y | ça marche | sí | adelante | aprobado | de acuerdo | vale | procede | claro |
    dale | akkoord | goedgekeurd | prima | ga je gang | is goed | doe maar | sì | va bene |
    approvato | procedi | procedi pure | vai pure | confermo | certo | sim | aprovado |
    pode seguir | pode prosseguir | pode rodar | beleza | да | одобряю | одобрено |
    согласовано | согласен | подтверждаю | запускай | хорошо | ок |
    はい | 承認します | 承認しました | 問題ありません | 進めてください | okです | 同意 | 批准 |
    好的 | 可以 | 执行吧 | 没问题 | 继续 | 請執行 | 请执行 | موافق | تمت الموافقة | نعم |
    تمام | تفضل | tak | zatwierdzam | godkänt | godkendt | 승인합니다 | 네 | evet |
    onaylıyorum | погоджую | jo | ja hoor | perfecto | ausführen | ✓ | ✔️ | ok to proceed |
    go ahead and run it | na klar | pas de souci | sí cómo no | cómo no | kannst loslegen |
    kör på | godkjent | 了解です | 可以执行 | devam edebilirsiniz | ano | schvaluji | kyllä |
    hyväksytty
"""
POLITENESS = """
    thanks | thank you | thank u | thx | thnx | ty | tyvm | please | pls | plz | cheers |
    appreciated | great | awesome | perfect | nice | cool | excellent | good | totally |
    thanks for checking | thanks for asking | thank you for checking | from my side |
    from me | no problem | no worries | not a problem | no prob |
    danke | bitte | merci | gracias | bedankt | dank je | grazie | obrigado |
    obrigada | dzięki | tack | sorry for the slow reply | спасибо | お願いします |
    よろしくお願いします | ください | 谢谢 | شكرا |
    🙏 | 🙂 | 😊 | 😀 | 😃 | 😄 | 🎉 | ❤ | 🙌
"""
REFUSING = """
    no | nope | nah | nay | never | no way | hell no | no thanks | no go | not a chance |
    absolutely not | not approved | not approving | disapprove | disapproved |
    i wouldn't | i'd rather not | don't | do not | dont | please don't | sorry | sorry no |
    reject | rejected | i reject | deny | denied | i deny | decline | declined | veto |
    refuse | refused | stop | cancel | abort | -1 | 👎 | ❌ | ⛔ | 🚫 | 🛑 | ✋ | 🙅 | ✖ | ❎ |
    nein | nicht | auf keinen fall | abgelehnt | non | pas question | refusé | surtout pas |
    rechazado | ni hablar | nee | niet | niet doen | afgewezen | assolutamente no | respinto |
    não | nao | negado | nem pensar | нет | не | отклонено | ни в коем случае |
    却下します | ダメです | だめです | 承認しません | 不行 | 拒绝 | 不同意 | 别执行 | 不要 | لا |
    مرفوض | 거절합니다 | hayır | rejecting | nö | hors de question | para nada | nie |
    odrzucam | nej | όχι | ні | hard no | hayir | いいえ | ei | ne | claro que no |
    certo che no | да нет
"""
# A negation that turns the yes after it into a no: "don't approve", "not approving this".
NEGATORS = phrases("""
    not | never | don't | do not | dont | please don't | please do not | i don't | i do not |
    shouldn't | i shouldn't | mustn't | needn't | ain't | hardly | no longer | i wouldn't |
    can't | cannot | i can't | i cannot | won't | i won't | wouldn't | nicht | не | non | pas |
    niet | não | nunca | jamais
""")
# What holds a decision back: doubt ("not sure"), and the words below.
DOUBTING = """
    not sure | not so sure | i'm not sure | im not sure | no idea | not really |
    please approve | pls approve | please confirm | pls confirm | confirm please |
    approve please | please accept | accept please | please review | can you approve |
    could you approve | can someone approve | can you confirm | could you confirm
"""  # and requests to someone else to decide
# A condition anywhere ("no, unless...") makes a reply unclear; a deferral or doubt does when
# it is the point of the reply ("not yet", "Nope. Next week."), not inside a reason ("Deny -
# budget freeze until January").
CONDITIONS = _words("""
    but however though although except unless if only provided assuming once when
    aber mais pero maar ma mas но 但是 不过 لكن
""")
HOLD = CONDITIONS | _words("""
    wait hold pause later tomorrow tonight soon next after afterwards before until till til yet
    first postpone defer delay moment now today ⏸ ⏳ ⌛
    monday tuesday wednesday thursday friday saturday sunday weekend eod
    maybe perhaps possibly probably might unsure hmm hm idk guess 🤔 🤷
    jk kidding nvm ignore revoked cancelled canceled scratch
    aspetta warte attends espera wacht
""")
# A refusal by the word the gateway asks for is one, whatever reason follows it ("reject:
# not today"); other refusals may be deferrals ("No, not yet").
REJECTING = phrases("""
    reject | rejected | i reject | rejecting | deny | denied | i deny | decline | declined |
    veto | refuse | refused
""")
TIME = _words("""
    not the a an this that for in on at by of week weeks month months day days hour hours
    minute minutes morning afternoon evening night noon end release freeze sprint quarter
    january february march april may june july august september october november december
""")

_TABLES: list[tuple[str, frozenset[Phrase]]] = [
    (YES, phrases(APPROVING)),
    (POLITE, phrases(POLITENESS)),
    (NO, phrases(REFUSING)),
    (HOLDS, phrases(DOUBTING)),
]
_LONGEST = max(len(phrase) for _, table in _TABLES for phrase in table)
# Every word the tables know: none of them is a name ("Not", "Tonight", "Approved").
KNOWN_WORDS = (
    frozenset(w for _, table in _TABLES for phrase in table for w in phrase)
    | HOLD
    | TIME
    | frozenset(w for phrase in NEGATORS for w in phrase)
)
