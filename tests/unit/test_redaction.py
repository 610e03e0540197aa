"""PII redaction as a pure function: what is redacted, and the ordinary numbers that must survive."""

from __future__ import annotations

import time

import pytest

from capture.redact import ACCOUNT, CARD, EMAIL, PHONE, iban_valid, luhn_valid, redact, redact_if, redact_text

REDACTED = [
    # e-mail addresses
    ("write to ana.diaz+support@example.co.uk today", f"write to {EMAIL} today"),
    ("<mailto:bob@corp.example|bob@corp.example>", f"<mailto:{EMAIL}|{EMAIL}>"),
    ("Contact: J_O'Neil@ex-ample.org.", f"Contact: J_O'{EMAIL}."),
    # phone numbers
    ("call +1 (555) 123-4567 now", f"call {PHONE} now"),
    ("call 555-123-4567 or 555.123.4567", f"call {PHONE} or {PHONE}"),
    ("(555) 123 4567", PHONE),
    ("London: +44 20 7946 0958", f"London: {PHONE}"),
    ("London: 020 7946 0958", f"London: {PHONE}"),
    ("Paris: 01 23 45 67 89", f"Paris: {PHONE}"),
    ("Berlin +49 30 1234567", f"Berlin {PHONE}"),
    ("<tel:+15551234567|+1 555 123 4567>", f"<tel:{PHONE}|{PHONE}>"),
    # payment cards (Luhn-valid)
    ("card 4111 1111 1111 1111 expired", f"card {CARD} expired"),
    ("card 4111-1111-1111-1111", f"card {CARD}"),
    ("amex 378282246310005", f"amex {CARD}"),
    ("mc 5555555555554444.", f"mc {CARD}."),
    # IBANs (mod-97 valid) and account numbers after a keyword
    ("IBAN GB82 WEST 1234 5698 7654 32 please", f"IBAN {ACCOUNT} please"),
    ("pay DE89370400440532013000", f"pay {ACCOUNT}"),
    ("GB82 WEST 1234 5698 7654 32 ABCD", f"{ACCOUNT} ABCD"),
    ("account number: 12345678", f"account number: {ACCOUNT}"),
    ("Acct #987654321 is closed", f"Acct #{ACCOUNT} is closed"),
    ("your account is 0012 3456 789", f"your account is {ACCOUNT}"),
    ("routing number 021000021", f"routing number {ACCOUNT}"),
    ("sort code 12-34-56", f"sort code {ACCOUNT}"),
]

KEPT = [
    "order 4111111111111112 shipped",  # 16 digits, Luhn-invalid: an order number, not a card
    "order #1234567890123456",
    "ticket 123456789 and order 0012345",
    "released on 2024-01-15 at 10:30",
    "dates 01.02.2024 and 01-02-2024",
    "server 192.168.1.10 on port 8080",
    "version 1.2.3, build 20240115",
    "it costs $1,234.56 or 1 234,56 €",
    "pi is 3.14159265358979",
    "Slack ts 1700000000.000100",
    "5551234567",  # a bare run of digits: no phone shape, left alone (a documented limit)
    "ZZ00 AAAA BBBB CCCC",  # looks like an IBAN, fails its check
    "the email field is required; use @ana in Slack",
    "4444 4444 4444 4444",  # one repeated digit: a placeholder, not a card
    "",
]


@pytest.mark.parametrize(("text", "expected"), REDACTED)
def test_pii_is_replaced_by_placeholders(text: str, expected: str) -> None:
    assert redact(text) == expected


@pytest.mark.parametrize("text", KEPT)
def test_ordinary_numbers_and_words_are_kept(text: str) -> None:
    assert redact(text) == text


def test_counts_say_what_was_found() -> None:
    result = redact_text("ana@example.com, +1 555 123 4567, 4111 1111 1111 1111, acct 12345678, bob@example.com")
    assert result.counts == {EMAIL: 2, PHONE: 1, CARD: 1, ACCOUNT: 1}
    assert result.changed
    assert not redact_text("nothing here").changed


def test_redact_if_follows_the_setting() -> None:
    assert redact_if(False, "ana@example.com") == "ana@example.com"
    assert redact_if(True, "ana@example.com") == EMAIL
    assert redact_if(True, None) is None
    assert redact_if(True, "") == ""


def test_checksums() -> None:
    assert luhn_valid("4111111111111111")
    assert not luhn_valid("4111111111111112")
    assert not luhn_valid("")
    assert iban_valid("GB82WEST12345698765432")
    assert iban_valid("GB82 WEST 1234 5698 7654 32")
    assert not iban_valid("GB83WEST12345698765432")
    assert not iban_valid("GB82")


def test_redaction_is_idempotent_and_keeps_unicode() -> None:
    text = "Olá 👋 ana@example.com — ☎ +351 21 123 4567, 名前 ok"
    once = redact(text)
    assert once == f"Olá 👋 {EMAIL} — ☎ {PHONE}, 名前 ok"
    assert redact(once) == once


@pytest.mark.parametrize("unit", ["a", "1", "1 ", "+1 ", "x@", "0 12 ", "GB82 ", "1-", "("])
def test_a_megabyte_of_hostile_text_is_redacted_in_bounded_time(unit: str) -> None:
    text = unit * (1_000_000 // len(unit))
    started = time.perf_counter()
    redact(text)
    assert time.perf_counter() - started < 15  # linear scans: about 1-4 s on a busy 2-core machine
