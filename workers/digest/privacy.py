"""Whether a digest may quote an answer's text (DESIGN.md "Privacy"): the same rule as alerts.

A private channel's text is quoted only when the alerts would quote it (`workers.alerts.policy.may_quote`:
the channel's OWN rule names an alert channel and quoting is on) and only in the alert channel that rule
sends to; anywhere else the digest shows the score and a link. A defaults section cannot turn quoting on
for a private channel by itself: its alert channel is not one the channel's people chose.
"""

from __future__ import annotations

from store.rules import ChannelRules
from store.settings import Settings
from workers.alerts.policy import may_quote as alert_may_quote


def may_quote(
    channel_id: str | None,
    channel_is_private: bool,
    rules: ChannelRules,
    settings: Settings,
    destination_channel: str | None,
) -> bool:
    if not channel_is_private:
        return True
    own_rule = rules.channels.get(channel_id) if channel_id else None
    effective = rules.for_channel(channel_id, settings)
    # The alerts' rule, word for word (workers/tasks/slack.py `quote_allowed` builds the same arguments).
    alerts_would_quote = alert_may_quote(
        channel_is_private,
        rule_names_alert_channel=own_rule is not None and own_rule.alert_channel is not None,
        quote_private=effective.quote_private,
    )
    # ...and only where those alerts go.
    return alerts_would_quote and destination_channel is not None and effective.alert_channel == destination_channel
