"""Who clicked "Add to test set" (or voted "Judge was right"), and what that person may see and change.

Two rules, both for one person at one place:
- what the modal quotes (the question, the expected answer): `common.privacy.may_quote` for the channel the click
  happened in (the alert channel, a DM) and the clicker's membership of the source channel
  (`common.membership.Viewer.may_read`): the same promise as the alert, narrowed to the one reader;
- who may add, edit or remove an item: `store.golden_rules.may_change_item`, with the members of the source
  channel and of the alert channel its own rule names as Slack's conversations.members says
  (`common.membership.MembershipCache`). The bot asks before it opens the modal, the worker again before it
  writes: a forged or stale submission changes nothing.
A membership Slack cannot answer counts as "not a member" (the safe side).
"""

from __future__ import annotations

from dataclasses import dataclass

from slack_sdk import WebClient
from sqlalchemy.orm import Session

from common.exchange_access import may_view, slack_group_members
from common.membership import MembershipCache, Viewer
from common.privacy import Destination, may_quote
from common.runtime import Runtime
from store import bot_groups, exchanges
from store.golden_rules import may_change_item

WITHHELD_NOT_MEMBER = "not_member"  # the clicker cannot read the source channel
WITHHELD_HERE = "not_here"  # the place of the click does not quote that channel (a private channel elsewhere)


@dataclass(frozen=True)
class Source:
    """A channel whose text an item holds: the alert's pair's, or the item's own (another public channel's). An
    ingested exchange in no Slack channel: its bot's report key (store.bot_groups), whose "members" are the viewers
    its bot's rule names."""

    channel_id: str | None
    private: bool


def pair_source(session: Session, pair_id: int, channel_id: str | None, private: bool) -> Source:
    """The Source of a pair: its channel, else (an ingested exchange in no channel) its bot's key."""
    if channel_id is None:
        sent = exchanges.origin(session, pair_id)
        if sent is not None:
            return Source(bot_groups.key_of(sent.bot), private)
    return Source(channel_id, private)


def own_alert_channel(runtime: Runtime, channel_id: str | None) -> str | None:
    """The alert channel the channel's OWN rule names (not the defaults': its people did not choose that one)."""
    rule = runtime.rules.own(channel_id)
    return rule.alert_channel if rule is not None else None


class Clicker:
    """One person, clicking in one place (`where`: the channel the button was in)."""

    def __init__(
        self, runtime: Runtime, client: WebClient, membership: MembershipCache, user_id: str | None, where: str | None
    ) -> None:
        self.runtime, self.user_id, self.where = runtime, user_id, where
        self.viewer = Viewer(client, membership, user_id) if user_id else None

    def _member(self, channel_id: str | None) -> bool:
        bot = bot_groups.bot_of(channel_id)
        if bot is not None:  # a bot's exchanges: the viewers its rule names stand for a channel's members
            rule = self.runtime.rules.bot(bot)
            viewers = rule.viewers if rule is not None else []
            return self.viewer is not None and may_view(self.user_id, viewers, slack_group_members(self.viewer.client))
        return self.viewer is not None and channel_id is not None and self.viewer.is_member(channel_id)

    def may_change(self, sources: list[Source]) -> bool:
        """Whether this person may add, edit or remove an item holding these channels' text."""
        for source in sources:
            if not source.private:
                continue
            member = self._member(source.channel_id)
            alert_channel = None if member else own_alert_channel(self.runtime, source.channel_id)
            via_alerts = alert_channel is not None and self._member(alert_channel)
            if not may_change_item(True, member_of_channel=member, member_of_alert_channel=via_alerts):
                return False
        return True

    def _may_read(self, channel_id: str | None) -> bool:
        if bot_groups.bot_of(channel_id) is not None:
            return self._member(channel_id)
        return self.viewer is not None and self.viewer.may_read(channel_id)

    def withheld(self, sources: list[Source]) -> str | None:
        """Why the modal may not quote these channels' text here (WITHHELD_*), or None: it may."""
        for source in sources:
            if self.viewer is None or not self._may_read(source.channel_id):
                return WITHHELD_NOT_MEMBER
            destination = Destination(self.where, self._may_read)
            if not may_quote(source.channel_id, source.private, self.runtime.rules, self.runtime.settings, destination):
                return WITHHELD_HERE
        return None


def worker_clicker(runtime: Runtime, user_id: str | None, where: str | None) -> Clicker:
    """The clicker as a worker sees them: Slack's members fetched afresh (a worker keeps no membership cache of
    its own between tasks: a test-set change is rare, and a fresh answer is the right one to write on)."""
    return Clicker(runtime, runtime.slack, MembershipCache(runtime.redis), user_id, where)
