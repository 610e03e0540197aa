"""What the digest may quote and how: the privacy rule for private channels (the same as the alerts'), escaping,
quoting only what it is given, and mentions that never ping."""

from __future__ import annotations

import json

from common.messages import blocks as block_kit
from common.messages.digest import digest_message
from common.privacy import may_quote
from common.privacy import may_quote_text as alert_may_quote
from store.rules import ChannelRules
from store.settings import Settings
from tests.report_tallies import build_report
from tests.stats_rows import PERIOD, PRICES, pair, thresholds_for, verdict


def test_private_text_is_quoted_only_in_the_alert_channel_its_rule_allows():
    settings = Settings(_env_file=None, alert_channel="CALERTS")
    rules = ChannelRules.model_validate(
        {"channels": {"GPRIV": {"quote_private": True, "alert_channel": "CQUOTE"}, "GOTHER": {}}}
    )
    assert may_quote("C1", False, rules, settings, "CANY")
    assert not may_quote("GOTHER", True, rules, settings, "CALERTS")
    assert not may_quote("GPRIV", True, rules, settings, "CALERTS")
    assert may_quote("GPRIV", True, rules, settings, "CQUOTE")
    assert not may_quote("GPRIV", True, rules, settings, None)


def test_private_text_needs_the_channels_own_rule_to_name_the_alert_channel_as_alerts_do():
    settings = Settings(_env_file=None, alert_channel="CALERTS")
    # Quoting on, but the channel's rule names no alert channel: its alerts would not quote, nor may the digest.
    own_quote_only = ChannelRules.model_validate({"channels": {"GPRIV": {"quote_private": True}}})
    assert not may_quote("GPRIV", True, own_quote_only, settings, "CALERTS")
    # Quoting on and an alert channel in the defaults: inherited, not chosen by the channel.
    from_defaults = ChannelRules.model_validate(
        {"defaults": {"quote_private": True, "alert_channel": "CALERTS"}, "channels": {"GPRIV": {}}}
    )
    assert not may_quote("GPRIV", True, from_defaults, settings, "CALERTS")
    assert not may_quote("GUNLISTED", True, from_defaults, settings, "CALERTS")
    # The defaults may still turn quoting on for a channel whose own rule names its alert channel.
    named = ChannelRules.model_validate(
        {"defaults": {"quote_private": True}, "channels": {"GPRIV": {"alert_channel": "CQUOTE"}}}
    )
    assert may_quote("GPRIV", True, named, settings, "CQUOTE")
    assert not may_quote("GPRIV", True, named, settings, "CALERTS")
    # Exactly the alerts' answer wherever the destination is the channel's alert channel.
    for rules in (own_quote_only, from_defaults, named):
        effective = rules.for_channel("GPRIV", settings)
        own = rules.channels.get("GPRIV")
        alerts = alert_may_quote(
            True, rule_names_alert_channel=bool(own and own.alert_channel), quote_private=effective.quote_private
        )
        assert may_quote("GPRIV", True, rules, settings, effective.alert_channel) == alerts


def a_message_quoting_only_the_public_answer() -> str:
    """A public and a private answer, both linked; only the public one's question and answer given to quote."""
    public = pair("C1", judgments=[verdict(0)])
    private = pair("GPRIV", private=True, judgments=[verdict(1)])
    report = build_report(PERIOD, [public, private], [], thresholds_for, PRICES)
    quotes = {public.id: ("How do I <reset> it?", "Try & see")}
    links = {public.id: "https://example.slack.com/archives/C1/p1", private.id: "https://example.slack.com/x"}
    message = digest_message(report, links, quotes, PRICES)
    return str(message["blocks"])


def test_message_escapes_what_it_quotes():
    rendered = a_message_quoting_only_the_public_answer()
    assert "How do I &lt;reset&gt; it?" in rendered and "Try &amp; see" in rendered


def test_message_quotes_only_what_it_is_given():
    rendered = a_message_quoting_only_the_public_answer()
    assert "<https://example.slack.com/x|view answer>" in rendered  # the private answer: score and link only
    assert "*1/4* relevancy in <#GPRIV>" in rendered


def test_digest_quotes_mentions_without_pinging():
    public = pair("C1", judgments=[verdict(0)])
    report = build_report(PERIOD, [public], [], thresholds_for, PRICES)
    quotes = {public.id: ("<!here> @channel what now?", "Ask <!subteam^S1|@team> or @everyone")}
    message = digest_message(report, {public.id: "https://example.slack.com/p1"}, quotes, PRICES)
    rendered = json.dumps(message["blocks"], ensure_ascii=False)
    assert "&lt;!here&gt;" in rendered and "&lt;!subteam^S1|@team&gt;" in rendered
    assert "@channel" not in rendered and "@everyone" not in rendered
    assert f"@{block_kit.ZERO_WIDTH_SPACE}channel" in rendered
