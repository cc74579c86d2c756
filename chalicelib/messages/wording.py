"""Words nobody can inject: the checks shared by message copy and catalogue names, and the fixed set of tones.

Text is checked in a folded form (`fold`), so look-alike spellings are caught by plain patterns:

* NFKC normalisation (fullwidth letters, digits and punctuation, ligatures and other compatibility forms become
  their plain forms: "ｗａｌｎｕｔ．ｃｏｍ" -> "walnut.com", "＠" -> "@");
* format characters (zero-width spaces and joiners, soft hyphens, direction marks) and stray combining marks
  dropped, so "walnut\u200b.com" and "fr\u0336ee" read as written;
* the dot-like marks in DOTS made dots ("walnut。com");
* lower case, then the Cyrillic and Greek letters in CONFUSABLES made the Latin letters they look like
  ("wаlnut.сom" with Cyrillic а and с -> "walnut.com"). The map is small on purpose: it covers the letters that
  pass for Latin ones in running text, not every Unicode confusable.

A host is anything shaped like one (labels joined by dots, the last at least two letters), in any script, with no
list of top-level domains: "walnut.shop", "walnut.co.uk", "магазин.рф" and "walnut.newtld" alike. Dots spelled
out count too: "walnut (dot) com" always, and in copy "walnut dot com" (a product name may say "polka dot").

Pure: no AWS, no I/O.
"""

from __future__ import annotations

import re
import unicodedata

from chalicelib.errors import BadRequest

DOTS = "\u3002\uff61\u30fb\u00b7\u2219\u22c5\u0701\u0702\u2e3c"  # 。 ｡ ・ · ∙ ⋅ and others that read as a dot
CONFUSABLES = str.maketrans(
    {
        # Cyrillic (lower case; upper case is lowered first)
        "а": "a",
        "в": "b",
        "с": "c",
        "ԁ": "d",
        "е": "e",
        "ё": "e",
        "һ": "h",
        "н": "h",
        "і": "i",
        "ї": "i",
        "ј": "j",
        "к": "k",
        "ӏ": "l",
        "м": "m",
        "о": "o",
        "р": "p",
        "ԛ": "q",
        "ѕ": "s",
        "т": "t",
        "у": "y",
        "ԝ": "w",
        "х": "x",
        # Greek
        "α": "a",
        "β": "b",
        "ε": "e",
        "η": "n",
        "ι": "i",
        "κ": "k",
        "ν": "v",
        "ο": "o",
        "ρ": "p",
        "τ": "t",
        "υ": "u",
        "χ": "x",
        # Latin letters that pass for others
        "ı": "i",
        "ɑ": "a",
        "ɡ": "g",
        **dict.fromkeys(DOTS, "."),
    }
)


