"""Whether a digest may quote an answer's text (DESIGN.md "Privacy"): the same rule as alerts.

Text from a private channel is quoted only where that channel's rule allows it (`quote_private`) and only in
the alert channel its rule names; anywhere else the digest shows the score and a link.
"""

from __future__ import annotations

from store.rules import EffectiveRule


def may_quote(channel_is_private: bool, rule: EffectiveRule, destination_channel: str | None) -> bool:
    if not channel_is_private:
        return True
    return bool(rule.quote_private and destination_channel and rule.alert_channel == destination_channel)
