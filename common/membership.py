"""Who may see a channel's answers and figures: its members, as conversations.members says.

Each process keeps the members it fetched, briefly (a minute for public channels, a few seconds for private
ones), and drops them at once when the channel's generation in Redis moves: the bot bumps it on every
`member_joined_channel` / `member_left_channel` event (`forget`), so a person removed from a channel loses
access in every bot process and worker, not a minute later.

`Viewer` is the one rule of what a person is shown (App Home, the `/judge digest` preview): public channels'
figures to anyone, a private channel's (private as Slack's channel info says) to its members only, and a
channel's text only to its members.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass

import redis
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from capture.directory import channel_is_private
from common.privacy import may_show_figures
from store import bot_groups
from store.rules import ChannelRules
from store.settings import Settings

log = logging.getLogger("relmon.membership")

MEMBERS_TTL_SECONDS = 60.0
PRIVATE_MEMBERS_TTL_SECONDS = 5.0  # without events, a private channel's members are never older than this
GENERATION_TTL_SECONDS = 7 * 24 * 3600  # a generation that expires only costs one fetch more
# Slack errors meaning relmon cannot see the channel at all.
UNSEEN_CHANNEL_ERRORS = frozenset(
    {"channel_not_found", "not_in_channel", "missing_scope", "method_not_supported_for_channel_type"}
)


def generation_key(channel_id: str) -> str:
    return f"relmon:members:generation:{channel_id}"


class Refusal(Exception):
    """Stop and tell the person one sentence (an ERRORS code)."""

    def __init__(self, code: str) -> None:
        super().__init__(code)
        self.code = code


@dataclass(frozen=True)
class _Members:
    fetched_at: float
    generation: bytes | None
    private: bool
    members: frozenset[str]


class MembershipCache:
    """Channel members from conversations.members, kept briefly and invalidated through Redis."""

    def __init__(
        self,
        redis_client: redis.Redis,
        ttl_seconds: float = MEMBERS_TTL_SECONDS,
        private_ttl_seconds: float = PRIVATE_MEMBERS_TTL_SECONDS,
    ) -> None:
        self.redis = redis_client
        self.ttl, self.private_ttl = ttl_seconds, private_ttl_seconds
        self._members: dict[str, _Members] = {}
        self._lock = threading.Lock()

    def forget(self, channel_id: str) -> None:
        """Someone joined or left: every process fetches this channel's members again on its next check."""
        with self.redis.pipeline() as pipe:
            pipe.incr(generation_key(channel_id)).expire(generation_key(channel_id), GENERATION_TTL_SECONDS)
            pipe.execute()
        with self._lock:
            self._members.pop(channel_id, None)

    def is_member(self, client: WebClient, channel_id: str, user_id: str) -> bool | None:
        """True or False; None when relmon cannot see the channel (so cannot vouch for anyone)."""
        members = self.members(client, channel_id)
        return None if members is None else user_id in members

    def members(self, client: WebClient, channel_id: str) -> frozenset[str] | None:
        """The channel's members; None when relmon cannot see the channel."""
        generation = self.redis.get(generation_key(channel_id))  # read before the fetch: a later event wins
        now = time.monotonic()
        with self._lock:
            cached = self._members.get(channel_id)
        if cached is not None and cached.generation == generation and now - cached.fetched_at <= self._ttl(cached):
            return cached.members
        try:
            members = self._fetch(client, channel_id)
        except SlackApiError as error:
            if error.response.get("error") in UNSEEN_CHANNEL_ERRORS:
                return None
            raise
        private = channel_is_private(self.redis, client, channel_id, None)
        with self._lock:
            self._members[channel_id] = _Members(now, generation, private, members)
        return members

    def _ttl(self, cached: _Members) -> float:
        return self.private_ttl if cached.private else self.ttl

    def require_member(self, client: WebClient, channel_id: str, user_id: str) -> None:
        """The link and the shortcut: the person must be a member of a channel relmon sees. One refusal for
        both failures, so nobody learns whether relmon is in a private channel."""
        if not self.is_member(client, channel_id, user_id):
            raise Refusal("not_member")

    @staticmethod
    def _fetch(client: WebClient, channel_id: str) -> frozenset[str]:
        members: set[str] = set()
        for page in client.conversations_members(channel=channel_id, limit=1000):
            members.update(page.get("members", []))
        return frozenset(members)


class Viewer:
    """What one person is shown, decided once per channel for one view or preview."""

    def __init__(self, client: WebClient, membership: MembershipCache, user_id: str) -> None:
        self.client, self.membership, self.user_id = client, membership, user_id
        self._member: dict[str, bool] = {}

    def is_member(self, channel_id: str) -> bool:
        """A member of a channel (Slack asked once per view). A bot's ingested exchanges (store.bot_groups) have no
        channel to be a member of: nobody is, so their words are quoted to no one reader."""
        if bot_groups.bot_of(channel_id) is not None:
            return False
        member = self._member.get(channel_id)
        if member is None:
            try:
                member = self.membership.is_member(self.client, channel_id, self.user_id) is True
            except Exception:  # Slack or Redis failed to answer: the safe side, not shown this time
                log.warning("could not check channel membership", extra={"channel": channel_id})
                member = False
            self._member[channel_id] = member
        return member

    def may_see(self, channel_id: str) -> bool:
        """A channel's figures and links: a public channel's to anyone, a private channel's to its members. A bot's
        ingested exchanges' figures (counts and scores, never words) to anyone: the bot is no secret."""
        if bot_groups.bot_of(channel_id) is not None:
            return True
        try:
            private = channel_is_private(self.membership.redis, self.client, channel_id, None)
        except redis.RedisError:
            private = True  # unknown: the safe side
        return not private or self.is_member(channel_id)

    def may_read(self, channel_id: str | None) -> bool:
        """A channel's text (questions, answers, reasoning): to its members only, public channel or not."""
        return channel_id is not None and self.is_member(channel_id)


class ChannelAudience:
    """What a channel (the digest's) is shown, as `Viewer` decides for one person: a public channel's figures, and a
    private one's (one whose pairs are stored as private: `private_channels`) only where its audience may see them
    (`common.privacy.may_show_figures`): the alert channel its own rule names, or a channel whose every member is
    one of its own."""

    def __init__(
        self,
        client: WebClient,
        membership: MembershipCache,
        rules: ChannelRules,
        settings: Settings,
        channel_id: str,
        private_channels: set[str],
    ) -> None:
        self.client, self.membership, self.channel_id = client, membership, channel_id
        self.rules, self.settings, self.private_channels = rules, settings, private_channels

    def _members_are_in(self, source: str) -> bool:
        try:
            audience = self.membership.members(self.client, self.channel_id)
            members = self.membership.members(self.client, source)
        except Exception:  # Slack or Redis failed to answer: the safe side, not shown this time
            log.warning("could not compare channel members", extra={"channel": source})
            return False
        return audience is not None and members is not None and audience <= members

    def may_see(self, channel_id: str) -> bool:
        private = channel_id in self.private_channels
        return may_show_figures(
            channel_id, private, self.rules, self.settings, self.channel_id, audience_are_members=self._members_are_in
        )