def fold(text: str) -> str:
    """The text as the checks read it (module docstring): NFKC, no invisible characters, confusables folded."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in text if unicodedata.category(c) not in ("Cf", "Mn"))
    text = unicodedata.normalize("NFKC", text.lower().translate(CONFUSABLES))
    return " ".join(text.split())


# --- Hosts, web and email addresses.

_LABEL = r"[^\W_](?:[\w-]*[^\W_])?"
_OPEN, _CLOSE = r"[\(\[\{<]", r"[\)\]\}>]"
HOST = re.compile(
    rf"(://|\b(?:https?|www|ftp)\b|[^\W_]\s*@\s*[^\W_]|{_LABEL}(?:\.{_LABEL})*\.[^\W\d_]{{2,}}(?![\w-])"
    rf"|\b\d{{1,3}}(?:\.\d{{1,3}}){{3}}\b"
    rf"|[^\W_]\s*{_OPEN}\s*(?:dot|period|at)\s*{_CLOSE}\s*[^\W_])"
)
# "walnut dot com", "help at walnut dot shop": copy only, where the model has no reason to write "dot".
SPELLED_HOST = re.compile(r"[^\W_]\s+dot\s+[^\W\d_]{2,}\b")


def find_host(text: str, *, spelled_dots: bool) -> str | None:
    """The first host, web or email address in the text (folded first), or None."""
    folded = fold(text)
    found = HOST.search(folded) or (SPELLED_HOST.search(folded) if spelled_dots else None)
    return found.group(0) if found else None


# --- Prices, discounts and promises.

_CURRENCY = r"(?:usd|eur|gbp|jpy|cad|aud|nzd|chf|sek|nok|dkk|inr|dollars?|euros?|pounds?|quid|bucks|pence|cents?)"
_AMOUNT = r"\d(?:[\d.,]*\d)?"
PRICE = re.compile(
    rf"({_AMOUNT}\s*{_CURRENCY}\b|\b{_CURRENCY}\s*{_AMOUNT}|\b\d+[.,]\d{{2}}(?![\w.,])|\bprice[ds]?\b|\b(?:rrp|msrp)\b)"
)
_NUMBER_WORD = r"(?:\d+|one|two|three|four|five|six|ten)"
# Spelled-out deals: half price, fifty percent off, 2 for 1, buy one get one.
DISCOUNT = re.compile(
    rf"(\bhalf[\s-]*(?:price|off)\b|(?:%|\bper\s*cent\b|\bpercent\b|\bpct\b)\s*off\b|\boff\s+(?:the\s+)?(?:rrp|price)\b"
    rf"|\b{_NUMBER_WORD}(?:\s*for\s*|\s+4\s+){_NUMBER_WORD}\b|\bbuy\s+\w+[\s,]+(?:and\s+)?get\b|\bbogof?\b|\bdiscount"
    rf"|\bcoupon|\bpromo|\bvoucher|\bclearance\b|\bsale\b)"
)
# What copy must never promise: a guaranteed or set-aside unit, free things, deals, scarcity it cannot know.
COPY_PROMISE = re.compile(
    r"(guarantee|\bpromis|\bassured?\b|\bwarrant|\breserved\b|\b(?:saved|kept|held|waiting|put\s+aside|set\s+aside)"
    r"\s+(?:just\s+|only\s+|especially\s+)?for\s+you|\bset\s+aside\b|\byours\s+(?:forever|until|for\s+good|to\s+keep)"
    r"|\bforever\b|\bexclusive|\bfree\b|\brisk[\s-]*free\b|\bno\s+risk\b|\bdeal\b|\bbargain|\bcheap|\bsav(?:e|es|ing|ings)\b"
    r"|\bpercent\b|\bper\s*cent\b|\bonly\s+\w+\s+left|\blast\s+(?:one|few|chance)\b|\bunits?\s+left\b|\bin\s+stock\s+until\b"
    r"|\bwhile\s+(?:stocks?|supplies)\s+last|\bwon'?t\s+last\b|\bselling\s+fast\b|\balmost\s+gone\b|\blimited\s+time\b)"
)
# What a product name must not promise. Narrower than copy: "100% wool" is a product fact, and so is "free" in a
# hyphenated compound ("gluten-free", "free-range"); "free" on its own is an offer.
NAME_PROMISE = re.compile(
    r"(guarantee|\bpromis|(?<!-)\bfree\b(?!-)|\breserved\s+for\b|\bexclusive\s+(?:offer|deal)\b|\bdeal\b"
    r"|\blimited\s+time\b|\bwhile\s+(?:stocks?|supplies)\s+last)"
)


# The same refusals in the other languages copy is written in (chalicelib/i18n.py), read without accents so
# "dernière" and "derniere" are one word. A copy in one of them is read against its own language's words and the
# English ones (models slip English words in); English copy only against the English ones, where "reserve" (to
# use the link) is an honest verb and not the French "réservé".
COPY_PROMISE_IN: dict[str, re.Pattern[str]] = {
    "de": re.compile(
        r"(rabatt|\bgratis\b|kostenlos|umsonst|garant|reserviert|zuruckgelegt|aufgehoben\s+fur|angebot|\baktion\b"
        r"|\bnur\s+noch\b|solange\s+(?:der\s+)?vorrat|schnappchen|\bbillig|\bspar(?:en|t|e)?\b|gespart|prozent"
        r"|ausverkauf|letzte\s+chance|exklusiv|versprech|versproch|\bfur\s+immer\b|\bpreis)"
    ),
    "fr": re.compile(
        r"(gratuit|\bpromo|\bsoldes?\b|\breserve(?:e|s|es)?\b|garanti|\boffre|derniere\s+chance|\bplus\s+que\b"
        r"|il\s+ne\s+(?:vous\s+)?reste\s+(?:plus\s+)?que|\bremise|reduction|rabais|pas\s+cher|econom|exclusi"
        r"|\bpromet|\bpromis|pour\s*cent|pourcentage|bon\s+plan|epuisement|pour\s+toujours|\bprix\b)"
    ),
    "es": re.compile(
        r"(\bgratis\b|gratuit|descuento|\boferta|rebaja|reservad[oa]s?\b|garantiz|garantia|ultimas\s+unidades"
        r"|ultima\s+oportunidad|solo\s+quedan|quedan\s+pocas|por\s*ciento|\bahorr|\bbarat|exclusiv|\bpromet"
        r"|para\s+siempre|hasta\s+agotar|\bprecio)"
    ),
    "nl": re.compile(
        r"(\bgratis\b|korting|aanbieding|gereserveerd|gegarandeerd|garantie|\bop\s*(?:=|is)\s*op\b|laatste\s+kans"
        r"|\bnog\s+maar\b|uitverkoop|procent|bespaar|goedkoop|exclusie|voor\s+altijd|\bbelo(?:of|ven|ofd)"
        r"|zolang\s+de\s+voorraad|\bprijs)"
    ),
}


def plain_letters(text: str) -> str:
    """Folded text without accents ("dernière" -> "derniere"), for the words of COPY_PROMISE_IN."""
    return "".join(c for c in unicodedata.normalize("NFKD", fold(text)) if not unicodedata.combining(c))


def find_deal(text: str, *, copy: bool, lang: str = "en") -> str | None:
    """The first price, discount or promise in the text (folded first), by copy's rules or a name's; or None.
    Copy in another language than English is also read for that language's words (COPY_PROMISE_IN)."""
    folded = fold(text)
    promise = COPY_PROMISE if copy else NAME_PROMISE
    found = PRICE.search(folded) or DISCOUNT.search(folded) or promise.search(folded)
    if found is None and copy and lang in COPY_PROMISE_IN:
        found = COPY_PROMISE_IN[lang].search(plain_letters(text))
    if found is None and any(unicodedata.category(c) == "Sc" for c in folded):
        return next(c for c in folded if unicodedata.category(c) == "Sc")
    return found.group(0) if found else None


