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
from collections import Counter
from dataclasses import dataclass, field

EMAIL = "[EMAIL]"
PHONE = "[PHONE]"
CARD = "[CARD]"
ACCOUNT = "[ACCOUNT]"

# ASCII digits only: `\d` would also match other scripts' digits, which no card or phone number uses.
_EMAIL = re.compile(r"(?<![\w.%+-])[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}")
# Compact ("DE89370400440532013000") or printed in groups of four ("DE89 3704 0044 0532 0130 00").
_IBAN = re.compile(
    r"(?<![A-Za-z0-9])[A-Z]{2}[0-9]{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,4})?)(?![A-Za-z0-9])"
)
_CARD = re.compile(r"(?<![0-9])[0-9](?:[ -]?[0-9]){12,18}(?![0-9])")
_ACCOUNT = re.compile(
    r"(?i)(?P<label>\b(?:account|acct|a/c|routing|sort[ -]?code|bsb)\.?"
    r"(?:[ \t]*(?:number|num|no\.?|nr\.?|#|code))?[ \t]*(?:is|:|=|#)?[ \t]*)"
    r"(?P<number>[0-9](?:[ -]?[0-9]){4,33})(?![0-9])"
)
_PHONE_INTERNATIONAL = re.compile(r"(?<![\w+])\+[0-9]{1,3}(?:[ .-]?\(?[0-9]{1,5}\)?){1,6}(?![0-9])")
_PHONE_BRACKETS = re.compile(r"(?<![\w(])\([0-9]{2,5}\)[ .-]?[0-9]{2,5}(?:[ .-]?[0-9]{2,5}){0,3}(?![0-9])")
_PHONE_TRUNK = re.compile(r"(?<![\w.+-])0[0-9]{1,4}(?:[ .-][0-9]{2,5}){1,4}(?![0-9]|\.[0-9])")
_PHONE_NANP = re.compile(r"(?<![\w.+-])[0-9]{3}([ .-])[0-9]{3}\1[0-9]{4}(?![0-9]|\.[0-9])")


@dataclass(frozen=True)
class Redaction:
    text: str
    counts: Counter = field(default_factory=Counter)  # placeholder → how many were put in

    @property
    def changed(self) -> bool:
        return bool(self.counts)


def digits_of(text: str) -> str:
    return "".join(ch for ch in text if "0" <= ch <= "9")


def luhn_valid(number: str) -> bool:
    """The Luhn checksum every payment card number carries."""
    digits = [int(ch) for ch in number]
    if not digits:
        return False
    total = 0
    for position, digit in enumerate(reversed(digits)):
        if position % 2 == 1:
            digit *= 2
            if digit > 9:
                digit -= 9
        total += digit
    return total % 10 == 0


def iban_valid(candidate: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters to numbers (A=10 … Z=35), mod 97 == 1."""
    compact = candidate.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(ch, 36)) for ch in rearranged)) % 97 == 1


def _is_card(candidate: str) -> bool:
    digits = digits_of(candidate)
    return 13 <= len(digits) <= 19 and len(set(digits)) > 1 and luhn_valid(digits)


def _is_phone(candidate: str, low: int, high: int) -> bool:
    return low <= len(digits_of(candidate)) <= high


def redact_text(text: str) -> Redaction:
    """Replace PII in `text` with placeholders; counts say what was found. E-mail first (addresses may hold
    digits), then IBANs and cards (long numbers a phone pattern might half-match), accounts, phones."""
    counts: Counter = Counter()

    def replace_if(check, placeholder: str):
        def replace(match: re.Match[str]) -> str:
            if not check(match.group(0)):
                return match.group(0)
            counts[placeholder] += 1
            return placeholder

        return replace

    def replace_iban(match: re.Match[str]) -> str:
        # A word in capitals right after a grouped IBAN can look like one more group: try shorter prefixes.
        candidate = match.group(0)
        while True:
            if iban_valid(candidate):
                counts[ACCOUNT] += 1
                return ACCOUNT + match.group(0)[len(candidate) :]
            if " " not in candidate:
                return match.group(0)
            candidate = candidate.rsplit(" ", 1)[0]

    def replace_account(match: re.Match[str]) -> str:
        counts[ACCOUNT] += 1
        return match.group("label") + ACCOUNT

    text = _EMAIL.sub(replace_if(lambda _: True, EMAIL), text)
    text = _IBAN.sub(replace_iban, text)
    text = _CARD.sub(replace_if(_is_card, CARD), text)
    text = _ACCOUNT.sub(replace_account, text)
    text = _PHONE_INTERNATIONAL.sub(replace_if(lambda m: _is_phone(m, 8, 15), PHONE), text)
    text = _PHONE_BRACKETS.sub(replace_if(lambda m: _is_phone(m, 7, 13), PHONE), text)
    text = _PHONE_TRUNK.sub(replace_if(lambda m: _is_phone(m, 9, 12), PHONE), text)
    text = _PHONE_NANP.sub(replace_if(lambda m: True, PHONE), text)
    return Redaction(text, counts)


def redact(text: str) -> str:
    return redact_text(text).text


def redact_if(enabled: bool, text: str | None) -> str | None:
    """`text` redacted when the setting is on (None and empty texts pass through)."""
    if not enabled or not text:
        return text
    return redact(text)
