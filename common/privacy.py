"""Whether a message may quote a channel's text, or show a private channel's figures: one rule for alerts,
their redraws, summaries, the digest and what one person is shown, decided for the place the words go.

A private channel's text is quoted only when the channel's OWN rule names an alert channel and quoting is on
(`may_quote_channel`), and only in that alert channel (`may_quote` with the destination); anywhere else a
message shows the score and a link. Its figures appear only where its audience may see them
(`may_show_figures`). A defaults section cannot turn quoting on for a private channel by
itself: its alert channel is not one the channel's people chose.

A channel shared with another organisation (Slack Connect) is treated as private: capture stores its pairs
with `channel_is_private` set (and `channel_is_ext_shared` saying why), so every rule here applies to it.

An exchange sent to the ingest API (bot.ingest) says who could read it: a `dm` or `private` one is stored with
`channel_is_private` set, and is never quoted anywhere, whatever a channel's rule says (`may_quote_exchange`): the
people of an alert channel never chose to read someone's conversation with an agent. Only its bot's own rule
(`bots:` in the rules file) can say otherwise, for the alert channel it names. In the reports such an exchange,
when it happened in no Slack channel, is grouped under its bot's key (`store.bot_groups`), a private "channel"
whose own rule is the bot's: `may_quote` reads it as any other, so by default its words are quoted nowhere.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from store.rules import ChannelRule, ChannelRules
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
    own_rule = rules.own(channel_id)
    return may_quote_text(
        channel_is_private,
        rule_names_alert_channel=own_rule is not None and own_rule.alert_channel is not None,
        quote_private=rules.for_channel(channel_id, settings).quote_private,
    )


@dataclass(frozen=True)
class Destination:
    """Where the words go: a channel (`channel_id`: the alert channel an alert lives in, the digest channel, the
    conversation a preview is shown in) and, when one person reads them (App Home, a DM, an ephemeral
    preview), `reader_may_read`: whether that person is a member of a source channel."""

    channel_id: str | None
    reader_may_read: Callable[[str | None], bool] | None = None


def may_quote(
    channel_id: str | None,
    channel_is_private: bool,
    rules: ChannelRules,
    settings: Settings,
    destination: Destination | str | None,
) -> bool:
    """The one rule for every quote, on every post and every redraw, decided for the place the words go: a
    public channel's text anywhere (to a person: if they are its member); a private (or shared) channel's only in
    the alert channel its OWN rule names, with quoting on there, and to a person only if a member too. A redrawn
    alert asks for the channel it lives in, not for where today's rule would send a new one: a rule that changed
    since never makes an old alert quote a private channel."""
    where = destination if isinstance(destination, Destination) else Destination(destination)
    if where.reader_may_read is not None and not where.reader_may_read(channel_id):
        return False
    if not channel_is_private:
        return True
    return (
        may_quote_channel(channel_id, channel_is_private, rules, settings)
        and where.channel_id is not None
        and rules.for_channel(channel_id, settings).alert_channel == where.channel_id
    )


def may_show_figures(
    channel_id: str | None,
    channel_is_private: bool,
    rules: ChannelRules,
    settings: Settings,
    destination_channel: str | None,
    *,
    audience_are_members: Callable[[str], bool] = lambda _channel: False,
) -> bool:
    """Whether a channel's figures and worst lines (scores, links) may be shown in a channel, as App Home shows
    them to a person: a public channel's anywhere; a private channel's only where its audience may see them: in
    the alert channel its own rule names (its people chose it), or in a channel whose every member is one of its
    own (`audience_are_members`)."""
    if not channel_is_private:
        return True
    own_rule = rules.own(channel_id)
    if own_rule is not None and own_rule.alert_channel is not None and own_rule.alert_channel == destination_channel:
        return True
    return channel_id is not None and audience_are_members(channel_id)


QUOTABLE_VISIBILITY = "public"


def may_quote_exchange(visibility: str | None, bot_rule: ChannelRule | None = None, where: str | None = None) -> bool:
    """Whether an ingested exchange's words may be quoted at all (None: not an ingested exchange): a public one's,
    and then where `may_quote` allows; a dm or private one's only where its bot's OWN rule (`bots:`) names `where`
    as its alert channel and says `quote_private: true` (the admin chose that channel's people for it)."""
    if visibility is None or visibility == QUOTABLE_VISIBILITY:
        return True
    return (
        bot_rule is not None
        and bool(bot_rule.quote_private)
        and bot_rule.alert_channel is not None
        and bot_rule.alert_channel == where
    )
