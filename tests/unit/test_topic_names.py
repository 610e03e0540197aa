"""The check a topic's name must pass (`topics.naming.name_problem`) and the prompt that asks once more."""

from __future__ import annotations

import pytest

from topics.naming import keyword_names, name_problem, naming_messages, parse_name

GOOD = [
    "Refunds for annual plans",
    "SSO login with Okta",
    "Exporting data to CSV",
    "API keys",
    "Okta's SSO setup",
    "E-mail delivery delays",
    "Upgrading to v2.1",
    "Error 404 on login",
    "Windows 11 install",
    "AES256 encryption settings",
    "Bill amount disputes",  # words scikit-learn lists as stop words, a topic's words here
    "Call back requests",
    "System status page",
    "Two factor authentication",
    "Rechnungen und Zahlungen",  # not English: words all the same
    "Réinitialiser le mot de passe",
    "Moving invoices between accounts and teams",  # six words: the most
]


@pytest.mark.parametrize("name", GOOD)
def test_a_good_name_passes(name):
    assert name_problem(name) is None


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        (None, "it is empty"),
        ("", "it is empty"),
        ("   \n", "it is empty"),
        ("...", "only numbers or punctuation"),
        ("- - -", "only numbers or punctuation"),
        ("🙂", "only numbers or punctuation"),
        ("12345", "only numbers or punctuation"),
        ("#1", "only numbers or punctuation"),
        ("3.14", "only numbers or punctuation"),
        ("1712345678.123456", "only numbers or punctuation"),  # a Slack ts
        ("C0SUPPORT1", "an ID"),  # a Slack channel ID
        ("U123ABC", "an ID"),  # a user ID
        ("W0123ABCD", "an ID"),
        ("Questions in C0SUPPORT1", "an ID"),  # words around an ID name nothing either
        ("Thread 1712345678.123456 replies", "an ID"),
        ("deadbeef1", "an ID"),  # a hash
        ("3f2a9c1b7e4d", "an ID"),
        ("Commit 9fceb02 issues", "an ID"),
        ("550e8400-e29b-41d4-a716-446655440000", "an ID"),  # a UUID
        ("A", "it is a stop word"),  # the one-letter name that reached the digest
        ("a", "it is a stop word"),
        ("The", "it is a stop word"),
        ("Of the", "made only of stop words"),
        ("Something else", "made only of stop words"),
        ("Whatever they were about", "made only of stop words"),
        ("X", "it is one word"),
        ("Refunds", "it is one word"),
        ("ABCDEFG", "it is one word"),
        ("Questions", "it is one word"),
        ("One two three four five six seven", "it has 7 words"),
        ("Customers asking about how to get refunds for their annual plans", "words (a name has 2 to 6)"),
    ],
)
def test_a_bad_name_says_what_is_wrong(name, problem):
    found = name_problem(name)
    assert found is not None and problem in found


def test_the_problem_never_repeats_the_name():
    """It is logged, and a name is made of the questions' words."""
    for name in ("C0SUPPORT1", "Secretproject", "Zorblax quux frobnicate glorp blip zap wobble"):
        assert "C0SUPPORT1" not in (name_problem(name) or "") and name not in (name_problem(name) or "")


def test_a_parsed_reply_is_checked_as_the_name():
    assert name_problem(parse_name('"A."\n')) == "it is a stop word"
    assert name_problem(parse_name("Name: SSO login")) is None
    assert name_problem(parse_name("\n\n")) == "it is empty"


def test_asking_again_keeps_the_beginning_and_says_what_was_wrong():
    first = naming_messages(["How do I get a refund?", "Refund for my annual plan?"])
    again = naming_messages(["How do I get a refund?", "Refund for my annual plan?"], ("A", "it is a stop word"))
    assert again[:2] == first and len(again) == 4
    assert again[2] == {"role": "assistant", "content": "A"}
    assert again[3]["role"] == "user" and "cannot be used: it is a stop word" in again[3]["content"]
    assert "2 to 6" in again[3]["content"]


def test_keyword_names_are_the_fallback_of_a_name_failing_twice():
    """Not checked (they are the last resort), but they are words of the questions, never an ID."""
    name = keyword_names([["refund my annual plan", "annual refund"], ["reset password", "password email"]])[0]
    assert name_problem(name) is None
