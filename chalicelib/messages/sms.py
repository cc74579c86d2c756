"""SMS arithmetic: GSM-7 and UCS-2 characters, septets and how many segments a message needs (pure)."""

from __future__ import annotations

import unicodedata

# GSM 03.38: the basic set costs one septet a character, the extension set two. Anything else forces UCS-2,
# which shrinks a segment from 153 to 67 characters, so it is translated or refused.
GSM_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM_EXTENDED = frozenset("^{}\\[~]|€\f")
# Characters with no GSM-7 form that NFKD does not take apart either: quotes and dashes, the ligatures œ and ĳ,
# and the narrow spaces CLDR puts in French numbers and prices. Accented letters are folded in to_gsm.
TYPOGRAPHIC = str.maketrans(
    {
        "œ": "oe",
        "Œ": "OE",
        "«": '"',
        "»": '"',
        "‹": "'",
        "›": "'",
        "‐": "-",
        "‑": "-",
        "′": "'",
        "´": "'",
        "`": "'",
        "\u202f": " ",
        "\u2009": " ",
        "‘": "'",
        "’": "'",
        "‚": "'",
        "“": '"',
        "”": '"',
        "„": '"',
        "–": "-",
        "—": "-",
        "…": "...",
        "\u00a0": " ",
        "•": "-",
    }
)


# Letters that are still outside GSM-7 once NFKD has taken their marks off: the stroked, dotless and other
# letters Unicode does not decompose (Polish ł, Vietnamese and Croatian đ, Turkish ı, Icelandic þ and ð, Maltese
# ħ), and Greek, written as GSM 03.38 practice writes it: in capitals, GSM-7's own Greek capitals where it has
# them and the Latin capitals that look the same otherwise. Dropping them instead made "Łódź" arrive as "odz".
LETTERS = str.maketrans(
    {
        "Ł": "L",
        "ł": "l",
        "Đ": "D",
        "đ": "d",
        "Ð": "D",
        "ð": "d",
        "ı": "i",
        "ẞ": "SS",
        "Þ": "Th",
        "þ": "th",
        "Ħ": "H",
        "ħ": "h",
        "Ŧ": "T",
        "ŧ": "t",
        "Ŋ": "N",
        "ŋ": "n",
        "ĸ": "k",
        "Ə": "E",
        "ə": "e",
        "ʼ": "'",
        "·": "",  # what NFKD leaves of Catalan ŀ after the l
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧ", "ABEZHIKMNOPTYX", strict=True)),
        **dict(zip("αβγδεζηθικλμνξοπρσςτυφχψω", "ABΓΔEZHΘIKΛMNΞOΠPΣΣTYΦXΨΩ", strict=True)),
    }
)


def to_gsm(text: str) -> str:
    """Text with typographic characters, accents and letters outside GSM-7 replaced by their GSM-7 forms where one
    exists: accents come off (ó -> o, ř -> r, ầ -> a) unless GSM-7 has the letter as it is (é, ü, ø, ß)."""
    # Composed first, so that a letter typed as a base and a combining accent keeps a GSM-7 form such as é.
    text = unicodedata.normalize("NFC", text).translate(TYPOGRAPHIC)
    out = []
    for char in text:
        if char in GSM_BASIC or char in GSM_EXTENDED:
            out.append(char)
            continue
        plain = "".join(c for c in unicodedata.normalize("NFKD", char) if not unicodedata.combining(c))
        plain = plain.translate(LETTERS)
        out.append(plain if plain and all(c in GSM_BASIC for c in plain) else char)
    return "".join(out)


def is_gsm(text: str) -> bool:
    """True when every character fits GSM-7 (so a segment holds 153 characters, not 67)."""
    return all(c in GSM_BASIC or c in GSM_EXTENDED for c in text)


GSM_SINGLE, GSM_PART = 160, 153  # septets in a lone GSM-7 SMS, and in each part of a split one (UDH takes 7)
UCS2_SINGLE, UCS2_PART = 70, 67


def septets(text: str) -> int:
    """GSM-7 length: extension characters count twice."""
    return sum(2 if c in GSM_EXTENDED else 1 for c in text)


def sms_segments(text: str) -> int:
    """How many SMS parts a message needs (GSM-7: 160 alone, 153 each when split; UCS-2: 70 / 67)."""
    if is_gsm(text):
        length, single, part = septets(text), GSM_SINGLE, GSM_PART
    else:
        length, single, part = len(text.encode("utf-16-le")) // 2, UCS2_SINGLE, UCS2_PART
    return 1 if length <= single else -(-length // part)
