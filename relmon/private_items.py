"""What the operator's commands (`relmon regress`, `relmon gaps`, `relmon golden list`) show of items from private
channels, DMs and Slack Connect channels: their figures and ids, not their text, unless `--include-private` says
the operator takes on sharing it only with those channels' members (as `relmon golden export --include-private`).
A report file or a terminal is easily pasted beyond them; an item whose text is left out is counted, and the count
is said in every format, so that nothing is left out silently."""

from __future__ import annotations

from common.privacy import may_quote_text

WITHHELD = "(private channel: withheld)"


def text_shown(channel_is_private: bool, *, include_private: bool) -> bool:
    """Whether an item's text may be printed: a public channel's always (common.privacy's rule with no alert
    channel chosen for it), a private one's only when asked."""
    return include_private or may_quote_text(channel_is_private, rule_names_alert_channel=False, quote_private=False)


def withheld_note(count: int) -> str | None:
    """The line that says how many items' texts were left out (None: none were)."""
    if count == 0:
        return None
    items = "item" if count == 1 else "items"
    return f"{count} private {items} withheld; --include-private to show them"
