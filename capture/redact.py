"""PII redaction (RELMON_REDACT_PII): e-mail addresses, phone numbers, payment card numbers and account numbers
(IBANs, and numbers introduced by "account", "acct", "routing number", "sort code") become placeholders before a
text reaches the LLM or the database. Pure functions over strings.

Each kind is validated, not just matched, so ordinary numbers survive: a card number must pass the Luhn check
(an order number of 16 digits usually does not), an IBAN its ISO 13616 mod-97 check, and a phone number needs a
phone's shape (a leading `+`, an area code in brackets, a trunk `0`, or the 3-3-4 North American layout with
separators) so dates, amounts, versions, IP addresses and bare order numbers stay as they are.
Limits: a phone number written as one run of digits without `+` ("5551234567") and an account number written
without a keyword are not recognised; names and postal addresses are not redacted.
"""

from __future__ import annotations

import re

EMAIL = "[EMAIL]"
PHONE = "[PHONE]"
CARD = "[CARD]"
ACCOUNT = "[ACCOUNT]"

# ASCII digits only: `\d` would also match other scripts' digits, which no card or phone number uses.
#
# Linear time: every pattern opens with a literal or a character class, and the "not preceded by" check comes
# right after that first character (a lookbehind before it would make the engine try every position of the text
# instead of scanning for the first character). Runs of digits and blanks are possessive (`++`, `{m,n}+`), so a
# failed match is never retried by splitting the same run another way: before this, 40,000 characters of
# `+111…1 ` took 5 s in the international phone pattern, and "account" followed by blanks was quadratic.
_EMAIL = re.compile(
    r"[A-Za-z0-9._%+-](?<![\w.%+-].)[A-Za-z0-9._%+-]{0,63}+@"
    r"[A-Za-z0-9-]{1,63}+(?:\.[A-Za-z0-9-]{1,63}+)*\.[A-Za-z]{2,24}+"
)
# Compact ("DE89370400440532013000") or printed in groups of four ("DE89 3704 0044 0532 0130 00").
_IBAN = re.compile(
    r"[A-Z](?<![A-Za-z0-9].)[A-Z][0-9]{2}"
    r"(?:[A-Z0-9]{11,30}+|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4}+)?)(?![A-Za-z0-9])"
)
_CARD = re.compile(r"[0-9](?<![0-9].)(?:[ -]?+[0-9]){12,18}(?![0-9])")
_ACCOUNT = re.compile(
    r"(?i)(?P<label>[abrs](?<!\w.)(?:ccount|cct|/c|outing|ort[ -]?code|sb)\.?"
    r"(?:[ \t]*+(?:number|num|no\.?|nr\.?|#|code))?[ \t]*+(?:is|:|=|#)?[ \t]*+)"
    r"(?P<number>[0-9](?:[ -]?+[0-9]){4,33}(?![0-9]))"
)
_PHONE_INTERNATIONAL = re.compile(r"\+(?<![\w+].)[0-9]{1,3}+(?:[ .-]?+\(?+[0-9]{1,5}+\)?+){1,6}(?![0-9])")
# The groups after the area code are read as whole runs of digits; `bracketed_phone_length` keeps what the
# original layout allowed: at most four groups of 2 to 5 digits, a run of L digits counting as ceil(L / 5).
_PHONE_BRACKETS = re.compile(r"\((?<![\w(].)[0-9]{2,5}+\)(?:[ .-]?+[0-9]++)+")
_PHONE_TRUNK = re.compile(r"0(?<![\w.+-].)[0-9]{1,4}+(?:[ .-][0-9]{2,5}+){1,4}(?![0-9]|\.[0-9])")
_PHONE_NANP = re.compile(r"[0-9](?<![\w.+-].)[0-9]{2}([ .-])[0-9]{3}\1[0-9]{4}(?![0-9]|\.[0-9])")
_DIGIT_RUN = re.compile(r"[0-9]++")


_NOT_DIGITS = re.compile(r"[^0-9]++")
# Letters as ISO 13616 numbers them (A=10 … Z=35), for str.translate: the check runs at C speed.
_IBAN_NUMBERS = str.maketrans({letter: str(number) for number, letter in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZ", 10)})
# Luhn: what each digit adds when it sits in a doubled place.
_LUHN_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)


def digits_of(text: str) -> str:
    return _NOT_DIGITS.sub("", text)


def luhn_valid(number: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    if not number:
        return False
    backwards = number[::-1]
    total = sum(map(int, backwards[0::2])) + sum(_LUHN_DOUBLED[int(digit)] for digit in backwards[1::2])
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers (A=10 … Z=35), mod 97 == 1."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int(rearranged.upper().translate(_IBAN_NUMBERS)) % 97 == 1


def _is_card(candidate: str) -> bool:
    digits = digits_of(candidate)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_valid(digits)


def _is_phone(candidate: str, low: int, high: int) -> bool:
    return low <= len(digits_of(candidate)) <= high


def bracketed_phone_length(candidate: str) -> int:
    """How much of `candidate` ("(555) 123 4567 …", an area code in brackets and runs of digits) is a phone number
    in the bracketed layout: up to four groups of 2 to 5 digits after the brackets, each optionally after one
    separator. A run of L digits fills ceil(L / 5) groups and needs at least 2 digits; 0 when none fits."""
    start = candidate.index(")") + 1
    end = groups = 0
    for run in _DIGIT_RUN.finditer(candidate, start):
        groups += -(-len(run.group(0)) // 5)
        if len(run.group(0)) < 2 or groups > 4:
            break
        end = run.end()
    return end


def redact(text: str) -> str:
    """Replace PII in `text` with placeholders. E-mail first (addresses may hold digits), then IBANs and cards
    (long numbers a phone pattern might half-match), accounts, phones."""

    def replace_if(check, placeholder: str):
        def replace(match: re.Match[str]) -> str:
            return placeholder if check(match.group(0)) else match.group(0)

        return replace

    def replace_iban(match: re.Match[str]) -> str:
        # A word in capitals right after a grouped IBAN can look like one more group: try shorter prefixes.
        candidate = match.group(0)
        while True:
            if iban_valid(candidate):
                return ACCOUNT + match.group(0)[len(candidate) :]
            if " " not in candidate:
                return match.group(0)
            candidate = candidate.rsplit(" ", 1)[0]

    def replace_bracketed_phone(match: re.Match[str]) -> str:
        candidate = match.group(0)
        length = bracketed_phone_length(candidate)
        if not length or not _is_phone(candidate[:length], 7, 13):
            return candidate
        return PHONE + candidate[length:]

    def replace_account(match: re.Match[str]) -> str:
        return match.group("label") + ACCOUNT

    text = _EMAIL.sub(replace_if(lambda _: True, EMAIL), text)
    text = _IBAN.sub(replace_iban, text)
    text = _CARD.sub(replace_if(_is_card, CARD), text)
    text = _ACCOUNT.sub(replace_account, text)
    text = _PHONE_INTERNATIONAL.sub(replace_if(lambda m: _is_phone(m, 8, 15), PHONE), text)
    text = _PHONE_BRACKETS.sub(replace_bracketed_phone, text)
    text = _PHONE_TRUNK.sub(replace_if(lambda m: _is_phone(m, 9, 12), PHONE), text)
    text = _PHONE_NANP.sub(replace_if(lambda m: True, PHONE), text)
    return text


def redact_if(enabled: bool, text: str | None) -> str | None:
    """`text` redacted when the setting is on (None and empty texts pass through)."""
    if not enabled or not text:
        return text
    return redact(text)
