"""Contact validation and normalisation: pure rules, no AWS."""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from chalicelib.errors import BadRequest

CHANNELS = ("sms", "email")
E164_MAX_DIGITS = 15
MAX_CONTACT_LEN = 254  # RFC 5321's limit on a forward path; far longer than any phone number.


@dataclass(frozen=True)
class Contact:
    """A validated contact: where to send, and the form used to recognise the same person again."""

    channel: str
    address: str  # E.164 for SMS; the normalised address for email, as typed: what we send to
    match: str  # the form two taps are compared by: for email the mailbox (`mailbox_of`), not the spelling
    # For email, the form taps were compared by before mailboxes were (the address lower-cased whole), when it
    # differs from `match`: suppressions and places stored under it before must still count (docs/SECURITY.md).
    legacy_match: str | None = None


# Why a number is not one: the `reason` an `invalid_phone` refusal carries, so the shopper is told what to fix (a
# number typed with its country code but a digit short must not be told to add its country code).
TOO_SHORT = "too_short"
TOO_LONG = "too_long"


def _not_a_number(reason: str | None) -> BadRequest:
    if reason == TOO_SHORT:
        return BadRequest("That phone number is too short for a mobile number.", code="invalid_phone", reason=reason)
    if reason == TOO_LONG:
        return BadRequest("That phone number is too long for a mobile number.", code="invalid_phone", reason=reason)
    return BadRequest("That is not a valid phone number.", code="invalid_phone")


def normalise_phone(raw: str, default_region: str) -> str:
    """A phone number in any common notation as E.164, or BadRequest('invalid_phone'), with the reason `too_short`
    or `too_long` when its length is what is wrong."""
    # Imported here, not at the top: a cold start pays for it only on the paths that use it.
    import phonenumbers

    try:
        number = phonenumbers.parse(raw, default_region)
    except phonenumbers.NumberParseException as exc:
        short = (phonenumbers.NumberParseException.TOO_SHORT_NSN, phonenumbers.NumberParseException.TOO_SHORT_AFTER_IDD)
        reason = TOO_SHORT if exc.error_type in short else None
        if exc.error_type == phonenumbers.NumberParseException.TOO_LONG:
            reason = TOO_LONG
        raise _not_a_number(reason) from exc
    if not phonenumbers.is_valid_number(number):
        # Measured against the lengths of its country's mobile numbers (libphonenumber's ValidationResult: shorter
        # than all of them, longer than all of them, or neither), since only a mobile can take an SMS.
        length = phonenumbers.is_possible_number_for_type_with_reason(number, phonenumbers.PhoneNumberType.MOBILE)
        reasons = {phonenumbers.ValidationResult.TOO_SHORT: TOO_SHORT, phonenumbers.ValidationResult.TOO_LONG: TOO_LONG}
        raise _not_a_number(reasons.get(length))
    e164 = phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)
    # The metadata accepts a few national numbers too long for E.164, which no SMS can reach.
    if len(e164) - 1 > E164_MAX_DIGITS:
        raise _not_a_number(TOO_LONG)
    return e164


def example_region(typed: str, allowed: tuple[str, ...], preferred: tuple[str, ...] = ()) -> str:
    """The allowed country whose example number to show a shopper: the one whose calling code the typed number
    starts with (+44..., 0044...), else the first of `preferred` that is allowed (their languages' countries), else
    the first allowed."""
    import phonenumbers

    digits = "".join(c for c in typed if c.isdigit() or c == "+")
    digits = "+" + digits[2:] if digits.startswith("00") else digits
    if digits.startswith("+"):
        for region in allowed:
            if digits[1:].startswith(str(phonenumbers.country_code_for_region(region))):
                return region
    return next((r for r in preferred if r in allowed), allowed[0])


# What an SMS may be sent to: a mobile number. North American numbers cannot be told apart from landlines by their
# digits alone (FIXED_LINE_OR_MOBILE), so they pass; every other kind is refused, by the name it is refused as.
SMS_NUMBER_TYPES = ("MOBILE", "FIXED_LINE_OR_MOBILE")
REFUSED_KIND = {
    "FIXED_LINE": "landline",
    "TOLL_FREE": "toll-free",
    "PREMIUM_RATE": "premium-rate",
    "SHARED_COST": "shared-cost",
    "VOIP": "VoIP (internet)",
    "PERSONAL_NUMBER": "personal (forwarding)",
    "PAGER": "pager",
    "UAN": "company (UAN)",
    "VOICEMAIL": "voicemail",
}