def check_name(value: str, key: str = "name") -> str:
    """A catalogue product's name as messages may print it; BadRequest says what it may not hold."""
    host = find_host(value, spelled_dots=False)
    if host is not None:
        raise BadRequest(f"{key} may not hold a web address, email address or host ({host!r})", code="invalid_field")
    deal = find_deal(value, copy=False)
    if deal is not None:
        raise BadRequest(f"{key} may not hold a price, discount or promise ({deal!r})", code="invalid_field")
    return value


# --- Tones: the voice of a product's messages is one of these, never free text.

TONES: dict[str, str] = {
    "friendly": "friendly and easy-going",
    "warm": "warm and personal",
    "cheerful": "cheerful and upbeat",
    "playful": "light and playful",
    "calm": "calm and unhurried",
    "plain": "plain and brief",
    "formal": "polite and formal",
}
DEFAULT_TONE = "friendly"
# Words of the free-text voices feeds used to carry, and the tone each is nearest.
NEAR_TONES: dict[str, str] = {
    "kind": "warm",
    "personal": "warm",
    "heartfelt": "warm",
    "cosy": "warm",
    "cozy": "warm",
    "upbeat": "cheerful",
    "bright": "cheerful",
    "happy": "cheerful",
    "enthusiastic": "cheerful",
    "excited": "cheerful",
    "fun": "playful",
    "witty": "playful",
    "quirky": "playful",
    "cheeky": "playful",
    "gentle": "calm",
    "unhurried": "calm",
    "relaxed": "calm",
    "quiet": "calm",
    "brief": "plain",
    "brisk": "plain",
    "dry": "plain",
    "simple": "plain",
    "short": "plain",
    "matter-of-fact": "plain",
    "plain-spoken": "plain",
    "polite": "formal",
    "professional": "formal",
    "courteous": "formal",
    "casual": "friendly",
    "chatty": "friendly",
    "approachable": "friendly",
}


def tone_of(voice: str | None) -> str | None:
    """The tone a voice names: a tone itself, or the first word of a free-text voice that is a tone or near one."""
    for word in re.findall(r"[a-z]+(?:-[a-z]+)*", fold(voice or "")):
        tone = word if word in TONES else NEAR_TONES.get(word)
        if tone is not None:
            return tone
    return None


def check_voice(value: str, key: str = "voice") -> str:
    """A voice as the catalogue keeps it: its tone; BadRequest when it names none."""
    tone = tone_of(value)
    if tone is None:
        raise BadRequest(f"{key} must be one of {', '.join(TONES)}", code="invalid_field")
    return tone
