"""Whether a digest may quote an answer's text (DESIGN.md "Privacy"): the same rule as alerts.

A private channel's text is quoted only when the alerts would quote it (`workers.alerts.policy.may_quote`:
the channel's OWN rule names an alert channel and quoting is on) and only in the alert channel that rule
sends to; anywhere else the digest shows the score and a link. A defaults section cannot turn quoting on
for a private channel by itself: its alert channel is not one the channel's people chose.
"""

from __future__ import annotations

from store.rules import ChannelRules
from store.settings import Settings
from workers.alerts.policy import may_quote_channel


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
