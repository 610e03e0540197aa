"""Whether a message may quote a private channel's text: one rule for alerts, summaries and the digest.

A private channel's text is quoted only when the channel's OWN rule names an alert channel and quoting is on
(`may_quote_channel`), and the digest quotes it only in the alert channel that rule sends to; anywhere else
a message shows the score and a link. A defaults section cannot turn quoting on for a private channel by
itself: its alert channel is not one the channel's people chose.

A channel shared with another organisation (Slack Connect) is treated as private: capture stores its pairs
with `channel_is_private` set (and `channel_is_ext_shared` saying why), so every rule here applies to it.
"""

from __future__ import annotations

from store.rules import ChannelRules
from store.settings import Settings


def may_quote_text(
    channel_is_private: bool, *, rule_names_alert_channel: bool, quote_private: bool, ext_shared: bool = False
) -> bool:
    """Whether an alert or summary may quote the question, answer and reasoning. A public channel's
    text may be quoted; a private or Slack Connect channel's only when its own rule names the alert channel
    that receives it and says `quote_private: true` (the people there were chosen for it)."""
    if not (channel_is_private or ext_shared):
        return True
    return rule_names_alert_channel and quote_private


def may_quote_channel(
    channel_id: str | None, channel_is_private: bool, rules: ChannelRules, settings: Settings
) -> bool:
    """`may_quote` for a channel under the rules file: its own entry must name the alert channel; quoting may be
    on in that entry or in the defaults. Alerts, summaries and the digest all ask this."""
    own_rule = rules.channels.get(channel_id) if channel_id else None
    return may_quote_text(
        channel_is_private,
        rule_names_alert_channel=own_rule is not None and own_rule.alert_channel is not None,
        quote_private=rules.for_channel(channel_id, settings).quote_private,
    )


def may_quote(
    channel_id: str | None,
    channel_is_private: bool,
    rules: ChannelRules,
    settings: Settings,
    destination_channel: str | None,
) -> bool:
    if not channel_is_private:
        return True
    # The alerts' rule, the same function, and only where those alerts go.
    effective = rules.for_channel(channel_id, settings)
    return (
        may_quote_channel(channel_id, channel_is_private, rules, settings)
        and destination_channel is not None
        and effective.alert_channel == destination_channel
    )