def check_sms_number(e164: str, allowed_countries: tuple[str, ...]) -> None:
    """Refuse an SMS destination outside `allowed_countries` or not a mobile number (SMS pumping, toll fraud).

    BadRequest('sms_country_not_allowed') for another country; BadRequest('sms_number_type') for a landline,
    toll-free, premium-rate, shared-cost, satellite or other non-mobile number. Pure: the phone metadata only.
    """
    import phonenumbers

    number = phonenumbers.parse(e164, None)
    region = phonenumbers.region_code_for_number(number)
    if region == phonenumbers.UNKNOWN_REGION or region == "001":
        # Non-geographic codes: satellite phones (+870, +881), international networks and services.
        raise BadRequest(
            "We cannot send text messages to satellite or international-network numbers; use a mobile number "
            "or choose email.",
            code="sms_number_type",
        )
    if region not in allowed_countries:
        raise BadRequest(
            f"We can only send text messages to mobile numbers from {', '.join(allowed_countries)}; "
            "use one of those, or choose email.",
            code="sms_country_not_allowed",
        )
    names = {value: name for name, value in vars(phonenumbers.PhoneNumberType).items() if isinstance(value, int)}
    kind = names.get(phonenumbers.number_type(number), "UNKNOWN")
    if kind not in SMS_NUMBER_TYPES:
        described = REFUSED_KIND.get(kind)
        what = f"That is a {described} number" if described else "We cannot tell that number is a mobile"
        raise BadRequest(
            f"{what}; text messages go to mobile numbers only. Use a mobile number, or choose email.",
            code="sms_number_type",
        )


def sms_prefix(e164: str) -> str:
    """The block a number belongs to, for counting taps on a range: the E.164 number less its last 4 digits."""
    return e164[:-4]


def normalise_email(raw: str) -> str:
    """An address SES can take, checked for syntax only (no DNS at run time), or BadRequest('invalid_email').

    The SMTP envelope SES sends with is ASCII only: the local part must be ASCII, and an internationalised
    domain is kept in its Punycode (IDNA) form, so `ana@bücher.de` is stored and sent as `ana@xn--bcher-kva.de`.
    """
    # Imported here, not at the top: a cold start pays for it only on the paths that use it.
    from email_validator import EmailNotValidError, validate_email

    local = raw.rpartition("@")[0]
    if not local.isascii():
        raise BadRequest(
            "That email address has letters outside plain ASCII before the @, which email cannot be sent to; "
            "use an address written in plain letters, digits and punctuation.",
            code="invalid_email",
        )
    try:
        result = validate_email(raw, check_deliverability=False, allow_smtputf8=False)
    except EmailNotValidError as exc:
        raise BadRequest(f"That is not a valid email address: {exc}", code="invalid_email") from exc
    # The ASCII form: the local part as given, the domain in IDNA form (None only for a form SES cannot take).
    if not result.ascii_email:
        raise BadRequest("That email address cannot be written in ASCII.", code="invalid_email")
    return str(result.ascii_email)


