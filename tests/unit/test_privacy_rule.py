"""common.privacy: one rule decides every quote for the place the words go (an alert channel, the digest channel,
one person), and a private channel's figures appear only where its audience may see them."""

from __future__ import annotations

import pytest

from common.privacy import Destination, may_quote, may_show_figures
from store.rules import ChannelRules
from store.settings import Settings

SETTINGS = Settings(_env_file=None, alert_channel="C_DEFAULT")
QUOTING = ChannelRules.model_validate({"channels": {"G1": {"alert_channel": "C_A", "quote_private": True}}})


@pytest.mark.parametrize(
    ("destination", "quoted"),
    [
        ("C_A", True),  # the alert channel its own rule names, quoting on
        ("C_DEFAULT", False),  # another alert channel
        ("C_DIGEST", False),
        (None, False),
        (Destination("C_A", lambda channel: True), True),  # a member reading where it may be quoted
        (Destination("C_A", lambda channel: False), False),  # a person who is not its member
        (Destination(None, lambda channel: True), False),  # a member's App Home or DM: not its alert channel
    ],
)
def test_a_private_channel_is_quoted_only_in_its_own_alert_channel(destination, quoted: bool) -> None:
    assert may_quote("G1", True, QUOTING, SETTINGS, destination) is quoted


def test_a_public_channel_is_quoted_anywhere_but_to_a_person_outside_it() -> None:
    for destination in ("C_A", "C_DIGEST", None, Destination(None, lambda channel: True)):
        assert may_quote("C1", False, QUOTING, SETTINGS, destination)
    assert not may_quote("C1", False, QUOTING, SETTINGS, Destination("C1", lambda channel: False))


def test_a_private_channels_figures_show_where_its_audience_may_see_them() -> None:
    named = ChannelRules.model_validate({"channels": {"G1": {"alert_channel": "C_A"}}})
    assert may_show_figures("C1", False, named, SETTINGS, "C_DIGEST")  # public: anywhere
    assert may_show_figures("G1", True, named, SETTINGS, "C_A")  # its own rule's alert channel
    assert not may_show_figures("G1", True, named, SETTINGS, "C_DIGEST")
    assert may_show_figures("G1", True, named, SETTINGS, "C_DIGEST", audience_are_members=lambda c: c == "G1")
    defaults = ChannelRules.model_validate({"defaults": {"alert_channel": "C_DIGEST"}})
    assert not may_show_figures("G1", True, defaults, SETTINGS, "C_DIGEST")  # the defaults' channel is not its own