# Domains whose mail service delivers `local+anything@domain` to `local@domain`, so one inbox can type as many
# addresses as it likes. Sources, each the provider's own help page: Gmail "Create task-specific email addresses"
# (support.google.com/mail/answer/22370, also for googlemail.com); Microsoft "Plus addressing in Exchange Online",
# on by default for Outlook.com, Hotmail and Live (learn.microsoft.com/exchange/recipients-in-exchange-online/
# plus-addressing-in-exchange-online); Apple "Use plus addressing in iCloud Mail" (support.apple.com/guide/icloud/
# mm6b1a490a9d); Fastmail "Plus addressing and subdomain addressing" (fastmail.help/hc/en-us/articles/360058753794);
# Proton "How to use plus addressing / aliases" (proton.me/support/addresses-and-aliases). A custom domain may route
# `+` to anyone, so elsewhere the whole local part counts.
PLUS_ADDRESSING_DOMAINS = frozenset(
    {
        "gmail.com",
        "googlemail.com",
        "outlook.com",
        "hotmail.com",
        "hotmail.co.uk",
        "hotmail.fr",
        "hotmail.de",
        "hotmail.it",
        "hotmail.es",
        "live.com",
        "live.co.uk",
        "live.fr",
        "msn.com",
        "icloud.com",
        "me.com",
        "mac.com",
        "fastmail.com",
        "fastmail.fm",
        "proton.me",
        "protonmail.com",
        "protonmail.ch",
        "pm.me",
    }
)
# Gmail ignores dots in the local part, and googlemail.com is the same mailbox as gmail.com (Google's "Dots don't
# matter in Gmail addresses", support.google.com/mail/answer/7436150). No other provider here promises either.
GMAIL_DOMAINS = frozenset({"gmail.com", "googlemail.com"})


def mailbox_of(address: str) -> str:
    """The mailbox an ASCII, lower-cased address delivers to, as taps are matched by: its sub-address (`+tag`)
    dropped where the provider honours plus-addressing, and Gmail's dots and googlemail.com folded away. Only for
    recognising a person (one place per mailbox, caps); mail still goes to the address as typed."""
    local, _, domain = address.rpartition("@")
    if domain not in PLUS_ADDRESSING_DOMAINS:
        return address
    base = local.split("+", 1)[0] or local  # "+tag@gmail.com" has no mailbox before the plus: keep it whole
    if domain in GMAIL_DOMAINS:
        base = base.replace(".", "") or base
        domain = "gmail.com"
    return f"{base}@{domain}"


def match_keys(contact: Contact, key: str) -> tuple[str, ...]:
    """The keyed hashes a contact may be stored under: its mailbox's first, then the one its exact spelling had
    before mailboxes were matched (only when it differs), so older suppressions and places are still found."""
    keys = [contact_key(contact.match, key)]
    if contact.legacy_match is not None:
        keys.append(contact_key(contact.legacy_match, key))
    return tuple(keys)


def looks_like_email(raw: str) -> bool:
    """True when the text is plainly meant as an email address."""
    return "@" in raw


def normalise_contact(channel: str, raw: str, default_region: str) -> Contact:
    """Validate a contact for its channel and return its normalised forms."""
    if channel not in CHANNELS:
        raise BadRequest("channel must be 'sms' or 'email'.", code="unsupported_channel")
    text = raw.strip()
    if not text:
        raise BadRequest("contact is required.", code="missing_field")
    if len(text) > MAX_CONTACT_LEN:
        raise BadRequest(f"contact must be at most {MAX_CONTACT_LEN} characters.", code="field_too_long")
    if channel == "sms":
        if looks_like_email(text):
            raise BadRequest(
                "An email address cannot receive SMS; choose email instead.", code="contact_channel_mismatch"
            )
        e164 = normalise_phone(text, default_region)
        return Contact(channel, e164, e164)
    if not looks_like_email(text):
        raise BadRequest("That looks like a phone number; choose SMS instead.", code="contact_channel_mismatch")
    address = normalise_email(text)
    # Lower-cased, not case-folded: the address is ASCII, and lower-casing only merges spellings that differ in case.
    lowered = address.lower()
    match = mailbox_of(lowered)
    return Contact(channel, address, match, lowered if lowered != match else None)


def normalise_any(raw: str, default_region: str) -> Contact:
    """A contact of either kind, recognised by its shape (support tools take whatever a shopper gives)."""
    return normalise_contact("email" if looks_like_email(raw) else "sms", raw, default_region)


def contact_key(match: str, key: str) -> str:
    """A keyed hash of a contact: lets audit rows and opt-outs recognise a person without storing them."""
    return hmac.new(key.encode(), match.encode(), hashlib.sha256).hexdigest()[:40]


def mask(address: str) -> str:
    """A contact shortened for screens: '+4477•••••123', 'a•••@example.com'."""
    if "@" in address:
        local, _, domain = address.partition("@")
        return f"{local[:1]}•••@{domain}"
    if len(address) <= 6:
        return "•" * len(address)
    return f"{address[:5]}•••••{address[-3:]}"
